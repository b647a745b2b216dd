package reconcile_test

import (
	"bytes"
	"database/sql"
	"os"
	"testing"

	"orderd/reconcile"
	"orderd/store"
)

// TestReporter_Write_amountColumns: a report reads each order's amounts
// from the order's columns, which the write path keeps with the state and
// the report_columns background migration fills for the rows written
// before it. The same rows read from the stored states, as a report did
// before, give the same bytes in every format, and so do the columns the
// migration fills.
func TestReporter_Write_amountColumns(t *testing.T) {
	e := reportEnv(t)
	// Shapes beyond the golden set, in the period: a payout whose own
	// transaction has another type (the first that is not a refund is
	// its own), refunds before and after it, one without completedAt,
	// one rejected, one in another time zone, amounts of several scales,
	// a completed payin that states no wallet.
	e.at("2026-11-01T22:00:00Z")
	e.apply([]byte(`{"id":"0a000000-0000-4000-8000-000000000010","merchantOrderId":"m-odd","type":"payout",`+
		`"createdAt":"2026-11-01T21:30:00Z","status":"completed","rejectReason":null,"merchantSourceWallet":null,"merchantTargetWallet":null,`+
		`"transactions":[`+
		`{"id":"r1","type":"refund","status":"completed","amount":{"amount":"1.5","currency":"brl"},"createdAt":"2026-11-01T21:31:00Z","completedAt":null,"rejectReason":null},`+
		`{"id":"t1","type":"transfer","status":"completed","authorized":{"amount":"20.000","currency":"brl"},"merchantWallet":{"amount":"20.5","currency":"brl"},`+
		`"createdAt":"2026-11-01T21:30:00Z","completedAt":"2026-11-01T21:45:00.123456789+02:00","rejectReason":null},`+
		`{"id":"r2","type":"refund","status":"completed","amount":{"amount":"2.25","currency":"brl"},"createdAt":"2026-11-01T21:40:00Z","completedAt":"2026-11-01T21:50:00.5Z","rejectReason":null},`+
		`{"id":"r3","type":"refund","status":"rejected","amount":{"amount":"9.00","currency":"brl"},"createdAt":"2026-11-01T21:41:00Z","completedAt":null,"rejectReason":"no"}]}`),
		store.SourceWebhook)
	e.apply([]byte(`{"id":"0a000000-0000-4000-8000-000000000011","merchantOrderId":"m-bare","type":"payin",`+
		`"createdAt":"2026-11-01T21:35:00Z","status":"completed","rejectReason":null,"merchantSourceWallet":null,"merchantTargetWallet":null,`+
		`"transactions":[{"id":"t2","type":"payin","status":"completed","authorized":{"amount":"7","currency":"usd"},`+
		`"createdAt":"2026-11-01T21:35:00Z","completedAt":"2026-11-01T21:36:00Z","rejectReason":null}]}`),
		store.SourcePoll)
	e.at("2026-11-02T01:00:00Z")

	r := e.reporter()
	reports := func() map[string][]byte {
		t.Helper()
		out := map[string][]byte{}
		for _, format := range reconcile.Formats {
			var buf bytes.Buffer
			if err := r.Write(t.Context(), &buf, reportDay, format, reconcile.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			out[format] = buf.Bytes()
		}
		return out
	}
	same := func(what string, got, want map[string][]byte) {
		t.Helper()
		for format, w := range want {
			if !bytes.Equal(got[format], w) {
				t.Errorf("%s report read %s differs from the one read from the columns:\n--- got\n%s\n--- want\n%s",
					format, what, got[format], w)
			}
		}
	}
	fromColumns := reports()
	if !bytes.Contains(fromColumns[reconcile.FormatCSV], []byte("m-odd")) {
		t.Fatalf("the report has no line of m-odd:\n%s", fromColumns[reconcile.FormatCSV])
	}

	db, err := sql.Open("sqlite", e.st.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	exec := func(q string) {
		t.Helper()
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	filled := func() int {
		t.Helper()
		var n int
		if err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM orders WHERE refunds IS NOT NULL`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	orders := filled()
	if orders < 10 {
		t.Fatalf("%d orders have their amount columns, want every order's", orders)
	}

	// Columns as an older release's migration 0011 filled them (its
	// text is not the write path's, until the report_columns background
	// migration rewrites it): the same report.
	old, err := os.ReadFile("../store/testdata/0011_old_update.sql")
	if err != nil {
		t.Fatal(err)
	}
	exec(string(old))
	if n := filled(); n != orders {
		t.Fatalf("the old UPDATE filled %d orders, want %d", n, orders)
	}
	same("from the columns an older release filled", reports(), fromColumns)

	// Columns unfilled: the report reads each stored state.
	exec(`UPDATE orders SET refunds = NULL`)
	same("from the stored states", reports(), fromColumns)

	// A database from before migration 0011: the report_columns
	// background migration (scheduled by 0015) fills them.
	for _, c := range []string{"authorized_amount", "authorized_currency", "own_wallet_amount", "own_wallet_currency", "refunds"} {
		exec(`ALTER TABLE orders DROP COLUMN ` + c)
	}
	exec(`DROP INDEX orders_odd_status`)
	exec(`DROP INDEX orders_odd_type`)
	exec(`DELETE FROM schema_migrations WHERE version IN (11, 15)`)
	exec(`DELETE FROM background_migrations`)
	applied, err := store.Migrate(t.Context(), e.st.Path())
	if err != nil {
		t.Fatal(err)
	}
	if len(applied) != 3 || applied[0].Version != 11 || applied[1].Version != 15 || applied[2].Name != "report_columns" {
		t.Errorf("migrations applied: %+v, want 0011, 0015 and report_columns", applied)
	}
	if n := filled(); n != orders {
		t.Errorf("the report_columns migration filled the columns of %d orders, want %d", n, orders)
	}
	same("from the columns the report_columns migration filled", reports(), fromColumns)
}
