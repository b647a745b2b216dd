package api

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"orderd/provider"
	"orderd/store"
)

//go:embed dashboard.html.tmpl
var dashboardHTML string

//go:embed dashboard_findings.html.tmpl
var dashboardFindingsHTML string

// DashboardStore is what the dashboard reads; *store.Store has it.
type DashboardStore interface {
	Readiness
	OpenFindingCounts(ctx context.Context) (map[string]int, error)
	FindingsPage(ctx context.Context, q store.FindingQuery) ([]store.Finding, error)
	RecentlyResolvedFindings(ctx context.Context, limit int) ([]store.Finding, error)
	OutboxStats(ctx context.Context) (backlog int64, oldest time.Time, err error)
	RecentOrders(ctx context.Context, query string, limit int) ([]store.OrderSummary, error)
	Activity(ctx context.Context, since time.Time) (store.Activity, error)
	AttemptsByMerchantID(ctx context.Context, merchantOrderID string) ([]store.Attempt, error)
}

// ReportFileLister lists the scheduled report files; *ReportFiles has it.
type ReportFileLister interface {
	List() ([]ReportFile, error)
}

var _ DashboardStore = (*store.Store)(nil)

// DashboardConfig configures the dashboard.
type DashboardConfig struct {
	Store DashboardStore
	// Checks are the readiness checks beside the store's own, as /readyz
	// runs them.
	Checks []Check
	// ReportsPath is where the reports are served; empty means
	// /v1/reports/reconciliation.
	ReportsPath string
	// ReportFiles, when set, lists the scheduled report files, the latest
	// periods of which the page links.
	ReportFiles ReportFileLister
	// Version is shown in the header.
	Version string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Started is when orderd started; zero means long ago. A window
	// longer than the time since starts on the minute orderd started,
	// and its rate divides by the time from then: a window's minutes
	// before the start saw no traffic and would dilute the rate.
	Started time.Time
	// Logger receives the dashboard's log lines; nil discards them.
	Logger *slog.Logger
	// ReadyTimeout bounds each readiness check; zero means 2 s.
	ReadyTimeout time.Duration
}

// Dashboard sizes.
const (
	dashboardOrders   = 20
	dashboardFindings = 10
	// dashboardAllFindings is how many open findings the page lists when
	// asked for all of them (GET /?findings=all), the most a page of the
	// store gives; beyond it the page says how many it leaves out and
	// links the JSON listing.
	dashboardAllFindings = 1000
	// dashboardResolved is how many recently resolved findings the page
	// shows, with their trails.
	dashboardResolved = 10
	// dashboardPeriods is how many periods of scheduled report files the
	// page links (a week of daily reports).
	dashboardPeriods = 7
	maxQueryLen      = 200
)

// NewDashboard returns the handler of GET /: one server-rendered HTML
// page (html/template, no scripts) with readiness, webhook and event
// rates over the last 5 and 60 minutes, the outbox backlog, open
// findings, recent orders with a search by merchantOrderId (GET /?q=,
// a prefix; an exact provider order id matches too), and links to
// today's and yesterday's reports in every format. A part that cannot be
// read says so in its place; the rest of the page still renders. The
// page sits behind the admin token like every admin route.
func NewDashboard(cfg DashboardConfig) (http.Handler, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ReportsPath == "" {
		cfg.ReportsPath = "/v1/reports/reconciliation"
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = 2 * time.Second
	}
	t, err := template.New("dashboard").Funcs(template.FuncMap{
		"time": func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			return t.UTC().Format("2006-01-02 15:04:05")
		},
		// noun picks the singular or plural of a noun for a count.
		"noun": func(n int64, one, many string) string {
			if n == 1 {
				return one
			}
			return many
		},
	}).Parse(dashboardHTML)
	if err == nil {
		t, err = t.Parse(dashboardFindingsHTML)
	}
	if err != nil {
		return nil, fmt.Errorf("parse dashboard template: %w", err)
	}
	return &dashboard{cfg: cfg, tmpl: t}, nil
}

type dashboard struct {
	cfg  DashboardConfig
	tmpl *template.Template
}

// dashboardPage is what the template renders.
type dashboardPage struct {
	Now     string
	Version string
	Ready   bool
	Checks  []checkResult

	// Windows head the rates' columns: each window's start and length.
	Windows  []rateWindow
	Rates    []rateRow
	RatesErr string
	// Uptime, when set, is how long orderd has been up, shorter than a
	// window of the rates: those windows start on the minute it started.
	Uptime string

	Backlog    int64
	OldestAge  string
	BacklogErr string

	FindingKinds []kindCount
	OpenTotal    int
	Findings     []findingRow
	FindingsErr  string
	// Unlisted is how many open findings the table leaves out; AllHref
	// lists them all on the page, when a page can hold them.
	Unlisted int
	AllHref  string

	Resolved    []resolvedRow
	ResolvedErr string
	// MaxBy and MaxNote bound the form's fields as the API bounds them.
	MaxBy, MaxNote int

	Query     string
	Orders    []orderRow
	OrdersErr string

	Reports []reportLinks

	// Scheduled lists the latest periods of scheduled report files;
	// ShowScheduled is false when the daemon serves none.
	ShowScheduled bool
	Scheduled     []reportLinks
	ScheduledErr  string
	FilesPath     string
}

type checkResult struct {
	Name, Result string
	OK           bool
}

// rateWindow is a column of the rates: its name, the time of day (UTC)
// it starts, on a whole minute, and how long it is up to now.
type rateWindow struct {
	Label, From, Span string
}

// rateRow is one kind of traffic over each window.
type rateRow struct {
	Name  string
	Cells []rateCell
}

type rateCell struct {
	Count     int64
	PerMinute string
}

type kindCount struct {
	Kind  string
	Count int
}

type findingRow struct {
	ID      int64
	Kind    string
	Key     string
	FoundAt time.Time
	Summary string
	// Age is how long it has been open; Status and LastAction where a
	// person stands on it.
	Age        string
	Status     string
	LastAction string
}

// newFindingRow is an open finding as the dashboard lists it.
func newFindingRow(f store.Finding, now time.Time) findingRow {
	r := findingRow{ID: f.ID, Kind: f.Kind, Key: f.Key, FoundAt: f.FoundAt, Summary: findingSummary(f.Detail),
		Age: now.Sub(f.FoundAt).Truncate(time.Second).String(), Status: f.Status}
	if n := len(f.Trail); n > 0 {
		a := f.Trail[n-1]
		r.LastAction = a.Action + " by " + a.By
		if a.Note != "" {
			r.LastAction += ": " + a.Note
		}
	}
	return r
}

// resolvedRow is a resolved finding as the dashboard shows it: how it was
// resolved, by whom, and every action people took on it.
type resolvedRow struct {
	ID         int64
	Kind, Key  string
	Summary    string
	ResolvedAt time.Time
	// Resolution and By are empty when the reconciler resolved it (a
	// later check found the problem gone).
	Resolution, By string
	Trail          []store.FindingAction
}

func newResolvedRow(f store.Finding) resolvedRow {
	r := resolvedRow{ID: f.ID, Kind: f.Kind, Key: f.Key, Summary: findingSummary(f.Detail),
		Resolution: f.Resolution, By: f.ResolvedBy, Trail: f.Trail}
	if f.ResolvedAt != nil {
		r.ResolvedAt = *f.ResolvedAt
	}
	return r
}

type orderRow struct {
	MerchantOrderID string
	ID              string
	Type, Status    string
	Amount          string
	// Requested: Amount is what the gateway creation asked for, the
	// provider having stated none yet.
	Requested  bool
	LearnedVia string
	UpdatedAt  time.Time
	Href       string
}

type reportLinks struct {
	Label string
	Day   string
	Links []reportLink
}

type reportLink struct {
	Format, Href string
}

func (d *dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	now := d.cfg.Now().UTC()
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	if len(q) > maxQueryLen {
		q = q[:maxQueryLen]
	}
	p := dashboardPage{Now: now.Format("2006-01-02 15:04:05"), Version: d.cfg.Version, Query: q, Ready: true,
		MaxBy: maxActorLen, MaxNote: maxNoteLen}

	checks := append([]Check{{Name: storeCheck, Check: d.cfg.Store.Ready}}, d.cfg.Checks...)
	for _, c := range checks {
		cctx, cancel := context.WithTimeout(ctx, d.cfg.ReadyTimeout)
		err := c.Check(cctx)
		cancel()
		res := checkResult{Name: c.Name, Result: "ok", OK: err == nil}
		if err != nil {
			res.Result, p.Ready = err.Error(), false
		}
		p.Checks = append(p.Checks, res)
	}

	webhooks, events := rateRow{Name: "webhooks"}, rateRow{Name: "events"}
	for _, win := range []struct {
		label string
		d     time.Duration
	}{{"last 5 min", 5 * time.Minute}, {"last 60 min", time.Hour}} {
		// The counters count whole minutes: a window starts on the
		// minute its length ago falls in (so it holds a little more than
		// its length), or on orderd's start's minute when that is later,
		// and the rate divides by the time it holds.
		since := now.Add(-win.d)
		if up := now.Sub(d.cfg.Started); !d.cfg.Started.IsZero() && up < win.d {
			since = d.cfg.Started
			p.Uptime = up.Truncate(time.Second).String()
		}
		from := store.ActivityFrom(since)
		span := max(now.Sub(from), time.Second)
		p.Windows = append(p.Windows, rateWindow{Label: win.label, From: from.Format("15:04"),
			Span: span.Truncate(time.Second).String()})
		a, err := d.cfg.Store.Activity(ctx, since)
		if err != nil {
			p.RatesErr = err.Error()
			break
		}
		webhooks.Cells = append(webhooks.Cells, rateCell{Count: a.Webhooks, PerMinute: perMinute(a.Webhooks, span)})
		events.Cells = append(events.Cells, rateCell{Count: a.Events, PerMinute: perMinute(a.Events, span)})
	}
	p.Rates = []rateRow{webhooks, events}

	backlog, oldest, err := d.cfg.Store.OutboxStats(ctx)
	if err != nil {
		p.BacklogErr = err.Error()
	} else {
		p.Backlog = backlog
		if !oldest.IsZero() {
			p.OldestAge = now.Sub(oldest).Truncate(time.Second).String()
		}
	}

	if counts, err := d.cfg.Store.OpenFindingCounts(ctx); err != nil {
		p.FindingsErr = err.Error()
	} else {
		for _, k := range sortedKeys(counts) {
			p.FindingKinds = append(p.FindingKinds, kindCount{Kind: k, Count: counts[k]})
			p.OpenTotal += counts[k]
		}
		limit := dashboardFindings
		if r.URL.Query().Get("findings") == "all" {
			limit = dashboardAllFindings
		}
		fs, err := d.cfg.Store.FindingsPage(ctx, store.FindingQuery{State: "open", Limit: limit})
		if err != nil {
			p.FindingsErr = err.Error()
		}
		for _, f := range fs {
			p.Findings = append(p.Findings, newFindingRow(f, now))
		}
		// The counts and the page are two reads; a finding opened or
		// resolved between them must not make the count negative.
		if err == nil && p.OpenTotal > len(p.Findings) {
			p.Unlisted = p.OpenTotal - len(p.Findings)
			if limit < dashboardAllFindings && p.OpenTotal <= dashboardAllFindings {
				p.AllHref = "/?findings=all#work-findings"
			}
		}
	}
	if fs, err := d.cfg.Store.RecentlyResolvedFindings(ctx, dashboardResolved); err != nil {
		p.ResolvedErr = err.Error()
	} else {
		for _, f := range fs {
			p.Resolved = append(p.Resolved, newResolvedRow(f))
		}
	}

	orders, err := d.cfg.Store.RecentOrders(ctx, q, dashboardOrders)
	if err != nil {
		p.OrdersErr = err.Error()
	}
	for _, o := range orders {
		row := orderRow{MerchantOrderID: o.MerchantOrderID, ID: o.ProviderID, Type: o.Type,
			Status: o.Status, Amount: orderAmount(o.Order), LearnedVia: string(o.LearnedVia), UpdatedAt: o.UpdatedAt,
			Href: "/v1/orders/" + url.PathEscape(o.MerchantOrderID)}
		if row.Amount == "" && o.LearnedVia == store.SourceGateway {
			row.Amount, row.Requested = d.requestedAmount(ctx, o.MerchantOrderID)
		}
		p.Orders = append(p.Orders, row)
	}

	today := now.Truncate(24 * time.Hour)
	for _, day := range []struct {
		label string
		from  time.Time
	}{{"Today (so far)", today}, {"Yesterday", today.Add(-24 * time.Hour)}} {
		rl := reportLinks{Label: day.label, Day: day.from.Format(time.DateOnly)}
		for _, f := range []string{"html", "csv", "json"} {
			v := url.Values{"from": {day.from.Format(time.DateOnly)}, "to": {day.from.Add(24 * time.Hour).Format(time.DateOnly)}, "format": {f}}
			rl.Links = append(rl.Links, reportLink{Format: strings.ToUpper(f), Href: d.cfg.ReportsPath + "?" + v.Encode()})
		}
		p.Reports = append(p.Reports, rl)
	}

	if d.cfg.ReportFiles != nil {
		p.ShowScheduled, p.FilesPath = true, ReportFilesPath
		files, err := d.cfg.ReportFiles.List()
		if err != nil {
			p.ScheduledErr = err.Error()
		}
		p.Scheduled = scheduledLinks(files, dashboardPeriods)
	}

	var buf bytes.Buffer
	if err := d.tmpl.Execute(&buf, p); err != nil {
		d.cfg.Logger.Error("render dashboard", "err", err)
		writeJSON(w, http.StatusInternalServerError, errorBody{Error: "render dashboard: " + err.Error()})
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
}

// requestedAmount is the amount the gateway creation of an order asked
// for, for an order orderd knows only from the provider's creation answer,
// which states none. ok is false when no created attempt states one.
func (d *dashboard) requestedAmount(ctx context.Context, merchantOrderID string) (amount string, ok bool) {
	as, err := d.cfg.Store.AttemptsByMerchantID(ctx, merchantOrderID)
	if err != nil {
		d.cfg.Logger.Warn("dashboard: read attempts", "merchantOrderId", merchantOrderID, "err", err)
		return "", false
	}
	for _, a := range slices.Backward(as) {
		if a.State != store.AttemptCreated || (a.Kind != store.AttemptPayin && a.Kind != store.AttemptPayout) {
			continue
		}
		if m, ok := provider.RequestedAmount(a.Request); ok {
			return m.String(), true
		}
	}
	return "", false
}

// scheduledLinks groups report files by period, the latest first, and
// keeps the first n periods.
func scheduledLinks(files []ReportFile, n int) []reportLinks {
	var out []reportLinks
	for i, f := range files {
		if i == 0 || !f.From.Equal(files[i-1].From) || !f.To.Equal(files[i-1].To) {
			if len(out) == n {
				break
			}
			out = append(out, reportLinks{Label: periodLabel(f.From, f.To)})
		}
		label := strings.ToUpper(f.Format)
		switch {
		case f.Summary:
			label = "CSV summary"
		case f.Findings:
			label = "CSV findings"
		}
		last := &out[len(out)-1]
		last.Links = append(last.Links, reportLink{Format: label, Href: f.Href})
	}
	return out
}

// periodLabel names a report period: its date for a UTC day, else its
// bounds.
func periodLabel(from, to time.Time) string {
	if from.Equal(from.Truncate(24*time.Hour)) && to.Sub(from) == 24*time.Hour {
		return from.Format(time.DateOnly)
	}
	return from.Format("2006-01-02 15:04:05") + " – " + to.Format("2006-01-02 15:04:05") + " UTC"
}

// perMinute writes n per minute over span (whole seconds, at least one)
// with two decimals (rounded down), in integers.
func perMinute(n int64, span time.Duration) string {
	secs := max(int64(span/time.Second), 1)
	hundredths := n * 100 * 60 / secs
	return fmt.Sprintf("%d.%02d", hundredths/100, hundredths%100)
}

// orderAmount is the authorized amount of an order's own transaction, as
// the provider wrote it, for the orders table.
func orderAmount(raw json.RawMessage) string {
	var o struct {
		Type         string `json:"type"`
		Transactions []struct {
			Type       string          `json:"type"`
			Authorized *provider.Money `json:"authorized"`
		} `json:"transactions"`
	}
	if json.Unmarshal(raw, &o) != nil {
		return ""
	}
	for _, t := range o.Transactions {
		if t.Type == o.Type && t.Authorized != nil {
			return t.Authorized.String()
		}
	}
	for _, t := range o.Transactions {
		if t.Type != "refund" && t.Authorized != nil {
			return t.Authorized.String()
		}
	}
	return ""
}

// findingSummary is a short reading of a finding's detail.
func findingSummary(detail json.RawMessage) string {
	var d struct {
		Reason          string `json:"reason"`
		Currency        string `json:"currency"`
		Unexplained     string `json:"unexplained"`
		MerchantOrderID string `json:"merchantOrderId"`
	}
	_ = json.Unmarshal(detail, &d)
	switch {
	case d.Unexplained != "":
		return d.Unexplained + " " + d.Currency + " unexplained"
	case d.Reason != "" && d.MerchantOrderID != "":
		return d.Reason + " (" + d.MerchantOrderID + ")"
	case d.Reason != "":
		return d.Reason
	}
	return d.MerchantOrderID
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
