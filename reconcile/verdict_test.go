package reconcile_test

import (
	"bytes"
	"encoding/json"
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
	var buf bytes.Buffer
	if err := e.reporter().WriteJSON(e.t.Context(), &buf, p); err != nil {
		e.t.Fatal(err)
	}
	var r jsonReport
	if err := json.Unmarshal(buf.Bytes(), &r); err != nil {
		e.t.Fatalf("report: %v\n%s", err, buf.Bytes())
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
