package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"orderd/provider"
)

// Background migrations.
//
// A schema step that rewrites the existing rows of a large table does not
// run inside the start's migrations, where it would hold the daemon not
// ready for as long as it takes. Its SQL migration only schedules it (a
// row in background_migrations, see migration 0014); after start,
// RunBackgroundMigrations walks the table by row id, BatchRows rows per
// write through the one writer, so each of its transactions is short and
// the webhooks' writes are committed between (and beside) its batches. The
// cursor, the rows done and the finish are committed with each batch's
// rows, so a restart resumes after the last committed batch and never
// rewrites a row twice in a way that matters (a rewrite is idempotent).
//
// Whatever reads a step's result reads the old form until the step has
// passed a row: each step says what that is (the report columns: NULL,
// read from the order's state, or the text of an older release, which
// parses to the same decimals).

// DefaultBackgroundBatch is how many rows a background migration rewrites
// per transaction unless BackgroundOptions says otherwise: a few
// milliseconds of the writer's time.
const DefaultBackgroundBatch = 500

// backgroundStep is a migration that rewrites existing rows after start.
type backgroundStep struct {
	// name is its row's name in background_migrations.
	name string
	// table is the table it walks by its integer primary key, id.
	table string
	// derived are the columns of table it writes. They are a function of
	// what the replicated log determines (the row's other columns and
	// the rows they point at), computed by the same code on the write
	// path; the replica digest leaves them out, so instances whose steps
	// stand at different rows still compare equal (see
	// ReadSnapshot.Digest).
	derived []string
	// batch rewrites up to limit rows of table with after < id <= end, in
	// id order, inside tx, and returns the last id it walked and how
	// many rows (0 when none is left).
	batch func(tx *Tx, after, end int64, limit int) (last int64, n int, err error)
}

// backgroundSteps are every background migration this orderd knows, by
// name.
var backgroundSteps = map[string]backgroundStep{
	reportColumnsStep: {
		name:    reportColumnsStep,
		table:   "orders",
		derived: []string{"authorized_amount", "authorized_currency", "own_wallet_amount", "own_wallet_currency", "refunds"},
		batch:   rewriteReportColumns,
	},
}

// reportColumnsStep fills 0011's report columns with the write path's
// text (scheduled by migration 0015).
const reportColumnsStep = "report_columns"

// digestExcluded returns, for each table, the columns the replica digest
// leaves out: those a background step derives.
func digestExcluded() map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, st := range backgroundSteps {
		if out[st.table] == nil {
			out[st.table] = map[string]bool{}
		}
		for _, c := range st.derived {
			out[st.table][c] = true
		}
	}
	return out
}

// MigrationProgress is where one background migration stands.
type MigrationProgress struct {
	// Name names the step ("report_columns").
	Name string `json:"migration"`
	// RowsDone is how many rows it has walked; RowsTotal how many it
	// walks (0 until it began).
	RowsDone  int64 `json:"rowsDone"`
	RowsTotal int64 `json:"rowsTotal"`
	// Done is true once it has walked every row.
	Done bool `json:"done"`
	// StartedAt and FinishedAt are zero until then.
	StartedAt  time.Time `json:"startedAt,omitzero"`
	FinishedAt time.Time `json:"finishedAt,omitzero"`
}

// Fraction is the progress from 0 to 1 (1 once done).
func (p MigrationProgress) Fraction() float64 {
	switch {
	case p.Done:
		return 1
	case p.RowsTotal <= 0:
		return 0
	}
	return min(1, float64(p.RowsDone)/float64(p.RowsTotal))
}

// BackgroundMigrations lists every background migration the database
// records, finished or not, by name. It reads the database, so it also
// sees another process's progress.
func (s *Store) BackgroundMigrations(ctx context.Context) ([]MigrationProgress, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT name, rows_done, coalesce(rows_total, 0), started_at, finished_at
		FROM background_migrations ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("background migrations: %w", err)
	}
	defer rows.Close()
	var out []MigrationProgress
	for rows.Next() {
		var (
			p                 MigrationProgress
			started, finished sql.NullInt64
		)
		if err := rows.Scan(&p.Name, &p.RowsDone, &p.RowsTotal, &started, &finished); err != nil {
			return nil, fmt.Errorf("background migrations: %w", err)
		}
		if started.Valid {
			p.StartedAt = unixMilliUTC(started.Int64)
		}
		if finished.Valid {
			p.Done, p.FinishedAt = true, unixMilliUTC(finished.Int64)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("background migrations: %w", err)
	}
	return out, nil
}

// BackgroundOptions adjust RunBackgroundMigrations. The zero value is
// usable.
type BackgroundOptions struct {
	// BatchRows bounds the rows one transaction rewrites; 0 means
	// DefaultBackgroundBatch.
	BatchRows int
	// Pause is a wait after every batch (tests use it to hold a step
	// open); 0 means none beyond the yield below.
	Pause time.Duration
	// Progress, when set, is called after every committed batch.
	Progress func(MigrationProgress)
}

// RunBackgroundMigrations runs every unfinished background migration to
// its end, one after the other, and returns nil once none is left, or the
// first error (ctx's when it ends: the progress committed so far stays,
// and the next run resumes after it).
//
// The writer is shared: when other writes were waiting as a batch
// committed (webhooks arriving), the step waits as long as that batch
// took before its next one, so that it takes at most about half of the
// writer's time while orderd is busy, and all of it while orderd is idle.
func (s *Store) RunBackgroundMigrations(ctx context.Context, opts BackgroundOptions) error {
	if opts.BatchRows <= 0 {
		opts.BatchRows = DefaultBackgroundBatch
	}
	for {
		var name string
		err := s.rdb.QueryRowContext(ctx, `SELECT name FROM background_migrations WHERE finished_at IS NULL
			ORDER BY scheduled_at, name LIMIT 1`).Scan(&name)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("background migrations: %w", err)
		}
		step, ok := backgroundSteps[name]
		if !ok {
			// checkSchema refuses a database of a newer orderd, so this
			// is a row someone wrote by hand.
			return fmt.Errorf("background migration %q: this orderd does not know it", name)
		}
		if err := s.runStep(ctx, step, opts); err != nil {
			return err
		}
	}
}

// runStep runs one background migration to its end.
func (s *Store) runStep(ctx context.Context, step backgroundStep, opts BackgroundOptions) error {
	started := time.Now()
	for {
		var p MigrationProgress
		t0 := time.Now()
		err := s.write(ctx, func(tx *Tx) error {
			var err error
			p, err = stepBatch(tx, step, opts.BatchRows)
			return err
		}, true)
		if errors.Is(err, ErrOverloaded) {
			// The queue is full of webhooks: they go first.
			if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("background migration %s: %w", step.name, err)
		}
		if opts.Progress != nil {
			opts.Progress(p)
		}
		if p.Done {
			s.log.Info("background migration finished", "migration", step.name, "rows", p.RowsDone,
				"took", time.Since(started).Round(time.Millisecond))
			return nil
		}
		pause := opts.Pause
		if len(s.queue) > 0 {
			pause = max(pause, time.Since(t0))
		}
		if err := sleepCtx(ctx, pause); err != nil {
			return err
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stepBatch runs one batch of step in tx and records the progress with
// it.
func stepBatch(tx *Tx, step backgroundStep, limit int) (MigrationProgress, error) {
	p := MigrationProgress{Name: step.name}
	var (
		cursor, done      int64
		end, total, start sql.NullInt64
		finished          sql.NullInt64
	)
	err := tx.QueryRow(`SELECT cursor, end_id, rows_done, rows_total, started_at, finished_at
		FROM background_migrations WHERE name = ?`, step.name).Scan(&cursor, &end, &done, &total, &start, &finished)
	if err != nil {
		return p, fmt.Errorf("read progress: %w", err)
	}
	if finished.Valid {
		// Another process finished it meanwhile.
		return MigrationProgress{Name: step.name, RowsDone: done, RowsTotal: total.Int64, Done: true,
			StartedAt: unixMilliUTC(start.Int64), FinishedAt: unixMilliUTC(finished.Int64)}, nil
	}
	now := tx.Now().UnixMilli()
	if !end.Valid {
		// The rows written from now on come from this release's write
		// path: the step walks those before it.
		if err := tx.QueryRow(`SELECT coalesce(max(id), 0), count(*) FROM `+step.table).Scan(&end.Int64, &total.Int64); err != nil {
			return p, fmt.Errorf("count rows: %w", err)
		}
		end.Valid, total.Valid = true, true
		start = sql.NullInt64{Int64: now, Valid: true}
	}
	last, n, err := step.batch(tx, cursor, end.Int64, limit)
	if err != nil {
		return p, err
	}
	if n > 0 {
		cursor, done = last, done+int64(n)
	}
	var fin any
	if n == 0 || cursor >= end.Int64 {
		fin, finished = now, sql.NullInt64{Int64: now, Valid: true}
		// Rows may have gone since the count; the total is what was walked.
		total.Int64 = done
	}
	if _, err := tx.Exec(`UPDATE background_migrations SET cursor = ?, end_id = ?, rows_done = ?, rows_total = ?,
		started_at = ?, finished_at = ? WHERE name = ?`,
		cursor, end.Int64, done, total.Int64, start.Int64, fin, step.name); err != nil {
		return p, fmt.Errorf("record progress: %w", err)
	}
	p.RowsDone, p.RowsTotal, p.StartedAt = done, total.Int64, unixMilliUTC(start.Int64)
	if finished.Valid {
		p.Done, p.FinishedAt = true, unixMilliUTC(finished.Int64)
	}
	return p, nil
}

// rewriteReportColumns is the report_columns step's batch: each order's
// report columns computed from its current state by reportColumnsOf, the
// write path's own function, and written where they differ. A state that
// does not decode (none that the write path stored) gets NULL columns, so
// that a report reads its JSON as before.
func rewriteReportColumns(tx *Tx, after, end int64, limit int) (last int64, n int, err error) {
	rows, err := tx.Query(`SELECT o.id, coalesce(h.raw, d.raw),
			o.authorized_amount, o.authorized_currency, o.own_wallet_amount, o.own_wallet_currency, o.refunds
		FROM orders o
		LEFT JOIN order_history h ON h.id = o.state_id
		LEFT JOIN deliveries d ON d.id = h.delivery_id
		WHERE o.id > ? AND o.id <= ?
		ORDER BY o.id LIMIT ?`, after, end, limit)
	if err != nil {
		return 0, 0, fmt.Errorf("read orders: %w", err)
	}
	type change struct {
		id   int64
		cols [5]any
	}
	var changes []change
	for rows.Next() {
		var (
			id  int64
			raw []byte
			cur [5]sql.NullString
		)
		if err := rows.Scan(&id, &raw, &cur[0], &cur[1], &cur[2], &cur[3], &cur[4]); err != nil {
			rows.Close()
			return 0, 0, fmt.Errorf("read orders: %w", err)
		}
		last, n = id, n+1
		var want [5]any
		if o, err := provider.DecodeOrder(raw); err == nil {
			rc := reportColumnsOf(o)
			want = [5]any{rc.authAmount, rc.authCurrency, rc.walletAmount, rc.walletCurrency, rc.refunds}
		}
		if !sameColumns(cur, want) {
			changes = append(changes, change{id: id, cols: want})
		}
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return 0, 0, fmt.Errorf("read orders: %w", err)
	}
	rows.Close()
	for _, c := range changes {
		if _, err := tx.Exec(`UPDATE orders SET authorized_amount = ?, authorized_currency = ?, own_wallet_amount = ?,
			own_wallet_currency = ?, refunds = ? WHERE id = ?`, c.cols[0], c.cols[1], c.cols[2], c.cols[3], c.cols[4], c.id); err != nil {
			return 0, 0, fmt.Errorf("rewrite order %d: %w", c.id, err)
		}
	}
	return last, n, nil
}

// sameColumns reports whether the stored columns hold exactly want (nil
// for NULL, else a string).
func sameColumns(cur [5]sql.NullString, want [5]any) bool {
	for i, w := range want {
		s, isText := w.(string)
		if cur[i].Valid != isText || cur[i].String != s {
			return false
		}
	}
	return true
}
