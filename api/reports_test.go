package api_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"orderd/api"
	"orderd/provider"
	"orderd/provider/providertest"
	"orderd/reconcile"
	"orderd/store"
	"orderd/test/support/reportschema"
)

// reportClock is the clock the store, the fake provider, the reconciler,
// the reporter and the dashboard share.
type reportClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *reportClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *reportClock) set(s string) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// reportServer is an admin API with the reports handler, the scheduled
// report files and the dashboard over a real store on loopback.
type reportServer struct {
	st    *store.Store
	url   string
	token string
	clock *reportClock
	// reportsDir is reports.dir, where the scheduled job wrote the
	// reports of 2026-10-31 and 2026-11-01.
	reportsDir string
}

// reportOrder renders a one-transaction order as the provider writes it.
func reportOrder(id, mid, typ, status, created, amount, net, ccy, completed string) []byte {
	target, source, completedAt := "null", "null", "null"
	if completed != "" {
		completedAt = `"` + completed + `"`
	}
	if status == "completed" && typ == "payin" {
		target = fmt.Sprintf(`{"amount":%q,"currency":%q}`, net, ccy)
	}
	if status == "completed" && typ == "payout" {
		source = fmt.Sprintf(`{"amount":%q,"currency":%q}`, amount, ccy)
	}
	return fmt.Appendf(nil, `{"id":%q,"merchantOrderId":%q,"type":%q,"createdAt":%q,"status":%q,"rejectReason":null,`+
		`"merchantSourceWallet":%s,"merchantTargetWallet":%s,"transactions":[{"id":"tx-%s","type":%q,"status":%q,`+
		`"authorized":{"amount":%q,"currency":%q},"merchantWallet":{"amount":%q,"currency":%q},`+
		`"createdAt":%q,"completedAt":%s,"rejectReason":null}]}`,
		id, mid, typ, created, status, source, target, id, typ, status, amount, ccy, net, ccy, created, completedAt)
}

// newReportServer builds a day of data (2026-11-01) through the store's
// write path, the creation gateway and the real balances job against the
// fake provider, runs the scheduled report job, and serves the admin API
// with the gateway, reports, report files and dashboard. The clock ends
// at 2026-11-02T01:00:00Z.
func newReportServer(t testing.TB, token string) *reportServer {
	t.Helper()
	ck := &reportClock{}
	ck.set("2026-10-31T23:00:00Z")
	fake := providertest.NewServer(providertest.Options{KeyType: "ecdsa", Now: ck.Now})
	t.Cleanup(fake.Close)
	st := openStore(t, store.Options{Now: ck.Now})
	client, err := provider.NewClient(provider.Options{BaseURL: fake.URL(), APIKey: fake.APIKey(), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// No balance check polls: the fixture applies what orderd learns
	// itself, and the order created through the gateway keeps showing the
	// amount it asked for (a check that did not add up would ask the
	// provider about it and learn its authorized amount).
	rec := reconcile.New(reconcile.Config{Now: ck.Now, DriftGrace: 1, DriftPolls: -1}, st, client, nil)
	reporter := reconcile.NewReporter(st, reconcile.ReportConfig{Now: ck.Now})
	reportsDir := filepath.Join(t.TempDir(), "reports")
	files := api.NewReportFiles(api.ReportFilesConfig{Dir: reportsDir})
	dash, err := api.NewDashboard(api.DashboardConfig{Store: st, Now: ck.Now, Version: "test", ReportFiles: files})
	if err != nil {
		t.Fatal(err)
	}
	h := api.New(api.Config{Token: token, Now: ck.Now, Logger: slog.New(slog.DiscardHandler)}, api.Deps{
		Store:       st,
		Provider:    client,
		Reports:     api.NewReports(api.ReportsConfig{Writer: reporter}),
		ReportFiles: files,
		Dashboard:   dash,
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	s := &reportServer{st: st, url: srv.URL, token: token, clock: ck, reportsDir: reportsDir}
	apply := func(src store.Source, raw []byte) {
		t.Helper()
		o, err := provider.DecodeOrder(raw)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Apply(context.Background(), store.Observation{Source: src, Order: o, Raw: raw, ObservedAt: ck.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	balances := func() {
		t.Helper()
		if _, err := rec.RunBalances(context.Background()); err != nil {
			t.Fatal(err)
		}
	}

	if err := fake.AdjustBalance("brl", "500.00"); err != nil {
		t.Fatal(err)
	}
	balances()
	steps := []struct {
		at, mid, typ, status, created, amount, net, ccy, completed string
		src                                                        store.Source
		balance                                                    string
	}{
		{"2026-11-01T06:00:01Z", "shop-1001", "payin", "completed", "2026-11-01T05:58:00Z", "100.00", "97.00", "brl", "2026-11-01T06:00:00Z", store.SourceWebhook, "97.00"},
		{"2026-11-01T09:00:01Z", "shop-1002", "payin", "completed", "2026-11-01T08:58:00Z", "50.00", "48.50", "brl", "2026-11-01T09:00:00Z", store.SourcePoll, "48.50"},
		{"2026-11-01T12:00:01Z", "shop-1003", "payin", "rejected", "2026-11-01T11:59:00Z", "70.00", "67.90", "brl", "", store.SourceGateway, ""},
		{"2026-11-01T15:00:01Z", "shop-1004", "payout", "completed", "2026-11-01T14:50:00Z", "30.00", "30.00", "brl", "2026-11-01T15:00:00Z", store.SourceWebhook, "-30.00"},
		{"2026-11-01T17:00:01Z", "shop-1005", "payin", "completed", "2026-11-01T16:58:00Z", "25.00", "24.25", "usd", "2026-11-01T17:00:00Z", store.SourceWebhook, ""},
		{"2026-11-01T20:00:01Z", "shop-1006", "payin", "processing", "2026-11-01T20:00:00Z", "40.00", "38.80", "brl", "", store.SourceWebhook, ""},
	}
	for i, s := range steps {
		ck.set(s.at)
		apply(s.src, reportOrder(fmt.Sprintf("0b000000-0000-4000-8000-%012d", i+1), s.mid, s.typ, s.status, s.created,
			s.amount, s.net, s.ccy, s.completed))
		if s.balance != "" {
			if err := fake.AdjustBalance(s.ccy, s.balance); err != nil {
				t.Fatal(err)
			}
		}
		// A balances run every three hours, as a schedule would.
		ck.set(s.at[:11] + fmt.Sprintf("%02d", 7+3*i) + ":30:00Z")
		if i == 3 {
			// 12.34 leaves with no order behind it: unexplained drift.
			if err := fake.AdjustBalance("brl", "-12.34"); err != nil {
				t.Fatal(err)
			}
		}
		balances()
	}
	// An order created through the gateway: the provider's answer states
	// no amount, the request does (55.00 brl).
	ck.set("2026-11-01T20:30:00Z")
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+"/v1/payins",
		strings.NewReader(`{"merchantOrderId":"shop-1008","invoice":{"amount":"55.00","currency":"brl"},"returnUrl":"https://shop.example/back"}`))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create shop-1008 through the gateway: status %d", resp.StatusCode)
	}
	// A rejection the reconciler learns of late: rejected at 05:00, the
	// last order orderd hears of in the day.
	ck.set("2026-11-01T20:45:00Z")
	apply(store.SourcePoll, reportOrder("0b000000-0000-4000-8000-000000000000", "shop-1000", "payin", "rejected",
		"2026-11-01T04:59:00Z", "10.00", "9.70", "brl", "2026-11-01T05:00:00Z"))
	ck.set("2026-11-01T21:00:00Z")
	if err := st.Quarantine(context.Background(), store.QuarantinedWebhook{
		Raw: []byte(`{"merchantOrderId":"shop-1007","status":`), Reason: "unexpected end of JSON input", MerchantOrderID: "shop-1007",
	}); err != nil {
		t.Fatal(err)
	}
	// Today, within six minutes: usd gets its first snapshot (1000.00),
	// the provider credits 20.00 for a payin orderd has not heard of, so
	// the 00:23 check finds 20.00 of unexplained drift; a poll brings the
	// payin (completed 00:21:30) and the 00:26 check, still from 00:20,
	// explains it all.
	ck.set("2026-11-02T00:20:00Z")
	if err := fake.AdjustBalance("usd", "1000.00"); err != nil {
		t.Fatal(err)
	}
	balances()
	if err := fake.AdjustBalance("usd", "20.00"); err != nil {
		t.Fatal(err)
	}
	ck.set("2026-11-02T00:23:00Z")
	balances()
	ck.set("2026-11-02T00:24:00Z")
	apply(store.SourcePoll, reportOrder("0b000000-0000-4000-8000-000000000009", "shop-1009", "payin", "completed",
		"2026-11-02T00:19:00Z", "20.62", "20.00", "usd", "2026-11-02T00:21:30Z"))
	ck.set("2026-11-02T00:26:00Z")
	balances()

	// The scheduled job, as it runs at 01:00: yesterday's report in every
	// format. The day before was written by an earlier run.
	ck.set("2026-11-02T01:00:00Z")
	if _, err := reporter.WriteAll(context.Background(), reportsDir, reconcile.Day(ck.Now().Add(-48*time.Hour))); err != nil {
		t.Fatal(err)
	}
	if err := reporter.DailyJob(reportsDir)(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *reportServer) get(t testing.TB, method, path string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, s.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

func TestReports_formats(t *testing.T) {
	s := newReportServer(t, testToken)
	for _, tc := range []struct {
		name, query, contentType, disposition string
		check                                 func(t *testing.T, body []byte)
	}{
		{"csv is the default", "from=2026-11-01&to=2026-11-02", "text/csv; charset=utf-8",
			`attachment; filename="orderd-reconciliation-2026-11-01-2026-11-02.csv"`, checkCSV},
		{"csv", "from=2026-11-01&to=2026-11-02&format=csv", "text/csv; charset=utf-8",
			`attachment; filename="orderd-reconciliation-2026-11-01-2026-11-02.csv"`, checkCSV},
		{"json", "from=2026-11-01&to=2026-11-02&format=json", "application/json",
			`attachment; filename="orderd-reconciliation-2026-11-01-2026-11-02.json"`, checkJSON},
		{"html is shown inline", "from=2026-11-01&to=2026-11-02&format=html", "text/html; charset=utf-8",
			`inline; filename="orderd-reconciliation-2026-11-01-2026-11-02.html"`, checkHTML},
		{"RFC 3339 bounds name the file by time", "from=2026-11-01T06:00:00Z&to=2026-11-01T18:00:00%2B02:00&format=json",
			"application/json", `attachment; filename="orderd-reconciliation-20261101T060000Z-20261101T160000Z.json"`, checkReportSchema},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.get(t, "GET", "/v1/reports/reconciliation?"+tc.query)
			wantStatus(t, r, http.StatusOK)
			if got := r.header.Get("Content-Type"); got != tc.contentType {
				t.Errorf("Content-Type %q, want %q", got, tc.contentType)
			}
			if got := r.header.Get("Content-Disposition"); got != tc.disposition {
				t.Errorf("Content-Disposition %q, want %q", got, tc.disposition)
			}
			if tc.check != nil {
				tc.check(t, r.body)
			}
		})
	}
	t.Run("HEAD answers the headers only", func(t *testing.T) {
		r := s.get(t, "HEAD", "/v1/reports/reconciliation?from=2026-11-01&to=2026-11-02&format=json")
		wantStatus(t, r, http.StatusOK)
		if r.header.Get("Content-Type") != "application/json" || len(r.body) != 0 {
			t.Errorf("HEAD: %v %q", r.header, r.body)
		}
	})
}

func checkCSV(t *testing.T, body []byte) {
	t.Helper()
	rd := csv.NewReader(strings.NewReader(string(body)))
	rd.FieldsPerRecord = -1
	recs, err := rd.ReadAll()
	if err != nil {
		t.Fatalf("not CSV: %v", err)
	}
	// Lines: header + 8 orders final or open in the period; then the
	// summary: header + brl + usd; then the findings: header + 2.
	if len(recs) != 1+8+1+2+1+2 || recs[0][0] != "order_id" || recs[9][0] != "currency" || recs[12][0] != "finding_id" ||
		recs[13][1] != "balance_drift" || recs[14][1] != "quarantined_webhook" {
		t.Fatalf("records: %q", recs)
	}
	// The order created through the gateway shows what it asked for.
	if gw := recs[7]; gw[1] != "shop-1008" || gw[7] != "" || gw[17] != "55.00" || gw[18] != "brl" {
		t.Errorf("gateway order line %q: want no authorized amount, requested 55.00 brl", gw)
	}
	brl := recs[10]
	if brl[0] != "brl" || brl[1] != "7" || brl[6] != "150.00" || brl[7] != "145.50" || brl[9] != "30.00" || brl[19] != "-12.34" {
		t.Errorf("brl summary %q: want gross 150.00, net 145.50, payouts 30.00, drift -12.34", brl)
	}
	if !strings.Contains(string(body), "\r\n\r\ncurrency,") {
		t.Errorf("summary section does not follow an empty line")
	}
}

func checkJSON(t *testing.T, body []byte) {
	t.Helper()
	checkReportSchema(t, body)
	var rep struct {
		Period     map[string]any   `json:"period"`
		Currencies []map[string]any `json:"currencies"`
		Orders     []map[string]any `json:"orders"`
		Findings   []map[string]any `json:"findings"`
		Runs       []map[string]any `json:"runs"`
	}
	if err := json.Unmarshal(body, &rep); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if len(rep.Currencies) != 2 || len(rep.Orders) != 8 || len(rep.Findings) != 2 || len(rep.Runs) != 6 {
		t.Errorf("report has %d currencies, %d orders, %d findings, %d runs; want 2, 8, 2, 6",
			len(rep.Currencies), len(rep.Orders), len(rep.Findings), len(rep.Runs))
	}
}

func checkHTML(t *testing.T, body []byte) {
	t.Helper()
	for _, want := range []string{`class="chart" id="chart-brl"`, `<table id="findings">`, `<td>balance_drift<span class="note">brl</span></td>`,
		`href="?from=2026-11-01&amp;to=2026-11-02&amp;format=csv"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("HTML report lacks %q", want)
		}
	}
}

func TestReports_badParameters(t *testing.T) {
	s := newReportServer(t, testToken)
	for _, tc := range []struct {
		name, query, field, message string
	}{
		{"from missing", "to=2026-11-02", "from", "from is required"},
		{"to missing", "from=2026-11-01", "to", "to is required"},
		{"from not a date", "from=2026-02-30&to=2026-11-02", "from", `from "2026-02-30" is not a date`},
		{"to not a time", "from=2026-11-01&to=noon", "to", `to "noon" is not a date`},
		// The zero time as a date: refused as a time before 1970 is, not
		// a report whose period starts at null.
		{"from at the zero time", "from=0001-01-01&to=2026-11-02", "from", `from "0001-01-01" is not a date`},
		{"to at the zero time", "from=2026-11-01&to=0001-01-01", "to", `to "0001-01-01" is not a date`},
		{"from before 1970", "from=1969-12-31&to=2026-11-02", "from", "from 1970 on"},
		{"to not after from", "from=2026-11-02&to=2026-11-01", "to", `to "2026-11-01" is not after from "2026-11-02"`},
		{"format unknown", "from=2026-11-01&to=2026-11-02&format=pdf", "format", `format "pdf" is not one of csv, json, html`},
		{"parameter unknown", "from=2026-11-01&to=2026-11-02&currency=brl", "currency", `unknown parameter "currency"`},
		{"parameter twice", "from=2026-11-01&from=2026-11-02&to=2026-11-03", "from", "from is given more than once"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.get(t, "GET", "/v1/reports/reconciliation?"+tc.query)
			wantStatus(t, r, http.StatusBadRequest)
			body := r.json(t)
			if body["field"] != tc.field || !strings.Contains(fmt.Sprint(body["error"]), tc.message) {
				t.Errorf("answer %v, want field %q and an error containing %q", body, tc.field, tc.message)
			}
			if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}
	t.Run("without the token", func(t *testing.T) {
		anon := *s
		anon.token = ""
		r := anon.get(t, "GET", "/v1/reports/reconciliation?from=2026-11-01&to=2026-11-02")
		wantStatus(t, r, http.StatusUnauthorized)
	})
}

func TestReports_storeFailure(t *testing.T) {
	s := newReportServer(t, "")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := s.st.Close(ctx); err != nil {
		t.Fatal(err)
	}
	r := s.get(t, "GET", "/v1/reports/reconciliation?from=2026-11-01&to=2026-11-02&format=html")
	wantStatus(t, r, http.StatusInternalServerError)
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") || r.header.Get("Content-Disposition") != "" {
		t.Errorf("a failed report answered as a file: %v", r.header)
	}
}

// checkReportSchema fails the test when a JSON report does not follow the
// schema the API publishes (GET /v1/report.schema.json).
func checkReportSchema(t *testing.T, body []byte) {
	t.Helper()
	v, err := reportschema.New(api.ReportSchema())
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Validate(body); err != nil {
		t.Errorf("%v\n%s", err, body)
	}
}
