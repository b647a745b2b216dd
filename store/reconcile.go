package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"orderd/provider"
)

// This file holds the reconciler's queries and writes: run records, the
// due-orders and due-watches queues with their backoff, balance snapshots
// and drift results, the ledger of observed balance movements, and deposit
// requisites. Schema: migrations/0003_reconcile.sql.

// ReconcileRun is one recorded run of a reconcile job.
type ReconcileRun struct {
	ID         int64
	Job        string
	StartedAt  time.Time
	FinishedAt time.Time // zero while running
	Counts     map[string]int
	Error      string
}

// StartReconcileRun records that job started at and returns the run's id.
func (s *Store) StartReconcileRun(ctx context.Context, job string, at time.Time) (int64, error) {
	id, err := ExecAs[int64](ctx, s, &startRunCmd{Job: job, At: at})
	if err != nil {
		return 0, fmt.Errorf("start run of %s: %w", job, err)
	}
	return id, nil
}

// FinishReconcileRun records the end of run id with what it did and its
// error (empty on success).
func (s *Store) FinishReconcileRun(ctx context.Context, id int64, at time.Time, counts map[string]int, runErr string) error {
	if counts == nil {
		counts = map[string]int{}
	}
	b, err := json.Marshal(counts)
	if err != nil {
		return fmt.Errorf("finish run %d: %w", id, err)
	}
	if _, err := s.Exec(ctx, &finishRunCmd{ID: id, At: at, Counts: b, Error: runErr}); err != nil {
		return fmt.Errorf("finish run %d: %w", id, err)
	}
	return nil
}

// ReconcileRuns returns the latest runs of job (every job when empty),
// newest first.
func (s *Store) ReconcileRuns(ctx context.Context, job string, limit int) ([]ReconcileRun, error) {
	if limit <= 0 {
		limit = 100
	}
	q := `SELECT id, job, started_at, finished_at, counts, error FROM reconcile_runs`
	args := []any{}
	if job != "" {
		q += ` WHERE job = ? ORDER BY started_at DESC, id DESC LIMIT ?`
		args = append(args, job, limit)
	} else {
		q += ` ORDER BY id DESC LIMIT ?`
		args = append(args, limit)
	}
	rows, err := s.rdb.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("reconcile runs: %w", err)
	}
	defer rows.Close()
	var out []ReconcileRun
	for rows.Next() {
		var (
			r        ReconcileRun
			started  int64
			finished sql.NullInt64
			counts   string
		)
		if err := rows.Scan(&r.ID, &r.Job, &started, &finished, &counts, &r.Error); err != nil {
			return nil, fmt.Errorf("reconcile runs: %w", err)
		}
		r.StartedAt = unixMilliUTC(started)
		if finished.Valid {
			r.FinishedAt = unixMilliUTC(finished.Int64)
		}
		if err := json.Unmarshal([]byte(counts), &r.Counts); err != nil {
			return nil, fmt.Errorf("reconcile run %d: counts: %w", r.ID, err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// openFindingCountsQuery reads the partial index of open findings only.
const openFindingCountsQuery = `SELECT kind, count(*) FROM findings WHERE resolved_at IS NULL GROUP BY kind`

// OpenFindingCounts returns the number of open findings per kind.
func (s *Store) OpenFindingCounts(ctx context.Context) (map[string]int, error) {
	rows, err := s.rdb.QueryContext(ctx, openFindingCountsQuery)
	if err != nil {
		return nil, fmt.Errorf("open findings: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var (
			kind string
			n    int
		)
		if err := rows.Scan(&kind, &n); err != nil {
			return nil, fmt.Errorf("open findings: %w", err)
		}
		out[kind] = n
	}
	return out, rows.Err()
}

// --- stale orders ---

// DueOrder is a non-final order whose next poll is due.
type DueOrder struct {
	ID              int64
	ProviderID      string
	MerchantOrderID string
	Type            provider.OrderType
	Status          provider.Status
	UpdatedAt       time.Time
	NextCheckAt     time.Time
	CheckAttempts   int
}

// DueCursor is where a page of due orders or watches ends; the next page
// starts after it. The zero cursor starts at the beginning.
type DueCursor struct {
	NextCheckAt int64
	ID          int64
}

// Cursor returns the cursor just after o.
func (o DueOrder) Cursor() DueCursor { return DueCursor{o.NextCheckAt.UnixMilli(), o.ID} }

// dueOrdersQuery walks the partial index orders_due (non-final orders by
// next_check_at, then rowid) from the cursor; the test of this package
// asserts that the plan uses it.
const dueOrdersQuery = `SELECT id, provider_id, merchant_order_id, type, status, updated_at, next_check_at, check_attempts
	FROM orders
	WHERE status IN ('new', 'processing')
	  AND next_check_at <= ?
	  AND (next_check_at, id) > (?, ?)
	  AND updated_at <= ?
	ORDER BY next_check_at, id
	LIMIT ?`

// DueOrdersPlan returns SQLite's query plan for the due-orders query, one
// line per step, for tests and benchmarks that check it uses its index.
func (s *Store) DueOrdersPlan(ctx context.Context) ([]string, error) {
	return s.queryPlan(ctx, dueOrdersQuery, 0, 0, 0, 0, 1)
}

// DueOrders returns up to limit orders in new or processing whose
// next_check_at is at or before now and whose last change is at or before
// changedBefore, after the cursor, in (next_check_at, id) order.
func (s *Store) DueOrders(ctx context.Context, now, changedBefore time.Time, after DueCursor, limit int) ([]DueOrder, error) {
	rows, err := s.rdb.QueryContext(ctx, dueOrdersQuery, now.UnixMilli(), after.NextCheckAt, after.ID,
		changedBefore.UnixMilli(), limit)
	if err != nil {
		return nil, fmt.Errorf("due orders: %w", err)
	}
	defer rows.Close()
	out := make([]DueOrder, 0, limit)
	for rows.Next() {
		var (
			o         DueOrder
			upd, next int64
		)
		if err := rows.Scan(&o.ID, &o.ProviderID, &o.MerchantOrderID, &o.Type, &o.Status, &upd, &next, &o.CheckAttempts); err != nil {
			return nil, fmt.Errorf("due orders: %w", err)
		}
		o.UpdatedAt, o.NextCheckAt = unixMilliUTC(upd), unixMilliUTC(next)
		out = append(out, o)
	}
	return out, rows.Err()
}

// CountDueOrders counts what DueOrders would page through.
func (s *Store) CountDueOrders(ctx context.Context, now, changedBefore time.Time) (int, error) {
	var n int
	err := s.rdb.QueryRowContext(ctx, `SELECT count(*) FROM orders
		WHERE status IN ('new', 'processing') AND next_check_at <= ? AND updated_at <= ?`,
		now.UnixMilli(), changedBefore.UnixMilli()).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count due orders: %w", err)
	}
	return n, nil
}

// refundingOrdersQuery walks ledger_pending_kind's refunds in flight by
// order from the cursor, one row per order (the GROUP BY follows the
// index), and reads each order by its key.
const refundingOrdersQuery = `SELECT o.id, o.provider_id, o.merchant_order_id, o.type, o.status, o.updated_at,
		coalesce(o.next_check_at, 0), o.check_attempts
	FROM ledger_pending p JOIN orders o ON o.id = p.order_id
	WHERE p.kind = 'refund_in_flight' AND p.order_id > ? AND p.since <= ?
	  AND o.status NOT IN ('new', 'processing') AND coalesce(o.next_check_at, 0) <= ?
	GROUP BY p.order_id
	ORDER BY p.order_id
	LIMIT ?`

// RefundingOrders returns up to limit final orders, after the one with
// rowid afterID, in rowid order, that have a refund orderd has known in
// flight (new or processing) since pendingSince or earlier and whose next
// check (none before the first) is at or before now. Refunds end at the
// provider on their own and need not send a webhook, so these are polled
// like orders in flight; orders in new or processing are DueOrders'.
func (s *Store) RefundingOrders(ctx context.Context, now, pendingSince time.Time, afterID int64, limit int) ([]DueOrder, error) {
	rows, err := s.rdb.QueryContext(ctx, refundingOrdersQuery, afterID, pendingSince.UnixMilli(), now.UnixMilli(), limit)
	if err != nil {
		return nil, fmt.Errorf("refunding orders: %w", err)
	}
	defer rows.Close()
	var out []DueOrder
	for rows.Next() {
		var (
			o         DueOrder
			upd, next int64
		)
		if err := rows.Scan(&o.ID, &o.ProviderID, &o.MerchantOrderID, &o.Type, &o.Status, &upd, &next, &o.CheckAttempts); err != nil {
			return nil, fmt.Errorf("refunding orders: %w", err)
		}
		o.UpdatedAt, o.NextCheckAt = unixMilliUTC(upd), unixMilliUTC(next)
		out = append(out, o)
	}
	return out, rows.Err()
}

// PostponeOrderCheck moves a non-final order's next poll to next and
// counts the check in check_attempts. A final order is left alone (it is
// no longer polled, but see PostponeRefundCheck); postponed reports
// whether the order was moved.
func (tx *Tx) PostponeOrderCheck(providerOrderID string, next time.Time) (postponed bool, err error) {
	return tx.postpone(providerOrderID, next, `status IN ('new', 'processing')`)
}

// PostponeRefundCheck is PostponeOrderCheck for a final order polled for
// its refund in flight (RefundingOrders): it moves the order only while
// orderd still knows a refund of it in flight. It is apart from
// PostponeOrderCheck so that the log entries written before refunds were
// polled apply as they did.
func (tx *Tx) PostponeRefundCheck(providerOrderID string, next time.Time) (postponed bool, err error) {
	return tx.postpone(providerOrderID, next, `status NOT IN ('new', 'processing')
		AND EXISTS (SELECT 1 FROM ledger_pending WHERE order_id = orders.id AND kind = 'refund_in_flight')`)
}

func (tx *Tx) postpone(providerOrderID string, next time.Time, cond string) (bool, error) {
	res, err := tx.Exec(`UPDATE orders SET next_check_at = ?, check_attempts = check_attempts + 1
		WHERE provider_id = ? AND `+cond, next.UnixMilli(), providerOrderID)
	if err != nil {
		return false, fmt.Errorf("postpone check of %s: %w", providerOrderID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("postpone check of %s: %w", providerOrderID, err)
	}
	return n == 1, nil
}

// StoredState is an order's current stored state as the write path last
// decided it.
type StoredState struct {
	ProviderID      string
	MerchantOrderID string
	Status          provider.Status
	// Source is how the current state was learned; Raw is its JSON.
	Source    Source
	Raw       json.RawMessage
	UpdatedAt time.Time
}

// OrderState returns the stored state of the order with provider id
// providerOrderID, or ErrNotFound.
func (tx *Tx) OrderState(providerOrderID string) (StoredState, error) {
	var (
		st  StoredState
		upd int64
		raw []byte
		src sql.NullString
	)
	err := tx.QueryRow(`SELECT o.provider_id, o.merchant_order_id, o.status, o.updated_at, h.source, coalesce(h.raw, d.raw)
		FROM orders o
		LEFT JOIN order_history h ON h.id = o.state_id
		LEFT JOIN deliveries d ON d.id = h.delivery_id
		WHERE o.provider_id = ?`, providerOrderID).Scan(&st.ProviderID, &st.MerchantOrderID, &st.Status, &upd, &src, &raw)
	if errors.Is(err, sql.ErrNoRows) {
		return StoredState{}, fmt.Errorf("order %s: %w", providerOrderID, ErrNotFound)
	}
	if err != nil {
		return StoredState{}, fmt.Errorf("order %s: %w", providerOrderID, err)
	}
	st.UpdatedAt = unixMilliUTC(upd)
	st.Source = Source(src.String)
	st.Raw = jsonOrNull(raw)
	return st, nil
}

// StuckOrder is an order with an open stuck_order finding.
type StuckOrder struct {
	ProviderID string
	Status     provider.Status
}

// ResolveSettledStuckOrders resolves every open stuck_order finding whose
// order has reached a final status since, and returns how many it resolved.
func (s *Store) ResolveSettledStuckOrders(ctx context.Context) (int, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT f.subject_key FROM findings f
		JOIN orders o ON o.provider_id = f.subject_key
		WHERE f.kind = ? AND f.resolved_at IS NULL AND o.status IN ('completed', 'rejected')`, FindingStuckOrder)
	if err != nil {
		return 0, fmt.Errorf("settled stuck orders: %w", err)
	}
	keys, err := scanStrings(rows)
	if err != nil {
		return 0, fmt.Errorf("settled stuck orders: %w", err)
	}
	n := 0
	for len(keys) > 0 {
		chunk := keys[:min(len(keys), 200)]
		keys = keys[len(chunk):]
		resolved, err := ExecAs[int](ctx, s, &ResolveFindingsCmd{FindingKind: FindingStuckOrder, Keys: chunk})
		n += resolved
		if err != nil {
			return n, fmt.Errorf("resolve stuck orders: %w", err)
		}
	}
	return n, nil
}

// --- watches ---

// DueWatch is an unresolved watch whose next poll is due.
type DueWatch struct {
	ID              int64
	MerchantOrderID string
	Reason          string
	CreatedAt       time.Time
	NextCheckAt     time.Time
	Attempts        int
}

// Cursor returns the cursor just after w.
func (w DueWatch) Cursor() DueCursor { return DueCursor{w.NextCheckAt.UnixMilli(), w.ID} }

// DueWatches returns up to limit unresolved watches due at now, after the
// cursor, by the watches_due index.
func (s *Store) DueWatches(ctx context.Context, now time.Time, after DueCursor, limit int) ([]DueWatch, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT id, merchant_order_id, reason, created_at, next_check_at, attempts
		FROM watches
		WHERE resolved_at IS NULL AND next_check_at <= ? AND (next_check_at, id) > (?, ?)
		ORDER BY next_check_at, id LIMIT ?`, now.UnixMilli(), after.NextCheckAt, after.ID, limit)
	if err != nil {
		return nil, fmt.Errorf("due watches: %w", err)
	}
	defer rows.Close()
	var out []DueWatch
	for rows.Next() {
		var (
			w             DueWatch
			created, next int64
		)
		if err := rows.Scan(&w.ID, &w.MerchantOrderID, &w.Reason, &created, &next, &w.Attempts); err != nil {
			return nil, fmt.Errorf("due watches: %w", err)
		}
		w.CreatedAt, w.NextCheckAt = unixMilliUTC(created), unixMilliUTC(next)
		out = append(out, w)
	}
	return out, rows.Err()
}

// PostponeWatch moves an open watch's next poll to next and counts the
// attempt.
func (tx *Tx) PostponeWatch(merchantOrderID string, next time.Time) error {
	_, err := tx.Exec(`UPDATE watches SET next_check_at = ?, attempts = attempts + 1
		WHERE merchant_order_id = ? AND resolved_at IS NULL`, next.UnixMilli(), merchantOrderID)
	if err != nil {
		return fmt.Errorf("postpone watch %s: %w", merchantOrderID, err)
	}
	return nil
}

// --- requisites ---

// Requisite sources.
const (
	RequisiteFromGateway = "gateway"
	RequisiteFromWatch   = "watch"
)

// Requisite is a deposit requisite the sweep pages through.
type Requisite struct {
	ID          string // the provider's requisite id
	Currency    string
	Source      string // RequisiteFromGateway or RequisiteFromWatch
	Active      bool
	CreatedAt   time.Time
	LastSweptAt time.Time // zero before the first sweep
	Recovered   int       // orders the sweep found that no webhook brought
}

// UpsertRequisite registers a requisite for the sweep, or reactivates one
// already known (keeping its sweep position). ID is required; Source
// defaults to gateway.
func (tx *Tx) UpsertRequisite(r Requisite) error {
	if r.ID == "" {
		return errors.New("requisite: id is empty")
	}
	if r.Source == "" {
		r.Source = RequisiteFromGateway
	}
	created := r.CreatedAt
	if created.IsZero() {
		created = tx.Now()
	}
	_, err := tx.Exec(`INSERT INTO requisites (requisite_id, currency, source, active, created_at)
		VALUES (?, ?, ?, 1, ?)
		ON CONFLICT (requisite_id) DO UPDATE SET
			currency = CASE WHEN excluded.currency <> '' THEN excluded.currency ELSE currency END,
			active = 1, deactivated_at = NULL`,
		strings.ToLower(r.ID), strings.ToLower(r.Currency), r.Source, created.UnixMilli())
	if err != nil {
		return fmt.Errorf("requisite %s: %w", r.ID, err)
	}
	return nil
}

// DeactivateRequisite stops sweeping the requisite with id after one last
// sweep up to its deactivation (see RequisitesToSweep). Deactivating an
// unknown requisite is not an error.
func (tx *Tx) DeactivateRequisite(id string) error {
	_, err := tx.Exec(`UPDATE requisites SET active = 0, deactivated_at = ? WHERE requisite_id = ? AND active = 1`,
		tx.Now().UnixMilli(), strings.ToLower(id))
	if err != nil {
		return fmt.Errorf("deactivate requisite %s: %w", id, err)
	}
	return nil
}

// UpsertRequisite is Tx.UpsertRequisite in a write of its own.
func (s *Store) UpsertRequisite(ctx context.Context, r Requisite) error {
	_, err := s.Exec(ctx, &UpsertRequisitesCmd{Requisites: []Requisite{r}})
	return err
}

// DeactivateRequisite is Tx.DeactivateRequisite in a write of its own.
func (s *Store) DeactivateRequisite(ctx context.Context, id string) error {
	_, err := s.Exec(ctx, &deactivateRequisiteCmd{ID: id})
	return err
}

// Requisites returns the registered requisites, only the active ones when
// activeOnly, in registration order.
func (s *Store) Requisites(ctx context.Context, activeOnly bool) ([]Requisite, error) {
	where := ``
	if activeOnly {
		where = ` WHERE active = 1`
	}
	return s.requisites(ctx, where)
}

// RequisitesToSweep returns, in registration order, the active requisites
// and the deactivated ones not yet swept past their deactivation: a
// deposit made after the last sweep and before the deactivation, whose
// webhook was lost, is still found by that last sweep.
func (s *Store) RequisitesToSweep(ctx context.Context) ([]Requisite, error) {
	return s.requisites(ctx, ` WHERE active = 1 OR last_swept_at IS NULL OR last_swept_at < deactivated_at`)
}

func (s *Store) requisites(ctx context.Context, where string) ([]Requisite, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT requisite_id, currency, source, active, created_at, last_swept_at, recovered
		FROM requisites`+where+` ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("requisites: %w", err)
	}
	defer rows.Close()
	var out []Requisite
	for rows.Next() {
		var (
			r       Requisite
			created int64
			swept   sql.NullInt64
		)
		if err := rows.Scan(&r.ID, &r.Currency, &r.Source, &r.Active, &created, &swept, &r.Recovered); err != nil {
			return nil, fmt.Errorf("requisites: %w", err)
		}
		r.CreatedAt = unixMilliUTC(created)
		if swept.Valid {
			r.LastSweptAt = unixMilliUTC(swept.Int64)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// MarkRequisiteSwept records a finished sweep of requisite id up to at,
// adding recovered to its count of orders that no webhook brought.
func (s *Store) MarkRequisiteSwept(ctx context.Context, id string, at time.Time, recovered int) error {
	if _, err := s.Exec(ctx, &requisiteSweptCmd{ID: id, At: at, Recovered: recovered}); err != nil {
		return fmt.Errorf("mark requisite %s swept: %w", id, err)
	}
	return nil
}

// --- balances ---

// BalanceSnapshot is the provider's balance in one currency at one time.
type BalanceSnapshot struct {
	ID       int64
	Currency string
	Amount   decimal.Decimal
	TakenAt  time.Time
}

// InsertBalanceSnapshot stores a snapshot and returns it with its id.
func (s *Store) InsertBalanceSnapshot(ctx context.Context, currency string, amount decimal.Decimal, at time.Time, runID int64) (BalanceSnapshot, error) {
	snap := BalanceSnapshot{Currency: strings.ToLower(currency), Amount: amount, TakenAt: unixMilliUTC(at.UnixMilli())}
	id, err := ExecAs[int64](ctx, s, &balanceSnapshotCmd{Snap: snap, RunID: runID})
	snap.ID = id
	if err != nil {
		return BalanceSnapshot{}, fmt.Errorf("balance snapshot %s: %w", currency, err)
	}
	return snap, nil
}

// BalanceSnapshots returns the snapshots taken in [from, to), oldest first,
// of every currency (or one when currency is set).
func (s *Store) BalanceSnapshots(ctx context.Context, currency string, from, to time.Time) ([]BalanceSnapshot, error) {
	q := `SELECT id, currency, amount, taken_at FROM balance_snapshots WHERE taken_at >= ? AND taken_at < ?`
	args := []any{from.UnixMilli(), to.UnixMilli()}
	if currency != "" {
		q = `SELECT id, currency, amount, taken_at FROM balance_snapshots WHERE currency = ? AND taken_at >= ? AND taken_at < ?`
		args = append([]any{strings.ToLower(currency)}, args...)
	}
	rows, err := s.rdb.QueryContext(ctx, q+` ORDER BY taken_at, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("balance snapshots: %w", err)
	}
	defer rows.Close()
	var out []BalanceSnapshot
	for rows.Next() {
		snap, err := scanSnapshot(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, snap)
	}
	return out, rows.Err()
}

type snapshotRow interface{ Scan(dest ...any) error }

func scanSnapshot(r snapshotRow) (BalanceSnapshot, error) {
	var (
		snap   BalanceSnapshot
		amount string
		at     int64
	)
	if err := r.Scan(&snap.ID, &snap.Currency, &amount, &at); err != nil {
		return BalanceSnapshot{}, fmt.Errorf("balance snapshot: %w", err)
	}
	d, err := provider.ParseAmount(amount)
	if err != nil {
		return BalanceSnapshot{}, fmt.Errorf("balance snapshot %d: %w", snap.ID, err)
	}
	snap.Amount, snap.TakenAt = d, unixMilliUTC(at)
	return snap, nil
}

// DriftOpening returns the snapshot a new comparison of currency should
// open from, given the closing snapshot just taken: where the last
// comparison left the books balanced (or a person accepted its gap) (its closing snapshot, or rather the
// latest snapshot before closing), or, when the last comparison left drift
// unexplained beyond tolerance, that comparison's opening snapshot. ok is
// false when there is no earlier snapshot.
func (s *Store) DriftOpening(ctx context.Context, closing BalanceSnapshot) (snap BalanceSnapshot, ok bool, err error) {
	var (
		openingID int64
		within    bool
	)
	// A comparison a person accepted (its finding resolved as explained
	// or written off) counts as agreed, like one within tolerance.
	err = s.rdb.QueryRowContext(ctx, `SELECT opening_id, within_tolerance OR accepted FROM balance_drifts
		WHERE currency = ? AND closing_id < ? ORDER BY closing_at DESC, id DESC LIMIT 1`,
		closing.Currency, closing.ID).Scan(&openingID, &within)
	switch {
	case errors.Is(err, sql.ErrNoRows) || err == nil && within:
		row := s.rdb.QueryRowContext(ctx, `SELECT id, currency, amount, taken_at FROM balance_snapshots
			WHERE currency = ? AND id < ? ORDER BY taken_at DESC, id DESC LIMIT 1`, closing.Currency, closing.ID)
		snap, err = scanSnapshot(row)
	case err != nil:
		return BalanceSnapshot{}, false, fmt.Errorf("drift opening %s: %w", closing.Currency, err)
	default:
		row := s.rdb.QueryRowContext(ctx, `SELECT id, currency, amount, taken_at FROM balance_snapshots WHERE id = ?`, openingID)
		snap, err = scanSnapshot(row)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return BalanceSnapshot{}, false, nil
	}
	if err != nil {
		return BalanceSnapshot{}, false, fmt.Errorf("drift opening %s: %w", closing.Currency, err)
	}
	return snap, true, nil
}

// BalanceDrift is one comparison of a currency's balance with the ledger;
// see migrations/0003_reconcile.sql for how the columns relate.
type BalanceDrift struct {
	ID              int64
	Currency        string
	Opening         BalanceSnapshot
	Closing         BalanceSnapshot
	Actual          decimal.Decimal
	Expected        decimal.Decimal
	Drift           decimal.Decimal
	Explained       decimal.Decimal
	Unexplained     decimal.Decimal
	Tolerance       decimal.Decimal
	WithinTolerance bool
	// Detail is the JSON the balance_drift finding carries.
	Detail     json.RawMessage
	RunID      int64
	ComputedAt time.Time
}

// UnexplainedStreak returns how many of the latest comparisons of
// currency, newest first and at most limit, left drift unexplained beyond
// tolerance in a row (a comparison a person accepted ends the streak).
func (tx *Tx) UnexplainedStreak(currency string, limit int) (int, error) {
	rows, err := tx.Query(`SELECT within_tolerance OR accepted FROM balance_drifts
		WHERE currency = ? ORDER BY closing_at DESC, id DESC LIMIT ?`, strings.ToLower(currency), limit)
	if err != nil {
		return 0, fmt.Errorf("drift streak %s: %w", currency, err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var agreed bool
		if err := rows.Scan(&agreed); err != nil {
			return 0, fmt.Errorf("drift streak %s: %w", currency, err)
		}
		if agreed {
			break
		}
		n++
	}
	return n, rows.Err()
}

// InsertBalanceDrift stores a comparison and returns its id.
func (tx *Tx) InsertBalanceDrift(d BalanceDrift) (int64, error) {
	detail, err := encodeDetail(d.Detail)
	if err != nil {
		return 0, fmt.Errorf("balance drift %s: %w", d.Currency, err)
	}
	at := d.ComputedAt
	if at.IsZero() {
		at = tx.Now()
	}
	var id int64
	err = tx.QueryRow(`INSERT INTO balance_drifts (currency, opening_id, closing_id, opening_at, closing_at,
			opening, closing, actual, expected, drift, explained, unexplained, tolerance, within_tolerance,
			detail, run_id, computed_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		strings.ToLower(d.Currency), d.Opening.ID, d.Closing.ID, d.Opening.TakenAt.UnixMilli(), d.Closing.TakenAt.UnixMilli(),
		provider.FormatAmount(d.Opening.Amount), provider.FormatAmount(d.Closing.Amount),
		provider.FormatAmount(d.Actual), provider.FormatAmount(d.Expected), provider.FormatAmount(d.Drift),
		provider.FormatAmount(d.Explained), provider.FormatAmount(d.Unexplained), provider.FormatAmount(d.Tolerance),
		d.WithinTolerance, string(detail), nullRowID(d.RunID), at.UnixMilli()).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("balance drift %s: %w", d.Currency, err)
	}
	return id, nil
}

// BalanceDrifts returns the comparisons whose closing snapshot was taken in
// [from, to), oldest first, of every currency (or one when currency is
// set). Reports and the dashboard chart read them.
func (s *Store) BalanceDrifts(ctx context.Context, currency string, from, to time.Time) ([]BalanceDrift, error) {
	where := `closing_at >= ? AND closing_at < ?`
	args := []any{from.UnixMilli(), to.UnixMilli()}
	if currency != "" {
		where += ` AND currency = ?`
		args = append(args, strings.ToLower(currency))
	}
	return s.balanceDrifts(ctx, where, args...)
}

// balanceDrifts returns the comparisons that meet where, by closing time.
func (s *Store) balanceDrifts(ctx context.Context, where string, args ...any) ([]BalanceDrift, error) {
	q := `SELECT id, currency, opening_id, closing_id, opening_at, closing_at, opening, closing, actual, expected,
			drift, explained, unexplained, tolerance, within_tolerance, detail, coalesce(run_id, 0), computed_at
		FROM balance_drifts WHERE ` + where
	rows, err := s.rdb.QueryContext(ctx, q+` ORDER BY closing_at, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("balance drifts: %w", err)
	}
	defer rows.Close()
	var out []BalanceDrift
	for rows.Next() {
		var (
			d                                                                  BalanceDrift
			openAt, closeAt, computed                                          int64
			opening, closing, actual, expected, drift, expl, unexpl, tolerance string
			detail                                                             string
		)
		if err := rows.Scan(&d.ID, &d.Currency, &d.Opening.ID, &d.Closing.ID, &openAt, &closeAt, &opening, &closing,
			&actual, &expected, &drift, &expl, &unexpl, &tolerance, &d.WithinTolerance, &detail, &d.RunID, &computed); err != nil {
			return nil, fmt.Errorf("balance drifts: %w", err)
		}
		d.Opening.Currency, d.Closing.Currency = d.Currency, d.Currency
		d.Opening.TakenAt, d.Closing.TakenAt, d.ComputedAt = unixMilliUTC(openAt), unixMilliUTC(closeAt), unixMilliUTC(computed)
		for _, f := range []struct {
			dst *decimal.Decimal
			s   string
		}{{&d.Opening.Amount, opening}, {&d.Closing.Amount, closing}, {&d.Actual, actual}, {&d.Expected, expected},
			{&d.Drift, drift}, {&d.Explained, expl}, {&d.Unexplained, unexpl}, {&d.Tolerance, tolerance}} {
			v, err := provider.ParseAmount(f.s)
			if err != nil {
				return nil, fmt.Errorf("balance drift %d: %w", d.ID, err)
			}
			*f.dst = v
		}
		d.Detail = json.RawMessage(detail)
		out = append(out, d)
	}
	return out, rows.Err()
}

// --- ledger ---

// Ledger movement kinds.
const (
	MovementPayin  = "payin"
	MovementPayout = "payout"
	MovementRefund = "refund"
)

// Pending movement kinds.
const (
	PendingProcessing     = "processing"
	PendingRefundInFlight = "refund_in_flight"
)

// LedgerMovement is one observed movement of the merchant's balance.
type LedgerMovement struct {
	ProviderOrderID string
	MerchantOrderID string
	Kind            string // MovementPayin, MovementPayout or MovementRefund
	EntryKey        string // the transaction behind it
	Currency        string
	// Amount is signed: positive credits the balance, negative debits it.
	Amount decimal.Decimal
	// PlacedAt is the provider's completedAt, or LearnedAt when the
	// provider gave none (PlacedByProvider false).
	PlacedAt         time.Time
	PlacedByProvider bool
	LearnedAt        time.Time
}

// PendingMovement is a movement that may still happen: an order not final
// yet, or a refund in flight.
type PendingMovement struct {
	ProviderOrderID string
	MerchantOrderID string
	Kind            string // PendingProcessing or PendingRefundInFlight
	EntryKey        string
	Currency        string
	Amount          decimal.Decimal // signed, as LedgerMovement.Amount
	Since           time.Time
}

// ledgerCursorKey is the reconcile_state key of the last order_history row
// the ledger has read.
const ledgerCursorKey = "ledger_history_cursor"

// UpdateLedger reads the order states recorded since the last call (by
// order_history id, which only grows) and derives ledger_movements and
// ledger_pending from them, batch rows at a time. It returns how many
// states it read.
func (s *Store) UpdateLedger(ctx context.Context, batch int) (int, error) {
	if batch <= 0 {
		batch = 1000
	}
	total := 0
	for {
		step, err := ExecAs[ledgerStep](ctx, s, &advanceLedgerCmd{Batch: batch})
		if err != nil {
			return total, fmt.Errorf("update ledger: %w", err)
		}
		if !step.Moved {
			return total, nil
		}
		total += step.States
	}
}

// advanceLedgerCmd is one step of UpdateLedger: it reads up to Batch
// history rows after the ledger's cursor, inside the transaction, so that
// every instance derives the same ledger from the same history.
type advanceLedgerCmd struct{ Batch int }

// ledgerStep is what one advanceLedgerCmd did.
type ledgerStep struct {
	States int  // applied states recorded
	Moved  bool // the cursor moved (false: the ledger is up to date)
}

func (*advanceLedgerCmd) Kind() string { return "ledger.advance" }

func (c *advanceLedgerCmd) Apply(tx *Tx) (any, error) {
	var cursor int64
	var v string
	err := tx.QueryRow(`SELECT value FROM reconcile_state WHERE key = ?`, ledgerCursorKey).Scan(&v)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return nil, fmt.Errorf("ledger cursor: %w", err)
	default:
		if cursor, err = strconv.ParseInt(v, 10, 64); err != nil {
			return nil, fmt.Errorf("ledger cursor %q: %w", v, err)
		}
	}
	states, last, err := historySince(context.Background(), tx.s.wconn, cursor, c.Batch)
	if err != nil {
		return nil, err
	}
	if last == cursor {
		return ledgerStep{}, nil
	}
	for _, st := range states {
		if err := tx.recordLedger(st); err != nil {
			return nil, err
		}
	}
	_, err = tx.Exec(`INSERT INTO reconcile_state (key, value) VALUES (?, ?)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value`, ledgerCursorKey, strconv.FormatInt(last, 10))
	if err != nil {
		return nil, err
	}
	return ledgerStep{States: len(states), Moved: true}, nil
}

// historyState is one applied order state the ledger reads.
type historyState struct {
	orderID    int64
	observedAt time.Time
	order      *provider.Order
}

// historySince returns the applied (new or changed) states after id
// cursor, up to limit rows scanned, and the last id scanned.
func historySince(ctx context.Context, q queryer, cursor int64, limit int) ([]historyState, int64, error) {
	rows, err := q.QueryContext(ctx, `SELECT h.id, h.order_id, h.outcome, h.observed_at, coalesce(h.raw, d.raw)
		FROM order_history h LEFT JOIN deliveries d ON d.id = h.delivery_id
		WHERE h.id > ? ORDER BY h.id LIMIT ?`, cursor, limit)
	if err != nil {
		return nil, cursor, fmt.Errorf("ledger: read history: %w", err)
	}
	defer rows.Close()
	last := cursor
	var out []historyState
	for rows.Next() {
		var (
			id, orderID, at int64
			outcome         string
			raw             []byte
		)
		if err := rows.Scan(&id, &orderID, &outcome, &at, &raw); err != nil {
			return nil, cursor, fmt.Errorf("ledger: read history: %w", err)
		}
		last = id
		if outcome != string(OutcomeNew) && outcome != string(OutcomeChanged) {
			continue
		}
		o, err := provider.DecodeOrder(raw)
		if err != nil {
			continue // the write path stored it, so it decoded once; skip rather than stall
		}
		out = append(out, historyState{orderID: orderID, observedAt: unixMilliUTC(at), order: o})
	}
	return out, last, rows.Err()
}

// recordLedger derives the movements of one applied state. Final statuses
// never regress, so a movement once recorded stays; a newer state that
// restates its amount (the provider's newer truth, also a mismatch
// finding) or first gives its completedAt updates it. Pending movements
// are replaced by those of the newest state.
func (tx *Tx) recordLedger(st historyState) error {
	moves, pending := LedgerEntries(st.order, st.observedAt)
	for _, m := range moves {
		by := "learned"
		if m.PlacedByProvider {
			by = "provider"
		}
		if _, err := tx.Exec(`INSERT INTO ledger_movements (order_id, entry_key, kind, provider_order_id, merchant_order_id,
				currency, amount, placed_at, placed_by, learned_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (order_id, entry_key) DO UPDATE SET currency = excluded.currency, amount = excluded.amount,
				placed_at = CASE WHEN excluded.placed_by = 'provider' THEN excluded.placed_at ELSE placed_at END,
				placed_by = CASE WHEN excluded.placed_by = 'provider' THEN 'provider' ELSE placed_by END`,
			st.orderID, m.EntryKey, m.Kind, m.ProviderOrderID, m.MerchantOrderID, m.Currency,
			provider.FormatAmount(m.Amount), m.PlacedAt.UnixMilli(), by, m.LearnedAt.UnixMilli()); err != nil {
			return fmt.Errorf("ledger movement of %s: %w", m.ProviderOrderID, err)
		}
	}
	if _, err := tx.Exec(`DELETE FROM ledger_pending WHERE order_id = ?`, st.orderID); err != nil {
		return fmt.Errorf("ledger pending of %s: %w", st.order.ID, err)
	}
	for _, p := range pending {
		if _, err := tx.Exec(`INSERT INTO ledger_pending (order_id, entry_key, kind, provider_order_id, merchant_order_id,
				currency, amount, since) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (order_id, entry_key) DO NOTHING`,
			st.orderID, p.EntryKey, p.Kind, p.ProviderOrderID, p.MerchantOrderID, p.Currency,
			provider.FormatAmount(p.Amount), p.Since.UnixMilli()); err != nil {
			return fmt.Errorf("ledger pending of %s: %w", p.ProviderOrderID, err)
		}
	}
	return nil
}

// LedgerEntries derives the balance movements one order state shows, and
// the movements it may still cause. The sign convention: a completed payin
// credits its merchantTargetWallet; a completed payout debits its
// merchantSourceWallet, whose amount the provider writes as a positive
// number (the absolute value is used, so a negative one debits too); a
// completed refund transaction debits its amount. A movement is placed at
// the completedAt of the transaction behind it, or at learned when it has
// none. A payin or payout not final yet may still move its transaction's
// merchantWallet (payin, credit; authorized when absent) or authorized
// amount (payout, debit); a refund transaction in new or processing may
// still debit its amount.
func LedgerEntries(o *provider.Order, learned time.Time) (moves []LedgerMovement, pending []PendingMovement) {
	own := ownTransaction(o)
	place := func(t *provider.Transaction) (time.Time, bool) {
		if t != nil && !t.CompletedAt.IsZero() {
			return t.CompletedAt.UTC(), true
		}
		return learned.UTC(), false
	}
	ownKey := "order"
	if own != nil && own.ID != "" {
		ownKey = own.ID
	}
	base := LedgerMovement{ProviderOrderID: o.ID, MerchantOrderID: o.MerchantOrderID, LearnedAt: learned.UTC()}
	if o.Status == provider.StatusCompleted {
		var (
			m    *provider.Money
			sign = 1
			kind = MovementPayin
		)
		switch o.Type {
		case provider.TypePayin:
			m = o.MerchantTargetWallet
		case provider.TypePayout:
			m, sign, kind = o.MerchantSourceWallet, -1, MovementPayout
		}
		if m != nil {
			mv := base
			mv.Kind, mv.EntryKey, mv.Currency = kind, ownKey, m.Currency
			mv.Amount = m.Amount.Abs()
			if sign < 0 {
				mv.Amount = mv.Amount.Neg()
			}
			mv.PlacedAt, mv.PlacedByProvider = place(own)
			moves = append(moves, mv)
		}
	}
	if !o.Status.IsFinal() && own != nil {
		var m *provider.Money
		switch o.Type {
		case provider.TypePayin:
			m = own.MerchantWallet
			if m == nil {
				m = own.Authorized
			}
		case provider.TypePayout:
			m = own.Authorized
			if m == nil {
				m = own.MerchantWallet
			}
		}
		if m != nil {
			amt := m.Amount.Abs()
			if o.Type == provider.TypePayout {
				amt = amt.Neg()
			}
			pending = append(pending, PendingMovement{ProviderOrderID: o.ID, MerchantOrderID: o.MerchantOrderID,
				Kind: PendingProcessing, EntryKey: ownKey, Currency: m.Currency, Amount: amt, Since: learned.UTC()})
		}
	}
	for i := range o.Transactions {
		t := &o.Transactions[i]
		if t.Type != "refund" || t.Amount == nil || t.ID == "" {
			continue
		}
		switch {
		case t.Status == provider.StatusCompleted:
			mv := base
			mv.Kind, mv.EntryKey, mv.Currency = MovementRefund, t.ID, t.Amount.Currency
			mv.Amount = t.Amount.Amount.Abs().Neg()
			mv.PlacedAt, mv.PlacedByProvider = place(t)
			moves = append(moves, mv)
		case !t.Status.IsFinal():
			pending = append(pending, PendingMovement{ProviderOrderID: o.ID, MerchantOrderID: o.MerchantOrderID,
				Kind: PendingRefundInFlight, EntryKey: t.ID, Currency: t.Amount.Currency,
				Amount: t.Amount.Amount.Abs().Neg(), Since: learned.UTC()})
		}
	}
	return moves, pending
}

// ownTransaction is the order's own transaction: the first whose type is
// the order's type, else the first that is not a refund.
func ownTransaction(o *provider.Order) *provider.Transaction {
	for i := range o.Transactions {
		if o.Transactions[i].Type == string(o.Type) {
			return &o.Transactions[i]
		}
	}
	for i := range o.Transactions {
		if o.Transactions[i].Type != "refund" {
			return &o.Transactions[i]
		}
	}
	return nil
}

// LedgerMovements returns the movements of currency placed in (from, to],
// by placement time.
func (s *Store) LedgerMovements(ctx context.Context, currency string, from, to time.Time) ([]LedgerMovement, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT provider_order_id, merchant_order_id, kind, entry_key, currency, amount,
			placed_at, placed_by, learned_at
		FROM ledger_movements WHERE currency = ? AND placed_at > ? AND placed_at <= ?
		ORDER BY placed_at, id`, strings.ToLower(currency), from.UnixMilli(), to.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("ledger movements: %w", err)
	}
	defer rows.Close()
	var out []LedgerMovement
	for rows.Next() {
		var (
			m                 LedgerMovement
			amount, by        string
			placed, learnedAt int64
		)
		if err := rows.Scan(&m.ProviderOrderID, &m.MerchantOrderID, &m.Kind, &m.EntryKey, &m.Currency, &amount,
			&placed, &by, &learnedAt); err != nil {
			return nil, fmt.Errorf("ledger movements: %w", err)
		}
		if m.Amount, err = provider.ParseAmount(amount); err != nil {
			return nil, fmt.Errorf("ledger movement of %s: %w", m.ProviderOrderID, err)
		}
		m.PlacedAt, m.LearnedAt, m.PlacedByProvider = unixMilliUTC(placed), unixMilliUTC(learnedAt), by == "provider"
		out = append(out, m)
	}
	return out, rows.Err()
}

// LedgerSum returns the sum and count of the movements of currency placed
// in (from, to].
func (s *Store) LedgerSum(ctx context.Context, currency string, from, to time.Time) (decimal.Decimal, int, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT amount FROM ledger_movements
		WHERE currency = ? AND placed_at > ? AND placed_at <= ?`, strings.ToLower(currency), from.UnixMilli(), to.UnixMilli())
	if err != nil {
		return decimal.Zero, 0, fmt.Errorf("ledger sum: %w", err)
	}
	defer rows.Close()
	sum, n := decimal.Zero, 0
	for rows.Next() {
		var a string
		if err := rows.Scan(&a); err != nil {
			return decimal.Zero, 0, fmt.Errorf("ledger sum: %w", err)
		}
		d, err := provider.ParseAmount(a)
		if err != nil {
			return decimal.Zero, 0, fmt.Errorf("ledger sum: %w", err)
		}
		sum = sum.Add(d)
		n++
	}
	return sum, n, rows.Err()
}

// PendingMovements returns the pending movements of currency, at most
// limit (0: all), oldest first.
func (s *Store) PendingMovements(ctx context.Context, currency string, limit int) ([]PendingMovement, error) {
	if limit <= 0 {
		limit = -1
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT provider_order_id, merchant_order_id, kind, entry_key, currency, amount, since
		FROM ledger_pending WHERE currency = ? ORDER BY since LIMIT ?`, strings.ToLower(currency), limit)
	if err != nil {
		return nil, fmt.Errorf("pending movements: %w", err)
	}
	defer rows.Close()
	var out []PendingMovement
	for rows.Next() {
		var (
			p      PendingMovement
			amount string
			since  int64
		)
		if err := rows.Scan(&p.ProviderOrderID, &p.MerchantOrderID, &p.Kind, &p.EntryKey, &p.Currency, &amount, &since); err != nil {
			return nil, fmt.Errorf("pending movements: %w", err)
		}
		if p.Amount, err = provider.ParseAmount(amount); err != nil {
			return nil, fmt.Errorf("pending movement of %s: %w", p.ProviderOrderID, err)
		}
		p.Since = unixMilliUTC(since)
		out = append(out, p)
	}
	return out, rows.Err()
}

// UnsettledCreation is a gateway creation still pending or in doubt, with
// the balance movement it would cause if the provider did create it.
type UnsettledCreation struct {
	AttemptID       int64
	Kind            string
	MerchantOrderID string
	State           string
	Currency        string
	// Amount is signed like LedgerMovement.Amount: a payin credits its
	// invoice amount (gross: the provider's fee is not known before
	// completion), a payout or refund debits its amount.
	Amount    decimal.Decimal
	CreatedAt time.Time
}

// UnsettledCreations returns the payin, payout and refund attempts still
// pending or in doubt whose request names an amount, by the
// attempts_unsettled index. A refund's currency is its order's.
func (s *Store) UnsettledCreations(ctx context.Context) ([]UnsettledCreation, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT a.id, a.kind, a.merchant_order_id, a.state, a.request, a.created_at,
			coalesce(o.target_currency, o.source_currency, '')
		FROM attempts a LEFT JOIN orders o ON a.kind = 'refund' AND o.merchant_order_id = a.merchant_order_id
		WHERE a.state IN ('pending', 'in_doubt') AND a.kind IN ('payin', 'payout', 'refund')`)
	if err != nil {
		return nil, fmt.Errorf("unsettled creations: %w", err)
	}
	defer rows.Close()
	var out []UnsettledCreation
	for rows.Next() {
		var (
			c        UnsettledCreation
			req      []byte
			created  int64
			orderCcy string
		)
		if err := rows.Scan(&c.AttemptID, &c.Kind, &c.MerchantOrderID, &c.State, &req, &created, &orderCcy); err != nil {
			return nil, fmt.Errorf("unsettled creations: %w", err)
		}
		c.CreatedAt = unixMilliUTC(created)
		m, ok := requestMoney(req)
		if !ok {
			continue
		}
		c.Currency, c.Amount = m.Currency, m.Amount.Abs()
		if c.Currency == "" {
			c.Currency = orderCcy
		}
		if c.Kind != "payin" {
			c.Amount = c.Amount.Neg()
		}
		if c.Currency == "" || c.Amount.IsZero() {
			continue
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// requestMoney reads the amount of a creation request: "invoice" (payin),
// "amount" as a money object (payout) or as a numeric string (refund).
func requestMoney(req []byte) (provider.Money, bool) {
	var r struct {
		Invoice  *provider.Money `json:"invoice"`
		Amount   json.RawMessage `json:"amount"`
		Currency string          `json:"currency"`
	}
	if json.Unmarshal(req, &r) != nil {
		return provider.Money{}, false
	}
	if r.Invoice != nil {
		return *r.Invoice, true
	}
	if len(r.Amount) == 0 {
		return provider.Money{}, false
	}
	var m provider.Money
	if json.Unmarshal(r.Amount, &m) == nil {
		return m, true
	}
	var s string
	if json.Unmarshal(r.Amount, &s) != nil {
		return provider.Money{}, false
	}
	d, err := provider.ParseAmount(s)
	if err != nil {
		return provider.Money{}, false
	}
	return provider.Money{Amount: d, Currency: strings.ToLower(r.Currency)}, true
}

func unixMilliUTC(v int64) time.Time { return time.UnixMilli(v).UTC() }

func nullRowID(v int64) any {
	if v == 0 {
		return nil
	}
	return v
}

// queryer is what runs a query: the read pool or the writer's connection.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// startRunCmd is StartReconcileRun's command.
type startRunCmd struct {
	Job string
	At  time.Time
}

func (*startRunCmd) Kind() string { return "reconcile.start_run" }

func (c *startRunCmd) Apply(tx *Tx) (any, error) {
	var id int64
	err := tx.QueryRow(`INSERT INTO reconcile_runs (job, started_at) VALUES (?, ?) RETURNING id`,
		c.Job, c.At.UnixMilli()).Scan(&id)
	return id, err
}

// finishRunCmd is FinishReconcileRun's command; Counts is a JSON object.
type finishRunCmd struct {
	ID     int64
	At     time.Time
	Counts json.RawMessage
	Error  string
}

func (*finishRunCmd) Kind() string { return "reconcile.finish_run" }

func (c *finishRunCmd) Apply(tx *Tx) (any, error) {
	_, err := tx.Exec(`UPDATE reconcile_runs SET finished_at = ?, counts = ?, error = ? WHERE id = ?`,
		c.At.UnixMilli(), string(c.Counts), c.Error, c.ID)
	return nil, err
}

// UpsertRequisitesCmd registers requisites (Tx.UpsertRequisite each).
type UpsertRequisitesCmd struct{ Requisites []Requisite }

// Kind implements Command.
func (*UpsertRequisitesCmd) Kind() string { return "requisite.upsert" }

// Apply implements Command.
func (c *UpsertRequisitesCmd) Apply(tx *Tx) (any, error) {
	for _, r := range c.Requisites {
		if err := tx.UpsertRequisite(r); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// deactivateRequisiteCmd is DeactivateRequisite's command.
type deactivateRequisiteCmd struct{ ID string }

func (*deactivateRequisiteCmd) Kind() string { return "requisite.deactivate" }

func (c *deactivateRequisiteCmd) Apply(tx *Tx) (any, error) { return nil, tx.DeactivateRequisite(c.ID) }

// requisiteSweptCmd is MarkRequisiteSwept's command.
type requisiteSweptCmd struct {
	ID        string
	At        time.Time
	Recovered int
}

func (*requisiteSweptCmd) Kind() string { return "requisite.swept" }

func (c *requisiteSweptCmd) Apply(tx *Tx) (any, error) {
	_, err := tx.Exec(`UPDATE requisites SET last_swept_at = ?, recovered = recovered + ? WHERE requisite_id = ?`,
		c.At.UnixMilli(), c.Recovered, strings.ToLower(c.ID))
	return nil, err
}

// balanceSnapshotCmd is InsertBalanceSnapshot's command.
type balanceSnapshotCmd struct {
	Snap  BalanceSnapshot
	RunID int64
}

func (*balanceSnapshotCmd) Kind() string { return "balance.snapshot" }

func (c *balanceSnapshotCmd) Apply(tx *Tx) (any, error) {
	var id int64
	err := tx.QueryRow(`INSERT INTO balance_snapshots (currency, amount, taken_at, run_id) VALUES (?, ?, ?, ?) RETURNING id`,
		c.Snap.Currency, provider.FormatAmount(c.Snap.Amount), c.Snap.TakenAt.UnixMilli(), nullRowID(c.RunID)).Scan(&id)
	return id, err
}

// OpenFindingCmd opens a finding (Tx.OpenFinding); its result is whether
// a new one was opened.
type OpenFindingCmd struct {
	FindingKind string
	Key         string
	Detail      json.RawMessage
}

// Kind implements Command.
func (*OpenFindingCmd) Kind() string { return "finding.open" }

// Apply implements Command.
func (c *OpenFindingCmd) Apply(tx *Tx) (any, error) {
	_, opened, err := tx.OpenFinding(c.FindingKind, c.Key, c.Detail)
	return opened, err
}

// ResolveFindingsCmd resolves the open findings of one kind with these
// keys; its result is how many it resolved.
type ResolveFindingsCmd struct {
	FindingKind string
	Keys        []string
}

// Kind implements Command.
func (*ResolveFindingsCmd) Kind() string { return "finding.resolve" }

// Apply implements Command.
func (c *ResolveFindingsCmd) Apply(tx *Tx) (any, error) {
	n := 0
	for _, k := range c.Keys {
		ok, err := tx.ResolveFinding(c.FindingKind, k)
		if err != nil {
			return n, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}
