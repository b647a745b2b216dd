package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"orderd/provider"
)

// Tx is the writer's transaction as seen by a Write callback: everything
// done through it commits or rolls back together with the callback's
// savepoint. Its statements run without the caller's context on purpose
// (an interrupted SQLite write aborts the whole batch); keep callbacks
// short instead.
type Tx struct {
	s      *Store
	events int // outbox rows added in the current savepoint
	// fed holds the outbox rows this transaction added, for the feed
	// once it commits; feedReset says it changed queued rows in place.
	fed       []feedEvent
	feedReset bool
	cursor    int64 // the highest seq the outbox cursor was moved to
	ids       rowIDs
	// now is the time of the command being applied (zero for a plain
	// Write, which reads the store's clock).
	now time.Time
	// trace is the traceparent of the command being applied, kept with
	// the events it queues (empty: not traced).
	trace string
	// activity holds the webhooks and events this transaction added, for
	// the per-minute counters written once before it commits (see
	// flushActivity); a rolled-back write's entries are cut off with it.
	activity []activityBump
}

// activityBump is one row counted in activity_minutes.
type activityBump struct {
	minute           int64
	webhooks, events int64
}

// countActivity counts a webhook body (webhook) or an event first stored
// at atMillis in its minute's counters.
func (tx *Tx) countActivity(atMillis int64, webhook bool) {
	b := activityBump{minute: minuteOf(atMillis)}
	if webhook {
		b.webhooks = 1
	} else {
		b.events = 1
	}
	tx.activity = append(tx.activity, b)
}

// minuteOf is the minute (unix milliseconds / 60000, rounded down) of a
// time in unix milliseconds.
func minuteOf(ms int64) int64 {
	m := ms / 60000
	if ms < 0 && ms%60000 != 0 {
		m--
	}
	return m
}

// flushActivity adds the transaction's counts to activity_minutes: one
// statement per minute the transaction touched (one or two for a batch of
// webhooks), not one per row, so the write path pays next to nothing for
// the dashboard's rates. Every instance in replicated mode applies the
// same rows, so its counters end equal whatever its batches were.
func (tx *Tx) flushActivity() error {
	for len(tx.activity) > 0 {
		m := tx.activity[0].minute
		var w, e int64
		rest := tx.activity[:0]
		for _, b := range tx.activity {
			if b.minute != m {
				rest = append(rest, b)
				continue
			}
			w += b.webhooks
			e += b.events
		}
		if _, err := tx.s.st.bumpActivity.Exec(m, w, e); err != nil {
			return fmt.Errorf("activity counters: %w", err)
		}
		tx.activity = rest
	}
	return nil
}

// queued records an outbox row this transaction added, for the feed.
func (tx *Tx) queued(res sql.Result, ev feedEvent) error {
	seq, err := res.LastInsertId()
	if err != nil {
		return err
	}
	ev.seq = seq
	if tx.trace != "" {
		// Beside the row, not in it: a trace is no state the replicas
		// compare (the digest reads the outbox, not this table), and an
		// untraced event costs no write here.
		if _, err := tx.s.st.insertTrace.Exec(seq, tx.trace); err != nil {
			return fmt.Errorf("keep traceparent: %w", err)
		}
		ev.traceparent = tx.trace
	}
	tx.fed = append(tx.fed, ev)
	tx.countActivity(tx.Now().UnixMilli(), false) // the row's created_at
	return nil
}

// rowIDs hands out the primary keys of orders, deliveries and history
// rows inside one transaction, so that rows pointing at each other are
// written once, with their pointers, instead of inserted and then updated.
// Each counter starts from the table's largest id when first needed; the
// transaction holds SQLite's write lock (BEGIN IMMEDIATE), so no other
// writer can take an id meanwhile. Every insert into these tables draws
// its id here. An id drawn by a write that is rolled back leaves a gap,
// which nothing relies on.
type rowIDs struct {
	order, delivery, history int64 // last id handed out; 0 until loaded
}

// next returns the next id of the counter last, loading it with maxQuery
// on first use in the transaction.
func (r *rowIDs) next(last *int64, maxQuery *sql.Stmt) (int64, error) {
	if *last == 0 {
		if err := maxQuery.QueryRow().Scan(last); err != nil {
			return 0, fmt.Errorf("read the largest row id: %w", err)
		}
	}
	*last++
	return *last, nil
}

// Now returns the time of the command being applied: the same on every
// instance that applies it. Write callbacks get the store's clock.
func (tx *Tx) Now() time.Time {
	if !tx.now.IsZero() {
		return tx.now
	}
	return tx.s.now()
}

// Exec runs a statement in the transaction.
func (tx *Tx) Exec(query string, args ...any) (sql.Result, error) {
	return tx.s.wconn.ExecContext(context.Background(), query, args...)
}

// Query runs a query in the transaction; the caller closes the rows before
// returning from the callback.
func (tx *Tx) Query(query string, args ...any) (*sql.Rows, error) {
	return tx.s.wconn.QueryContext(context.Background(), query, args...)
}

// QueryRow runs a query expected to return at most one row.
func (tx *Tx) QueryRow(query string, args ...any) *sql.Row {
	return tx.s.wconn.QueryRowContext(context.Background(), query, args...)
}

// InsertEvent appends an event to the outbox unless an event with its id is
// already there (then inserted is false and nothing changes). ID, Type,
// Subject and Data are required; a zero Time means now.
func (tx *Tx) InsertEvent(ev OutboxEvent) (inserted bool, err error) {
	switch {
	case ev.ID == "":
		return false, errors.New("insert event: id is empty")
	case ev.Type == "":
		return false, errors.New("insert event: type is empty")
	case ev.Subject == "":
		return false, errors.New("insert event: subject is empty")
	case len(ev.Data) == 0:
		return false, errors.New("insert event: data is empty")
	case !json.Valid(ev.Data):
		return false, fmt.Errorf("insert event %s: data is not valid JSON", ev.ID)
	}
	now := tx.Now()
	if ev.Time.IsZero() {
		ev.Time = now
	}
	res, err := tx.s.st.insertEvent.Exec(ev.ID, ev.Type, ev.Subject, ev.EventSubject, ev.Time.UnixMilli(),
		nullString(ev.MerchantOrderID), nullString(string(ev.LearnedVia)), []byte(ev.Data), now.UnixMilli())
	if err != nil {
		return false, fmt.Errorf("insert event %s: %w", ev.ID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("insert event %s: %w", ev.ID, err)
	}
	if n == 1 {
		if err := tx.queued(res, feedEvent{id: ev.ID, typ: ev.Type, subject: ev.Subject, eventSubject: ev.EventSubject,
			timeMillis: ev.Time.UnixMilli(), merchantOrderID: ev.MerchantOrderID, learnedVia: ev.LearnedVia,
			data: ev.Data}); err != nil {
			return false, fmt.Errorf("insert event %s: %w", ev.ID, err)
		}
	}
	tx.events += int(n)
	return n == 1, nil
}

// Finding is a finding as stored and as its events carry it.
type Finding struct {
	ID   int64  `json:"id"`
	Kind string `json:"kind"`
	Key  string `json:"key"`
	// State is "open" or "resolved"; Status adds "acknowledged" (open,
	// with a person on it).
	State      string          `json:"state"`
	Status     string          `json:"status"`
	Detail     json.RawMessage `json:"detail"`
	FoundAt    time.Time       `json:"foundAt"`
	ResolvedAt *time.Time      `json:"resolvedAt,omitempty"`
	// AcknowledgedAt is when a person acknowledged the finding.
	AcknowledgedAt *time.Time `json:"acknowledgedAt,omitempty"`
	// Resolution and ResolvedBy are set when a person resolved it.
	Resolution string `json:"resolution,omitempty"`
	ResolvedBy string `json:"resolvedBy,omitempty"`
	// Trail lists every action people took on it, oldest first.
	Trail []FindingAction `json:"trail"`
}

// Finding kinds known to orderd. Other packages may use others.
const (
	FindingMismatch           = "mismatch"
	FindingQuarantinedWebhook = "quarantined_webhook"
	FindingStuckOrder         = "stuck_order"
	FindingUnresolvedCreation = "unresolved_creation"
	FindingBalanceDrift       = "balance_drift"
	// FindingAmountChanged: money changed inside a final order (other than
	// a new refund transaction).
	FindingAmountChanged = "amount_changed"
	// FindingEventNotPublished: an event could not be published as it is
	// (too large for the NATS server or the stream) and was set aside.
	FindingEventNotPublished = "event_not_published"
	// FindingIdentityConflict: the provider answered a poll, a sweep or a
	// creation with an order that contradicts a stored identity (its
	// merchantOrderId is another order's, or its type differs). The state
	// was not stored, so no event told the platform about it.
	FindingIdentityConflict = "identity_conflict"
	// FindingReplicaDivergence: two instances of a replicated deployment
	// hold different states at the same log sequence (key: the sequence).
	FindingReplicaDivergence = "replica_divergence"
)

// ReplicaDivergence is the detail of a replica_divergence finding: the
// log sequence at which replicated instances digested their states, each
// instance with its digest, and what to do.
type ReplicaDivergence struct {
	Seq       uint64          `json:"seq"`
	Instances []ReplicaDigest `json:"instances"`
	Action    string          `json:"action"`
}

// ReplicaDigest is one instance's state digest in a ReplicaDivergence.
type ReplicaDigest struct {
	Node   string `json:"node"`
	Digest string `json:"digest"`
}

// IdentityConflict is the detail of an identity_conflict finding: what the
// provider answered, why the store refused it, and where the answer came
// from.
type IdentityConflict struct {
	Reason          string             `json:"reason"`
	MerchantOrderID string             `json:"merchantOrderId"`
	OrderID         string             `json:"orderId"`
	Type            provider.OrderType `json:"type"`
	Status          provider.Status    `json:"status"`
	Source          Source             `json:"source"`
	Order           json.RawMessage    `json:"order,omitempty"` // the provider's answer, as received
}

// RecordIdentityConflict opens the identity_conflict finding of obs's
// merchantOrderId (or refreshes the open one) for a state the write path
// refused: reason says why. Nothing of obs is stored; a person settles
// which order the merchantOrderId is. Polls that apply cleanly later
// resolve it (ResolveFinding).
func (tx *Tx) RecordIdentityConflict(obs Observation, reason string) (opened bool, err error) {
	o := obs.Order
	if o == nil {
		return false, errors.New("record identity conflict: no order")
	}
	d := IdentityConflict{Reason: reason, MerchantOrderID: o.MerchantOrderID, OrderID: o.ID,
		Type: o.Type, Status: o.Status, Source: obs.Source}
	if json.Valid(obs.Raw) {
		d.Order = json.RawMessage(obs.Raw)
	}
	key := o.MerchantOrderID
	if key == "" {
		key = o.ID
	}
	_, opened, err = tx.OpenFinding(FindingIdentityConflict, key, d)
	return opened, err
}

// OpenFinding opens a finding of kind about key (an order id or a
// currency) unless one is already open; then it refreshes that one's
// detail and returns opened false. A newly opened finding queues a
// "reconcile.<kind>" event whose id is EventID(finding id, "open").
// detail is JSON-encoded unless it is already json.RawMessage.
func (tx *Tx) OpenFinding(kind, key string, detail any) (id int64, opened bool, err error) {
	if kind == "" || key == "" {
		return 0, false, errors.New("open finding: kind and key are required")
	}
	raw, err := encodeDetail(detail)
	if err != nil {
		return 0, false, fmt.Errorf("open finding %s %s: %w", kind, key, err)
	}
	now := tx.Now()
	state := stateKey(kind, raw)
	// A person resolved the latest finding of this subject in this very
	// state: the check sees what they settled, not a new problem.
	if last, same, err := tx.resolvedByPerson(kind, key, state); err != nil {
		return 0, false, err
	} else if same {
		return last, false, nil
	}
	err = tx.QueryRow(`INSERT INTO findings (kind, subject_key, detail, found_at, updated_at, state_key)
		VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (kind, subject_key) WHERE resolved_at IS NULL DO NOTHING
		RETURNING id`, kind, key, string(raw), now.UnixMilli(), now.UnixMilli(), state).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		err = tx.QueryRow(`UPDATE findings SET detail = ?, updated_at = ?, state_key = ?
			WHERE kind = ? AND subject_key = ? AND resolved_at IS NULL RETURNING id`,
			string(raw), now.UnixMilli(), state, kind, key).Scan(&id)
		if err != nil {
			return 0, false, fmt.Errorf("open finding %s %s: refresh: %w", kind, key, err)
		}
		return id, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("open finding %s %s: %w", kind, key, err)
	}
	f := Finding{ID: id, Kind: kind, Key: key, State: StatusOpen, Status: StatusOpen, Detail: raw,
		FoundAt: time.UnixMilli(now.UnixMilli()).UTC(), Trail: []FindingAction{}}
	if err := tx.findingEvent(f, now); err != nil {
		return 0, false, err
	}
	return id, true, nil
}

// ResolveFinding resolves the open finding of kind about key, if there is
// one, and queues its "reconcile.<kind>" event with id
// EventID(finding id, "resolved").
func (tx *Tx) ResolveFinding(kind, key string) (resolved bool, err error) {
	now := tx.Now()
	var (
		f       = Finding{Kind: kind, Key: key, State: StatusResolved, Status: StatusResolved, Trail: []FindingAction{}}
		detail  string
		foundAt int64
	)
	err = tx.QueryRow(`UPDATE findings SET resolved_at = ?, updated_at = ?
		WHERE kind = ? AND subject_key = ? AND resolved_at IS NULL
		RETURNING id, detail, found_at`, now.UnixMilli(), now.UnixMilli(), kind, key).Scan(&f.ID, &detail, &foundAt)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("resolve finding %s %s: %w", kind, key, err)
	}
	f.Detail = json.RawMessage(detail)
	f.FoundAt = time.UnixMilli(foundAt).UTC()
	at := time.UnixMilli(now.UnixMilli()).UTC()
	f.ResolvedAt = &at
	// A finding people worked on (acknowledged, or reopened after a
	// resolution) is sent with its trail, under an id of its own: a
	// reopened finding can be resolved again.
	full, err := findingByID(context.Background(), txQueryer{tx}, f.ID)
	if err != nil {
		return false, err
	}
	if n := len(full.Trail); n > 0 {
		data, err := json.Marshal(full)
		if err != nil {
			return false, fmt.Errorf("finding %d event: %w", f.ID, err)
		}
		_, err = tx.InsertEvent(OutboxEvent{
			ID:           EventID(strconv.FormatInt(f.ID, 10), f.State, "after", strconv.Itoa(n)),
			Type:         "reconcile." + SubjectToken(f.Kind),
			Subject:      FindingSubject(f.Kind),
			EventSubject: f.Key,
			Time:         now,
			Data:         data,
		})
		return err == nil, err
	}
	if err := tx.findingEvent(f, now); err != nil {
		return false, err
	}
	return true, nil
}

func (tx *Tx) findingEvent(f Finding, now time.Time) error {
	data, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("finding %d event: %w", f.ID, err)
	}
	_, err = tx.InsertEvent(OutboxEvent{
		ID:           EventID(strconv.FormatInt(f.ID, 10), f.State),
		Type:         "reconcile." + SubjectToken(f.Kind),
		Subject:      FindingSubject(f.Kind),
		EventSubject: f.Key,
		Time:         now,
		Data:         data,
	})
	return err
}

func encodeDetail(detail any) (json.RawMessage, error) {
	switch d := detail.(type) {
	case nil:
		return json.RawMessage("{}"), nil
	case json.RawMessage:
		if !json.Valid(d) {
			return nil, errors.New("detail is not valid JSON")
		}
		return d, nil
	default:
		return json.Marshal(d)
	}
}

// Watch is an order the reconciler should poll although orderd may not
// know it yet: the order of a quarantined webhook, of a webhook that failed
// its signature check, or one a platform created itself.
type Watch struct {
	MerchantOrderID string
	ProviderOrderID string
	Type            provider.OrderType
	Reason          string
	// NextCheckAt is when to poll; zero means now.
	NextCheckAt time.Time
}

// UpsertWatch adds a watch or refreshes the one for the same
// merchantOrderId: an open watch keeps its earlier due time and attempts; a
// resolved one is reopened.
func (tx *Tx) UpsertWatch(w Watch) error {
	if w.MerchantOrderID == "" {
		return errors.New("watch: merchantOrderId is empty")
	}
	if w.Reason == "" {
		return errors.New("watch: reason is empty")
	}
	now := tx.Now()
	next := w.NextCheckAt
	if next.IsZero() {
		next = now
	}
	_, err := tx.Exec(`INSERT INTO watches (merchant_order_id, provider_order_id, type, reason, created_at, next_check_at)
		VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (merchant_order_id) DO UPDATE SET
			provider_order_id = coalesce(excluded.provider_order_id, provider_order_id),
			type = coalesce(excluded.type, type),
			reason = excluded.reason,
			next_check_at = CASE WHEN resolved_at IS NULL THEN min(next_check_at, excluded.next_check_at)
				ELSE excluded.next_check_at END,
			attempts = CASE WHEN resolved_at IS NULL THEN attempts ELSE 0 END,
			resolved_at = NULL`,
		w.MerchantOrderID, nullString(w.ProviderOrderID), nullString(string(w.Type)), w.Reason,
		now.UnixMilli(), next.UnixMilli())
	if err != nil {
		return fmt.Errorf("watch %s: %w", w.MerchantOrderID, err)
	}
	return nil
}

// ResolveWatch marks the watch for merchantOrderID done; the reconciler
// calls it once the order is settled.
func (tx *Tx) ResolveWatch(merchantOrderID string) error {
	_, err := tx.Exec(`UPDATE watches SET resolved_at = ? WHERE merchant_order_id = ? AND resolved_at IS NULL`,
		tx.Now().UnixMilli(), merchantOrderID)
	if err != nil {
		return fmt.Errorf("resolve watch %s: %w", merchantOrderID, err)
	}
	return nil
}

// WatchReasonUnverified is the reason of a watch opened from a webhook whose
// signature did not verify. Anyone can send such a webhook, so the
// reconciler gives up on its order quietly after a few ORDER_NOT_FOUND
// answers instead of watching it for ever.
const WatchReasonUnverified = "webhook with a signature that did not verify"

// MarkForPoll asks the reconciler to poll merchantOrderID soon (for example
// after a webhook for it failed its signature check).
func (s *Store) MarkForPoll(ctx context.Context, merchantOrderID, reason string) error {
	_, err := s.Exec(ctx, &watchCmd{W: Watch{MerchantOrderID: merchantOrderID, Reason: reason}})
	return err
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}
