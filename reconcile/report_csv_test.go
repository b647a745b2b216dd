package reconcile_test

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"orderd/reconcile"
	"orderd/store"
)

// readRFC4180 parses data strictly as RFC 4180 says: records end with
// CRLF, a quoted field holds every byte up to its closing quote (a doubled
// quote is one quote), an unquoted field holds neither quote, CR nor LF.
// Unlike encoding/csv's Reader, it keeps a CRLF inside a quoted field.
func readRFC4180(data string) ([][]string, error) {
	var (
		recs  [][]string
		rec   []string
		field strings.Builder
	)
	for i := 0; i < len(data); {
		if data[i] == '"' {
			i++
			for {
				j := strings.IndexByte(data[i:], '"')
				if j < 0 {
					return nil, errors.New("unterminated quoted field")
				}
				field.WriteString(data[i : i+j])
				i += j + 1
				if i < len(data) && data[i] == '"' {
					field.WriteByte('"')
					i++
					continue
				}
				break
			}
		} else {
			j := strings.IndexAny(data[i:], ",\r\n\"")
			if j < 0 {
				j = len(data) - i
			}
			field.WriteString(data[i : i+j])
			i += j
		}
		rec = append(rec, field.String())
		field.Reset()
		switch {
		case i == len(data):
			return nil, errors.New("last record has no CRLF")
		case data[i] == ',':
			i++
		case strings.HasPrefix(data[i:], "\r\n"):
			recs, rec = append(recs, rec), nil
			i += 2
		default:
			return nil, fmt.Errorf("unexpected %q at byte %d", data[i], i)
		}
	}
	return recs, nil
}

// csvEnv is a store with one completed payin per merchantOrderId, in the
// period 2026-11-01.
func csvEnv(t *testing.T, mids []string) *env {
	t.Helper()
	e := newEnv(t, envOptions{clock: &clock{t: time.Date(2026, 11, 1, 1, 0, 0, 0, time.UTC)}})
	for i, mid := range mids {
		e.at(fmt.Sprintf("2026-11-01T02:%02d:00Z", i))
		e.observe(rOrder{id: fmt.Sprintf("0b000000-0000-4000-8000-%012d", i), mid: mid, typ: "payin", status: "completed",
			created: "2026-11-01T01:00:00Z", amount: "10.00", net: "9.70", ccy: "brl", completed: "2026-11-01T02:00:00Z"},
			store.SourceWebhook)
	}
	return e
}

// csvLines writes the CSV report of 2026-11-01 in two files and reads
// the lines back with readRFC4180, by merchant_order_id, and the summary.
func csvLines(t *testing.T, rep *reconcile.Reporter) (map[string][]string, [][]string, []byte) {
	t.Helper()
	var lines, summary bytes.Buffer
	if err := rep.WriteCSV(t.Context(), &lines, &summary, reconcile.Day(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))); err != nil {
		t.Fatal(err)
	}
	recs, err := readRFC4180(lines.String())
	if err != nil {
		t.Fatalf("lines are not RFC 4180: %v\n%q", err, lines.String())
	}
	if !slices.Equal(recs[0], reconcile.CSVLineHeader) {
		t.Fatalf("header %q", recs[0])
	}
	byMID := map[string][]string{}
	for _, r := range recs[1:] {
		if len(r) != len(reconcile.CSVLineHeader) {
			t.Fatalf("record of %d fields: %q", len(r), r)
		}
		byMID[r[1]] = r
	}
	sum, err := readRFC4180(summary.String())
	if err != nil {
		t.Fatalf("summary is not RFC 4180: %v\n%q", err, summary.String())
	}
	return byMID, sum, lines.Bytes()
}

// TestReporter_WriteCSV_exact: every merchantOrderId comes back from an
// RFC 4180 reader byte for byte, however it mixes CR, LF, CRLF, tabs,
// quotes, commas and leading or trailing spaces — values that differ only
// there stay different (encoding/csv's Writer with UseCRLF wrote a lone CR
// as CRLF, so "INV-42\r" read back as "INV-42"). Go's own csv.Reader,
// which turns CRLF into LF even inside quotes, reads every value that has
// no CRLF exactly too.
func TestReporter_WriteCSV_exact(t *testing.T) {
	mids := []string{
		"INV-42", "INV-42\r", "INV-\r42", "\rINV-42", "A\r\nB", "A\nB", "A\n\rB", "A\r\r\nB",
		"tab\there", "\tleading tab", "trailing tab\t", " leading space", "trailing space ", "  ",
		`say "hi"`, `"quoted"`, `"`, "comma,inside", "semi;colon", "'apostrophe", "ü-ñ-€", "=1+1", "-3", "+4", "@SUM(A1)",
	}
	e := csvEnv(t, mids)
	byMID, _, raw := csvLines(t, e.reporter())
	var lost []string
	for _, mid := range mids {
		if _, ok := byMID[mid]; !ok {
			lost = append(lost, mid)
		}
	}
	if len(lost) > 0 {
		t.Errorf("merchantOrderIds %q did not come back exactly; the file has:\n%q", lost, raw)
	}
	if len(byMID) != len(mids) {
		t.Errorf("%d distinct lines, want %d", len(byMID), len(mids))
	}
	// Without a guard, a formula-looking value is written as it is.
	if r := byMID["=1+1"]; r == nil || r[1] != "=1+1" {
		t.Errorf("=1+1 written as %q, want it exactly", r)
	}

	r := csv.NewReader(bytes.NewReader(raw))
	recs, err := r.ReadAll()
	if err != nil {
		t.Fatalf("encoding/csv cannot read the lines: %v", err)
	}
	got := map[string]bool{}
	for _, rec := range recs[1:] {
		got[rec[1]] = true
	}
	for _, mid := range mids {
		if !strings.Contains(mid, "\r\n") && !got[mid] {
			t.Errorf("encoding/csv read %q differently", mid)
		}
	}
}

// TestReporter_WriteCSV_guardFormulas: with the guard on, every text
// cell starting with =, +, -, @, a tab or a CR gets a leading ', in every
// text column alike, amounts stay numbers, other values stay exact, and
// the summary says the guard is on.
func TestReporter_WriteCSV_guardFormulas(t *testing.T) {
	mids := []string{"=HYPERLINK(\"http://x\")", "+1", "-2", "@SUM(A1)", "\tx", "\rx", "plain", "a=b", " =leading space"}
	e := csvEnv(t, mids)
	rep := reconcile.NewReporter(e.st, reconcile.ReportConfig{Now: e.clock.Now, CSVGuardFormulas: true})
	byMID, sum, raw := csvLines(t, rep)
	want := map[string]string{
		"'=HYPERLINK(\"http://x\")": "guarded", "'+1": "guarded", "'-2": "guarded", "'@SUM(A1)": "guarded",
		"'\tx": "guarded", "'\rx": "guarded", "plain": "as is", "a=b": "as is", " =leading space": "as is",
	}
	for v := range want {
		if _, ok := byMID[v]; !ok {
			t.Errorf("no line with merchant_order_id %q; the file has:\n%q", v, raw)
		}
	}
	for _, r := range byMID {
		if r[7] != "10.00" || r[9] != "9.70" {
			t.Errorf("amounts %q, %q: want 10.00 and 9.70 as numbers", r[7], r[9])
		}
	}
	if last := sum[0][len(sum[0])-1]; last != "formulas_guarded" {
		t.Errorf("summary header ends with %q, want formulas_guarded", last)
	}
	for _, r := range sum[1:] {
		if r[len(r)-1] != "true" {
			t.Errorf("summary row %q does not say the guard is on", r)
		}
	}

	// Off (the default), the summary has no such column.
	_, sum, _ = csvLines(t, e.reporter())
	if slices.Contains(sum[0], "formulas_guarded") {
		t.Errorf("summary header %q names the guard while it is off", sum[0])
	}
}
