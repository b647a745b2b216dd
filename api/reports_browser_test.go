package api_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
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

// layout is how a page lies in a 1280 px wide window.
type layout struct {
	// WindowWidth is the viewport's width, DocWidth the document's full
	// scroll width: wider means a horizontal scroll bar.
	WindowWidth float64 `json:"windowWidth"`
	DocWidth    float64 `json:"docWidth"`
	// Overflowing names the scroll boxes and tables whose content is
	// wider than they are (a table scrolling inside the page).
	Overflowing []string `json:"overflowing"`
	// Right is the right edge of the widest table.
	Right float64 `json:"right"`
}

const layoutJS = `({
	windowWidth: window.innerWidth,
	docWidth: document.documentElement.scrollWidth,
	overflowing: [...document.querySelectorAll('.scroll, table')].filter(e => e.scrollWidth > e.clientWidth + 1)
		.map(e => e.tagName + '#' + e.id + ' ' + e.scrollWidth + '>' + e.clientWidth),
	right: Math.max(0, ...[...document.querySelectorAll('table')].map(t => t.getBoundingClientRect().right)),
})`

// checkFits fails the test unless the page fits a 1280 px window: no
// horizontal scrolling of the page or of any table in it.
func checkFits(t *testing.T, ctx context.Context, page string) {
	t.Helper()
	l := step(t, ctx, "measure "+page, chromedp.Evaluate[layout](layoutJS))
	if l.WindowWidth != 1280 {
		t.Fatalf("%s: the window is %.0f px wide, want 1280", page, l.WindowWidth)
	}
	if l.DocWidth > 1280 || len(l.Overflowing) > 0 || l.Right > 1280 {
		t.Errorf("%s does not fit 1280 px: document %.0f px wide, widest table ends at %.0f px, overflowing %v",
			page, l.DocWidth, l.Right, l.Overflowing)
	}
}

// chartJS reads one chart: its axis, the x of each balance point and
// check, and its tick labels.
const chartJS = `(id => {
	const svg = document.getElementById(id);
	const xs = sel => [...svg.querySelectorAll(sel)].map(c => parseFloat(c.getAttribute('cx')));
	return {
		from: svg.dataset.from, to: svg.dataset.to,
		balanceX: xs('circle.balance-dot'), driftX: xs('circle.drift-dot'),
		ticks: [...svg.querySelectorAll('text.tick')].map(e => e.textContent),
		dates: [...svg.querySelectorAll('text.tick-date')].map(e => e.textContent),
	};
})`

type chartRead struct {
	From     string    `json:"from"`
	To       string    `json:"to"`
	BalanceX []float64 `json:"balanceX"`
	DriftX   []float64 `json:"driftX"`
	Ticks    []string  `json:"ticks"`
	Dates    []string  `json:"dates"`
}

// Where the charts' plot area lies, in SVG units (the SVG is drawn at
// its own size, 760 px, within 1280).
const plotLeft, plotRight = 90.0, 740.0

// TestBrowser_reportAndDashboard loads the HTML reports and the dashboard
// from a running admin API in a 1280 px wide headless Chromium and checks
// what a reader sees: every page fits without horizontal scrolling; a
// chart's time axis follows its points (minutes of data fill the plot);
// order lines are grouped and sorted; only alarming figures are red; an
// order created through the gateway shows the amount it asked for; the
// dashboard lists orders by the time it shows and links the scheduled
// report files, which open in the browser. Screenshots go to the test's
// temporary directory (ORDERD_SCREENSHOT_DIR keeps them).
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
	// shot saves one element at its size on the page, to look at closely.
	shot := func(name, selector string) {
		t.Helper()
		png := step(t, ctx, "screenshot "+name, chromedp.Screenshot(chromedp.CSS(selector)))
		path := filepath.Join(shots, name)
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", path)
	}
	color := func(what, selector string) string {
		t.Helper()
		return step(t, ctx, "colour of "+what, chromedp.Evaluate[string](
			`getComputedStyle(document.querySelector(`+strconv.Quote(selector)+`)).color`))
	}
	const red, ink = "rgb(180, 35, 24)", "rgb(27, 31, 36)"

	t.Run("HTML report", func(t *testing.T) {
		step(t, ctx, "open report", chromedp.Steps(
			chromedp.Navigate(s.url+"/v1/reports/reconciliation?from=2026-11-01&to=2026-11-02&format=html"),
			chromedp.WaitVisible(chromedp.CSS("svg.chart")),
		))
		type rendered struct {
			Charts    []string   `json:"charts"`
			Polylines int        `json:"polylines"`
			BrlPoints string     `json:"brlPoints"`
			Findings  []string   `json:"findings"`
			Orders    [][]string `json:"orders"`
			Groups    []string   `json:"groups"`
			Title     string     `json:"title"`
			Meta      string     `json:"meta"`
			Header    []string   `json:"header"`
		}
		got := step(t, ctx, "read the rendered DOM", chromedp.Evaluate[rendered](`({
			charts: [...document.querySelectorAll('svg.chart')].map(e => e.id),
			polylines: document.querySelectorAll('svg.chart polyline').length,
			brlPoints: document.querySelector('#chart-brl polyline.balance').getAttribute('points'),
			findings: [...document.querySelectorAll('table#findings tbody tr')].map(r => r.cells[1].firstChild.textContent + ' ' + r.cells[1].querySelector('.note').textContent),
			orders: [...document.querySelectorAll('table#orders tr.line')].map(r => [
				r.querySelector('.mid').textContent, r.cells[2].textContent, r.cells[3].textContent, r.cells[4].textContent,
				r.cells[5].innerText.replace(/\s+/g, ' ')]),
			groups: [...document.querySelectorAll('table#orders tr.group')].map(r => r.textContent),
			title: document.title,
			meta: document.querySelector('p.meta').textContent,
			header: [...document.querySelectorAll('#summary thead th')].map(e => e.textContent),
		})`))
		if strings.Join(got.Charts, " ") != "chart-brl" {
			t.Errorf("charts %v, want one for brl (usd has no balance snapshot before the period's end)", got.Charts)
		}
		// The balance from the opening snapshot (the evening before,
		// dashed), the balance over the day, the drift, its unexplained part.
		if got.Polylines != 4 || strings.Count(got.BrlPoints, ",") != 6 {
			t.Errorf("brl chart: %d polylines, balance points %q; want 4 lines and 6 points in the period", got.Polylines, got.BrlPoints)
		}
		if strings.Join(got.Findings, "; ") != "balance_drift brl; quarantined_webhook shop-1007" {
			t.Errorf("findings table rows %v", got.Findings)
		}
		if !strings.Contains(got.Title, "2026-11-01") || !strings.Contains(got.Meta, "8 order lines · 2 findings") {
			t.Errorf("title %q, meta %q", got.Title, got.Meta)
		}
		// Final lines by completion (shop-1000 was learned last, rejected
		// first), then open lines by creation.
		var mids []string
		for _, o := range got.Orders {
			mids = append(mids, o[0])
		}
		if want := "shop-1000 shop-1001 shop-1002 shop-1003 shop-1004 shop-1005 shop-1006 shop-1008"; strings.Join(mids, " ") != want {
			t.Errorf("order lines %v, want %s", mids, want)
		}
		for i := 1; i < 6; i++ {
			if got.Orders[i][3] < got.Orders[i-1][3] {
				t.Errorf("final lines not by completion: %s (%s) after %s (%s)", mids[i], got.Orders[i][3], mids[i-1], got.Orders[i-1][3])
			}
		}
		if len(got.Groups) != 2 || !strings.HasPrefix(got.Groups[0], "Final in the period") || !strings.HasSuffix(got.Groups[0], "· 6 lines") ||
			!strings.HasPrefix(got.Groups[1], "Open at the end of the period") || !strings.HasSuffix(got.Groups[1], "· 2 lines") {
			t.Errorf("groups %q", got.Groups)
		}
		// The order created through the gateway: its invoice, in brl.
		if gw := got.Orders[7]; gw[4] != "55.00 brl requested" {
			t.Errorf("gateway order's authorized cell %q, want the requested 55.00 brl", gw[4])
		}
		if strings.Join(got.Header, " ") != " brl usd" {
			t.Errorf("summary columns %q, want brl and usd only (no 'no amount yet')", got.Header)
		}
		// The brl chart: the day's checks (07:30 to 22:30) after the
		// opening snapshot of the evening before, which sits at the
		// period's start; padded, that is the whole day.
		c := step(t, ctx, "read the brl chart", chromedp.Evaluate[chartRead](chartJS+`('chart-brl')`))
		if c.From != "2026-11-01 00:00:00" || c.To != "2026-11-02 00:00:00" || c.BalanceX[0] != plotLeft ||
			c.BalanceX[len(c.BalanceX)-1] < 690 || strings.Join(c.Ticks, " ") != "00:00 06:00 12:00 18:00 00:00" {
			t.Errorf("brl chart: axis %s to %s, balance at x %v, ticks %v", c.From, c.To, c.BalanceX, c.Ticks)
		}
		// Red only where it alarms: unexplained drift of -12.34.
		if got := color("unexplained brl", "#summary tbody tr:nth-child(17) td:nth-child(2)"); got != red {
			t.Errorf("unexplained -12.34 shown in %s, want red %s", got, red)
		}
		if got := color("explained brl", "#summary tbody tr:nth-child(16) td:nth-child(2)"); got != ink {
			t.Errorf("explained 0.00 shown in %s, want ink %s", got, ink)
		}
		checkFits(t, ctx, "the report of 2026-11-01")
		screenshot("report.png")
		shot("report-chart-brl.png", "#chart-brl")
		shot("report-orders.png", "table#orders")
	})

	t.Run("today's report: minutes of data", func(t *testing.T) {
		step(t, ctx, "open today's report", chromedp.Steps(
			chromedp.Navigate(s.url+"/v1/reports/reconciliation?from=2026-11-02&to=2026-11-03&format=html"),
			chromedp.WaitVisible(chromedp.ID("chart-usd")),
		))
		c := step(t, ctx, "read the usd chart", chromedp.Evaluate[chartRead](chartJS+`('chart-usd')`))
		// Snapshots at 00:20, 00:23, 00:26: the axis is those six minutes,
		// padded, and the points spread over the plot.
		if c.From != "2026-11-02 00:19:42" || c.To != "2026-11-02 00:26:18" {
			t.Errorf("usd chart axis %s to %s, want 00:19:42 to 00:26:18", c.From, c.To)
		}
		if len(c.BalanceX) != 3 || c.BalanceX[2]-c.BalanceX[0] < 0.8*(plotRight-plotLeft) {
			t.Errorf("usd balance points at x %v: six minutes of data should span most of the plot (%v to %v)",
				c.BalanceX, plotLeft, plotRight)
		}
		if strings.Join(c.Ticks, " ") != "00:20 00:22 00:24 00:26" || strings.Join(c.Dates, " ") != "2026-11-02" {
			t.Errorf("usd ticks %v, dates %v", c.Ticks, c.Dates)
		}
		// The usd drift the 00:23 check found was explained at 00:26:
		// 0.00 unexplained is not an alarm; the check beyond tolerance is.
		cells := step(t, ctx, "read the usd column", chromedp.Evaluate[[]string](
			`[...document.querySelectorAll('#summary tbody tr')].map(r => r.cells[0].textContent + '=' + r.cells[2].textContent)`))
		if !slices.Contains(cells, "· unexplained=0.00") || !slices.Contains(cells, "Balance checks (beyond tolerance)=2 (1)") {
			t.Errorf("usd summary %v", cells)
		}
		if got := color("unexplained usd", "#summary tbody tr:nth-child(17) td:nth-child(3)"); got != ink {
			t.Errorf("unexplained 0.00 shown in %s, want ink %s", got, ink)
		}
		if got := color("usd checks", "#summary tbody tr:nth-child(18) td:nth-child(3)"); got != red {
			t.Errorf("a check beyond tolerance shown in %s, want red %s", got, red)
		}
		meta := step(t, ctx, "meta", chromedp.Text(chromedp.CSS("p.meta")))
		if !strings.Contains(meta, "1 order line · 3 findings") {
			t.Errorf("meta %q, want singular and plural counts", meta)
		}
		checkFits(t, ctx, "today's report")
		screenshot("report-today.png")
		shot("report-today-chart-usd.png", "#chart-usd")
		shot("report-today-chart-brl.png", "#chart-brl")
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
		rows := step(t, ctx, "read recent orders", chromedp.Evaluate[[][]string](
			`[...document.querySelectorAll('#orders-table tbody tr')].map(r => [r.cells[0].textContent, r.cells[4].textContent, r.cells[6].textContent])`))
		var mids []string
		for i, r := range rows {
			mids = append(mids, r[0])
			if i > 0 && r[2] > rows[i-1][2] {
				t.Errorf("recent orders not by Updated, newest first: %s (%s) below %s (%s)", r[0], r[2], rows[i-1][0], rows[i-1][2])
			}
			if r[0] == "shop-1008" && r[1] != "55.00 brl requested" {
				t.Errorf("gateway order's amount %q", r[1])
			}
		}
		if len(rows) < 9 || mids[0] != "shop-1009" || mids[1] != "shop-1000" {
			t.Errorf("recent orders %v: want today's shop-1009, then shop-1000 (changed last yesterday), first", mids)
		}
		scheduled := step(t, ctx, "read the scheduled reports", chromedp.Evaluate[[]string](
			`[...document.querySelectorAll('#scheduled li')].map(e => e.textContent)`))
		if strings.Join(scheduled, "; ") != "2026-11-01: HTML · CSV · CSV summary · CSV findings · JSON; 2026-10-31: HTML · CSV · CSV summary · CSV findings · JSON" {
			t.Errorf("scheduled reports %q", scheduled)
		}
		checkFits(t, ctx, "the dashboard")
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
		found := step(t, ctx, "read results", chromedp.Evaluate[[]string](
			`[...document.querySelectorAll('#orders-table tbody tr')].map(r => r.cells[0].textContent + ' ' + r.cells[3].textContent)`))
		if !strings.HasSuffix(loc, "/?q=shop-1004") || strings.Join(found, ";") != "shop-1004 completed" {
			t.Errorf("search went to %s and shows %v", loc, found)
		}
		// The report links work from the page.
		step(t, ctx, "follow yesterday's HTML report", chromedp.Steps(
			chromedp.Navigate(s.url+"/"),
			chromedp.WaitVisible(chromedp.ID("reports")),
			chromedp.Click(chromedp.CSS(`#reports li:nth-child(2) a`)),
			chromedp.WaitVisible(chromedp.CSS("table#findings")),
		))
	})

	t.Run("a scheduled report file", func(t *testing.T) {
		step(t, ctx, "follow the scheduled HTML report", chromedp.Steps(
			chromedp.Navigate(s.url+"/"),
			chromedp.WaitVisible(chromedp.ID("scheduled")),
			chromedp.Click(chromedp.CSS(`#scheduled li:nth-child(1) a`)),
			chromedp.WaitVisible(chromedp.CSS("svg#chart-brl")),
		))
		loc := step(t, ctx, "location", chromedp.Location())
		if !strings.HasSuffix(loc, "/v1/reports/files/orderd-reconciliation-2026-11-01-2026-11-02.html") {
			t.Errorf("the link went to %s", loc)
		}
		// Its links to the sibling CSV and JSON files resolve beside it.
		hrefs := step(t, ctx, "read the format links", chromedp.Evaluate[[]string](
			`[...document.querySelectorAll('p.meta a')].map(a => a.href)`))
		if len(hrefs) != 2 || !strings.HasSuffix(hrefs[0], "/v1/reports/files/orderd-reconciliation-2026-11-01-2026-11-02.csv") {
			t.Errorf("format links %v", hrefs)
		}
		checkFits(t, ctx, "the scheduled report file")
	})
}
