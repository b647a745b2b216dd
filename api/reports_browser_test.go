package api_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// chromiumPath finds headless Chromium: Debian's chromium package (what
// CI installs), else a chromium or google-chrome on PATH. Without one the
// test fails and says how to install it, unless ORDERD_SKIP_BROWSER=1
// asks to skip it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if os.Getenv("ORDERD_SKIP_BROWSER") == "1" {
		t.Skip("ORDERD_SKIP_BROWSER=1: browser test skipped")
	}
	for _, p := range []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	t.Fatal("headless Chromium is needed for this test: install it (Debian: apt-get install chromium) " +
		"or set ORDERD_SKIP_BROWSER=1 to skip it")
	return ""
}

// browser starts a headless Chromium with a fresh profile that sends the
// admin token with every request, and returns its context.
func browser(t *testing.T, token string) context.Context {
	t.Helper()
	alloc, cancel := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1600),
	)
	t.Cleanup(cancel)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	t.Cleanup(cancelCtx)
	// The first Run starts the browser; it must not carry a timeout.
	err := chromedp.Do(ctx, func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		if _, err := cdp.Call(ctx, tg, network.Enable, network.EnableParams{}); err != nil {
			return chromedp.Void{}, err
		}
		_, err := cdp.Call(ctx, tg, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{
			Headers: network.Headers{"Authorization": "Bearer " + token}})
		return chromedp.Void{}, err
	})
	if err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// step runs one browser step with a time bound.
func step[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(sctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// TestBrowser_reportAndDashboard loads the HTML report and the dashboard
// from a running admin API in headless Chromium and checks what the
// rendered page holds: the charts' SVG with their lines, the findings
// table, the search form working without JavaScript. Screenshots go to
// the test's temporary directory (ORDERD_SCREENSHOT_DIR keeps them).
func TestBrowser_reportAndDashboard(t *testing.T) {
	s := newReportServer(t, testToken)
	ctx := browser(t, testToken)
	shots := t.TempDir()
	if d := os.Getenv("ORDERD_SCREENSHOT_DIR"); d != "" {
		shots = d
	}
	screenshot := func(name string) {
		t.Helper()
		png := step(t, ctx, "screenshot "+name, chromedp.FullScreenshot(100))
		path := filepath.Join(shots, name)
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		if len(png) < 10_000 {
			t.Errorf("screenshot %s is only %d bytes", name, len(png))
		}
		t.Logf("screenshot: %s", path)
	}

	t.Run("HTML report", func(t *testing.T) {
		step(t, ctx, "open report", chromedp.Steps(
			chromedp.Navigate(s.url+"/v1/reports/reconciliation?from=2026-11-01&to=2026-11-02&format=html"),
			chromedp.WaitVisible(chromedp.CSS("svg.chart")),
		))
		type rendered struct {
			Charts     []string `json:"charts"`
			Polylines  int      `json:"polylines"`
			BrlPoints  string   `json:"brlPoints"`
			Dots       int      `json:"dots"`
			ChartWidth float64  `json:"chartWidth"`
			Findings   []string `json:"findings"`
			Orders     int      `json:"orders"`
			Title      string   `json:"title"`
		}
		got := step(t, ctx, "read the rendered DOM", chromedp.Evaluate[rendered](`({
			charts: [...document.querySelectorAll('svg.chart')].map(e => e.id),
			polylines: document.querySelectorAll('svg.chart polyline').length,
			brlPoints: document.querySelector('#chart-brl polyline.balance').getAttribute('points'),
			dots: document.querySelectorAll('#chart-brl circle').length,
			chartWidth: document.querySelector('#chart-brl').getBoundingClientRect().width,
			findings: [...document.querySelectorAll('table#findings tbody tr')].map(r => r.cells[1].textContent + ' ' + r.cells[2].textContent),
			orders: document.querySelectorAll('table#orders tbody tr').length,
			title: document.title,
		})`))
		if strings.Join(got.Charts, " ") != "chart-brl" {
			t.Errorf("charts %v, want one for brl (usd has no balance snapshot)", got.Charts)
		}
		if got.Polylines != 3 || strings.Count(got.BrlPoints, ",") != 7 {
			t.Errorf("brl chart: %d polylines, balance points %q; want 3 lines and 7 points", got.Polylines, got.BrlPoints)
		}
		if got.Dots < 7 || got.ChartWidth < 300 {
			t.Errorf("brl chart: %d dots, %.0f px wide", got.Dots, got.ChartWidth)
		}
		if strings.Join(got.Findings, "; ") != "quarantined_webhook shop-1007; balance_drift brl" &&
			strings.Join(got.Findings, "; ") != "balance_drift brl; quarantined_webhook shop-1007" {
			t.Errorf("findings table rows %v", got.Findings)
		}
		if got.Orders != 6 || !strings.Contains(got.Title, "2026-11-01") {
			t.Errorf("orders table has %d rows (want 6), title %q", got.Orders, got.Title)
		}
		screenshot("report.png")
	})

	t.Run("dashboard", func(t *testing.T) {
		step(t, ctx, "open dashboard", chromedp.Steps(
			chromedp.Navigate(s.url+"/"),
			chromedp.WaitVisible(chromedp.ID("health")),
		))
		health := step(t, ctx, "read health", chromedp.Text(chromedp.CSS("#health .big")))
		if health != "ready" {
			t.Errorf("health shows %q", health)
		}
		screenshot("dashboard.png")
		// Search without JavaScript: the form is a plain GET.
		// RunResponse waits for the navigation the submit starts, so the
		// checks below read the results page, not the one it was typed on.
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := chromedp.RunResponse(sctx,
			chromedp.SendKeys(chromedp.CSS(`input[name=q]`), "shop-1004"),
			chromedp.Submit(chromedp.CSS(`input[name=q]`)),
		)
		cancel()
		if err != nil {
			t.Fatalf("search: %v", err)
		}
		step(t, ctx, "search results", chromedp.WaitVisible(chromedp.CSS(`#orders-table`)))
		loc := step(t, ctx, "location", chromedp.Location())
		rows := step(t, ctx, "read results", chromedp.Evaluate[[]string](
			`[...document.querySelectorAll('#orders-table tbody tr')].map(r => r.cells[0].textContent + ' ' + r.cells[3].textContent)`))
		if !strings.HasSuffix(loc, "/?q=shop-1004") || strings.Join(rows, ";") != "shop-1004 completed" {
			t.Errorf("search went to %s and shows %v", loc, rows)
		}
		// The report links work from the page.
		step(t, ctx, "follow yesterday's HTML report", chromedp.Steps(
			chromedp.Navigate(s.url+"/"),
			chromedp.WaitVisible(chromedp.ID("reports")),
			chromedp.Click(chromedp.CSS(`#reports li:nth-child(2) a`)),
			chromedp.WaitVisible(chromedp.CSS("table#findings")),
		))
	})
}
