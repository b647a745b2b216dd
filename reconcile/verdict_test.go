package reconcile_test

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"orderd/reconcile"
	"orderd/store"
)

// jsonReport is the part of the JSON report the verdict tests read.
type jsonReport struct {
	Period struct {
		GeneratedAt string `json:"generatedAt"`
	} `json:"period"`
	Currencies []struct {
		Currency string `json:"currency"`
		Verdict  string `json:"verdict"`
		Bridge   struct {
			Opening   *string           `json:"opening"`
			Movements map[string]string `json:"movements"`
			Expected  *string           `json:"expectedClosing"`
			Closing   *string           `json:"closing"`
			Residual  *string           `json:"residual"`
		} `json:"bridge"`
		Breaks []struct {
			Kind       string  `json:"kind"`
			Amount     *string `json:"amount"`
			AgeSeconds int64   `json:"ageSeconds"`
			Priority   string  `json:"priority"`
		} `json:"breaks"`
	} `json:"currencies"`
	Digest string `json:"digest"`
}

func (e *env) jsonReport(p reconcile.Period) jsonReport {
	e.t.Helper()
	b := writeJSON(e.t, e.reporter(), p)
	var r jsonReport
	if err := json.Unmarshal(b, &r); err != nil {
		e.t.Fatalf("report: %v\n%s", err, b)
	}
	return r
}

func TestReporter_WriteJSON_verdictAndBridge(t *testing.T) {
	e := reportEnv(t)
	r := e.jsonReport(reportDay)
	if len(r.Currencies) != 2 {
		t.Fatalf("currencies = %+v", r.Currencies)
	}
	brl := r.Currencies[0]
	b := brl.Bridge
	if brl.Currency != "brl" || brl.Verdict != reconcile.VerdictBreaks || *b.Opening != "1000.00" || *b.Closing != "1224.50" ||
		*b.Expected != "1219.50" || *b.Residual != "5.00" || b.Movements["payins"] != "350.00" || b.Movements["fees"] != "-10.50" ||
		b.Movements["payouts"] != "-60.00" || b.Movements["refunds"] != "-60.00" || b.Movements["other"] != "0.00" {
		t.Fatalf("brl: %+v", brl)
	}
	if len(brl.Breaks) != 2 || brl.Breaks[0].Kind != store.FindingBalanceDrift || *brl.Breaks[0].Amount != "5.00" ||
		brl.Breaks[0].Priority != reconcile.PriorityHigh || brl.Breaks[0].AgeSeconds != 3600 {
		t.Fatalf("brl breaks: %+v", brl.Breaks)
	}
	if usd := r.Currencies[1]; *usd.Bridge.Residual != "0.00" {
		t.Fatalf("usd bridge: %+v", usd.Bridge)
	}
	// Before any snapshot: incomplete, with no opening.
	early := e.jsonReport(reconcile.Period{From: time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 10, 2, 0, 0, 0, 0, time.UTC)})
	for _, c := range early.Currencies {
		if c.Verdict != reconcile.VerdictIncomplete || c.Bridge.Opening != nil || c.Bridge.Residual != nil {
			t.Errorf("%s before any snapshot: %+v", c.Currency, c)
		}
	}
}

// TestReporter_WriteJSON_digest: the same period over the same data gives
// the same digest, whenever it is generated; a new order in the period
// changes it.
func TestReporter_WriteJSON_digest(t *testing.T) {
	e := reportEnv(t)
	first := e.jsonReport(reportDay)
	e.clock.Advance(3 * time.Hour)
	second := e.jsonReport(reportDay)
	if len(first.Digest) != 64 || first.Digest != second.Digest {
		t.Fatalf("digests %q and %q, want one SHA-256 twice", first.Digest, second.Digest)
	}
	if first.Period.GeneratedAt == second.Period.GeneratedAt {
		t.Fatalf("the two reports were not generated at different times")
	}

	e.observe(rOrder{id: "0e000000-0000-4000-8000-000000000001", mid: "m-new", typ: "payin", status: "completed",
		created: "2026-11-01T12:00:00Z", amount: "10.00", net: "9.70", ccy: "brl", completed: "2026-11-01T12:01:00Z"}, store.SourceWebhook)
	if third := e.jsonReport(reportDay); third.Digest == first.Digest {
		t.Fatalf("a new order in the period left the digest at %s", third.Digest)
	}
}

// digests returns the digest of the report of p in each format: the
// JSON's digest, the CSV summary's digest column (the same on every row,
// whether the summary has its own file or follows the lines) and the HTML
// report's, which stands at its top.
func (e *env) digests(p reconcile.Period) (jsonDigest, csvDigest, htmlDigest string) {
	e.t.Helper()
	jsonDigest = e.jsonReport(p).Digest
	var lines, summary, stream bytes.Buffer
	if err := e.reporter().WriteCSV(e.t.Context(), &lines, &summary, p); err != nil {
		e.t.Fatal(err)
	}
	if err := e.reporter().WriteCSV(e.t.Context(), &stream, nil, p); err != nil {
		e.t.Fatal(err)
	}
	_, tail, _ := strings.Cut(stream.String(), "\r\n\r\n")
	tail, _, _ = strings.Cut(tail, "\r\n\r\n") // the findings follow the summary
	for _, sum := range []string{summary.String(), tail} {
		recs, err := csv.NewReader(strings.NewReader(sum)).ReadAll()
		if err != nil || len(recs) < 2 {
			e.t.Fatalf("CSV summary: %v\n%s", err, sum)
		}
		col := slices.Index(recs[0], "digest")
		if col < 0 {
			e.t.Fatalf("CSV summary header has no digest: %q", recs[0])
		}
		for _, rec := range recs[1:] {
			if rec[slices.Index(recs[0], "verdict")] == "" || rec[slices.Index(recs[0], "bridge_residual")] == "" {
				e.t.Errorf("CSV summary row without its verdict and bridge: %q", rec)
			}
			if csvDigest != "" && rec[col] != csvDigest {
				e.t.Fatalf("CSV summary digests %q and %q in one period", csvDigest, rec[col])
			}
			csvDigest = rec[col]
		}
	}
	var html bytes.Buffer
	if err := e.reporter().WriteHTML(e.t.Context(), &html, p, reconcile.WriteOptions{}); err != nil {
		e.t.Fatal(err)
	}
	m := regexp.MustCompile(`<code id="digest"[^>]*>([0-9a-f]*)</code>`).FindStringSubmatchIndex(html.String())
	if m == nil {
		e.t.Fatalf("HTML report shows no digest")
	}
	if v := strings.Index(html.String(), `id="verdict"`); v < m[0] {
		e.t.Errorf("the HTML digest is not at the top, above the verdict")
	}
	return jsonDigest, csvDigest, html.String()[m[2]:m[3]]
}

// TestReporter_digest_everyFormat: the JSON, CSV and HTML reports of a
// period carry one digest, stable across two runs and changed, in all
// three, by a new order in the period.
func TestReporter_digest_everyFormat(t *testing.T) {
	e := reportEnv(t)
	j1, c1, h1 := e.digests(reportDay)
	if len(j1) != 64 || c1 != j1 || h1 != j1 {
		t.Fatalf("digests: JSON %q, CSV %q, HTML %q; want one SHA-256", j1, c1, h1)
	}
	e.clock.Advance(3 * time.Hour)
	if j2, c2, h2 := e.digests(reportDay); j2 != j1 || c2 != j1 || h2 != j1 {
		t.Fatalf("second run: JSON %q, CSV %q, HTML %q; want %q", j2, c2, h2, j1)
	}
	e.observe(rOrder{id: "0e000000-0000-4000-8000-000000000002", mid: "m-new-2", typ: "payin", status: "completed",
		created: "2026-11-01T12:00:00Z", amount: "10.00", net: "9.70", ccy: "brl", completed: "2026-11-01T12:01:00Z"}, store.SourceWebhook)
	j3, c3, h3 := e.digests(reportDay)
	if j3 == j1 || c3 != j3 || h3 != j3 {
		t.Fatalf("after a new order: JSON %q, CSV %q, HTML %q (was %q)", j3, c3, h3, j1)
	}
}

// TestReporter_WriteHTML_verdictFirst: the HTML report opens with the
// verdict and its bridge, before the summary.
func TestReporter_WriteHTML_verdictFirst(t *testing.T) {
	e := reportEnv(t)
	var buf bytes.Buffer
	if err := e.reporter().WriteHTML(t.Context(), &buf, reportDay, reconcile.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	for _, want := range []string{
		`<td class="num verdict bad" data-verdict="breaks"><strong>breaks</strong></td>`,
		`<tr><th>= expected closing</th><td class="num">1219.50</td><td class="num">538.80</td></tr>`,
		`<tr><th>Residual</th><td class="num bad">5.00</td><td class="num">0.00</td></tr>`,
		`<strong>high</strong> balance_drift brl · 5.00 brl · open 1h0m0s`,
		// A rejected order's authorized amount is not money taken.
		`<td>rejected</td>`,
		`<span class="note">not taken</span>`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML report lacks %q", want)
		}
	}
	if v, s := strings.Index(html, `id="verdict"`), strings.Index(html, `id="summary"`); v < 0 || v > s {
		t.Errorf("the verdict is not above the summary (at %d, summary at %d)", v, s)
	}
}

// TestReporter_WriteHTML_breaksCapped: the HTML verdict lists at most the
// report's cap of breaks per currency, the highest priority first, and says
// how many more the JSON report lists; the JSON report lists them all.
func TestReporter_WriteHTML_breaksCapped(t *testing.T) {
	e := reportEnv(t)
	if n := len(e.jsonReport(reportDay).Currencies[0].Breaks); n != 2 {
		t.Fatalf("the fixture has %d brl breaks, want 2", n)
	}
	r := reconcile.NewReporter(e.st, reconcile.ReportConfig{Now: e.clock.Now, HTMLMaxLines: 1})
	var buf bytes.Buffer
	if err := r.WriteHTML(t.Context(), &buf, reportDay, reconcile.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	// The cap holds per currency: brl's two breaks show as one and a
	// count, the other currency's single break as itself.
	if got := strings.Count(html, `<div class="break"><strong>`); got != 2 {
		t.Errorf("%d breaks listed, want 2 (one in each currency's column)", got)
	}
	if got := strings.Count(html, `more: the JSON report lists every break`); got != 1 {
		t.Errorf("%d notes of breaks left out, want 1 (brl's)", got)
	}
	for _, want := range []string{
		`<strong>high</strong> balance_drift brl · 5.00 brl`,
		`and 1 more: the JSON report lists every break`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML report lacks %q", want)
		}
	}
	buf.Reset()
	if err := e.reporter().WriteHTML(t.Context(), &buf, reportDay, reconcile.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "more: the JSON report lists every break") {
		t.Error("under the cap, the report still says some breaks are left out")
	}
}
