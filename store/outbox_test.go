package store_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"orderd/store"
)

func TestStore_PendingEvents(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	s, _ := openStore(t, store.Options{Now: clock})
	var (
		orders []order
		bodies []string // as events must carry them: received, compacted
	)
	for i := range 5 {
		o := newOrder("1.00")
		orders = append(orders, o)
		var buf bytes.Buffer
		if err := json.Compact(&buf, o.json(i%2 == 1)); err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, buf.String())
		ob := obs(t, store.SourceWebhook, o.json(i%2 == 1))
		ob.ObservedAt = now
		if _, err := s.Apply(t.Context(), ob); err != nil {
			t.Fatal(err)
		}
	}
	evs, err := s.PendingEvents(t.Context(), 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 3 {
		t.Fatalf("%d events with limit 3", len(evs))
	}
	rest, err := s.PendingEvents(t.Context(), evs[2].Seq, 10)
	if err != nil {
		t.Fatal(err)
	}
	all := append(evs, rest...)
	if len(all) != 5 {
		t.Fatalf("%d events in all, want 5", len(all))
	}
	for i, ev := range all {
		if i > 0 && ev.Seq <= all[i-1].Seq {
			t.Errorf("events out of order: %d after %d", ev.Seq, all[i-1].Seq)
		}
		if ev.MerchantOrderID != orders[i].mid || string(ev.Data) != bodies[i] {
			t.Errorf("event %d: %s %s", i, ev.MerchantOrderID, ev.Data)
		}
		if !ev.Time.Equal(now) {
			t.Errorf("event %d time %v, want %v", i, ev.Time, now)
		}
	}
	backlog, oldest, err := s.OutboxStats(t.Context())
	if err != nil || backlog != 5 || !oldest.Equal(now) {
		t.Errorf("stats %d %v %v, want 5 %v", backlog, oldest, err, now)
	}

	// Publishing the first three leaves two pending.
	if err := s.MarkPublishedThrough(t.Context(), all[2].Seq); err != nil {
		t.Fatal(err)
	}
	left, err := s.PendingEvents(t.Context(), 0, 10)
	if err != nil || len(left) != 2 || left[0].Seq != all[3].Seq {
		t.Fatalf("pending after publish: %v %+v", err, left)
	}
	if backlog, _, _ := s.OutboxStats(t.Context()); backlog != 2 {
		t.Errorf("backlog %d, want 2", backlog)
	}

	// Pruning removes published events older than the cutoff only.
	if n, err := s.PruneOutbox(t.Context(), now); err != nil || n != 0 {
		t.Errorf("prune before publication time: %d %v", n, err)
	}
	n, err := s.PruneOutbox(t.Context(), now.Add(time.Second))
	if err != nil || n != 3 {
		t.Errorf("prune: %d %v, want 3", n, err)
	}
	if c := count(t, s, `SELECT count(*) FROM outbox`); c != 2 {
		t.Errorf("%d outbox rows after prune, want the 2 unpublished", c)
	}
	// Seqs are never reused, even after pruning everything.
	if err := s.MarkPublishedThrough(t.Context(), all[4].Seq); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PruneOutbox(t.Context(), now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(t.Context(), obs(t, store.SourceWebhook, newOrder("2.00").json(false))); err != nil {
		t.Fatal(err)
	}
	next, err := s.PendingEvents(t.Context(), all[4].Seq, 10)
	if err != nil || len(next) != 1 {
		t.Errorf("new event after full prune not found after the old cursor: %v %+v", err, next)
	}
}

// Set-aside events queued anew go to the end of the outbox in their first
// order, with their ids; their findings are resolved; a later event still
// gets a seq above theirs.
func TestStore_RequeueSetAside(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s, _ := openStore(t, store.Options{Now: func() time.Time { return now }})
	if n, err := s.RequeueSetAside(t.Context()); err != nil || n != 0 {
		t.Fatalf("requeue with nothing set aside: %d %v", n, err)
	}
	for range 4 {
		if _, err := s.Apply(t.Context(), obs(t, store.SourceWebhook, newOrder("1.00").json(false))); err != nil {
			t.Fatal(err)
		}
	}
	evs, err := s.PendingEvents(t.Context(), 0, 10)
	if err != nil || len(evs) != 4 {
		t.Fatalf("pending: %d %v", len(evs), err)
	}
	// The first and the third cannot be published; the others are.
	for _, ev := range []store.OutboxEvent{evs[0], evs[2]} {
		if err := s.SetAsideEvent(t.Context(), store.SetAside{Seq: ev.Seq, ID: ev.ID, Type: ev.Type, Subject: ev.Subject,
			EventSubject: ev.EventSubject, Reason: "too large"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.MarkPublishedThrough(t.Context(), evs[3].Seq); err != nil {
		t.Fatal(err)
	}
	if fs, err := s.FindingsPage(t.Context(), store.FindingQuery{Kind: store.FindingEventNotPublished, State: "open", Limit: 10}); err != nil || len(fs) != 2 {
		t.Fatalf("open event_not_published findings: %d %v", len(fs), err)
	}

	now = now.Add(time.Hour)
	n, err := s.RequeueSetAside(t.Context())
	if err != nil || n != 2 {
		t.Fatalf("requeued %d (%v), want 2", n, err)
	}
	// Behind them: the findings' own events (opened, then resolved).
	left := orderEvents(t, s, evs[3].Seq)
	if len(left) != 2 {
		t.Fatalf("order events pending after requeue: %+v", left)
	}
	if left[0].ID != evs[0].ID || left[1].ID != evs[2].ID || left[0].Seq <= evs[3].Seq || left[1].Seq <= left[0].Seq ||
		string(left[0].Data) != string(evs[0].Data) {
		t.Fatalf("requeued events %+v, want the first and the third, in order, after seq %d", left, evs[3].Seq)
	}
	// They count as queued now (retention, the outbox's age on /readyz).
	var queuedAt int64
	if err := s.DB().QueryRowContext(t.Context(), `SELECT created_at FROM outbox WHERE seq = ?`, left[0].Seq).Scan(&queuedAt); err != nil ||
		queuedAt != now.UnixMilli() {
		t.Errorf("requeued event queued at %d (%v), want %d", queuedAt, err, now.UnixMilli())
	}
	if fs, _ := s.FindingsPage(t.Context(), store.FindingQuery{Kind: store.FindingEventNotPublished, State: "open", Limit: 10}); len(fs) != 0 {
		t.Errorf("event_not_published findings still open: %+v", fs)
	}
	if n, err := s.RequeueSetAside(t.Context()); err != nil || n != 0 {
		t.Fatalf("second requeue: %d %v, want nothing left", n, err)
	}

	// A new event goes after them.
	if _, err := s.Apply(t.Context(), obs(t, store.SourceWebhook, newOrder("2.00").json(false))); err != nil {
		t.Fatal(err)
	}
	all := orderEvents(t, s, evs[3].Seq)
	if len(all) != 3 || all[2].Seq <= left[1].Seq {
		t.Fatalf("order events pending with a new one: %+v", all)
	}
}

// orderEvents returns the pending order events after seq.
func orderEvents(t *testing.T, s *store.Store, after int64) []store.OutboxEvent {
	t.Helper()
	evs, err := s.PendingEvents(t.Context(), after, 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []store.OutboxEvent
	for _, ev := range evs {
		if strings.HasPrefix(ev.Type, "order.") {
			out = append(out, ev)
		}
	}
	return out
}
