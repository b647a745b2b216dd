package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"orderd/provider"
)

// This file holds the queries of the finance report and the dashboard.
// Report queries run inside one read-only transaction (ReportTx), so every
// part of a report — its totals pass, its lines pass, its findings and its
// balances — sees the same snapshot of the database even while the daemon
// keeps writing. Rows are handed to a callback one at a time and never
// collected, so a period of any size streams.

// Report line memberships: why an order is a line of a period's report.
const (
	// ReportFinal: the order reached its final status in the period (its
	// completed_at lies in [from, to)).
	ReportFinal = "final"
	// ReportOpen: the order was created in the period and was not final
	// by its end.
	ReportOpen = "open"
	// ReportRefund: the order became final before the period but a refund
	// of it may have completed in the period; the caller checks the
	// refund transactions' completedAt and drops the line when none did.
	ReportRefund = "refund"
)

// ReportTx is a consistent read-only view of the store for one report.
// Close releases it; it must be closed, since an open read transaction
// keeps the WAL from being checkpointed past it.
type ReportTx struct {
	tx *sql.Tx
}

// BeginReport starts a read-only transaction for a report.
func (s *Store) BeginReport(ctx context.Context) (*ReportTx, error) {
	if s.rdb == nil {
		return nil, fmt.Errorf("begin report: %w", ErrClosed)
	}
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("begin report: %w", err)
	}
	return &ReportTx{tx: tx}, nil
}

// Close ends the report's transaction.
func (r *ReportTx) Close() error {
	if err := r.tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		return fmt.Errorf("end report: %w", err)
	}
	return nil
}

// ReportOrder is one order of a report period, as the store knows it. The
// value passed to the callback of Orders, Raw included, is only valid
// during the call.
type ReportOrder struct {
	// RowID is the store's integer id; lines come in this order.
	RowID           int64
	ProviderID      string
	MerchantOrderID string
	Type            provider.OrderType
	// Membership is ReportFinal, ReportOpen or ReportRefund.
	Membership string
	// Status is the status at the end of the period: the current status
	// for final and refund lines; for open lines the current status when
	// it is still not final, else the last non-final status orderd had
	// observed before the period ended ("processing" when it had observed
	// none).
	Status provider.Status
	// CreatedAt is the provider's createdAt, else when orderd first saw
	// the order.
	CreatedAt time.Time
	// CompletedAt is when the order reached its final status; zero for
	// open lines.
	CompletedAt time.Time
	// UpdatedAt is when orderd last learned a new state of the order: a
	// line can only have changed since an earlier report if its order
	// changed after that report was made.
	UpdatedAt time.Time
	// LearnedVia is how orderd learned the state the line reports: for
	// final lines the first state with the final status; for open lines
	// the state at the end of the period; for refund lines the current
	// state.
	LearnedVia Source
	// OpenFindings lists the kinds of the findings open now whose key is
	// the order's id or merchantOrderId, sorted, without repeats.
	OpenFindings []string
	// AmountColumns holds what a report reads of the current state: the
	// order's amount columns, which the write path keeps with the state
	// (see migration 0011), as one text that ReportAmountReader parses.
	// It is nil when the columns were never filled (a state migration
	// 0011 could not read), and then Raw holds the state instead. Like
	// Raw it is only valid during the call. (The caller parses it, so
	// that a report can do so in another goroutine than the one reading
	// the rows.)
	AmountColumns []byte
	// Raw is the order's current state as the provider wrote it, read
	// only when AmountColumns is nil; nil otherwise.
	Raw []byte
	// Requested is the body of the gateway creation that created the
	// order, when orderd knows the order only from the provider's creation
	// answer (learned via gateway), which states no amount; nil otherwise.
	// Like Raw it is only valid during the call.
	Requested []byte
}

// ReportAmounts is the part of an order's current state a report reads.
// The amounts are owned by the value (they stay valid after the call).
type ReportAmounts struct {
	MerchantSourceWallet *provider.Money
	MerchantTargetWallet *provider.Money
	// Authorized and OwnWallet are the authorized amount and the
	// merchantWallet of the order's own transaction: the first whose type
	// is the order's, else the first that is not a refund.
	Authorized *provider.Money
	OwnWallet  *provider.Money
	// Refunds are the completed refund transactions that state an amount,
	// in the state's order.
	Refunds []RefundAmount
}

// RefundAmount is one completed refund transaction of an order.
type RefundAmount struct {
	Amount provider.Money
	// CompletedAt is zero when the provider gave none.
	CompletedAt time.Time
}

// reportOrdersQuery selects the orders of [from, to) in one pass over the
// orders table in row id order, so lines stream without a sort. The
// three memberships are told apart by completed_at, which is set once,
// when an order becomes final, and is NULL before:
//
//   - final:  completed_at in [from, to);
//   - open:   created in [from, to) and completed_at NULL or >= to;
//   - refund: completed_at < from, a completed payin changed since
//     refundSince (a refund completing changes the order's state, so an
//     order unchanged since then cannot have one in the period).
//
// Open findings are aggregated once per key and joined by the order's id
// and by its merchantOrderId (findings about creations and quarantined
// bodies are keyed by the latter). The creation request is looked up only
// for orders whose current state is the gateway's creation answer, a few
// through the attempts' merchantOrderId index. The amounts come from the
// order's own columns; the current state's JSON (in a history row that
// carries the webhook's body) is read only for an order whose columns were
// never filled. The amount columns are read as one text (and the finding
// kinds too): each column costs the driver a few calls per row, which
// over a month of orders cost more than joining them here. The amounts
// are plain decimals and the currencies three lowercase letters (the
// write path refuses others), so the separators cannot occur in them;
// the refunds' JSON, last, escapes them.
const reportOrdersQuery = `
WITH open_findings AS MATERIALIZED (
	SELECT subject_key, group_concat(kind, ' ') AS kinds
	FROM (SELECT DISTINCT subject_key, kind FROM findings WHERE resolved_at IS NULL ORDER BY subject_key, kind)
	GROUP BY subject_key
)
SELECT o.id, o.provider_id, o.merchant_order_id, o.type,
	CASE
		WHEN o.completed_at >= :from AND o.completed_at < :to THEN 'final'
		WHEN o.completed_at IS NULL OR o.completed_at >= :to THEN 'open'
		ELSE 'refund'
	END AS membership,
	o.status, coalesce(o.created_at, o.first_seen_at), o.completed_at, o.learned_via, o.updated_at,
	CASE
		WHEN o.completed_at >= :from AND o.completed_at < :to THEN coalesce(o.final_via,
			(SELECT h.source FROM order_history h
			 WHERE h.order_id = o.id AND h.status = o.status AND h.outcome IN ('new', 'changed')
			 ORDER BY h.id LIMIT 1))
		WHEN o.completed_at >= :to THEN
			(SELECT h.status || char(31) || h.source FROM order_history h
			 WHERE h.order_id = o.id AND h.outcome IN ('new', 'changed') AND h.observed_at < :to
			   AND h.status NOT IN ('completed', 'rejected')
			 ORDER BY h.id DESC LIMIT 1)
	END AS period_state,
	coalesce(fp.kinds, '') || ' ' || coalesce(fm.kinds, '') AS findings,
	CASE WHEN o.refunds IS NOT NULL THEN
		coalesce(o.source_amount || char(31) || coalesce(o.source_currency, ''), '') || char(30) ||
		coalesce(o.target_amount || char(31) || coalesce(o.target_currency, ''), '') || char(30) ||
		coalesce(o.authorized_amount || char(31) || coalesce(o.authorized_currency, ''), '') || char(30) ||
		coalesce(o.own_wallet_amount || char(31) || coalesce(o.own_wallet_currency, ''), '') || char(30) ||
		o.refunds
	END AS amounts,
	CASE WHEN o.refunds IS NULL THEN
		(SELECT coalesce(hs.raw, d.raw) FROM order_history hs
		 LEFT JOIN deliveries d ON d.id = hs.delivery_id
		 WHERE hs.id = o.state_id)
	END AS raw,
	CASE WHEN o.learned_via = 'gateway' THEN
		(SELECT a.request FROM attempts a
		 WHERE a.merchant_order_id = o.merchant_order_id AND a.kind IN ('payin', 'payout') AND a.state = 'created'
		 ORDER BY a.id DESC LIMIT 1)
	END AS requested
FROM orders o
LEFT JOIN open_findings fp ON fp.subject_key = o.provider_id
LEFT JOIN open_findings fm ON fm.subject_key = o.merchant_order_id
WHERE (o.completed_at >= :from AND o.completed_at < :to)
   OR (coalesce(o.created_at, o.first_seen_at) >= :from AND coalesce(o.created_at, o.first_seen_at) < :to
       AND (o.completed_at IS NULL OR o.completed_at >= :to))
   OR (o.completed_at < :from AND o.updated_at >= :refund_since AND o.type = 'payin' AND o.status = 'completed')
ORDER BY o.id`

// Orders calls fn with every order of the period [from, to) in row id
// order (see ReportOrder for what each line holds). Refund candidates are
// the completed payins that became final before from and changed at or
// after refundSince. An error from fn stops the iteration and is returned.
func (r *ReportTx) Orders(ctx context.Context, from, to, refundSince time.Time, fn func(*ReportOrder) error) error {
	rows, err := r.tx.QueryContext(ctx, reportOrdersQuery,
		sql.Named("from", from.UnixMilli()), sql.Named("to", to.UnixMilli()),
		sql.Named("refund_since", refundSince.UnixMilli()))
	if err != nil {
		return fmt.Errorf("report orders: %w", err)
	}
	defer rows.Close()
	var (
		o                    ReportOrder
		created, updated     int64
		completed            sql.NullInt64
		current, learned     string
		periodState          sql.NullString
		kinds                string
		amounts              sql.RawBytes
		raw, requested       sql.RawBytes
		findingKinds         []string
		status, typ, members string
	)
	for rows.Next() {
		if err := rows.Scan(&o.RowID, &o.ProviderID, &o.MerchantOrderID, &typ, &members, &current, &created,
			&completed, &learned, &updated, &periodState, &kinds, &amounts, &raw, &requested); err != nil {
			return fmt.Errorf("report orders: %w", err)
		}
		o.Type, o.Membership, status = provider.OrderType(typ), members, current
		o.CreatedAt = unixMilliUTC(created)
		o.UpdatedAt = unixMilliUTC(updated)
		o.CompletedAt = time.Time{}
		o.LearnedVia = Source(learned)
		switch members {
		case ReportFinal:
			o.CompletedAt = unixMilliUTC(completed.Int64)
			if periodState.Valid {
				o.LearnedVia = Source(periodState.String)
			}
		case ReportRefund:
			o.CompletedAt = unixMilliUTC(completed.Int64)
		case ReportOpen:
			if completed.Valid {
				// Final now, but not by the end of the period: report the
				// state it was in then.
				status, o.LearnedVia = string(provider.StatusProcessing), ""
				if st, src, ok := strings.Cut(periodState.String, "\x1f"); ok {
					status, o.LearnedVia = st, Source(src)
				}
			}
		}
		o.Status = provider.Status(status)
		findingKinds = findingKinds[:0]
		findingKinds = appendKinds(findingKinds, kinds)
		o.OpenFindings = findingKinds
		o.AmountColumns, o.Raw, o.Requested = amounts, raw, requested
		if err := fn(&o); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("report orders: %w", err)
	}
	return nil
}

// ReportAmountReader reads ReportOrder.AmountColumns. It keeps one string
// per currency, so use one per goroutine.
type ReportAmountReader struct {
	words map[string]string
}

// Read fills a from an order's amount columns as the report's query joins
// them: the source and target wallets, the own transaction's authorized
// amount and merchant wallet (each "amount\x1fcurrency", or empty for
// none), and the refunds, separated by \x1e.
func (r *ReportAmountReader) Read(b []byte, a *ReportAmounts) error {
	*a = ReportAmounts{}
	if r.words == nil {
		r.words = map[string]string{}
	}
	words := r.words
	var fields [5][]byte
	for i := range 4 {
		var ok bool
		if fields[i], b, ok = bytes.Cut(b, []byte{0x1e}); !ok {
			return errors.New("amount columns: not five fields")
		}
	}
	fields[4] = b
	for i, dst := range []**provider.Money{&a.MerchantSourceWallet, &a.MerchantTargetWallet, &a.Authorized, &a.OwnWallet} {
		if len(fields[i]) == 0 {
			continue
		}
		amount, currency, _ := bytes.Cut(fields[i], []byte{0x1f})
		d, err := provider.ParseAmountBytes(amount)
		if err != nil {
			return fmt.Errorf("amount columns: %w", err)
		}
		*dst = &provider.Money{Amount: d, Currency: word(words, currency)}
	}
	if len(fields[4]) == 0 {
		return nil
	}
	// Rare (an order with a completed refund): the general decoder.
	var refunds [][3]string
	if err := json.Unmarshal(fields[4], &refunds); err != nil {
		return fmt.Errorf("refunds column: %w", err)
	}
	a.Refunds = make([]RefundAmount, len(refunds))
	for i, r := range refunds {
		m, err := provider.NewMoney(r[0], r[1])
		if err != nil {
			return fmt.Errorf("refunds column: %w", err)
		}
		a.Refunds[i].Amount = m
		if r[2] != "" {
			t, err := provider.ParseTime(r[2])
			if err != nil {
				return fmt.Errorf("refunds column: %w", err)
			}
			a.Refunds[i].CompletedAt = t.Time
		}
	}
	return nil
}

// word returns b lowercased (as provider.NewMoney writes a currency) as a
// string, one per distinct value while words is small.
func word(words map[string]string, b []byte) string {
	if w, ok := words[string(b)]; ok {
		return w
	}
	w := strings.ToLower(string(b))
	if len(words) < 256 {
		words[string(b)] = w
	}
	return w
}

// appendKinds merges the space-separated sorted kinds of s into the
// sorted list dst, without repeats.
func appendKinds(dst []string, s string) []string {
	if s == "" {
		return dst
	}
	for k := range strings.FieldsSeq(s) {
		i := 0
		for i < len(dst) && dst[i] < k {
			i++
		}
		if i < len(dst) && dst[i] == k {
			continue
		}
		dst = append(dst, "")
		copy(dst[i+1:], dst[i:])
		dst[i] = k
	}
	return dst
}

// Findings calls fn with every finding that was open at some time in
// [from, to): found before to and not resolved before from, in id order.
// State and ResolvedAt say how each stands now.
func (r *ReportTx) Findings(ctx context.Context, from, to time.Time, fn func(Finding) error) error {
	rows, err := r.tx.QueryContext(ctx, `SELECT `+findingColumns+`
		FROM findings WHERE found_at < ? AND (resolved_at IS NULL OR resolved_at >= ?)
		ORDER BY id`, to.UnixMilli(), from.UnixMilli())
	if err != nil {
		return fmt.Errorf("report findings: %w", err)
	}
	// Read them all first: the trails are read with a second query on the
	// same transaction, which cannot run while these rows are open. A
	// period's findings are few (they are exceptions).
	var fs []Finding
	for rows.Next() {
		f, err := scanFinding(rows)
		if err != nil {
			rows.Close()
			return fmt.Errorf("report findings: %w", err)
		}
		fs = append(fs, f)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("report findings: %w", err)
	}
	for i := 0; i < len(fs); i += 500 {
		if err := loadTrails(ctx, r.tx, fs[i:min(i+500, len(fs))]); err != nil {
			return err
		}
	}
	for _, f := range fs {
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

// Runs calls fn with every reconcile run started in [from, to), oldest
// first.
func (r *ReportTx) Runs(ctx context.Context, from, to time.Time, fn func(ReconcileRun) error) error {
	rows, err := r.tx.QueryContext(ctx, `SELECT id, job, started_at, finished_at, counts, error
		FROM reconcile_runs WHERE started_at >= ? AND started_at < ? ORDER BY started_at, id`,
		from.UnixMilli(), to.UnixMilli())
	if err != nil {
		return fmt.Errorf("report runs: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			run      ReconcileRun
			started  int64
			finished sql.NullInt64
			counts   string
		)
		if err := rows.Scan(&run.ID, &run.Job, &started, &finished, &counts, &run.Error); err != nil {
			return fmt.Errorf("report runs: %w", err)
		}
		run.StartedAt = unixMilliUTC(started)
		if finished.Valid {
			run.FinishedAt = unixMilliUTC(finished.Int64)
		}
		if err := json.Unmarshal([]byte(counts), &run.Counts); err != nil {
			return fmt.Errorf("report run %d: counts: %w", run.ID, err)
		}
		if err := fn(run); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("report runs: %w", err)
	}
	return nil
}

// BalanceCurrencies returns the currencies with a balance snapshot taken
// before to, sorted.
func (r *ReportTx) BalanceCurrencies(ctx context.Context, to time.Time) ([]string, error) {
	rows, err := r.tx.QueryContext(ctx, `SELECT DISTINCT currency FROM balance_snapshots WHERE taken_at < ? ORDER BY currency`,
		to.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("report balance currencies: %w", err)
	}
	out, err := scanStrings(rows)
	if err != nil {
		return nil, fmt.Errorf("report balance currencies: %w", err)
	}
	return out, nil
}

// LatestSnapshot returns the newest snapshot of currency taken before
// before; ok is false when there is none.
func (r *ReportTx) LatestSnapshot(ctx context.Context, currency string, before time.Time) (snap BalanceSnapshot, ok bool, err error) {
	row := r.tx.QueryRowContext(ctx, `SELECT id, currency, amount, taken_at FROM balance_snapshots
		WHERE currency = ? AND taken_at < ? ORDER BY taken_at DESC, id DESC LIMIT 1`,
		strings.ToLower(currency), before.UnixMilli())
	return scanOptionalSnapshot(row)
}

// FirstSnapshot returns the oldest snapshot of currency taken at or after
// from and before to; ok is false when there is none.
func (r *ReportTx) FirstSnapshot(ctx context.Context, currency string, from, to time.Time) (snap BalanceSnapshot, ok bool, err error) {
	row := r.tx.QueryRowContext(ctx, `SELECT id, currency, amount, taken_at FROM balance_snapshots
		WHERE currency = ? AND taken_at >= ? AND taken_at < ? ORDER BY taken_at, id LIMIT 1`,
		strings.ToLower(currency), from.UnixMilli(), to.UnixMilli())
	return scanOptionalSnapshot(row)
}

func scanOptionalSnapshot(row *sql.Row) (BalanceSnapshot, bool, error) {
	snap, err := scanSnapshot(row)
	if errors.Is(err, sql.ErrNoRows) {
		return BalanceSnapshot{}, false, nil
	}
	if err != nil {
		return BalanceSnapshot{}, false, err
	}
	return snap, true, nil
}

// Snapshots calls fn with the snapshots of currency taken in [from, to),
// oldest first.
func (r *ReportTx) Snapshots(ctx context.Context, currency string, from, to time.Time, fn func(BalanceSnapshot) error) error {
	rows, err := r.tx.QueryContext(ctx, `SELECT id, currency, amount, taken_at FROM balance_snapshots
		WHERE currency = ? AND taken_at >= ? AND taken_at < ? ORDER BY taken_at, id`,
		strings.ToLower(currency), from.UnixMilli(), to.UnixMilli())
	if err != nil {
		return fmt.Errorf("report snapshots: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		snap, err := scanSnapshot(rows)
		if err != nil {
			return err
		}
		if err := fn(snap); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("report snapshots: %w", err)
	}
	return nil
}

// Drifts calls fn with the balance comparisons of currency whose closing
// snapshot was taken in [from, to), oldest first. Detail is left empty:
// reports read the sums, and a detail may list many orders.
func (r *ReportTx) Drifts(ctx context.Context, currency string, from, to time.Time, fn func(BalanceDrift) error) error {
	rows, err := r.tx.QueryContext(ctx, `SELECT id, currency, opening_id, closing_id, opening_at, closing_at,
			opening, closing, actual, expected, drift, explained, unexplained, tolerance, within_tolerance,
			coalesce(run_id, 0), computed_at
		FROM balance_drifts WHERE currency = ? AND closing_at >= ? AND closing_at < ?
		ORDER BY closing_at, id`, strings.ToLower(currency), from.UnixMilli(), to.UnixMilli())
	if err != nil {
		return fmt.Errorf("report drifts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			d                                                                  BalanceDrift
			openAt, closeAt, computed                                          int64
			opening, closing, actual, expected, drift, expl, unexpl, tolerance string
		)
		if err := rows.Scan(&d.ID, &d.Currency, &d.Opening.ID, &d.Closing.ID, &openAt, &closeAt, &opening, &closing,
			&actual, &expected, &drift, &expl, &unexpl, &tolerance, &d.WithinTolerance, &d.RunID, &computed); err != nil {
			return fmt.Errorf("report drifts: %w", err)
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
				return fmt.Errorf("balance drift %d: %w", d.ID, err)
			}
			*f.dst = v
		}
		if err := fn(d); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("report drifts: %w", err)
	}
	return nil
}

// Activity counts what arrived in a recent window, for the dashboard.
type Activity struct {
	// Webhooks is the number of distinct authenticated webhook bodies
	// first received in the window (a byte-identical repeat is not
	// counted again).
	Webhooks int64
	// Events is the number of events queued in the outbox in the window.
	Events int64
}

// ActivityFrom is the start of the window Activity counts for since: the
// start of since's minute, the finest the counters divide.
func ActivityFrom(since time.Time) time.Time {
	return time.UnixMilli(minuteOf(since.UnixMilli()) * 60000).UTC()
}

// Activity counts the webhooks and events from the start of since's
// minute (ActivityFrom) on, summed from the per-minute counters the write
// path keeps (activity_minutes, see migration 0008): at most 61 rows for
// the dashboard's windows, read along the table's primary key, however
// many webhooks those minutes saw. The window starts on a whole minute
// because the counters cannot split one: counting the rows of since's own
// minute in the tables instead read up to a minute of a busy day's rows
// (hundreds of thousands) on every page view. The caller divides by the
// window it gets, from ActivityFrom(since) to now.
func (s *Store) Activity(ctx context.Context, since time.Time) (Activity, error) {
	var a Activity
	err := s.rdb.QueryRowContext(ctx, activityQuery, minuteOf(since.UnixMilli())).Scan(&a.Webhooks, &a.Events)
	if err != nil {
		return Activity{}, fmt.Errorf("activity: %w", err)
	}
	return a, nil
}

// activityQuery sums the counters from the given minute on, along the
// table's primary key.
const activityQuery = `SELECT coalesce(sum(webhooks), 0), coalesce(sum(events), 0) FROM activity_minutes WHERE minute >= ?`

// ActivityPlan returns SQLite's query plan for the counters' sum, one line
// per step, for tests that check it reads a range of the primary key.
func (s *Store) ActivityPlan(ctx context.Context) ([]string, error) {
	return s.queryPlan(ctx, activityQuery, 0)
}

// queryPlan returns SQLite's plan for query, one line per step.
func (s *Store) queryPlan(ctx context.Context, query string, args ...any) ([]string, error) {
	rows, err := s.rdb.QueryContext(ctx, "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		return nil, fmt.Errorf("query plan: %w", err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var (
			id, parent, notused int
			detail              string
		)
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			return nil, fmt.Errorf("query plan: %w", err)
		}
		plan = append(plan, detail)
	}
	return plan, rows.Err()
}

// The dashboard's order queries. Each walks an index and stops at its
// limit; the tests of this package check their plans.
const (
	// updated_at has no index (each would cost a random write per state
	// change on the hot path). An order's current state is the history
	// row its state_id points at, and history ids grow as changes are
	// recorded, so walking the history backwards and keeping the rows
	// that are some order's current state yields each order once, the
	// last changed first. CROSS JOIN keeps the history as the outer loop;
	// the walk passes over superseded and stale states only, a few per
	// order.
	recentOrdersQuery = `SELECT o.id, o.provider_id, o.merchant_order_id, o.type, o.status,
			o.learned_via, o.created_at, o.first_seen_at, o.updated_at, o.completed_at, coalesce(h.raw, d.raw)
		FROM order_history h
		CROSS JOIN orders o ON o.id = h.order_id AND o.state_id = h.id
		LEFT JOIN deliveries d ON d.id = h.delivery_id
		ORDER BY h.id DESC LIMIT ?`
	orderSummaryColumns = `SELECT o.id, o.provider_id, o.merchant_order_id, o.type, o.status, o.learned_via,
		o.created_at, o.first_seen_at, o.updated_at, o.completed_at, o.raw FROM orders_current o `
	orderByProviderIDQuery = orderSummaryColumns + `WHERE o.provider_id = ?`
	ordersByPrefixQuery    = orderSummaryColumns + `WHERE o.merchant_order_id >= ? AND o.merchant_order_id < ?
		ORDER BY o.merchant_order_id LIMIT ?`
)

// RecentOrders returns, when query is empty, the limit orders whose state
// changed last, the latest change first (by UpdatedAt, which is when
// orderd recorded the change); otherwise the order whose provider id is
// query, if any, followed by the orders whose merchantOrderId starts with
// query, by merchantOrderId. Each walks an index and stops at limit,
// whatever the size of the tables.
func (s *Store) RecentOrders(ctx context.Context, query string, limit int) ([]OrderSummary, error) {
	limit = pageLimit(limit)
	if query == "" {
		out, err := s.orderSummaries(ctx, recentOrdersQuery, limit)
		if err != nil {
			return nil, err
		}
		// A change observed a moment earlier may commit a moment later;
		// the list is in the order of the time it shows.
		slices.SortStableFunc(out, func(a, b OrderSummary) int { return b.UpdatedAt.Compare(a.UpdatedAt) })
		return out, nil
	}
	out, err := s.orderSummaries(ctx, orderByProviderIDQuery, query)
	if err != nil {
		return nil, err
	}
	// Every UTF-8 string that starts with query sorts below query followed
	// by the byte 0xff, which no UTF-8 text contains.
	byMID, err := s.orderSummaries(ctx, ordersByPrefixQuery, query, query+"\xff", limit)
	if err != nil {
		return nil, err
	}
	for _, o := range byMID {
		if len(out) == limit {
			break
		}
		if len(out) > 0 && out[0].RowID == o.RowID {
			continue
		}
		out = append(out, o)
	}
	return out, nil
}

// orderSummaries runs query, which selects the columns of OrderSummary from
// orders_current in their order, and reads the rows.
func (s *Store) orderSummaries(ctx context.Context, query string, args ...any) ([]OrderSummary, error) {
	rows, err := s.rdb.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("order summaries: %w", err)
	}
	defer rows.Close()
	var out []OrderSummary
	for rows.Next() {
		var (
			o                    OrderSummary
			created, completed   sql.NullInt64
			firstSeen, updatedAt int64
			raw                  []byte
		)
		if err := rows.Scan(&o.RowID, &o.ProviderID, &o.MerchantOrderID, &o.Type, &o.Status, &o.LearnedVia,
			&created, &firstSeen, &updatedAt, &completed, &raw); err != nil {
			return nil, fmt.Errorf("order summaries: %w", err)
		}
		o.CreatedAt = msTime(created)
		o.FirstSeenAt = unixMilliUTC(firstSeen)
		o.UpdatedAt = unixMilliUTC(updatedAt)
		o.CompletedAt = msTime(completed)
		o.Order = jsonOrNull(compactJSON(raw))
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("order summaries: %w", err)
	}
	return out, nil
}
