package store_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"orderd/store"
)

// TestStore_EventTraceparent: an event queued under a traced context keeps
// that context's traceparent beside its row; the relay's reads give it
// back (the in-memory feed and the database alike); an untraced event
// has none and writes no trace row; pruning the event removes its trace.
func TestStore_EventTraceparent(t *testing.T) {
	s, path := openStore(t, store.Options{})
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
	})
	const want = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	traced := trace.ContextWithSpanContext(t.Context(), sc)

	o := newOrder("10.00")
	if _, err := s.Apply(traced, obs(t, store.SourceWebhook, o.processing().json(false))); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(t.Context(), obs(t, store.SourceWebhook, newOrder("5.00").processing().json(false))); err != nil {
		t.Fatal(err)
	}
	check := func(from string, evs []store.OutboxEvent) {
		t.Helper()
		if len(evs) != 2 {
			t.Fatalf("%s: %d events, want 2", from, len(evs))
		}
		if evs[0].Traceparent != want || evs[1].Traceparent != "" {
			t.Errorf("%s: traceparents %q, %q; want %q and none", from, evs[0].Traceparent, evs[1].Traceparent, want)
		}
	}
	fed, err := s.PendingEvents(t.Context(), 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	check("database", fed)
	if n := count(t, s, `SELECT count(*) FROM outbox_traces`); n != 1 {
		t.Errorf("%d trace rows, want 1 (the untraced event writes none)", n)
	}
	// A read that continues where the last one ended is answered from
	// the commits' feed.
	if _, err := s.Apply(traced, obs(t, store.SourceWebhook, o.json(false))); err != nil {
		t.Fatal(err)
	}
	next, err := s.PendingEvents(t.Context(), fed[1].Seq, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(next) != 1 || next[0].Traceparent != want {
		var got []string
		for _, ev := range next {
			got = append(got, ev.Traceparent)
		}
		t.Errorf("feed: traceparents %q, want one event with %s", got, want)
	}

	// A second store on the same file reads the rows from the database.
	s2, err := store.Open(t.Context(), path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := s2.PendingEvents(t.Context(), 0, 10)
	s2.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	check("another reader", evs[:2])

	if err := s.MarkPublishedThrough(t.Context(), next[0].Seq); err != nil {
		t.Fatal(err)
	}
	if n, err := s.PruneOutbox(t.Context(), time.Now().Add(time.Hour)); err != nil || n != 3 {
		t.Fatalf("pruned %d, %v; want 3", n, err)
	}
	if n := count(t, s, `SELECT count(*) FROM outbox_traces`); n != 0 {
		t.Errorf("%d trace rows left after the events were pruned, want 0", n)
	}
}
