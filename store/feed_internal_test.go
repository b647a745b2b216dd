package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

func feedEvents(from, to int64) []feedEvent {
	var evs []feedEvent
	for seq := from; seq <= to; seq++ {
		evs = append(evs, feedEvent{seq: seq, id: fmt.Sprint("e", seq), data: []byte(`{"n":1}`)})
	}
	return evs
}

func seqs(evs []feedEvent) []int64 {
	out := make([]int64, len(evs))
	for i, ev := range evs {
		out[i] = ev.seq
	}
	return out
}

// The feed answers only a read that starts inside what it holds, never
// across a gap, a reset, or from below the outbox cursor; it keeps its
// bounds by dropping its oldest events.
func TestFeed_answersOnlyWhatItHoldsWhole(t *testing.T) {
	var f feed
	f.push(feedEvents(5, 9), false, 0)
	for _, c := range []struct {
		after, limit int
		want         []int64
		ok           bool
	}{
		{3, 10, nil, false}, // event 4 is not held
		{9, 10, nil, false}, // nothing after the newest: the database says
		{4, 2, []int64{5, 6}, true},
		{6, 10, []int64{7, 8, 9}, true},
		{5, 10, nil, false}, // 5 and 6 were let go once read past
	} {
		got, ok := f.after(int64(c.after), c.limit)
		if ok != c.ok || fmt.Sprint(seqs(got)) != fmt.Sprint(c.want) {
			t.Errorf("after(%d, %d) = %v, %v; want %v, %v", c.after, c.limit, seqs(got), ok, c.want, c.ok)
		}
	}

	// An event that does not follow the newest starts the feed anew.
	f.push(feedEvents(12, 13), false, 0)
	if _, ok := f.after(8, 10); ok {
		t.Error("the feed answered across the gap between 9 and 12")
	}
	if got, ok := f.after(11, 10); !ok || fmt.Sprint(seqs(got)) != "[12 13]" {
		t.Errorf("after(11) = %v, %v; want [12 13]", seqs(got), ok)
	}

	// A reset empties it; a cursor above the read sends it to the database.
	f.push(nil, true, 0)
	if _, ok := f.after(11, 10); ok {
		t.Error("the feed answered after a reset")
	}
	f.push(feedEvents(14, 20), false, 16)
	if _, ok := f.after(15, 10); ok {
		t.Error("the feed answered from below the outbox cursor")
	}
	if got, ok := f.after(16, 10); !ok || fmt.Sprint(seqs(got)) != "[17 18 19 20]" {
		t.Errorf("after(16) = %v, %v; want [17 18 19 20]", seqs(got), ok)
	}

	// Bounds: the oldest go first.
	var g feed
	g.push(feedEvents(1, feedMaxEvents+10), false, 0)
	if len(g.evs) != feedMaxEvents || g.evs[0].seq != 11 {
		t.Fatalf("holds %d events from %d; want %d from 11", len(g.evs), g.evs[0].seq, feedMaxEvents)
	}
	big := feedEvents(feedMaxEvents+11, feedMaxEvents+13)
	for i := range big {
		big[i].data = make([]byte, feedMaxBytes/2+1)
	}
	g.push(big, false, 0)
	if len(g.evs) != 1 || g.bytes != feedMaxBytes/2+1 {
		t.Fatalf("holds %d events of %d bytes; want the newest alone", len(g.evs), g.bytes)
	}
}

// failingEventCmd queues an event and then fails, so that its savepoint
// takes the event back.
type failingEventCmd struct{ id string }

func (*failingEventCmd) Kind() string { return "test.failing_event" }
func (c *failingEventCmd) Apply(tx *Tx) (any, error) {
	if _, err := tx.InsertEvent(OutboxEvent{ID: c.id, Type: "test", Subject: "test.x", Data: []byte(`{}`)}); err != nil {
		return nil, err
	}
	return nil, errors.New("fails after queueing its event")
}

type eventCmd struct{ id string }

func (*eventCmd) Kind() string { return "test.event" }
func (c *eventCmd) Apply(tx *Tx) (any, error) {
	return tx.InsertEvent(OutboxEvent{ID: c.id, Type: "test", Subject: "test.x", Data: []byte(`{}`)})
}

// An event whose write is rolled back inside a batch that commits (a
// failing write in the writer's savepoint, or a failing op of a replicated
// entry) must not reach the feed: the relay would publish an event the
// outbox does not hold.
func TestFeed_rolledBackEventsStayOut(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "orderd.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if err := s.Write(ctx, func(tx *Tx) error {
		_, err := (&eventCmd{"first"}).Apply(tx)
		return err
	}); err != nil {
		t.Fatal(err)
	}

	req := func(fn func(*Tx) error) *request {
		return &request{ctx: ctx, fn: fn, done: make(chan error, 1)}
	}
	// Two writes in one batch, as the writer runs them after a failure:
	// each in its own savepoint; the second one's event is rolled back.
	live := []*request{
		req(func(tx *Tx) error { _, err := (&eventCmd{"second"}).Apply(tx); return err }),
		req(func(tx *Tx) error { _, err := (&failingEventCmd{"ghost-1"}).Apply(tx); return err }),
	}
	errs := make([]error, len(live))
	if _, _, err := s.runOnce(live, errs, true); err != nil || errs[0] != nil || errs[1] == nil {
		t.Fatalf("batch: %v, writes: %v", err, errs)
	}
	// One replicated entry of three ops, the middle one failing.
	if err := s.write(ctx, func(tx *Tx) error {
		for _, cmd := range []Command{&eventCmd{"third"}, &failingEventCmd{"ghost-2"}, &eventCmd{"fourth"}} {
			if res := tx.applyOp(Op{At: time.Now(), Cmd: cmd}); res.Err != nil && cmd.Kind() != "test.failing_event" {
				return res.Err
			}
		}
		return nil
	}, false); err != nil {
		t.Fatal(err)
	}

	got, ok := s.feed.after(1, 10)
	if !ok {
		t.Fatal("the feed holds nothing after the first event")
	}
	want, err := s.pendingFromDB(ctx, 1, 10)
	if err != nil {
		t.Fatal(err)
	}
	var gotIDs, wantIDs []string
	for i := range got {
		gotIDs = append(gotIDs, got[i].id)
	}
	for _, ev := range want {
		wantIDs = append(wantIDs, ev.ID)
	}
	if fmt.Sprint(gotIDs) != "[second third fourth]" || fmt.Sprint(gotIDs) != fmt.Sprint(wantIDs) {
		t.Fatalf("the feed holds %v, the outbox %v; want [second third fourth] in both", gotIDs, wantIDs)
	}
}
