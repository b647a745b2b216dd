package reconcile_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"orderd/reconcile"
	"orderd/store"
)

// oneStory fails unless every currency of the JSON report raw with a
// complete bridge has a balance summary whose figures are the bridge's:
// start and end its opening and closing, expected movement what the
// ledger moved, drift actual minus expected, the explained part the
// bridge's other and the unexplained part its residual.
func oneStory(t *testing.T, raw []byte) {
	t.Helper()
	var r struct {
		Currencies []struct {
			Currency string `json:"currency"`
			Balance  *struct {
				Start            struct{ Amount string } `json:"start"`
				End              struct{ Amount string } `json:"end"`
				ActualMovement   string                  `json:"actualMovement"`
				ExpectedMovement *string                 `json:"expectedMovement"`
				Drift            *string                 `json:"drift"`
				DriftExplained   *string                 `json:"driftExplained"`
				DriftUnexplained *string                 `json:"driftUnexplained"`
			} `json:"balance"`
			Bridge struct {
				Opening   *string            `json:"opening"`
				Closing   *string            `json:"closing"`
				Residual  *string            `json:"residual"`
				Movements map[string]*string `json:"movements"`
			} `json:"bridge"`
		} `json:"currencies"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	d := func(s *string) decimal.Decimal {
		if s == nil {
			t.Fatalf("a figure is null")
		}
		return decimal.RequireFromString(*s)
	}
	checked := 0
	for _, c := range r.Currencies {
		b, br := c.Balance, c.Bridge
		if b == nil || br.Opening == nil || br.Closing == nil {
			continue
		}
		checked++
		m := br.Movements
		exp := d(m["payins"]).Add(d(m["payouts"])).Add(d(m["refunds"])).Add(d(m["fees"]))
		actual := d(br.Closing).Sub(d(br.Opening))
		for _, f := range []struct {
			name      string
			got, want decimal.Decimal
		}{
			{"start", decimal.RequireFromString(b.Start.Amount), d(br.Opening)},
			{"end", decimal.RequireFromString(b.End.Amount), d(br.Closing)},
			{"actual movement", decimal.RequireFromString(b.ActualMovement), actual},
			{"expected movement", d(b.ExpectedMovement), exp},
			{"drift", d(b.Drift), actual.Sub(exp)},
			{"drift explained (resolved)", d(b.DriftExplained), d(m["other"])},
			{"drift unexplained", d(b.DriftUnexplained), d(br.Residual)},
		} {
			if !f.got.Equal(f.want) {
				t.Errorf("%s: summary %s %s, bridge %s", c.Currency, f.name, f.got, f.want)
			}
		}
	}
	if checked == 0 {
		t.Fatalf("no currency with a complete bridge in %s", raw)
	}
}

// TestReporter_oneStory_resolvedDrift: the period's 5.00 brl drift is
// resolved by a person. The report's summary tells the bridge's story
// (5.00 resolved, 0.00 unexplained, nothing red), the HTML findings table
// shows the resolution, who, the note and the trail, and the CSV carries
// the findings with their trails, the formula guard on what a person
// typed.
func TestReporter_oneStory_resolvedDrift(t *testing.T) {
	e := reportEnv(t)
	fs := e.findings(store.FindingBalanceDrift, "open")
	if len(fs) != 1 {
		t.Fatalf("open balance_drift findings = %+v", fs)
	}
	if _, err := e.st.ActOnFinding(t.Context(), store.FindingActionCmd{ID: fs[0].ID, Action: store.ActionResolve,
		By: "ana", Note: "=provider fee, credit note 7731", Resolution: store.ResolutionExplained}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Hour)

	js := writeJSON(t, e.reporter(), reportDay)
	oneStory(t, js)
	r := e.jsonReport(reportDay)
	if brl := r.Currencies[0]; brl.Bridge.Movements["other"] != "5.00" || *brl.Bridge.Residual != "0.00" {
		t.Fatalf("brl bridge: %+v", brl.Bridge)
	}

	var html bytes.Buffer
	if err := e.reporter().WriteHTML(t.Context(), &html, reportDay, reconcile.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	h := html.String()
	for _, want := range []string{
		`<tr><th>· resolved by people</th><td class="num">5.00</td>`,
		`<tr><th>· unexplained</th><td class="num">0.00</td>`,
		`<div>explained by ana</div><div class="note-text">=provider fee, credit note 7731</div>`,
		`resolve (explained) by ana: =provider fee, credit note 7731</div>`,
	} {
		if !strings.Contains(h, want) {
			t.Errorf("HTML report lacks %q", want)
		}
	}
	if strings.Contains(h, `<td class="num bad">5.00</td>`) {
		t.Errorf("the resolved 5.00 is shown red")
	}

	var lines bytes.Buffer
	guarded := reconcile.NewReporter(e.st, reconcile.ReportConfig{Now: e.clock.Now, CSVGuardFormulas: true})
	if err := guarded.WriteCSV(t.Context(), &lines, nil, reportDay); err != nil {
		t.Fatal(err)
	}
	sections := strings.Split(lines.String(), "\r\n\r\n")
	if len(sections) != 3 {
		t.Fatalf("CSV has %d sections, want lines, summary and findings", len(sections))
	}
	recs, err := readRFC4180(sections[2])
	if err != nil {
		t.Fatal(err)
	}
	var drift []string
	for _, rec := range recs[1:] {
		if rec[1] == store.FindingBalanceDrift {
			drift = rec
		}
	}
	want := []string{"balance_drift", "brl", "resolved", "resolved", "2026-11-01T23:00:00.000Z", "2026-11-02T01:00:00.000Z",
		"explained", "ana", "5.00 brl unexplained of a drift of 5.00 (tolerance 0.00)", "resolve", "ana", "explained",
		"'=provider fee, credit note 7731", "2026-11-02T01:00:00.000Z"}
	if len(drift) != len(reconcile.CSVFindingHeader) || strings.Join(drift[1:], "|") != strings.Join(want, "|") {
		t.Fatalf("balance_drift row %q\nwant %q", drift, want)
	}
}

// TestReporter_oneStory_driftFromBeforeThePeriod: drift left unexplained
// before the period keeps the balance checks comparing from a snapshot
// before it; the summary is still the bridge's for the period itself.
func TestReporter_oneStory_driftFromBeforeThePeriod(t *testing.T) {
	e := balancesEnv(t, reconcile.Config{DriftGrace: 1})
	e.at("2026-10-31T22:00:00Z")
	e.run(e.rec.RunBalances)
	if err := e.fake.AdjustBalance("brl", "-63.71"); err != nil {
		t.Fatal(err)
	}
	for _, at := range []string{"2026-10-31T23:30:00Z", "2026-11-01T06:00:00Z", "2026-11-01T23:00:00Z"} {
		e.at(at)
		e.run(e.rec.RunBalances)
	}
	e.createAtFake("in-period", "100.00", "payin")
	e.at("2026-11-01T23:10:00Z")
	if err := e.fake.Complete("in-period"); err != nil {
		t.Fatal(err)
	}
	e.learn("in-period", store.SourceWebhook)
	e.at("2026-11-01T23:30:00Z")
	e.run(e.rec.RunBalances)
	e.at("2026-11-02T01:00:00Z")
	js := writeJSON(t, e.reporter(), reportDay)
	oneStory(t, js)
}

// TestReporter_digest_closedPeriodIsStable: after the period ended, a
// finding opens on one of its orders, a person resolves its drift finding
// and the balance checks go on. Its report made again gives the digest
// first issued, in every format, and says what the digest covers. A late
// webhook of an order that completed in the period changes it.
func TestReporter_digest_closedPeriodIsStable(t *testing.T) {
	e := reportEnv(t)
	j0, c0, h0 := e.digests(reportDay)
	if c0 != j0 || h0 != j0 {
		t.Fatalf("digests differ between formats: %s %s %s", j0, c0, h0)
	}

	e.clock.Advance(time.Hour)
	if _, err := e.st.Exec(t.Context(), &store.OpenFindingCmd{FindingKind: store.FindingStuckOrder,
		Key: "0a000000-0000-4000-8000-000000000006", Detail: json.RawMessage(`{"orderId":"0a000000-0000-4000-8000-000000000006",` +
			`"merchantOrderId":"m-open","type":"payin","status":"processing","lastChangeAt":"2026-11-01T20:00:01Z",` +
			`"checkAttempts":9,"giveUpAfter":"24h0m0s"}`)}); err != nil {
		t.Fatal(err)
	}
	fs := e.findings(store.FindingBalanceDrift, "open")
	if len(fs) != 1 {
		t.Fatalf("open balance_drift findings = %+v", fs)
	}
	e.actOn(fs[0].ID, store.ActionResolve, store.ResolutionWrittenOff)
	e.clock.Advance(time.Hour)
	e.run(e.rec.RunBalances)
	e.clock.Advance(20 * time.Minute)

	if j, c, h := e.digests(reportDay); j != j0 || c != j0 || h != j0 {
		t.Fatalf("later digests JSON %s CSV %s HTML %s, want the first %s", j, c, h, j0)
	}
	js := writeJSON(t, e.reporter(), reportDay)
	var r struct {
		DigestCovers string `json:"digestCovers"`
	}
	if err := json.Unmarshal(js, &r); err != nil || r.DigestCovers != reconcile.DigestCovers {
		t.Fatalf("digestCovers %q (%v)", r.DigestCovers, err)
	}
	// The report itself does show the change.
	if jr := e.jsonReport(reportDay); jr.Currencies[0].Verdict == reconcile.VerdictBreaks && len(jr.Currencies[0].Breaks) == 2 {
		t.Fatalf("brl still breaks on the resolved drift: %+v", jr.Currencies[0].Breaks)
	}

	// A late webhook of an order that completed in the period.
	e.observe(rOrder{id: "0e000000-0000-4000-8000-000000000002", mid: "m-late-webhook", typ: "payin", status: "completed",
		created: "2026-11-01T11:00:00Z", amount: "10.00", net: "9.70", ccy: "brl", completed: "2026-11-01T11:01:00Z"}, store.SourceWebhook)
	if j, _, _ := e.digests(reportDay); j == j0 {
		t.Fatalf("a late webhook of an order in the period left the digest at %s", j)
	}
}
