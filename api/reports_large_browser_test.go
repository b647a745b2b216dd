package api_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"orderd/api"
	"orderd/provider"
	"orderd/reconcile"
	"orderd/store"
)

// TestBrowser_largeReport: the HTML report of a day with far more orders
// than a person reads (3,000 here; the same code holds a day of 300,000
// under 2 MB, BENCHMARKS.md) renders in a 1280 px headless Chromium as
// a page a person can take in: the summary first, every line counted by
// day, currency and status, a table of at most 300 lines with the
// exceptions (open orders) among them, and a note that links the CSV and
// JSON reports holding every line.
func TestBrowser_largeReport(t *testing.T) {
	const n = 3000
	st := openStore(t, store.Options{})
	// Every tenth order is still processing at the end of the day; the
	// rest completed. Applied by many callers at once, as webhooks arrive.
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 16 {
				status, completed, target := "completed", fmt.Sprintf(`"2026-11-01T%02d:%02d:30Z"`, i/125, i%60), `{"amount":"97.00","currency":"brl"}`
				if i%10 == 0 {
					status, completed, target = "processing", "null", "null"
				}
				raw := fmt.Appendf(nil, `{"id":"0c000000-0000-4000-8000-%012d","merchantOrderId":"big-%05d","type":"payin",`+
					`"createdAt":"2026-11-01T%02d:%02d:00Z","status":%q,"rejectReason":null,"merchantSourceWallet":null,`+
					`"merchantTargetWallet":%s,"transactions":[{"id":"t-%d","type":"payin","status":%q,`+
					`"authorized":{"amount":"100.00","currency":"brl"},"merchantWallet":{"amount":"97.00","currency":"brl"},`+
					`"createdAt":"2026-11-01T%02d:%02d:00Z","completedAt":%s,"rejectReason":null}]}`,
					i, i, i/125, i%60, status, target, i, status, i/125, i%60, completed)
				o, err := provider.DecodeOrder(raw)
				if err == nil {
					_, err = st.Apply(context.Background(), store.Observation{Source: store.SourceWebhook, Order: o, Raw: raw,
						ObservedAt: time.Date(2026, 11, 1, 23, 0, 0, 0, time.UTC)})
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	now := func() time.Time { return time.Date(2026, 11, 2, 1, 0, 0, 0, time.UTC) }
	h := api.New(api.Config{Token: testToken, Now: now, Logger: slog.New(slog.DiscardHandler)}, api.Deps{
		Store:   st,
		Reports: api.NewReports(api.ReportsConfig{Writer: reconcile.NewReporter(st, reconcile.ReportConfig{Now: now})}),
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	page := srv.URL + "/v1/reports/reconciliation?from=2026-11-01&to=2026-11-02&format=html"

	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, page, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET the report: %d, %v", resp.StatusCode, err)
	}
	// 300 lines of a few hundred bytes each, whatever the day's orders.
	if len(body) > 400<<10 {
		t.Errorf("the HTML report of %d orders is %d bytes; the table should hold 300 lines", n, len(body))
	}

	ctx := browser(t, testToken)
	step(t, ctx, "open the report", chromedp.Steps(
		chromedp.Navigate(page),
		chromedp.WaitVisible(chromedp.CSS("table#orders")),
	))
	type rendered struct {
		Lines     int      `json:"lines"`
		Open      int      `json:"open"`
		Breakdown []string `json:"breakdown"`
		Note      string   `json:"note"`
		Links     []string `json:"links"`
		Order     []string `json:"order"`
	}
	got := step(t, ctx, "read the rendered DOM", chromedp.Evaluate[rendered](`({
		lines: document.querySelectorAll('table#orders tr.line').length,
		open: document.querySelectorAll('table#orders tbody.open tr.line').length,
		breakdown: [...document.querySelectorAll('table#breakdown tbody tr')].map(r => [...r.cells].map(c => c.textContent).join(' ')),
		note: document.getElementById('orders-note').textContent,
		links: [...document.querySelectorAll('#orders-note a')].map(a => a.getAttribute('href')),
		order: [...document.querySelectorAll('h2')].map(h => h.textContent),
	})`))
	if got.Lines != 300 || got.Open != 300 {
		t.Errorf("orders table: %d lines, %d of them open; want 300, the open orders first", got.Lines, got.Open)
	}
	want := []string{"2026-11-01 brl final completed 2,700 270000.00", "2026-11-01 brl open processing 300 30000.00"}
	if strings.Join(got.Breakdown, "; ") != strings.Join(want, "; ") {
		t.Errorf("breakdown %q, want %q", got.Breakdown, want)
	}
	if !strings.Contains(got.Note, "Showing 300 of 3,000 order lines") || len(got.Links) != 3 ||
		!strings.HasSuffix(got.Links[1], "format=csv") || !strings.HasSuffix(got.Links[2], "format=json") {
		t.Errorf("note %q, links %q; want it to say 300 of 3,000 and link the breakdown, CSV and JSON", got.Note, got.Links)
	}
	at := func(h string) int { return slices.Index(got.Order, h) }
	if s, f, b, o := at("Summary per currency"), at("Findings"), at("Orders by day, currency and status"), at("Orders"); s < 0 || !(s < f && f < b && b < o) {
		t.Errorf("sections %q: the totals, findings and counts come before the lines", got.Order)
	}
	checkFits(t, ctx, "the report of 3,000 orders")
}
