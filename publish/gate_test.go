package publish_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"orderd/publish"
	"orderd/store"
)

// TestRelay_Gate: a relay whose gate is closed publishes nothing and
// stops with ErrNotLeading (replicated mode's deposed leader); with the
// gate open, the same outbox goes out.
func TestRelay_Gate(t *testing.T) {
	js := startStream(t)
	st, _ := openStore(t, store.Options{})
	for i := range 5 {
		apply(t, st, newTestOrder("gate", i), "completed", false, store.SourceWebhook)
	}
	var open atomic.Bool
	r := newRelay(t, publish.RelayConfig{Gate: open.Load}, st, js)
	done := make(chan error, 1)
	go func() { done <- r.Run(t.Context()) }()
	select {
	case err := <-done:
		if !errors.Is(err, publish.ErrNotLeading) {
			t.Fatalf("Run with a closed gate returned %v, want ErrNotLeading", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a relay with a closed gate kept running")
	}
	if n := streamCount(t, js, "ORDERD"); n != 0 {
		t.Fatalf("a closed gate let %d events out", n)
	}
	open.Store(true)
	stop := runRelay(t, newRelay(t, publish.RelayConfig{Gate: open.Load}, st, js))
	defer stop()
	waitFor(t, 10*time.Second, "the outbox to drain", func() bool { return backlog(t, st) == 0 })
	if n := streamCount(t, js, "ORDERD"); n != 5 {
		t.Fatalf("stream holds %d events, want 5", n)
	}
}
