package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"orderd/provider"
	"orderd/store"
)

// TestDaemon_outboxReady: readiness fails once the oldest unpublished event
// has waited longer than nats.unreachable_ready_after, whatever keeps it
// in (here: nothing publishes), and passes again once it is published.
func TestDaemon_outboxReady(t *testing.T) {
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "orderd.db"), store.Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(context.Background()) })
	cfg := &Config{NATS: NATSConfig{UnreachableReadyAfter: 30 * time.Second}}
	d := &daemon{cfg: cfg, store: st, now: clock}

	if err := d.outboxReady(t.Context()); err != nil {
		t.Fatalf("empty outbox: %v", err)
	}
	raw := []byte(`{"id":"o-1","merchantOrderId":"m-1","type":"payin","status":"processing","transactions":[]}`)
	o, err := provider.DecodeOrder(raw)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Apply(t.Context(), store.Observation{Source: store.SourcePoll, Order: o, Raw: raw, ObservedAt: now}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(29 * time.Second)
	if err := d.outboxReady(t.Context()); err != nil {
		t.Fatalf("an event 29s old with a 30s limit: %v", err)
	}
	now = now.Add(2 * time.Second)
	err = d.outboxReady(t.Context())
	if err == nil || !strings.Contains(err.Error(), "events are not getting out") || !strings.Contains(err.Error(), "nats.unreachable_ready_after") {
		t.Fatalf("an event 31s old with a 30s limit: %v", err)
	}
	evs, err := st.PendingEvents(t.Context(), 0, 10)
	if err != nil || len(evs) != 1 {
		t.Fatalf("pending: %v %v", evs, err)
	}
	if err := st.MarkPublishedThrough(t.Context(), evs[0].Seq); err != nil {
		t.Fatal(err)
	}
	if err := d.outboxReady(t.Context()); err != nil {
		t.Fatalf("everything published: %v", err)
	}
}
