package reconcile_test

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"orderd/reconcile"
	"orderd/store"
)

// firstIssueOf makes the JSON report of p and returns its digest and
// firstIssue (nil when it has none).
func (e *env) firstIssueOf(p reconcile.Period) (string, *firstIssueJSON) {
	e.t.Helper()
	var r struct {
		Digest     string
		FirstIssue *struct {
			Digest, IssuedAt string
			SameDigest       bool
			ChangedOrders    []struct{ OrderID, MerchantOrderID string }
			UnnamedChanges   int
		}
	}
	if err := json.Unmarshal(writeJSON(e.t, e.reporter(), p), &r); err != nil {
		e.t.Fatal(err)
	}
	if r.FirstIssue == nil {
		return r.Digest, nil
	}
	fi := &firstIssueJSON{Digest: r.FirstIssue.Digest, IssuedAt: r.FirstIssue.IssuedAt, Same: r.FirstIssue.SameDigest,
		Unnamed: r.FirstIssue.UnnamedChanges}
	for _, c := range r.FirstIssue.ChangedOrders {
		fi.Changed = append(fi.Changed, c.OrderID+"/"+c.MerchantOrderID)
	}
	return r.Digest, fi
}

type firstIssueJSON struct {
	Digest, IssuedAt string
	Same             bool
	Changed          []string
	Unnamed          int
}

// csvFirstIssue returns the first-issue columns of the CSV summary rows
// of p (the same on every row).
func (e *env) csvFirstIssue(p reconcile.Period) []string {
	e.t.Helper()
	var lines, summary bytes.Buffer
	if err := e.reporter().WriteCSV(e.t.Context(), &lines, &summary, p); err != nil {
		e.t.Fatal(err)
	}
	recs, err := csv.NewReader(&summary).ReadAll()
	if err != nil || len(recs) < 2 {
		e.t.Fatalf("CSV summary: %v\n%s", err, summary.String())
	}
	var out []string
	for _, rec := range recs[1:] {
		var got []string
		for _, col := range []string{"first_issued_digest", "first_issued_at", "changed_order_ids", "unnamed_changes"} {
			i := slices.Index(recs[0], col)
			if i < 0 {
				e.t.Fatalf("CSV summary has no %s column: %q", col, recs[0])
			}
			got = append(got, rec[i])
		}
		if out != nil && !slices.Equal(out, got) {
			e.t.Fatalf("CSV summary rows disagree on the first issue: %q and %q", out, got)
		}
		out = got
	}
	return out
}

func (e *env) html(p reconcile.Period) string {
	e.t.Helper()
	var b bytes.Buffer
	if err := e.reporter().WriteHTML(e.t.Context(), &b, p, reconcile.WriteOptions{}); err != nil {
		e.t.Fatal(err)
	}
	return b.String()
}

// TestReporter_firstIssue: the first report of a period that has ended
// records its digest; made again with nothing changed in the period, the
// report gives the same digest, names it as the first issued and lists no
// changed line, in JSON, CSV and HTML. A late webhook of an order inside
// the period (and an order the period did not have) changes the digest:
// the report names the first digest, when it was issued, and exactly the
// orders whose lines changed — not an order of the period that changed
// after it in a way its line does not show (a refund after the period).
// The record is local: the replicated state's digest does not cover it.
func TestReporter_firstIssue(t *testing.T) {
	e := reportEnv(t) // the clock is at 2026-11-02T01:00:00Z

	// A period that has not ended has no first issue.
	if b := writeJSON(t, e.reporter(), reconcile.Day(e.clock.Now())); bytes.Contains(b, []byte(`"firstIssue"`)) {
		t.Fatalf("a period that has not ended has a first issue:\n%s", b)
	}

	before, _, err := e.st.Digest(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	d0, fi := e.firstIssueOf(reportDay)
	if fi == nil || fi.Digest != d0 || !fi.Same || fi.IssuedAt != "2026-11-02T01:00:00.000Z" || len(fi.Changed) != 0 || fi.Unnamed != 0 {
		t.Fatalf("first report: digest %s, firstIssue %+v; want itself, issued now, nothing changed", d0, fi)
	}
	if after, _, err := e.st.Digest(t.Context()); err != nil || after != before {
		t.Fatalf("recording the issued digest changed the replicated state's digest: %s -> %s (%v)", before, after, err)
	}

	// Later, nothing changed inside the period.
	e.clock.Advance(time.Hour)
	d1, fi := e.firstIssueOf(reportDay)
	if d1 != d0 || fi == nil || fi.Digest != d0 || !fi.Same || fi.IssuedAt != "2026-11-02T01:00:00.000Z" || len(fi.Changed) != 0 {
		t.Fatalf("report an hour later: digest %s, firstIssue %+v; want %s, the first issue, no change", d1, fi, d0)
	}
	if got := e.csvFirstIssue(reportDay); !slices.Equal(got, []string{d0, "2026-11-02T01:00:00.000Z", "", "0"}) {
		t.Fatalf("CSV first issue = %q", got)
	}
	if h := e.html(reportDay); !strings.Contains(h, `id="first-issue">Same digest as first issued for this period at 2026-11-02 01:00:00 UTC`) {
		t.Fatalf("HTML does not say the digest is the first issued:\n%s", h)
	}

	// After the period: a refund of an order completed in it (its line
	// counts refunds completed in the period only), a late webhook that
	// completes an order inside the period, and an order of the period
	// orderd had never heard of.
	e.at("2026-11-02T02:30:00Z")
	e.observe(rOrder{id: "0a000000-0000-4000-8000-000000000001", mid: "m-paid", typ: "payin", status: "completed",
		created: "2026-11-01T07:55:00Z", amount: "100.00", net: "97.00", ccy: "brl", completed: "2026-11-01T08:00:03Z",
		refunds: []rRefund{{id: "rf-after", status: "completed", amount: "5.00", created: "2026-11-02T02:00:00Z",
			completed: "2026-11-02T02:10:00Z"}}}, store.SourceWebhook)
	e.observe(rOrder{id: "0a000000-0000-4000-8000-000000000006", mid: "m-open", typ: "payin", status: "completed",
		created: "2026-11-01T20:00:00Z", amount: "30.00", net: "29.10", ccy: "brl", completed: "2026-11-01T23:30:00Z"}, store.SourceWebhook)
	e.observe(rOrder{id: "0e000000-0000-4000-8000-000000000002", mid: "m-late-webhook", typ: "payin", status: "completed",
		created: "2026-11-01T11:00:00Z", amount: "10.00", net: "9.70", ccy: "brl", completed: "2026-11-01T11:01:00Z"}, store.SourceWebhook)

	e.clock.Advance(time.Hour)
	d2, fi := e.firstIssueOf(reportDay)
	want := []string{"0a000000-0000-4000-8000-000000000006/m-open", "0e000000-0000-4000-8000-000000000002/m-late-webhook"}
	if d2 == d0 || fi == nil || fi.Digest != d0 || fi.Same || fi.IssuedAt != "2026-11-02T01:00:00.000Z" ||
		!slices.Equal(fi.Changed, want) || fi.Unnamed != 0 {
		t.Fatalf("report after late data: digest %s (first %s), firstIssue %+v; want a new digest naming %q", d2, d0, fi, want)
	}
	if got := e.csvFirstIssue(reportDay); !slices.Equal(got, []string{d0, "2026-11-02T01:00:00.000Z",
		"0a000000-0000-4000-8000-000000000006 0e000000-0000-4000-8000-000000000002", "0"}) {
		t.Fatalf("CSV first issue = %q", got)
	}
	h := e.html(reportDay)
	for _, s := range []string{`<code id="first-digest">` + d0 + `</code>`, `The lines of 2 orders changed since`,
		`<code>0a000000-0000-4000-8000-000000000006</code> (m-open)`, `<code>0e000000-0000-4000-8000-000000000002</code> (m-late-webhook)`} {
		if !strings.Contains(h, s) {
			t.Errorf("HTML lacks %q", s)
		}
	}
	if strings.Contains(h, "m-paid)") {
		t.Error("HTML names m-paid, whose line did not change")
	}

	// Made again, the report still compares with the first issue, which
	// stays the first.
	e.clock.Advance(time.Hour)
	if d3, fi := e.firstIssueOf(reportDay); d3 != d2 || fi == nil || fi.Digest != d0 || !slices.Equal(fi.Changed, want) {
		t.Fatalf("report made again: digest %s, firstIssue %+v", d3, fi)
	}
}
