package scale

import (
	"bytes"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"orderd/test/support/testbin"
)

// TestRun_small runs what make bench-scale runs, at a small size: a
// database of 300 orders built through the write path, the real daemon
// on it, and every figure printed. It checks that each request a person
// opens answered 200 (the tool fails otherwise) and is on the table, that
// the database has the orders, and that a second run measures the kept
// database without rebuilding it.
func TestRun_small(t *testing.T) {
	if testing.Short() {
		t.Skip("builds orderd and starts it")
	}
	bin := filepath.Join(t.TempDir(), "orderd")
	if err := testbin.Orderd(bin); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if code := Run(t.Context(), []string{"-orderd", bin, "-size", "300", "-days", "2", "-runs", "3", "-dir", dir}, &out, &errb); code != 0 {
		t.Fatalf("exit %d:\n%s\n%s", code, out.String(), errb.String())
	}
	t.Logf("\n%s", out.String())
	for _, want := range []string{
		"built 300 orders (", "database: 300 orders, ",
		"start-up (exec to /readyz 200)", "GET / ", "GET /v1/orders ", "GET /v1/orders/{id}", "GET /v1/findings",
		"GET /metrics", "GET /readyz", "report csv, the 48h span", "report json, the 48h span", "report html, the 48h span",
		"report html, last 24h", "orderd backup", "orderd migrate",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q", want)
		}
	}
	// Every webhook of every order's life went through the write path.
	want := 0
	for i := range 300 {
		want++ // processing
		if orderStatus(i) != "processing" {
			want++ // final
			if repeated(i) {
				want++
			}
			if refunded(i) {
				want++
			}
		}
	}
	if !strings.Contains(out.String(), fmt.Sprintf("built 300 orders (%d applies", want)) {
		t.Errorf("want %d applies", want)
	}

	out.Reset()
	if code := Run(t.Context(), []string{"-orderd", bin, "-size", "300", "-runs", "1", "-dir", dir}, &out, &errb); code != 0 {
		t.Fatalf("second run: exit %d:\n%s\n%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "exists; measured as it is") || strings.Contains(out.String(), "built ") {
		t.Errorf("the second run rebuilt the database:\n%s", out.String())
	}

	// The busy day: 300 orders and 300 repeats through the write path,
	// every interactive request on the table, no report; timed at once
	// rather than minutes later.
	out.Reset()
	if code := Run(t.Context(), []string{"-orderd", bin, "-scenario", "busy", "-wait=false", "-size", "300", "-runs", "1", "-dir", t.TempDir()}, &out, &errb); code != 0 {
		t.Fatalf("busy day: exit %d:\n%s\n%s", code, out.String(), errb.String())
	}
	t.Logf("\n%s", out.String())
	for _, want := range []string{
		"built a busy day: 300 orders in ", "then as many repeats (600 applies", "database: 300 orders, ",
		"webhook bodies kept: 300, ", // a repeat is counted on its first body's row
		"start-up (exec to /readyz 200)", "GET / ", "GET /v1/orders ", "GET /v1/orders/{id}", "GET /v1/findings",
		"GET /metrics", "GET /readyz", "orderd backup", "orderd migrate",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the busy day's output lacks %q", want)
		}
	}
	if strings.Contains(out.String(), "report ") {
		t.Errorf("the busy day timed reports:\n%s", out.String())
	}
}

// TestRun_usage: bad flags are exit 2, naming the rule.
func TestRun_usage(t *testing.T) {
	for _, args := range [][]string{{"-size", "10"}, {"-runs", "0"}, {"-build-only"}, {"extra"}, {"-scenario", "weekend"}} {
		var out, errb bytes.Buffer
		if code := Run(t.Context(), args, &out, &errb); code != 2 {
			t.Errorf("%q: exit %d, want 2 (%s)", args, code, errb.String())
		}
	}
}

// TestRun_migrationSmall runs what make bench-migrate runs, at a small
// size: the report_columns migration pending over every order, the real
// daemon started on it, webhooks sent while it runs and after, and every
// figure printed; the database ends with every order's columns written.
func TestRun_migrationSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds orderd and starts it")
	}
	bin := filepath.Join(t.TempDir(), "orderd")
	if err := testbin.Orderd(bin); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var out, errb bytes.Buffer
	args := []string{"-orderd", bin, "-size", "300", "-days", "2", "-dir", dir, "-migration", "-window", "1s", "-senders", "4", "-webhooks", "200"}
	if code := Run(t.Context(), args, &out, &errb); code != 0 {
		t.Fatalf("exit %d:\n%s\n%s", code, out.String(), errb.String())
	}
	t.Logf("\n%s", out.String())
	for _, want := range []string{
		"pending: the report_columns background migration over 300 orders",
		"start-up with the migration pending (exec to /readyz 200): ",
		"ingest while the migration runs: ", "migration finished within ", "ingest once it finished (the reference, same run): ",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q", want)
		}
	}
	if strings.Contains(out.String(), " 0 acked") || !strings.Contains(out.String(), "(0 failed)") {
		t.Errorf("webhooks were not all acked:\n%s", out.String())
	}
	db, err := sql.Open("sqlite", filepath.Join(dir, "orderd.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var unfilled int
	if err := db.QueryRow(`SELECT count(*) FROM orders WHERE refunds IS NULL`).Scan(&unfilled); err != nil || unfilled != 0 {
		t.Errorf("%d orders left without their report columns (%v)", unfilled, err)
	}
}
