package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// PendingEvents returns up to limit unpublished events with seq greater
// than afterSeq, in seq order. Order events carry the order JSON as
// received (compacted); other events their stored data. Data that is not
// valid JSON (a damaged row) is returned as it is stored. Events at or
// below the stored outbox cursor are passed over.
//
// A read that continues where the last one ended, while the events after
// it are still in memory from the commits that queued them (see feed),
// is answered from there, with the same events a read of the database
// would return.
func (s *Store) PendingEvents(ctx context.Context, afterSeq int64, limit int) ([]OutboxEvent, error) {
	if limit <= 0 {
		limit = 100
	}
	if afterSeq > 0 {
		if fed, ok := s.feed.after(afterSeq, limit); ok {
			return outboxEvents(fed), nil
		}
	}
	return s.pendingFromDB(ctx, afterSeq, limit)
}

// pendingFromDB is PendingEvents' read of the database.
func (s *Store) pendingFromDB(ctx context.Context, afterSeq int64, limit int) ([]OutboxEvent, error) {
	rows, err := s.pending.QueryContext(ctx, afterSeq, limit)
	if err != nil {
		return nil, fmt.Errorf("pending events: %w", err)
	}
	defer rows.Close()
	var evs []OutboxEvent
	for rows.Next() {
		var (
			ev   OutboxEvent
			at   int64
			data []byte
		)
		if err := rows.Scan(&ev.Seq, &ev.ID, &ev.Type, &ev.Subject, &ev.EventSubject, &at,
			&ev.MerchantOrderID, &ev.LearnedVia, &data, &ev.Traceparent); err != nil {
			return nil, fmt.Errorf("pending events: %w", err)
		}
		ev.Time = time.UnixMilli(at).UTC()
		if ev.Data, err = compact(data); err != nil {
			// Only a damaged row can get here (every write path checks
			// its JSON). It comes back as stored, so that the relay sets
			// this one event aside instead of failing the whole page.
			ev.Data = data
		}
		evs = append(evs, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pending events: %w", err)
	}
	return evs, nil
}

// pendingEventsQuery reads along the primary key from the later of the
// caller's and the stored cursor; rows set aside (and rows stamped before
// the cursor existed) carry published_at and are passed over.
const pendingEventsQuery = `SELECT o.seq, o.event_id, o.type, o.subject, o.event_subject, o.time,
		coalesce(o.merchant_order_id, ''), coalesce(o.learned_via, ''), coalesce(o.data, h.raw, d.raw),
		coalesce(t.traceparent, '')
	FROM outbox o
	LEFT JOIN order_history h ON h.id = o.state_id
	LEFT JOIN deliveries d ON d.id = h.delivery_id
	LEFT JOIN outbox_traces t ON t.seq = o.seq
	WHERE o.seq > max(?, (SELECT seq FROM outbox_cursor)) AND o.published_at IS NULL
	ORDER BY o.seq
	LIMIT ?`

// compact returns data without insignificant whitespace. Data with no
// whitespace byte at all is compact already (as webhook bodies usually are)
// and comes back as it is, unchecked: every write path checked it, and the
// relay's encoding checks it again before it is sent.
func compact(data []byte) ([]byte, error) {
	if !bytes.ContainsAny(data, " \t\r\n") {
		return data, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// MarkPublishedThrough records that every event with a seq up to and
// including through is acknowledged by NATS (or set aside): it moves the
// outbox's cursor, never back. The relay calls it once per batch of
// acknowledgements; it goes through the writer, so it shares commits with
// the webhooks'.
func (s *Store) MarkPublishedThrough(ctx context.Context, through int64) error {
	if through <= 0 {
		return nil
	}
	_, err := s.Exec(ctx, &advanceOutboxCmd{Through: through})
	return err
}

// advanceOutboxCmd is MarkPublishedThrough's command.
type advanceOutboxCmd struct{ Through int64 }

func (*advanceOutboxCmd) Kind() string { return "outbox.advance" }
func (*advanceOutboxCmd) rerunnable()  {}

func (c *advanceOutboxCmd) Apply(tx *Tx) (any, error) {
	tx.cursor = max(tx.cursor, c.Through)
	if _, err := tx.s.st.advanceOutbox.Exec(c.Through); err != nil {
		return nil, fmt.Errorf("move the outbox cursor: %w", err)
	}
	return nil, nil
}

// OutboxCursor returns the seq up to which every event is published or set
// aside.
func (s *Store) OutboxCursor(ctx context.Context) (int64, error) {
	var seq int64
	if err := s.rdb.QueryRowContext(ctx, `SELECT seq FROM outbox_cursor`).Scan(&seq); err != nil {
		return 0, fmt.Errorf("outbox cursor: %w", err)
	}
	return seq, nil
}

// markPublishedCmd stamps published_at on a list of events (Seqs, a JSON
// array). Versions before the outbox cursor wrote it for every batch of
// acknowledgements; it stays registered so that a replicated log holding
// such entries is still applied alike everywhere (a stamped event is
// published for the relay's read as well).
type markPublishedCmd struct{ Seqs json.RawMessage }

func (*markPublishedCmd) Kind() string { return "outbox.mark_published" }
func (*markPublishedCmd) rerunnable()  {}

func (c *markPublishedCmd) Apply(tx *Tx) (any, error) {
	tx.feedReset = true
	if _, err := tx.Exec(`UPDATE outbox SET published_at = ?
		WHERE seq IN (SELECT value FROM json_each(?)) AND published_at IS NULL`,
		tx.Now().UnixMilli(), string(c.Seqs)); err != nil {
		return nil, fmt.Errorf("mark events published: %w", err)
	}
	return nil, nil
}

// pruneChunk bounds one prune transaction, so pruning a long backlog never
// holds the writer for long.
const pruneChunk = 2000

// PruneOutbox deletes published events queued before queuedBefore and
// returns how many it deleted. Unpublished events and events set aside are
// never deleted.
func (s *Store) PruneOutbox(ctx context.Context, queuedBefore time.Time) (int64, error) {
	var total int64
	for {
		n, err := ExecAs[int64](ctx, s, &pruneOutboxCmd{Before: queuedBefore, Limit: pruneChunk})
		if err != nil {
			return total, fmt.Errorf("prune outbox: %w", err)
		}
		total += n
		if n < pruneChunk {
			return total, nil
		}
	}
}

// outboxStatsQuery reads the outbox from its cursor on: the backlog, not
// the history.
const outboxStatsQuery = `SELECT
		(SELECT count(*) FROM outbox WHERE ` + unpublished + `),
		(SELECT created_at FROM outbox WHERE ` + unpublished + ` ORDER BY seq LIMIT 1)`

// OutboxStats returns the number of unpublished events and when the oldest
// of them was queued (zero when there are none).
func (s *Store) OutboxStats(ctx context.Context) (backlog int64, oldest time.Time, err error) {
	var first sql.NullInt64
	err = s.rdb.QueryRowContext(ctx, outboxStatsQuery).Scan(&backlog, &first)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("outbox stats: %w", err)
	}
	if first.Valid {
		oldest = time.UnixMilli(first.Int64).UTC()
	}
	return backlog, oldest, nil
}

// unpublished is the condition of an event not yet published or set aside,
// which SQLite reads along the primary key from the cursor.
const unpublished = `seq > (SELECT seq FROM outbox_cursor) AND published_at IS NULL`

// OldestUnpublished returns when the oldest unpublished event was queued,
// and false when every event is published. It reads from the cursor along
// the primary key, so readiness checks may call it often.
func (s *Store) OldestUnpublished(ctx context.Context) (time.Time, bool, error) {
	var at int64
	err := s.rdb.QueryRowContext(ctx, `SELECT created_at FROM outbox WHERE `+unpublished+` ORDER BY seq LIMIT 1`).Scan(&at)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("oldest unpublished event: %w", err)
	}
	return time.UnixMilli(at).UTC(), true, nil
}

// SetAsideEvent takes an event that can never be published as it is out of
// the queue: it is marked published with the reason in set_aside (pruning
// keeps it), and an "event_not_published" finding about the event's
// subject (its order, or a finding's key) is opened, whose own small event
// tells consumers and finance. Nothing else waits behind it any more. An
// event already published or set aside is left alone.
func (s *Store) SetAsideEvent(ctx context.Context, ev SetAside) error {
	if ev.Seq <= 0 || ev.Reason == "" {
		return errors.New("set aside event: seq and reason are required")
	}
	_, err := s.Exec(ctx, &setAsideCmd{Event: ev})
	return err
}

// SetAside is an outbox event the relay gives up on, and why.
type SetAside struct {
	Seq          int64  `json:"seq"`
	ID           string `json:"eventId"`
	Type         string `json:"type"`
	Subject      string `json:"subject"`
	EventSubject string `json:"eventSubject"`
	// Bytes is the size of the encoded message, when known.
	Bytes int64 `json:"bytes,omitempty"`
	// Limit is the largest message the server or stream takes, when known.
	Limit  int64  `json:"limit,omitempty"`
	Reason string `json:"reason"`
}

// setAsideCmd is SetAsideEvent's command.
type setAsideCmd struct{ Event SetAside }

func (*setAsideCmd) Kind() string { return "outbox.set_aside" }

func (c *setAsideCmd) Apply(tx *Tx) (any, error) {
	ev := c.Event
	tx.feedReset = true
	res, err := tx.Exec(`UPDATE outbox SET published_at = ?, set_aside = ? WHERE seq = ? AND published_at IS NULL`,
		tx.Now().UnixMilli(), ev.Reason, ev.Seq)
	if err != nil {
		return nil, fmt.Errorf("set aside event %d: %w", ev.Seq, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return nil, err
	}
	key := ev.EventSubject
	if key == "" {
		key = ev.ID
	}
	if _, _, err := tx.OpenFinding(FindingEventNotPublished, key, ev); err != nil {
		return nil, fmt.Errorf("set aside event %d: %w", ev.Seq, err)
	}
	return nil, nil
}

// RequeueSetAside queues every event set aside (SetAsideEvent) anew at the
// end of the outbox, in the order they were first queued, and resolves
// their event_not_published findings; it returns how many it queued. Meant
// for after the limit that stopped them was raised: the relay publishes
// them behind the events queued so far, and an event that still cannot be
// published is set aside again, with a new finding. In replicated mode it
// is one command of the log, so every instance moves the same events.
func (s *Store) RequeueSetAside(ctx context.Context) (int64, error) {
	return ExecAs[int64](ctx, s, &requeueSetAsideCmd{})
}

// requeueSetAsideCmd is RequeueSetAside's command. The events keep their
// rows and ids; their seq moves past the largest one (AUTOINCREMENT never
// hands out a seq at or below the table's largest, so no later event can
// take an old place) and they count as queued now.
type requeueSetAsideCmd struct{}

func (*requeueSetAsideCmd) Kind() string { return "outbox.requeue_set_aside" }

func (c *requeueSetAsideCmd) Apply(tx *Tx) (any, error) {
	rows, err := tx.Query(`SELECT DISTINCT coalesce(nullif(event_subject, ''), event_id) FROM outbox
		WHERE set_aside IS NOT NULL`)
	if err != nil {
		return nil, fmt.Errorf("requeue set-aside events: %w", err)
	}
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			rows.Close()
			return nil, fmt.Errorf("requeue set-aside events: %w", err)
		}
		keys = append(keys, k)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, fmt.Errorf("requeue set-aside events: %w", err)
	}
	if len(keys) == 0 {
		return int64(0), nil
	}
	// One offset for all keeps their order; every new seq is above the
	// largest, so none collides with a row still in place.
	tx.feedReset = true
	res, err := tx.Exec(`UPDATE outbox
		SET seq = seq + (SELECT max(seq) FROM outbox) - (SELECT min(seq) FROM outbox WHERE set_aside IS NOT NULL) + 1,
			published_at = NULL, set_aside = NULL, created_at = ?
		WHERE set_aside IS NOT NULL`, tx.Now().UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("requeue set-aside events: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return nil, fmt.Errorf("requeue set-aside events: %w", err)
	}
	for _, k := range keys {
		if _, err := tx.ResolveFinding(FindingEventNotPublished, k); err != nil {
			return nil, fmt.Errorf("requeue set-aside events: %w", err)
		}
	}
	tx.events += int(n)
	return n, nil
}

// pruneOutboxCmd is one chunk of PruneOutbox: of the next Limit published
// events in seq order (the set-aside ones passed over), those queued before
// Before. Events are queued in seq order, so once a chunk meets one queued
// later the rest are later too, and the chunk deletes fewer than Limit.
type pruneOutboxCmd struct {
	Before time.Time
	Limit  int
}

func (*pruneOutboxCmd) Kind() string { return "outbox.prune" }

func (c *pruneOutboxCmd) Apply(tx *Tx) (any, error) {
	res, err := tx.Exec(`DELETE FROM outbox WHERE seq IN (
			SELECT seq FROM outbox WHERE seq <= (SELECT seq FROM outbox_cursor) AND set_aside IS NULL
			ORDER BY seq LIMIT ?)
		AND created_at < ?`,
		c.Limit, c.Before.UnixMilli())
	if err != nil {
		return nil, err
	}
	// The traceparents of the events just deleted go with them.
	if _, err := tx.Exec(`DELETE FROM outbox_traces WHERE seq IN (
			SELECT t.seq FROM outbox_traces t LEFT JOIN outbox o ON o.seq = t.seq
			WHERE o.seq IS NULL AND t.seq <= (SELECT seq FROM outbox_cursor))`); err != nil {
		return nil, err
	}
	return res.RowsAffected()
}
