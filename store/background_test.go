package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"orderd/store"
)

// oldReportColumnsUpdate reads the UPDATE with which migration 0011
// filled the report columns in releases before the report_columns
// background migration (0015), to make a database as they left it.
func oldReportColumnsUpdate(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("testdata/0011_old_update.sql")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// amountColumns is every amount column of every order, each quoted as
// SQL would write it (NULL apart from an empty text), by provider id.
const amountColumnsQuery = `SELECT provider_id || ' ' || quote(source_amount) || ' ' || quote(source_currency) || ' ' ||
	quote(target_amount) || ' ' || quote(target_currency) || ' ' || quote(authorized_amount) || ' ' ||
	quote(authorized_currency) || ' ' || quote(own_wallet_amount) || ' ' || quote(own_wallet_currency) || ' ' || quote(refunds)
	FROM orders ORDER BY provider_id`

// oddOrders are order states whose text the provider may write in several
// ways: leading zeros, offsets other than Z, no
// authorized amount, no transaction, refunds.
func oddOrders() [][]byte {
	tx := func(id, typ, status, money, completed string) string {
		return fmt.Sprintf(`{"id":%q,"type":%q,"status":%q,%s,"createdAt":"2026-03-01T10:00:00Z","completedAt":%s,"rejectReason":null}`,
			id, typ, status, money, completed)
	}
	order := func(n int, typ, status, target string, txs ...string) []byte {
		return fmt.Appendf(nil, `{"id":"0b000000-0000-4000-8000-%012d","merchantOrderId":"odd-%d","type":%q,"createdAt":"2026-03-01T10:00:00+00:00","status":%q,"rejectReason":null,"merchantSourceWallet":null,"merchantTargetWallet":%s,"transactions":[%s]}`,
			n, n, typ, status, target, strings.Join(txs, ","))
	}
	return [][]byte{
		order(1, "payin", "completed", `{"amount":"0007.50","currency":"brl"}`,
			tx("t1", "payin", "completed", `"authorized":{"amount":"0007.50","currency":"brl"},"merchantWallet":{"amount":"7.5","currency":"brl"}`, `"2026-03-01T10:00:05+00:00"`)),
		order(2, "payin", "processing", `null`,
			tx("t2", "payin", "processing", `"authorized":null,"merchantWallet":null`, `null`)),
		order(3, "payin", "new", `null`),
		order(4, "payin", "completed", `{"amount":"20.000","currency":"usd"}`,
			tx("t4", "payin", "completed", `"authorized":{"amount":"20.000","currency":"usd"},"merchantWallet":{"amount":"19.40","currency":"usd"}`, `"2026-03-01T12:00:05.120+02:00"`),
			tx("r4", "refund", "completed", `"amount":{"amount":"01.5","currency":"usd"}`, `"2026-03-02T09:00:00+00:00"`),
			tx("r5", "refund", "completed", `"amount":{"amount":"2","currency":"usd"}`, `null`),
			tx("r6", "refund", "rejected", `"amount":{"amount":"9","currency":"usd"}`, `null`)),
		order(5, "payout", "completed", `null`,
			tx("r7", "refund", "completed", `"amount":{"amount":"1.00","currency":"eur"}`, `"2026-03-01T11:00:00Z"`),
			tx("t5", "transfer", "completed", `"authorized":{"amount":"30","currency":"eur"},"merchantWallet":{"amount":"30.00","currency":"eur"}`, `"2026-03-01T11:00:00Z"`)),
	}
}

// applyAll applies each body as a webhook, then n ordinary orders.
func applyAll(t *testing.T, s *store.Store, bodies [][]byte, n int) {
	t.Helper()
	for _, b := range bodies {
		if _, err := s.Apply(t.Context(), obs(t, store.SourceWebhook, b)); err != nil {
			t.Fatalf("apply %s: %v", b, err)
		}
	}
	applyOrders(t, s, n)
}

// applyOrders applies n completed orders from several callers at once.
func applyOrders(t *testing.T, s *store.Store, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				o := newOrder(fmt.Sprintf("%d.%02d", i+1, i%100))
				if _, err := s.Apply(context.Background(), obs(t, store.SourceWebhook, o.json(i%2 == 0))); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func execDB(t *testing.T, path string, queries ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range queries {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func amountColumns(t *testing.T, s *store.Store) []string {
	t.Helper()
	rows, err := s.DB().QueryContext(t.Context(), amountColumnsQuery)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		out = append(out, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// reopen closes s and opens the database at path again.
func reopen(t *testing.T, s *store.Store, path string) *store.Store {
	t.Helper()
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// TestMigrate_reportColumnsAsTheWritePathWrites: a database whose report
// columns were filled by the old migration 0011 (its UPDATE, run here on
// purpose) holds text the write path never writes; once migrated, every
// amount column of every order holds exactly what a database built from
// the same webhooks through the write path holds.
func TestMigrate_reportColumnsAsTheWritePathWrites(t *testing.T) {
	built, _ := openStore(t, store.Options{})
	applyAll(t, built, oddOrders(), 40)
	want := amountColumns(t, built)

	old, path := openStore(t, store.Options{})
	applyAll(t, old, oddOrders(), 0)
	if got := amountColumns(t, old); !slicesEqualPrefix(got, want) {
		t.Fatalf("the write path wrote different columns for the same webhooks:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if err := old.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	// As releases up to 0014 left it: 0011's UPDATE filled the columns,
	// and 0015 was never applied.
	execDB(t, path,
		`UPDATE orders SET authorized_amount = NULL, authorized_currency = NULL, own_wallet_amount = NULL, own_wallet_currency = NULL, refunds = NULL`,
		oldReportColumnsUpdate(t),
		`DELETE FROM schema_migrations WHERE version = 15`)
	old = reopen(t, old, path)
	before := amountColumns(t, old)
	if slicesEqualPrefix(before, want) {
		t.Fatal("the old UPDATE wrote the write path's text: the test shows nothing")
	}
	if !strings.Contains(strings.Join(before, "\n"), "'0007.50'") || !strings.Contains(strings.Join(before, "\n"), "''") {
		t.Fatalf("the old UPDATE's text lacks the forms seen in the field:\n%s", strings.Join(before, "\n"))
	}
	if err := old.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	applied, err := store.Migrate(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	// 0015 was applied when the store opened above: it scheduled the
	// rewrite, which migrate runs to its end.
	if len(applied) != 1 || !applied[0].Background || applied[0].Name != "report_columns" ||
		applied[0].Rows != int64(len(oddOrders())) {
		t.Errorf("migrate applied %+v, want the report_columns background migration over %d rows", applied, len(oddOrders()))
	}
	old, err = store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close(context.Background())
	if got := amountColumns(t, old); !slicesEqualPrefix(got, want) {
		t.Errorf("amount columns after the migration:\n%s\nwant (the write path's)\n%s", strings.Join(got, "\n"), strings.Join(want[:len(got)], "\n"))
	}
	ms, err := old.BackgroundMigrations(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || !ms[0].Done || ms[0].RowsDone != ms[0].RowsTotal || ms[0].Fraction() != 1 {
		t.Errorf("background migrations after migrate: %+v", ms)
	}
}

// slicesEqualPrefix reports whether got equals want's lines of the same
// orders (want may hold more orders: the ordinary ones).
func slicesEqualPrefix(got, want []string) bool {
	index := map[string]string{}
	for _, w := range want {
		id, _, _ := strings.Cut(w, " ")
		index[id] = w
	}
	for _, g := range got {
		id, _, _ := strings.Cut(g, " ")
		if index[id] != g {
			return false
		}
	}
	return len(got) > 0
}

// TestStore_RunBackgroundMigrations_resumesAndServes: a background
// migration commits its progress with each batch; stopped mid-way it
// resumes after the last batch on the next run, webhooks are applied
// between its batches meanwhile, and the orders written during it have
// the write path's columns.
func TestStore_RunBackgroundMigrations_resumesAndServes(t *testing.T) {
	s, path := openStore(t, store.Options{})
	applyOrders(t, s, 300)
	want := amountColumns(t, s)
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	execDB(t, path,
		`UPDATE orders SET authorized_amount = NULL, authorized_currency = NULL, own_wallet_amount = NULL, own_wallet_currency = NULL, refunds = NULL`,
		`INSERT INTO background_migrations (name, scheduled_at) VALUES ('report_columns', 0)`)
	s = reopen(t, s, path)

	// Three batches of 20, then a stop (a daemon's shutdown).
	ctx, cancel := context.WithCancel(t.Context())
	batches := 0
	err := s.RunBackgroundMigrations(ctx, store.BackgroundOptions{BatchRows: 20, Progress: func(p store.MigrationProgress) {
		if batches++; batches == 3 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("a stopped run returned %v, want context.Canceled", err)
	}
	ms, err := s.BackgroundMigrations(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || ms[0].Done || ms[0].RowsDone != 60 || ms[0].RowsTotal != 300 {
		t.Fatalf("progress after three batches: %+v, want 60 of 300 rows", ms)
	}
	if n := count(t, s, `SELECT count(*) FROM orders WHERE refunds IS NOT NULL`); n != 60 {
		t.Errorf("%d orders filled after three batches of 20, want 60", n)
	}

	// A restart: the next run begins after row 60, while webhooks come.
	s = reopen(t, s, path)
	var first store.MigrationProgress
	served := make(chan struct{})
	go func() {
		defer close(served)
		applyOrders(t, s, 100)
	}()
	err = s.RunBackgroundMigrations(t.Context(), store.BackgroundOptions{BatchRows: 20, Pause: 5 * time.Millisecond,
		Progress: func(p store.MigrationProgress) {
			if first.Name == "" {
				first = p
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	<-served
	if first.RowsDone != 80 {
		t.Errorf("the first batch after the restart ended at %d rows, want 80 (resumed after 60)", first.RowsDone)
	}
	ms, err = s.BackgroundMigrations(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || !ms[0].Done || ms[0].RowsDone != 300 || ms[0].RowsTotal != 300 {
		t.Errorf("progress at the end: %+v, want 300 of 300 rows, done", ms)
	}
	got := amountColumns(t, s)
	if len(got) != 400 {
		t.Fatalf("%d orders, want 400", len(got))
	}
	if !slicesEqualPrefix(want, got) {
		t.Errorf("the rewritten columns differ from the write path's")
	}
	if n := count(t, s, `SELECT count(*) FROM orders WHERE refunds IS NULL OR authorized_amount IS NULL`); n != 0 {
		t.Errorf("%d orders left without their columns", n)
	}
	// Finished: a further run has nothing to do.
	if err := s.RunBackgroundMigrations(t.Context(), store.BackgroundOptions{Progress: func(p store.MigrationProgress) {
		t.Errorf("a finished migration ran again: %+v", p)
	}}); err != nil {
		t.Fatal(err)
	}
}

// TestStore_Digest_leavesDerivedColumnsOut: the replica digest does not
// change with the columns a background migration derives (instances
// whose migrations stand at different rows agree), and does change with
// any other column.
func TestStore_Digest_leavesDerivedColumnsOut(t *testing.T) {
	s, path := openStore(t, store.Options{})
	applyAll(t, s, oddOrders(), 10)
	before, _, err := s.Digest(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	execDB(t, path, `UPDATE orders SET authorized_amount = NULL, authorized_currency = NULL, own_wallet_amount = NULL,
		own_wallet_currency = NULL, refunds = NULL WHERE id % 2 = 0`)
	execDB(t, path, strings.TrimRight(oldReportColumnsUpdate(t), ";\n")+" WHERE id % 3 = 0")
	mid, _, err := s.Digest(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if mid != before {
		t.Errorf("the digest changed with the derived columns: %s, was %s", mid, before)
	}
	execDB(t, path, `UPDATE orders SET target_amount = '1.00' WHERE id = 1`)
	after, _, err := s.Digest(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if after == before {
		t.Error("the digest did not change with an order's target amount")
	}
}
