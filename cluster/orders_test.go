package cluster_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"orderd/provider"
	"orderd/store"
)

// applier is the write path a test drives: a single-node store or a
// replicated one.
type applier interface {
	Apply(ctx context.Context, obs store.Observation) (store.Result, error)
}

func randomID() string {
	var b [16]byte
	rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// webhook is an observation of a payin in status, as the provider's
// webhook carries it.
func webhook(tb testing.TB, id, mid, txID, status string) store.Observation {
	tb.Helper()
	completed, target := "null", "null"
	if status == "completed" {
		completed, target = `"2026-03-01T10:00:05Z"`, `{"amount":"125.50","currency":"brl"}`
	}
	raw := fmt.Appendf(nil, `{"id":%q,"merchantOrderId":%q,"type":"payin","createdAt":"2026-03-01T10:00:00Z","status":%q,"rejectReason":null,"merchantSourceWallet":null,"merchantTargetWallet":%s,"transactions":[{"id":%q,"type":"payin","status":%q,"authorized":{"amount":"125.50","currency":"brl"},"merchantWallet":{"amount":"125.50","currency":"brl"},"counterpartyInfo":null,"paymentInfo":null,"createdAt":"2026-03-01T10:00:00Z","completedAt":%s,"rejectReason":null}]}`,
		id, mid, status, target, txID, status, completed)
	o, err := provider.DecodeOrder(raw)
	if err != nil {
		tb.Fatalf("decode test order: %v", err)
	}
	return store.Observation{Source: store.SourceWebhook, Order: o, Raw: raw, ObservedAt: time.Now(),
		Delivery: &store.Delivery{RemoteAddr: "127.0.0.1:5555", Header: map[string][]string{
			"Signature": {"c2lnbmF0dXJl"}, "Content-Type": {"application/json"}}}}
}

// addOrders applies n new orders' lives (a processing and a completed
// webhook each, random ids as the provider's) through st with conc
// callers at once: the real write path, random keys and all.
func addOrders(tb testing.TB, st applier, n, conc int) {
	tb.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	for range conc {
		wg.Go(func() {
			for next.Add(1) <= int64(n) && failed.Load() == nil {
				id, mid, tx := randomID(), "m-"+randomID(), randomID()
				for _, status := range []string{"processing", "completed"} {
					if _, err := st.Apply(context.Background(), webhook(tb, id, mid, tx, status)); err != nil {
						failed.CompareAndSwap(nil, &err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if p := failed.Load(); p != nil {
		tb.Fatalf("apply: %v", *p)
	}
}
