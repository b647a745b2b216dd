package store_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"orderd/api"
	"orderd/provider"
	"orderd/publish"
	"orderd/store"
	"orderd/test/support/eventschema"
)

// uuid returns a random UUID-shaped string.
func uuid() string {
	var b [16]byte
	rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// tx is a transaction inside a test order.
type tx struct {
	id, typ, status, amount, completedAt string
}

// order is a test order rendered as the provider would send it.
type order struct {
	id, mid, typ, status, amount string
	txs                          []tx
}

// newOrder is a completed payin of amount brl with one payin transaction.
func newOrder(amount string) order {
	return order{
		id: uuid(), mid: "m-" + uuid(), typ: "payin", status: "completed", amount: amount,
		txs: []tx{{id: uuid(), typ: "payin", status: "completed", amount: amount, completedAt: "2026-03-01T10:00:05Z"}},
	}
}

// with returns a copy of o changed by fn.
func (o order) with(fn func(*order)) order {
	o.txs = append([]tx(nil), o.txs...)
	fn(&o)
	return o
}

// processing is o before it completed.
func (o order) processing() order {
	return o.with(func(o *order) {
		o.status = "processing"
		for i := range o.txs {
			o.txs[i].status, o.txs[i].completedAt = "processing", ""
		}
	})
}

// rejected is o rejected instead of completed.
func (o order) rejected() order {
	return o.with(func(o *order) {
		o.status = "rejected"
		for i := range o.txs {
			o.txs[i].status, o.txs[i].completedAt = "rejected", ""
		}
	})
}

// refunded is o with a completed refund transaction of amount added.
func (o order) refunded(amount string) order {
	return o.with(func(o *order) {
		o.txs = append(o.txs, tx{id: uuid(), typ: "refund", status: "completed", amount: amount, completedAt: "2026-03-02T09:00:00Z"})
	})
}

// json renders the order compactly; pretty adds whitespace and reorders
// keys, as a different sender would.
func (o order) json(pretty bool) []byte {
	var txs []string
	for _, t := range o.txs {
		completed := "null"
		if t.completedAt != "" {
			completed = `"` + t.completedAt + `"`
		}
		money := fmt.Sprintf(`"authorized":{"amount":"%s","currency":"brl"},"merchantWallet":{"amount":"%s","currency":"brl"}`, t.amount, t.amount)
		if t.typ == "refund" {
			money = fmt.Sprintf(`"amount":{"amount":"%s","currency":"brl"}`, t.amount)
		}
		if pretty {
			txs = append(txs, fmt.Sprintf(`{ "status": "%s", "id": "%s", "type": "%s", %s, "counterpartyInfo": null, "paymentInfo": null, "createdAt": "2026-03-01T10:00:00+00:00", "completedAt": %s, "rejectReason": null }`,
				t.status, t.id, t.typ, strings.ReplaceAll(money, ":", ": "), completed))
		} else {
			txs = append(txs, fmt.Sprintf(`{"id":"%s","type":"%s","status":"%s",%s,"counterpartyInfo":null,"paymentInfo":null,"createdAt":"2026-03-01T10:00:00Z","completedAt":%s,"rejectReason":null}`,
				t.id, t.typ, t.status, money, completed))
		}
	}
	target := "null"
	if o.status == "completed" {
		target = fmt.Sprintf(`{"amount":"%s","currency":"brl"}`, o.amount)
	}
	if pretty {
		return fmt.Appendf(nil, "{\n  \"status\": %q,\n  \"merchantOrderId\": %q,\n  \"id\": %q,\n  \"type\": %q,\n  \"createdAt\": \"2026-03-01T10:00:00+00:00\",\n  \"rejectReason\": null,\n  \"merchantSourceWallet\": null,\n  \"merchantTargetWallet\": %s,\n  \"transactions\": [%s]\n}\n",
			o.status, o.mid, o.id, o.typ, target, strings.Join(txs, ", "))
	}
	return fmt.Appendf(nil, `{"id":%q,"merchantOrderId":%q,"type":%q,"createdAt":"2026-03-01T10:00:00Z","status":%q,"rejectReason":null,"merchantSourceWallet":null,"merchantTargetWallet":%s,"transactions":[%s]}`,
		o.id, o.mid, o.typ, o.status, target, strings.Join(txs, ","))
}

// obs builds an observation of raw from source.
func obs(tb testing.TB, source store.Source, raw []byte) store.Observation {
	tb.Helper()
	o, err := provider.DecodeOrder(raw)
	if err != nil {
		tb.Fatalf("decode test order: %v\n%s", err, raw)
	}
	ob := store.Observation{Source: source, Order: o, Raw: raw, ObservedAt: time.Now()}
	if source == store.SourceWebhook {
		ob.Delivery = &store.Delivery{RemoteAddr: "127.0.0.1:5555", Header: map[string][]string{
			"Signature": {"c2lnbmF0dXJl"}, "Content-Type": {"application/json"}, "Cookie": {"secret"},
		}}
	}
	return ob
}

// count runs a COUNT query on the read pool.
func count(tb testing.TB, s *store.Store, query string, args ...any) int {
	tb.Helper()
	var n int
	if err := s.DB().QueryRowContext(context.Background(), query, args...).Scan(&n); err != nil {
		tb.Fatalf("%s: %v", query, err)
	}
	return n
}

// openStore opens a store on a fresh file and closes it at the end of the test.
func openStore(tb testing.TB, opts store.Options) (*store.Store, string) {
	tb.Helper()
	path := tb.TempDir() + "/orderd.db"
	s, err := store.Open(tb.Context(), path, opts)
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(func() {
		// tb.Context is already canceled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			tb.Errorf("close store: %v", err)
		}
	})
	if t, ok := tb.(*testing.T); ok {
		// Runs before the store closes (cleanups run last first).
		t.Cleanup(func() { checkEvents(t, s) })
	}
	return s, path
}

var (
	schemaOnce sync.Once
	schemas    *eventschema.Validator
	schemaErr  error
	// synthetic holds the tests whose events are made up by the test
	// itself (to exercise the outbox and findings mechanics), not by
	// orderd's code: checkEvents leaves them alone.
	synthetic sync.Map
)

// syntheticEvents says that t queues events of its own making, which
// need not match the AsyncAPI document.
func syntheticEvents(t *testing.T) { synthetic.Store(t, true) }

// checkEvents encodes every event in s's outbox as the relay would publish
// it and checks those of the types orderd publishes against the AsyncAPI
// document (tests of the outbox itself queue events of made-up types).
func checkEvents(t *testing.T, s *store.Store) {
	t.Helper()
	if _, ok := synthetic.Load(t); ok {
		return
	}
	schemaOnce.Do(func() { schemas, schemaErr = eventschema.New(api.AsyncAPI(), eventschema.Published) })
	if schemaErr != nil {
		t.Fatalf("asyncapi document: %v", schemaErr)
	}
	known := map[string]bool{}
	for _, typ := range schemas.Types() {
		known[typ] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	evs, err := s.PendingEvents(ctx, 0, 100000)
	if err != nil {
		return // a test that broke its store on purpose
	}
	for _, ev := range evs {
		if !known[ev.Type] && !strings.HasPrefix(ev.Type, "order.") {
			continue
		}
		_, payload, err := publish.EncodeEvent(ev, publish.DefaultPrefix, "orderd", publish.DefaultSchemaURL)
		if err != nil {
			continue // the publish tests cover what cannot be encoded
		}
		if _, err := schemas.Check(payload); err != nil {
			t.Errorf("event %s does not match the asyncapi document: %v", ev.ID, err)
		}
	}
}
