package api_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"orderd/api"
	"orderd/provider"
	"orderd/provider/providertest"
	"orderd/receiver"
	"orderd/store"
)

// cellsOf returns the text of the first cell of each row of the table
// with id, tags stripped.
func cellsOf(t *testing.T, html, id string) []string {
	t.Helper()
	start := strings.Index(html, `<table id="`+id+`">`)
	if start < 0 {
		return nil
	}
	end := strings.Index(html[start:], "</table>")
	rows := regexp.MustCompile(`<tr><td[^>]*>(.*?)</td>`).FindAllStringSubmatch(html[start:start+end], -1)
	tags := regexp.MustCompile(`<[^>]+>`)
	var out []string
	for _, r := range rows {
		out = append(out, tags.ReplaceAllString(r[1], ""))
	}
	return out
}

func TestDashboard_ServeHTTP(t *testing.T) {
	s := newReportServer(t, testToken)
	// Three more webhooks shortly before now: two in the last five
	// minutes, three in the last hour.
	for i, at := range []string{"2026-11-02T00:10:00Z", "2026-11-02T00:56:00Z", "2026-11-02T00:58:30Z"} {
		s.clock.set(at)
		raw := reportOrder(fmt.Sprintf("0c000000-0000-4000-8000-%012d", i), fmt.Sprintf("late-%d", i), "payin", "processing",
			at, "10.00", "9.70", "brl", "")
		o, err := provider.DecodeOrder(raw)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.st.Apply(t.Context(), store.Observation{Source: store.SourceWebhook, Order: o, Raw: raw, ObservedAt: s.clock.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	s.clock.set("2026-11-02T01:00:00Z")
	pending, err := s.st.PendingEvents(t.Context(), 0, 10000)
	if err != nil {
		t.Fatal(err)
	}

	r := s.get(t, "GET", "/")
	wantStatus(t, r, http.StatusOK)
	html := string(r.body)
	if ct := r.header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	for _, want := range []string{
		`<p class="big ok">ready</p>`,
		`<span class="ok">✓</span> store`,
		`<tr><td>webhooks</td><td class="num">2 <span class="muted">(0.40/min)</span></td><td class="num">3 <span class="muted">(0.05/min)</span></td></tr>`,
		// Events: the three orders above, and today's usd payin with its
		// drift finding opened and resolved (see newReportServer).
		`<tr><td>events</td><td class="num">2 <span class="muted">(0.40/min)</span></td><td class="num">6 <span class="muted">(0.10/min)</span></td></tr>`,
		fmt.Sprintf(`<p class="big bad">%d</p>`, len(pending)),
		"the oldest waits for " + s.clock.Now().Sub(pending[0].Time).String(),
		`<li>balance_drift: 1</li>`,
		`<li>quarantined_webhook: 1</li>`,
		`<td>balance_drift</td><td>brl</td>`,
		`Today (so far) (2026-11-02): <a href="/v1/reports/reconciliation?format=html&amp;from=2026-11-02&amp;to=2026-11-03">HTML</a>`,
		`Yesterday (2026-11-01): <a href="/v1/reports/reconciliation?format=html&amp;from=2026-11-01&amp;to=2026-11-02">HTML</a> · <a href="/v1/reports/reconciliation?format=csv&amp;from=2026-11-01&amp;to=2026-11-02">CSV</a> · <a href="/v1/reports/reconciliation?format=json&amp;from=2026-11-01&amp;to=2026-11-02">JSON</a>`,
		`<h2>Recent orders <span class="muted sort">last changed first</span></h2>`,
		`Written on schedule`,
		`<li>2026-11-01: <a href="/v1/reports/files/orderd-reconciliation-2026-11-01-2026-11-02.html">HTML</a> · <a href="/v1/reports/files/orderd-reconciliation-2026-11-01-2026-11-02.csv">CSV</a> · <a href="/v1/reports/files/orderd-reconciliation-2026-11-01-2026-11-02-summary.csv">CSV summary</a> · <a href="/v1/reports/files/orderd-reconciliation-2026-11-01-2026-11-02-findings.csv">CSV findings</a> · <a href="/v1/reports/files/orderd-reconciliation-2026-11-01-2026-11-02.json">JSON</a></li>`,
		`<li>2026-10-31: <a href="/v1/reports/files/orderd-reconciliation-2026-10-31-2026-11-01.html">HTML</a>`,
		// The column says which amount it shows.
		`<th class="num" title="the amount the provider authorized for the order's own transaction (payin or payout); for an order created through orderd that the provider has not stated yet, the amount requested">Amount authorized</th>`,
		// The order created through the gateway: the amount it asked for.
		`<td class="num">55.00 brl <span class="muted" title="asked for when the order was created through orderd; the provider has not stated an amount yet">requested</span></td>`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("dashboard lacks %q", want)
		}
	}
	// By last change, as the Updated column shows: late-0 was created
	// after shop-1009 but last changed before it.
	if got := strings.Join(cellsOf(t, html, "orders-table"), " "); got != "late-2 late-1 shop-1009 late-0 shop-1000 shop-1008 shop-1006 shop-1005 shop-1004 shop-1003 shop-1002 shop-1001" {
		t.Errorf("recent orders, last changed first: %s", got)
	}
	if m := regexp.MustCompile(`(?i)<script|<link|<img|\bsrc=`).FindString(html); m != "" {
		t.Errorf("dashboard loads something: %q", m)
	}

	t.Run("search", func(t *testing.T) {
		for _, tc := range []struct {
			name, q string
			want    []string
		}{
			{"by merchantOrderId prefix", "shop-100", []string{"shop-1000", "shop-1001", "shop-1002", "shop-1003", "shop-1004", "shop-1005", "shop-1006", "shop-1008", "shop-1009"}},
			{"by whole merchantOrderId", "shop-1003", []string{"shop-1003"}},
			{"by provider order id", "0b000000-0000-4000-8000-000000000002", []string{"shop-1002"}},
			{"nothing matches", "nope", nil},
			{"markup is text", "<script>alert(1)</script>", nil},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := s.get(t, "GET", "/?q="+strings.NewReplacer("<", "%3C", ">", "%3E", "(", "%28", ")", "%29").Replace(tc.q))
				wantStatus(t, r, http.StatusOK)
				html := string(r.body)
				if got := cellsOf(t, html, "orders-table"); strings.Join(got, " ") != strings.Join(tc.want, " ") {
					t.Errorf("orders %v, want %v", got, tc.want)
				}
				if tc.want == nil && !strings.Contains(html, "No order matches.") {
					t.Errorf("no 'No order matches.' note")
				}
				if strings.Contains(html, "<script>") {
					t.Errorf("the query was written as markup")
				}
			})
		}
	})

	t.Run("without the token", func(t *testing.T) {
		anon := *s
		anon.token = ""
		r := anon.get(t, "GET", "/")
		wantStatus(t, r, http.StatusUnauthorized)
		if strings.Contains(string(r.body), "shop-10") {
			t.Errorf("an unauthenticated answer shows orders: %s", r.body)
		}
	})

	t.Run("a failing readiness check", func(t *testing.T) {
		dash, err := api.NewDashboard(api.DashboardConfig{Store: s.st, Now: s.clock.Now,
			Checks: []api.Check{{Name: "nats", Check: func(context.Context) error { return errors.New("connection refused") }}}})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(dash)
		defer srv.Close()
		resp, err := http.Get(srv.URL + "/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		html := string(b)
		for _, want := range []string{`<p class="big bad">not ready</p>`, `<span class="bad">✗</span> nats: <span class="bad">connection refused</span>`} {
			if !strings.Contains(html, want) {
				t.Errorf("dashboard lacks %q", want)
			}
		}
	})

	// Started two minutes ago: both windows are over those two minutes,
	// which saw one webhook (00:58:30) and its event. Divided by the
	// windows, the rates would read 0.20 and 0.01 a minute; counted over
	// the windows, the 00:56:00 webhook an earlier run stored would be in
	// the 5-minute one.
	t.Run("rates after a start", func(t *testing.T) {
		started := s.clock.Now().Add(-2 * time.Minute)
		dash, err := api.NewDashboard(api.DashboardConfig{Store: s.st, Now: s.clock.Now, Started: started})
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		dash.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		html := rec.Body.String()
		for _, want := range []string{
			`<tr><td>webhooks</td><td class="num">1 <span class="muted">(0.50/min)</span></td><td class="num">1 <span class="muted">(0.50/min)</span></td></tr>`,
			`<tr><td>events</td><td class="num">1 <span class="muted">(0.50/min)</span></td><td class="num">1 <span class="muted">(0.50/min)</span></td></tr>`,
			"orderd has been up for 2m0s",
		} {
			if !strings.Contains(html, want) {
				t.Errorf("dashboard lacks %q", want)
			}
		}
	})
}

// TestDashboard_busyTraffic: the rates a person reads after a burst of
// real webhooks (signed, posted to the receiver, stored in a real SQLite
// database), each delivered twice, and a change of state for some: the
// counts are the distinct bodies stored and the events queued from the
// start of each window's minute, held to a plain count of the stored rows,
// and each column says where its window starts and how long it is; the
// repeats are answered 200 and not counted again.
func TestDashboard_busyTraffic(t *testing.T) {
	ck := &reportClock{}
	ck.set("2026-11-02T00:00:00Z")
	st := openStore(t, store.Options{Now: ck.Now})
	key, _, err := providertest.GenerateKey("rsa")
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := provider.NewVerifier(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	webhooks := receiver.New(receiver.Config{}, receiver.Deps{Store: st, Verifier: verifier, Now: ck.Now})
	post := func(body []byte) {
		t.Helper()
		sig, err := providertest.Sign(key, body)
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodPost, receiver.DefaultPath, strings.NewReader(string(body)))
		req.RemoteAddr = "192.0.2.1:41000"
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Signature", sig)
		rec := httptest.NewRecorder()
		webhooks.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("webhook answered %d: %s", rec.Code, rec.Body)
		}
	}
	n := 0
	// deliver posts a new order's processing webhook at the given time,
	// then the same bytes again, and, when complete, its completion (a
	// second body, a change) and that again.
	deliver := func(at string, complete bool) {
		t.Helper()
		ck.set(at)
		n++
		id, mid := fmt.Sprintf("0d000000-0000-4000-8000-%012d", n), fmt.Sprintf("busy-%d", n)
		processing := reportOrder(id, mid, "payin", "processing", at, "10.00", "9.70", "brl", "")
		post(processing)
		post(processing)
		if complete {
			done := reportOrder(id, mid, "payin", "completed", at, "10.00", "9.70", "brl", at)
			post(done)
			post(done)
		}
	}
	deliver("2026-11-01T22:59:59Z", true) // before both windows
	deliver("2026-11-01T23:00:00Z", true) // the first second of the hour's
	deliver("2026-11-01T23:54:59Z", false)
	deliver("2026-11-01T23:55:00Z", false) // the first second of the 5 minutes'
	deliver("2026-11-01T23:55:39Z", true)  // before now-5m, in its minute
	for i := range 150 {                   // a burst in the last minute
		deliver(fmt.Sprintf("2026-11-02T00:00:%02dZ", 10+i%25), i%3 == 0)
	}
	ck.set("2026-11-02T00:00:40Z")

	dash, err := api.NewDashboard(api.DashboardConfig{Store: st, Now: ck.Now})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	dash.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	html := rec.Body.String()

	// The oracle: the rows stored, counted from each window's minute.
	from5, from60 := time.Date(2026, 11, 1, 23, 55, 0, 0, time.UTC), time.Date(2026, 11, 1, 23, 0, 0, 0, time.UTC)
	countFrom := func(query string, from time.Time) int64 {
		var c int64
		if err := st.DB().QueryRow(query, from.UnixMilli()).Scan(&c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	const hooks, events = `SELECT count(*) FROM webhook_deliveries WHERE first_received_at >= ?`, `SELECT count(*) FROM outbox WHERE created_at >= ?`
	w5, w60 := countFrom(hooks, from5), countFrom(hooks, from60)
	e5, e60 := countFrom(events, from5), countFrom(events, from60)
	// By construction: 150 orders of the burst with 50 completions, and
	// the three orders since 23:55 (one completed) in the 5 minutes; the
	// orders from 23:00 on in the hour. The repeats add nothing.
	if w5 != 150+50+2+1 || w60 != w5+1+2 || e5 != w5 || e60 != w60 {
		t.Fatalf("stored: %d and %d webhooks, %d and %d events: the fixture is not what this test reads", w5, w60, e5, e60)
	}
	cell := func(c int64, span time.Duration) string {
		h := c * 100 * 60 / int64(span/time.Second)
		return fmt.Sprintf(`<td class="num">%d <span class="muted">(%d.%02d/min)</span></td>`, c, h/100, h%100)
	}
	span5, span60 := 5*time.Minute+40*time.Second, time.Hour+40*time.Second
	for _, want := range []string{
		`<th class="num">last 5 min <span class="muted">(from 23:55, 5m40s)</span></th>`,
		`<th class="num">last 60 min <span class="muted">(from 23:00, 1h0m40s)</span></th>`,
		`<tr><td>webhooks</td>` + cell(w5, span5) + cell(w60, span60) + `</tr>`,
		`<tr><td>events</td>` + cell(e5, span5) + cell(e60, span60) + `</tr>`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("dashboard lacks %q", want)
		}
	}
	if t.Failed() {
		i := strings.Index(html, `id="rates"`)
		t.Logf("the rates as shown:\n%s", html[i:min(i+1200, len(html))])
	}
}
