package store

import (
	"sync"
	"time"
)

// Bounds of the feed: the newest events it keeps for the relay. A relay
// that falls further behind reads the rest from the database.
const (
	feedMaxEvents = 4096
	feedMaxBytes  = 8 << 20
)

// feed keeps the outbox events of the latest commits in memory, so that
// the relay, which reads them right after the commit that queued them,
// does not read back from SQLite what the writer has just written: the
// three-table read was about 8 µs of CPU per event under load.
//
// It is a cache of the outbox, never a source of its own. It holds only
// events whose transaction committed, in seq order, with no gap: an event
// that does not follow the newest one (an insert the feed did not see,
// such as a re-queued event) empties it first. A commit that changes
// queued rows in place (setting an event aside, re-queueing) empties it
// too. PendingEvents answers from it only when it holds the event right
// after the caller's seq; otherwise it reads the database as before.
type feed struct {
	mu    sync.Mutex
	evs   []feedEvent // in seq order, consecutive
	bytes int
	// cursor is at least the stored outbox cursor: the highest seq a
	// committed outbox.advance moved it to. A read from below it goes to
	// the database, which passes over the events up to the cursor.
	cursor int64
}

// feedEvent is an outbox row as written; PendingEvents turns it into what
// a read of the row returns.
type feedEvent struct {
	seq             int64
	id, typ         string
	subject         string
	eventSubject    string
	timeMillis      int64
	merchantOrderID string
	learnedVia      Source
	data            []byte // as stored: the order JSON or the event's data
	traceparent     string
}

// push adds the events of one committed transaction; reset first empties
// the feed (the transaction changed queued rows in place), and cursor is
// the highest seq it moved the outbox cursor to.
func (f *feed) push(evs []feedEvent, reset bool, cursor int64) {
	if len(evs) == 0 && !reset && cursor == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cursor = max(f.cursor, cursor)
	if reset {
		f.clearLocked()
	}
	for _, ev := range evs {
		if n := len(f.evs); n > 0 && ev.seq != f.evs[n-1].seq+1 {
			f.clearLocked()
		}
		f.evs = append(f.evs, ev)
		f.bytes += len(ev.data)
	}
	// Drop the oldest beyond the bounds.
	drop := 0
	for len(f.evs)-drop > feedMaxEvents || f.bytes > feedMaxBytes && drop < len(f.evs) {
		f.bytes -= len(f.evs[drop].data)
		drop++
	}
	f.trimLocked(drop)
}

// after returns up to limit events with seq greater than seq when the feed
// holds the one right after it, and reports whether it could answer.
// Events at or below seq are dropped: the caller has them, and a caller
// that asks for them again reads the database.
func (f *feed) after(seq int64, limit int) ([]feedEvent, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.evs) == 0 || seq < f.cursor || seq < f.evs[0].seq-1 || seq >= f.evs[len(f.evs)-1].seq {
		return nil, false
	}
	skip := int(seq - (f.evs[0].seq - 1))
	for _, ev := range f.evs[:skip] {
		f.bytes -= len(ev.data)
	}
	f.trimLocked(skip)
	n := min(limit, len(f.evs))
	return append([]feedEvent(nil), f.evs[:n]...), true
}

// trimLocked drops the first n events, letting go of their data.
func (f *feed) trimLocked(n int) {
	if n == 0 {
		return
	}
	clear(f.evs[:n])
	f.evs = f.evs[n:]
	if len(f.evs) == 0 {
		f.evs = f.evs[:0:0]
	}
}

func (f *feed) clearLocked() {
	clear(f.evs)
	f.evs = f.evs[:0]
	f.bytes = 0
}

// outboxEvents turns fed into the events a read of their rows returns.
func outboxEvents(fed []feedEvent) []OutboxEvent {
	evs := make([]OutboxEvent, len(fed))
	for i := range fed {
		evs[i] = fed[i].outboxEvent()
	}
	return evs
}

// outboxEvent is the event as PendingEvents returns a read of its row.
func (ev *feedEvent) outboxEvent() OutboxEvent {
	out := OutboxEvent{
		Seq:             ev.seq,
		ID:              ev.id,
		Type:            ev.typ,
		Subject:         ev.subject,
		EventSubject:    ev.eventSubject,
		Time:            time.UnixMilli(ev.timeMillis).UTC(),
		MerchantOrderID: ev.merchantOrderID,
		LearnedVia:      ev.learnedVia,
		Traceparent:     ev.traceparent,
	}
	var err error
	if out.Data, err = compact(ev.data); err != nil {
		out.Data = ev.data
	}
	return out
}
