package publish_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"orderd/provider"
	"orderd/publish"
	"orderd/store"
)

// testOrder is an order rendered as the provider sends it.
type testOrder struct {
	id, mid string
	// extra, when set, is added as a field orderd does not know (to make
	// an order large).
	extra string
}

func newTestOrder(prefix string, i int) testOrder {
	return testOrder{id: fmt.Sprintf("%s-%06d-0000-4000-8000-000000000000", prefix, i), mid: fmt.Sprintf("m-%s-%d", prefix, i)}
}

// raw renders the order in status; pretty spaces and reorders the keys as
// another sender would, for the same state.
func (o testOrder) raw(status string, pretty bool) []byte {
	target, completedAt, txStatus := "null", "null", "processing"
	if status == "completed" {
		target, completedAt, txStatus = `{"amount":"150.00","currency":"brl"}`, `"2026-03-01T10:00:05Z"`, "completed"
	}
	extra := ""
	if o.extra != "" {
		extra = fmt.Sprintf(`,"note":%q`, o.extra)
	}
	if pretty {
		return fmt.Appendf(nil, "{\n  \"status\": %q,\n  \"id\": %q,\n  \"merchantOrderId\": %q,\n  \"type\": \"payin\",\n"+
			"  \"createdAt\": \"2026-03-01T10:00:00+00:00\",\n  \"rejectReason\": null,\n  \"merchantSourceWallet\": null,\n"+
			"  \"merchantTargetWallet\": %s,\n  \"transactions\": [ { \"status\": %q, \"id\": \"tx-%s\", \"type\": \"payin\","+
			" \"authorized\": { \"amount\": \"150\", \"currency\": \"brl\" }, \"merchantWallet\": { \"amount\": \"150.0\", \"currency\": \"brl\" },"+
			" \"createdAt\": \"2026-03-01T10:00:00+00:00\", \"completedAt\": %s, \"rejectReason\": null } ]%s\n}\n",
			status, o.id, o.mid, target, txStatus, o.id, completedAt, extra)
	}
	return fmt.Appendf(nil, `{"id":%q,"merchantOrderId":%q,"type":"payin","createdAt":"2026-03-01T10:00:00Z","status":%q,`+
		`"rejectReason":null,"merchantSourceWallet":null,"merchantTargetWallet":%s,"transactions":[{"id":"tx-%s","type":"payin",`+
		`"status":%q,"authorized":{"amount":"150.00","currency":"brl"},"merchantWallet":{"amount":"150.00","currency":"brl"},`+
		`"createdAt":"2026-03-01T10:00:00Z","completedAt":%s,"rejectReason":null}]%s}`,
		o.id, o.mid, status, target, o.id, txStatus, completedAt, extra)
}

// apply feeds one observation of the order through the store's one write
// path, as the receiver (webhook) or the reconciler (poll) would.
func apply(tb testing.TB, st *store.Store, o testOrder, status string, pretty bool, src store.Source) store.Result {
	tb.Helper()
	res, err := tryApply(st, o, status, pretty, src)
	if err != nil {
		tb.Fatal(err)
	}
	return res
}

// tryApply is apply for goroutines other than the test's.
func tryApply(st *store.Store, o testOrder, status string, pretty bool, src store.Source) (store.Result, error) {
	raw := o.raw(status, pretty)
	ord, err := provider.DecodeOrder(raw)
	if err != nil {
		return store.Result{}, fmt.Errorf("decode test order: %w\n%s", err, raw)
	}
	ob := store.Observation{Source: src, Order: ord, Raw: raw, ObservedAt: time.Now()}
	if src == store.SourceWebhook {
		ob.Delivery = &store.Delivery{RemoteAddr: "127.0.0.1:5555", Header: http.Header{"Signature": {"c2ln"}}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := st.Apply(ctx, ob)
	if err != nil {
		return store.Result{}, fmt.Errorf("apply %s %s: %w", o.id, status, err)
	}
	return res, nil
}

// openStore opens a store on a fresh file, closed when the test ends.
func openStore(tb testing.TB, opts store.Options) (*store.Store, string) {
	tb.Helper()
	path := tb.TempDir() + "/orderd.db"
	return openStoreAt(tb, path, opts), path
}

func openStoreAt(tb testing.TB, path string, opts store.Options) *store.Store {
	tb.Helper()
	st, err := store.Open(context.Background(), path, opts)
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := st.Close(ctx); err != nil {
			tb.Errorf("close store: %v", err)
		}
	})
	return st
}

// runRelay runs r until the test ends (or stop is called) and checks that
// Run returned nil.
func runRelay(tb testing.TB, r *publish.Relay) (stop func()) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				tb.Errorf("Run returned %v, want nil", err)
			}
		case <-time.After(10 * time.Second):
			tb.Errorf("Run did not return within 10s of cancel")
		}
	}
	tb.Cleanup(stop)
	return stop
}

func newRelay(tb testing.TB, cfg publish.RelayConfig, ob publish.Outbox, js jetstream.JetStream) *publish.Relay {
	tb.Helper()
	r, err := publish.NewRelay(cfg, ob, js)
	if err != nil {
		tb.Fatalf("NewRelay: %v", err)
	}
	return r
}

func backlog(tb testing.TB, st *store.Store) int64 {
	tb.Helper()
	n, _, err := st.OutboxStats(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

func streamCount(tb testing.TB, js jetstream.JetStream, stream string) uint64 {
	tb.Helper()
	s, err := js.Stream(context.Background(), stream)
	if err != nil {
		return 0
	}
	info, err := s.Info(context.Background())
	if err != nil {
		return 0
	}
	return info.State.Msgs
}
