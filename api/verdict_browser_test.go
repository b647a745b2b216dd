package api_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"orderd/api"
	"orderd/provider"
	"orderd/provider/providertest"
	"orderd/reconcile"
	"orderd/store"
)

// checksServer serves the reports of a day on which the balances job ran
// `checks` comparisons of brl (checks+1 snapshots, 15 minutes apart), the
// provider's balance moving by a long amount with no order behind it at
// the first, so every comparison has drift.
func checksServer(t *testing.T, checks int) string {
	t.Helper()
	ck := &reportClock{}
	ck.set("2026-11-01T08:00:00Z")
	fake := providertest.NewServer(providertest.Options{KeyType: "ecdsa", Now: ck.Now,
		InitialBalances: map[string]string{"brl": "1000.00"}})
	t.Cleanup(fake.Close)
	st := openStore(t, store.Options{Now: ck.Now})
	client, err := provider.NewClient(provider.Options{BaseURL: fake.URL(), APIKey: fake.APIKey(), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rec := reconcile.New(reconcile.Config{Now: ck.Now}, st, client, nil)
	h := api.New(api.Config{Token: testToken, Now: ck.Now, Logger: slog.New(slog.DiscardHandler)}, api.Deps{
		Store: st, Provider: client,
		Reports: api.NewReports(api.ReportsConfig{Writer: reconcile.NewReporter(st, reconcile.ReportConfig{Now: ck.Now})}),
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	at := time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)
	for i := 0; i <= checks; i++ {
		ck.set(at.Add(time.Duration(i) * 15 * time.Minute).Format(time.RFC3339))
		if i == 1 {
			// A movement nothing explains, long enough to test the axis.
			if err := fake.AdjustBalance("brl", "-1234567.89"); err != nil {
				t.Fatal(err)
			}
		}
		if i > 1 && i%3 == 0 {
			if err := fake.AdjustBalance("brl", fmt.Sprintf("%d.25", i)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := rec.RunBalances(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	ck.set("2026-11-01T23:00:00Z")
	return srv.URL
}

// chartView is what a reader sees of the brl chart.
type chartView struct {
	DriftDots   int      `json:"driftDots"`
	BalanceDots int      `json:"balanceDots"`
	Labels      []string `json:"labels"`
	// DotsAtZero counts drift dots drawn on the zero line.
	DotsAtZero int `json:"dotsAtZero"`
	// Clipped names the texts that stick out of the chart's box.
	Clipped []string `json:"clipped"`
	// Unexplained is the summary's unexplained brl.
	Unexplained string `json:"unexplained"`
	Verdict     string `json:"verdict"`
}

const chartViewJS = `(() => {
	const svg = document.getElementById('chart-brl');
	const box = svg.getBoundingClientRect();
	const zero = svg.querySelector('line.zero');
	const zy = zero ? parseFloat(zero.getAttribute('y1')) : NaN;
	const dots = [...svg.querySelectorAll('circle.drift-dot')];
	return {
		driftDots: dots.length,
		balanceDots: svg.querySelectorAll('circle.balance-dot').length,
		labels: [...svg.querySelectorAll('text.value')].map(e => e.textContent),
		dotsAtZero: dots.filter(d => Math.abs(parseFloat(d.getAttribute('cy')) - zy) < 0.5).length,
		clipped: [...svg.querySelectorAll('text')].filter(e => {
			const r = e.getBoundingClientRect();
			return r.width > 0 && (r.left < box.left - 0.5 || r.right > box.right + 0.5);
		}).map(e => e.textContent),
		unexplained: [...document.querySelectorAll('#summary tbody tr')].find(r => r.cells[0].textContent === '· unexplained').cells[1].textContent,
		verdict: document.querySelector('#verdict td.verdict').dataset.verdict,
	};
})()`

// TestBrowser_reportCharts: the HTML report's chart follows the data with
// one balance check and with many: a single check is a visible point
// labelled with its value, no drift point sits at 0 beside a table that
// says otherwise, and no label (a long amount on the axis) is clipped.
func TestBrowser_reportCharts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		checks int
	}{
		{"one balance check", 1},
		{"many balance checks", 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := checksServer(t, tc.checks)
			ctx := browser(t, testToken)
			step(t, ctx, "open report", chromedp.Steps(
				chromedp.Navigate(url+"/v1/reports/reconciliation?from=2026-11-01&to=2026-11-02&format=html"),
				chromedp.WaitVisible(chromedp.ID("chart-brl")),
			))
			v := step(t, ctx, "read the chart", chromedp.Evaluate[chartView](chartViewJS))
			if v.DriftDots != tc.checks || v.BalanceDots != tc.checks+1 {
				t.Errorf("%d drift dots and %d balance dots, want %d and %d", v.DriftDots, v.BalanceDots, tc.checks, tc.checks+1)
			}
			if v.DotsAtZero != 0 {
				t.Errorf("%d drift points drawn at 0, but every check had drift (summary: %s unexplained)", v.DotsAtZero, v.Unexplained)
			}
			if len(v.Clipped) > 0 {
				t.Errorf("labels stick out of the chart: %q", v.Clipped)
			}
			if tc.checks == 1 && !strings.Contains(strings.Join(v.Labels, " "), "-1234567.89") {
				t.Errorf("the single check is not labelled with its value: labels %q", v.Labels)
			}
			// One check is within reconcile.drift_grace: pending, not a
			// break yet; after many, the movement is a finding.
			want := reconcile.VerdictBreaks
			if tc.checks == 1 {
				want = reconcile.VerdictReconciledWithPending
			}
			if v.Verdict != want {
				t.Errorf("verdict %q, want %s", v.Verdict, want)
			}
			checkFits(t, ctx, "the report")
			png := step(t, ctx, "screenshot", chromedp.Screenshot(chromedp.ID("chart-brl")))
			dir := t.TempDir()
			if d := os.Getenv("ORDERD_SCREENSHOT_DIR"); d != "" {
				dir = d
			}
			path := filepath.Join(dir, fmt.Sprintf("report-chart-%d-checks.png", tc.checks))
			if err := os.WriteFile(path, png, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("screenshot: %s", path)
		})
	}
}

// TestBrowser_dashboardFindings: a person works a finding from the
// dashboard: the open findings are listed oldest first with their age;
// the form acknowledges one, then resolves it as written off with a note;
// the dashboard no longer lists it and its trail holds both actions.
func TestBrowser_dashboardFindings(t *testing.T) {
	s := newReportServer(t, testToken)
	ctx := browser(t, testToken)
	step(t, ctx, "open dashboard", chromedp.Steps(
		chromedp.Navigate(s.url+"/"),
		chromedp.WaitVisible(chromedp.ID("work-findings")),
	))
	rows := step(t, ctx, "read the findings", chromedp.Evaluate[[][]string](
		`[...document.querySelectorAll('#findings tbody tr')].map(r => [r.id, r.cells[1].textContent, r.cells[3].textContent, r.cells[4].textContent])`))
	if len(rows) != 2 || rows[0][1] != "balance_drift" || rows[1][1] != "quarantined_webhook" || rows[0][3] != "open" {
		t.Fatalf("findings rows %q, want the drift (older) then the quarantined webhook, open", rows)
	}
	if rows[0][2] == "" || rows[0][2] == "0s" {
		t.Errorf("the drift finding's age is %q", rows[0][2])
	}
	sel := "#" + rows[0][0] + " form"
	act := func(action, resolution, note string) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_, err := chromedp.RunResponse(sctx,
			chromedp.SetValue(chromedp.CSS(sel+` select[name=action]`), action),
			chromedp.SetValue(chromedp.CSS(sel+` select[name=resolution]`), resolution),
			chromedp.SetValue(chromedp.CSS(sel+` input[name=by]`), "ana"),
			chromedp.SetValue(chromedp.CSS(sel+` input[name=note]`), note),
			chromedp.Submit(chromedp.CSS(sel)),
		)
		if err != nil {
			t.Fatalf("%s from the dashboard: %v", action, err)
		}
		step(t, ctx, "back on the dashboard", chromedp.WaitVisible(chromedp.ID("health")))
	}
	act("acknowledge", "", "looking into the provider's statement")
	status := step(t, ctx, "read the status", chromedp.Text(chromedp.CSS(sel[:len(sel)-5]+" td:nth-child(5)")))
	if !strings.HasPrefix(status, "acknowledged") || !strings.Contains(status, "acknowledge by ana") {
		t.Errorf("status after acknowledging: %q", status)
	}
	// A resolve without its note is refused with a page that says so and
	// keeps what was typed; the note added there, the form goes through.
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_, err := chromedp.RunResponse(sctx,
		chromedp.SetValue(chromedp.CSS(sel+` select[name=action]`), "resolve"),
		chromedp.SetValue(chromedp.CSS(sel+` select[name=resolution]`), "written_off"),
		// The note is left as the reloaded page has it: empty.
		chromedp.SetValue(chromedp.CSS(sel+` input[name=by]`), "ana"),
		chromedp.Submit(chromedp.CSS(sel)),
	)
	cancel()
	if err != nil {
		t.Fatalf("resolve without a note from the dashboard: %v", err)
	}
	refused := step(t, ctx, "read the refusal", chromedp.Evaluate[[]string](
		`[document.querySelector('#problem').textContent, document.querySelector('#action').value,
		  document.querySelector('#resolution').value, document.querySelector('#by').value]`))
	if !strings.Contains(refused[0], "note is required with action resolve") || refused[1] != "resolve" ||
		refused[2] != "written_off" || refused[3] != "ana" {
		t.Fatalf("the refused form's page: %q, want the reason and the form as typed", refused)
	}
	sctx, cancel = context.WithTimeout(ctx, 30*time.Second)
	_, err = chromedp.RunResponse(sctx,
		chromedp.SetValue(chromedp.CSS(`#note`), "provider fee, agreed with the provider"),
		chromedp.Submit(chromedp.CSS(`form`)),
	)
	cancel()
	if err != nil {
		t.Fatalf("resolve from the refusal's page: %v", err)
	}
	step(t, ctx, "back on the dashboard", chromedp.WaitVisible(chromedp.ID("health")))
	trail := step(t, ctx, "read the resolved finding", chromedp.Text(chromedp.CSS("#resolved-"+strings.TrimPrefix(rows[0][0], "finding-"))))
	if !strings.Contains(trail, "written_off") || !strings.Contains(trail, "resolve (written_off) by ana: provider fee, agreed with the provider") {
		t.Errorf("the resolved finding on the dashboard: %q", trail)
	}
	left := step(t, ctx, "read the findings again", chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('#findings tbody tr')].map(r => r.cells[1].textContent)`))
	if strings.Join(left, " ") != "quarantined_webhook" {
		t.Errorf("findings left on the dashboard: %q", left)
	}
	fs, err := s.st.FindingsPage(context.Background(), store.FindingQuery{Kind: store.FindingBalanceDrift})
	if err != nil {
		t.Fatal(err)
	}
	fs = slices.DeleteFunc(fs, func(f store.Finding) bool { return f.Key != "brl" })
	if len(fs) != 1 || fs[0].Resolution != store.ResolutionWrittenOff || fs[0].ResolvedBy != "ana" || len(fs[0].Trail) != 2 ||
		fs[0].Trail[1].Note != "provider fee, agreed with the provider" {
		t.Fatalf("the drift finding after the dashboard: %+v", fs)
	}
	checkFits(t, ctx, "the dashboard")
}
