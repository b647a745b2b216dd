package reconcile_test

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"orderd/reconcile"
	"orderd/store"
)

// manyOrders stores n completed brl payins of 2026-11-01 through the
// write path, order i authorizing i+1.00, one in three with a refund of
// 0.50 completed in the day.
func manyOrders(t *testing.T, n int) *env {
	t.Helper()
	e := newEnv(t, envOptions{clock: &clock{t: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}})
	for i := range n {
		o := rOrder{id: fmt.Sprintf("0b000000-0000-4000-8000-%012d", i), mid: fmt.Sprintf("m-%d", i), typ: "payin",
			status: "completed", created: "2026-11-01T10:00:00Z", amount: fmt.Sprintf("%d.00", i+1),
			net: fmt.Sprintf("%d.00", i), ccy: "brl", completed: "2026-11-01T10:01:00Z"}
		if i%3 == 0 {
			o.refunds = []rRefund{{id: fmt.Sprintf("rf-%d", i), status: "completed", amount: "0.50",
				created: "2026-11-01T11:00:00Z", completed: "2026-11-01T11:00:05Z"}}
		}
		e.observe(o, store.SourceWebhook)
	}
	return e
}

// TestReporter_WriteCSV_manyLines: a period of more orders than pass
// between the report's reader and writer at once gives every line once,
// in the order the orders were stored, each with its own amounts.
func TestReporter_WriteCSV_manyLines(t *testing.T) {
	const n = 700
	e := manyOrders(t, n)
	var lines bytes.Buffer
	if err := e.reporter().WriteCSV(t.Context(), &lines, io.Discard, reportDay); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&lines).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != n+1 {
		t.Fatalf("%d lines, want %d", len(recs)-1, n)
	}
	for i, r := range recs[1:] {
		refunded := ""
		if i%3 == 0 {
			refunded = "0.50"
		}
		want := []string{fmt.Sprintf("0b000000-0000-4000-8000-%012d", i), fmt.Sprintf("%d.00", i+1), fmt.Sprintf("%d.00", i), "1.00", refunded}
		got := []string{r[0], r[7], r[9], r[11], r[13]}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("line %d: id, authorized, merchant, fee, refunded = %q, want %q", i, got, want)
		}
	}
}

// TestReporter_lines_stopsAtError: an error from the writer of the lines
// part-way through (a full disk) ends the report with that error at that
// line, no line after it written; the next report reads every line.
func TestReporter_lines_stopsAtError(t *testing.T) {
	e := manyOrders(t, 600)
	errFull := errors.New("disk full")
	calls := 0
	err := reconcile.Lines(t.Context(), e.reporter(), reportDay, func(*reconcile.Line) error {
		calls++
		if calls == 300 {
			return errFull
		}
		return nil
	})
	if !errors.Is(err, errFull) || calls != 300 {
		t.Fatalf("lines = %v after %d lines, want %v after 300", err, calls, errFull)
	}
	var buf bytes.Buffer
	if err := e.reporter().WriteCSV(t.Context(), &buf, io.Discard, reportDay); err != nil {
		t.Fatalf("the next report: %v", err)
	}
	if got := bytes.Count(buf.Bytes(), []byte("\r\n")); got != 601 {
		t.Errorf("the next report has %d records, want 601", got)
	}
}
