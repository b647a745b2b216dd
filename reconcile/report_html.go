package reconcile

import (
	"bufio"
	"cmp"
	"container/heap"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"orderd/provider"
	"orderd/store"
)

//go:embed report.html.tmpl
var reportHTML string

//go:embed report_verdict.html.tmpl
var reportVerdictHTML string

func parseReportTemplates() (*template.Template, error) {
	t, err := template.New("report").Funcs(template.FuncMap{
		"time": func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			return t.UTC().Format("2006-01-02 15:04:05")
		},
		// date and clock write a time's two halves, for cells that show
		// the date above the time.
		"date": func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			return t.UTC().Format(time.DateOnly)
		},
		"clock": func(t time.Time) string { return t.UTC().Format(time.TimeOnly) },
		"money": func(m *provider.Money) string {
			if m == nil {
				return ""
			}
			return provider.FormatAmount(m.Amount) + " " + m.Currency
		},
		"refunded": func(rs []Refunded) string {
			parts := make([]string, 0, len(rs))
			for _, r := range rs {
				parts = append(parts, provider.FormatAmount(r.Money.Amount)+" "+r.Money.Currency)
			}
			return strings.Join(parts, "; ")
		},
		"join":    strings.Join,
		"summary": FindingSummary,
		// lastNote is the note of the latest action in a finding's trail
		// that has one: why it stands as it does.
		"lastNote": func(f store.Finding) string {
			for i := len(f.Trail) - 1; i >= 0; i-- {
				if f.Trail[i].Note != "" {
					return f.Trail[i].Note
				}
			}
			return ""
		},
		"count":  func(n int) string { return groupThousands(strconv.Itoa(n)) },
		"plural": plural,
		"counts": func(m map[string]int) string {
			parts := make([]string, 0, len(m))
			for _, k := range sortedKeys(m) {
				parts = append(parts, k+" "+strconv.Itoa(m[k]))
			}
			return strings.Join(parts, ", ")
		},
	}).Parse(reportHTML)
	if err != nil {
		return nil, fmt.Errorf("parse report template: %w", err)
	}
	if t, err = t.Parse(reportVerdictHTML); err != nil {
		return nil, fmt.Errorf("parse report template: %w", err)
	}
	return t, nil
}

// plural writes a count with its noun: "1 finding", "2 findings",
// "10,000 order lines".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return groupThousands(strconv.Itoa(n)) + " " + many
}

// groupThousands writes 1000000 as 1,000,000.
func groupThousands(s string) string {
	if len(s) <= 3 {
		return s
	}
	var b strings.Builder
	pre := len(s) % 3
	if pre > 0 {
		b.WriteString(s[:pre])
	}
	for i := pre; i < len(s); i += 3 {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s[i : i+3])
	}
	return b.String()
}

// htmlHead is what the top of an HTML report shows.
type htmlHead struct {
	From, To, Generated string
	FileName            string
	Currencies          []htmlCurrency
	Lines               int
	Findings            int
	Max                 int
	CSVHref             string
	JSONHref            string
	// Verdicts are the per-currency verdicts shown first (verdict.go).
	Verdicts []htmlVerdict
	// Digest is the report's digest, as in its CSV and JSON (digester).
	Digest string
	// DigestCovers is DigestCovers, for the page to say.
	DigestCovers string
	// FirstIssue is the first digest issued for the period, when it has
	// ended (report_issued.go); nil otherwise.
	FirstIssue *FirstIssue
	// FirstIssued is FirstIssue's time as the page writes times.
	FirstIssued string
}

// htmlGroup heads the order lines of one membership in the orders table.
type htmlGroup struct {
	Membership string
	Title      string
	// Lines is how many lines of this membership the period has; Shown
	// how many of them the table holds (fewer past the cap).
	Lines, Shown int
}

// groupTitles names the memberships in the orders table, in the order
// the table lists them.
var groupTitles = []struct{ membership, title string }{
	{store.ReportFinal, "Final in the period, by completion time"},
	{store.ReportRefund, "Final earlier, with a refund completed in the period, by the order's completion time"},
	{store.ReportOpen, "Open at the end of the period, by creation time"},
}

// membershipRank is a membership's place in the orders table.
func membershipRank(m string) int {
	for i, g := range groupTitles {
		if g.membership == m {
			return i
		}
	}
	return len(groupTitles)
}

// compareLines orders the HTML report's lines: by membership (final,
// refund, open), then by the time that placed the line there — the
// completion for final and refund lines, the creation for open ones —
// then by merchantOrderId and order id, so the order is total and the
// same on every run.
func compareLines(a, b *Line) int {
	if c := membershipRank(a.Membership) - membershipRank(b.Membership); c != 0 {
		return c
	}
	at, bt := a.CompletedAt, b.CompletedAt
	if a.Membership == store.ReportOpen {
		at, bt = a.CreatedAt, b.CreatedAt
	}
	if c := at.Compare(bt); c != 0 {
		return c
	}
	if c := strings.Compare(a.MerchantOrderID, b.MerchantOrderID); c != 0 {
		return c
	}
	return strings.Compare(a.OrderID, b.OrderID)
}

// exceptionRank is how much a line needs a person's eyes: an order with an
// open finding first, then one still open at the end of the period, then
// the rest.
func exceptionRank(l *Line) int {
	switch {
	case len(l.OpenFindings) > 0:
		return 0
	case l.Membership == store.ReportOpen:
		return 1
	}
	return 2
}

// keepFirst orders lines for the choice of which the HTML report shows
// when there are more than it holds: exceptions first, then as the table
// lists them (compareLines).
func keepFirst(a, b *Line) int {
	if c := exceptionRank(a) - exceptionRank(b); c != 0 {
		return c
	}
	return compareLines(a, b)
}

// firstLines keeps the first max lines by keepFirst out of a stream
// of any length, in a heap whose root is the last line kept, so the
// memory it takes is bounded by max whatever the size of the period.
type firstLines struct {
	max   int
	lines []*Line
}

func (f *firstLines) Len() int           { return len(f.lines) }
func (f *firstLines) Less(i, j int) bool { return keepFirst(f.lines[i], f.lines[j]) > 0 }
func (f *firstLines) Swap(i, j int)      { f.lines[i], f.lines[j] = f.lines[j], f.lines[i] }
func (f *firstLines) Push(x any)         { f.lines = append(f.lines, x.(*Line)) }
func (f *firstLines) Pop() any {
	l := f.lines[len(f.lines)-1]
	f.lines = f.lines[:len(f.lines)-1]
	return l
}

// add offers l, which the caller reuses afterwards: a kept line is copied.
func (f *firstLines) add(l *Line) {
	switch {
	case len(f.lines) < f.max:
		heap.Push(f, l.clone())
	case keepFirst(l, f.lines[0]) < 0:
		f.lines[0] = l.clone()
		heap.Fix(f, 0)
	}
}

// sorted returns the lines kept, first first.
func (f *firstLines) sorted() []*Line {
	slices.SortFunc(f.lines, compareLines)
	return f.lines
}

// clone copies l deeply enough to outlive the iteration that reuses it.
func (l *Line) clone() *Line {
	c := *l
	money := func(m *provider.Money) *provider.Money {
		if m == nil {
			return nil
		}
		v := *m
		return &v
	}
	c.Authorized, c.Requested, c.Merchant, c.Fee = money(l.Authorized), money(l.Requested), money(l.Merchant), money(l.Fee)
	c.Refunded = slices.Clone(l.Refunded)
	c.OpenFindings = slices.Clone(l.OpenFindings)
	return &c
}

// breakdown counts the period's order lines by day (by month for a period
// longer than two months), currency, membership and status, with their
// authorized amounts: what the HTML report shows of the lines it does not
// list. Its size grows with the days of the period, never with its orders.
type breakdown struct {
	layout string // time layout of the first column
	rows   map[breakdownKey]*breakdownRow
}

type breakdownKey struct {
	When, Currency, Membership, Status string
}

// breakdownRow is one row of the breakdown table.
type breakdownRow struct {
	breakdownKey
	Lines      int
	authorized decimal.Decimal
	exp        int32 // the most decimal places an amount of the row had
	Authorized string
}

func newBreakdown(p Period) *breakdown {
	b := &breakdown{layout: time.DateOnly, rows: map[breakdownKey]*breakdownRow{}}
	if p.To.Sub(p.From) > 62*24*time.Hour {
		b.layout = "2006-01"
	}
	return b
}

// add counts l under the day that placed it in the period: its
// completion for final and refund lines, its creation for open ones.
func (b *breakdown) add(l *Line) {
	at := l.CompletedAt
	if l.Membership == store.ReportOpen || at.IsZero() {
		at = l.CreatedAt
	}
	k := breakdownKey{Currency: l.currency(), Membership: l.Membership, Status: l.Status}
	if !at.IsZero() {
		k.When = at.UTC().Format(b.layout)
	}
	row := b.rows[k]
	if row == nil {
		row = &breakdownRow{breakdownKey: k}
		b.rows[k] = row
	}
	row.Lines++
	if l.Authorized != nil && l.Authorized.Currency == k.Currency {
		row.authorized = row.authorized.Add(l.Authorized.Amount)
		row.exp = min(row.exp, l.Authorized.Amount.Exponent())
	}
}

// sorted returns the rows by time, currency, membership (as the orders
// table lists them) and status.
func (b *breakdown) sorted() []*breakdownRow {
	out := make([]*breakdownRow, 0, len(b.rows))
	for _, r := range b.rows {
		r.Authorized = r.authorized.StringFixed(-r.exp)
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *breakdownRow) int {
		return cmp.Or(strings.Compare(a.When, b.When), strings.Compare(a.Currency, b.Currency),
			membershipRank(a.Membership)-membershipRank(b.Membership), strings.Compare(a.Status, b.Status))
	})
	return out
}

type htmlCurrency struct {
	Currency                                        string
	Orders, Completed, Rejected, Open               int
	Payins, Payouts, Refunds                        int
	Gross, Net, Fees, PayoutAmount, RefundAmount    string
	HasBalance                                      bool
	Start, StartAt, End, EndAt                      string
	Actual, Expected, Drift, Explained, Unexplained string
	Comparisons, OutOfTolerance                     int
	Chart                                           *chart
	ByStatus                                        map[string]int
	// UnexplainedBad: the bridge's residual is beyond tolerance. What
	// people resolved is shown as resolved, never as alarming.
	UnexplainedBad bool
}

// WriteHTML writes the report of p as one self-contained HTML page: no
// scripts, no external requests (a Content-Security-Policy forbids them),
// inline styles and an inline SVG chart of balance and drift per
// currency. The order lines are grouped by membership and sorted (see
// compareLines); they and the findings are cut at the configured maximum
// (DefaultHTMLMaxLines) with a note pointing to the CSV and JSON reports,
// which hold all of them. One pass over the orders computes the totals
// and keeps the first lines in order, so memory stays bounded by the cap.
func (r *Reporter) WriteHTML(ctx context.Context, w io.Writer, p Period, opts WriteOptions) error {
	if r.tmplErr != nil {
		return r.tmplErr
	}
	rp, err := r.open(ctx, p)
	if err != nil {
		return err
	}
	defer rp.close()
	t := newTotals()
	fl := flagged{}
	first := &firstLines{max: r.htmlMax}
	byMembership := map[string]int{}
	bd := newBreakdown(rp.p)
	dg, le := rp.newDigester(), newLineEncoder()
	err = rp.lines(ctx, func(l *Line) error {
		dg.line(l, le.line(l))
		t.add(l)
		fl.add(l)
		byMembership[l.Membership]++
		first.add(l)
		bd.add(l)
		return nil
	})
	if err != nil {
		return fmt.Errorf("write html: %w", err)
	}
	cur, err := rp.finish(ctx, t)
	if err != nil {
		return fmt.Errorf("write html: %w", err)
	}
	vs, err := rp.verdicts(ctx, cur, fl)
	if err != nil {
		return fmt.Errorf("write html: %w", err)
	}
	findings := 0
	if err := rp.tx.Findings(ctx, rp.p.From, rp.p.To, func(store.Finding) error { findings++; return nil }); err != nil {
		return fmt.Errorf("write html: %w", err)
	}
	digest, err := rp.digest(ctx, dg, cur, vs)
	if err != nil {
		return fmt.Errorf("write html: %w", err)
	}
	fi, err := rp.firstIssue(ctx, &dg.fp, digest)
	if err != nil {
		return fmt.Errorf("write html: %w", err)
	}
	head := htmlHead{FirstIssue: fi,
		From: rp.p.From.Format("2006-01-02 15:04:05"), To: rp.p.To.Format("2006-01-02 15:04:05"),
		Generated: rp.gen.Format("2006-01-02 15:04:05"), FileName: rp.p.FileName(FormatHTML),
		Lines: t.lines, Findings: findings, Max: r.htmlMax, Digest: digest, DigestCovers: DigestCovers,
		CSVHref: opts.CSVHref, JSONHref: strings.TrimSuffix(opts.CSVHref, FormatCSV) + FormatJSON,
	}
	if head.CSVHref == "" {
		head.CSVHref, head.JSONHref = rp.p.FileName(FormatCSV), rp.p.FileName(FormatJSON)
	}
	if fi != nil {
		head.FirstIssued = fi.IssuedAt.Format("2006-01-02 15:04:05")
	}
	for _, c := range cur {
		head.Currencies = append(head.Currencies, newHTMLCurrency(c, rp.p))
		head.Verdicts = append(head.Verdicts, newHTMLVerdict(c, vs[c.Currency], r.htmlMax))
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	exec := func(name string, data any) error { return r.tmpl.ExecuteTemplate(bw, name, data) }
	if err := exec("head", head); err != nil {
		return fmt.Errorf("write html: %w", err)
	}
	n := 0
	err = rp.tx.Findings(ctx, rp.p.From, rp.p.To, func(f store.Finding) error {
		if n == r.htmlMax {
			return errStop
		}
		n++
		return exec("finding", f)
	})
	if err != nil && !errors.Is(err, errStop) {
		return fmt.Errorf("write html: %w", err)
	}
	if err := exec("findings-end", head); err != nil {
		return fmt.Errorf("write html: %w", err)
	}
	if err := exec("breakdown", htmlBreakdown{Head: head, Rows: bd.sorted(), Monthly: bd.layout != time.DateOnly}); err != nil {
		return fmt.Errorf("write html: %w", err)
	}
	if err := exec("lines-head", head); err != nil {
		return fmt.Errorf("write html: %w", err)
	}
	lines := first.sorted()
	for i, l := range lines {
		if i == 0 || l.Membership != lines[i-1].Membership {
			if i > 0 {
				if err := exec("group-end", nil); err != nil {
					return fmt.Errorf("write html: %w", err)
				}
			}
			g := htmlGroup{Membership: l.Membership, Title: l.Membership, Lines: byMembership[l.Membership]}
			if rank := membershipRank(l.Membership); rank < len(groupTitles) {
				g.Title = groupTitles[rank].title
			}
			for _, m := range lines[i:] {
				if m.Membership != l.Membership {
					break
				}
				g.Shown++
			}
			if err := exec("group", g); err != nil {
				return fmt.Errorf("write html: %w", err)
			}
		}
		if err := exec("line", l); err != nil {
			return fmt.Errorf("write html: %w", err)
		}
	}
	if len(lines) > 0 {
		if err := exec("group-end", nil); err != nil {
			return fmt.Errorf("write html: %w", err)
		}
	}
	if err := exec("lines-end", head); err != nil {
		return fmt.Errorf("write html: %w", err)
	}
	// Scheduled jobs run every minute or so: thousands of runs a day. Past
	// the cap only the failed runs are listed, and the note counts them
	// all per job.
	runs := htmlRuns{Max: r.htmlMax}
	byJob := map[string]*jobRuns{}
	err = rp.tx.Runs(ctx, rp.p.From, rp.p.To, func(run store.ReconcileRun) error {
		runs.Runs++
		j := byJob[run.Job]
		if j == nil {
			j = &jobRuns{Job: run.Job}
			byJob[run.Job] = j
		}
		j.Runs++
		if run.Error != "" {
			runs.Failed++
			j.Failed++
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("write html: %w", err)
	}
	for _, k := range sortedKeys(byJob) {
		runs.Jobs = append(runs.Jobs, *byJob[k])
	}
	n = 0
	err = rp.tx.Runs(ctx, rp.p.From, rp.p.To, func(run store.ReconcileRun) error {
		if runs.Runs > r.htmlMax && run.Error == "" {
			return nil
		}
		if n == r.htmlMax {
			return errStop
		}
		n++
		return exec("run", run)
	})
	if err != nil && !errors.Is(err, errStop) {
		return fmt.Errorf("write html: %w", err)
	}
	if err := exec("runs-end", runs); err != nil {
		return fmt.Errorf("write html: %w", err)
	}
	if err := exec("tail", head); err != nil {
		return fmt.Errorf("write html: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write html: %w", err)
	}
	return nil
}

// htmlRuns counts the reconcile runs of the period, for the note under
// their table.
type htmlRuns struct {
	Runs, Failed, Max int
	Jobs              []jobRuns
}

type jobRuns struct {
	Job          string
	Runs, Failed int
}

// htmlBreakdown is what the breakdown table shows.
type htmlBreakdown struct {
	Head    htmlHead
	Rows    []*breakdownRow
	Monthly bool
}

// errStop ends an iteration early without being an error.
var errStop = errors.New("stop")

func newHTMLCurrency(c *CurrencyTotals, p Period) htmlCurrency {
	h := htmlCurrency{
		Actual: "—", Expected: "—", Drift: "—", Explained: "—", Unexplained: "—",
		Currency: c.Currency, Orders: c.Orders, Completed: c.ByStatus[string(provider.StatusCompleted)],
		Rejected: c.ByStatus[string(provider.StatusRejected)], Open: c.Open, ByStatus: c.ByStatus,
		Payins: c.Payins, Payouts: c.Payouts, Refunds: c.Refunds,
		Gross: c.Format(c.GrossAuthorized), Net: c.Format(c.MerchantNet), Fees: c.Format(c.Fees()),
		PayoutAmount: c.Format(c.PayoutAmount), RefundAmount: c.Format(c.RefundAmount),
	}
	b := c.Balance
	if b == nil {
		return h
	}
	opt := func(d *decimal.Decimal) string {
		if d == nil {
			return "—"
		}
		return c.Format(*d)
	}
	h.HasBalance = true
	h.Start, h.StartAt = c.Format(b.Start.Amount), b.Start.TakenAt.Format("2006-01-02 15:04:05")
	h.End, h.EndAt = c.Format(b.End.Amount), b.End.TakenAt.Format("2006-01-02 15:04:05")
	h.Actual, h.Expected, h.Drift = c.Format(b.Actual), opt(b.Expected), opt(b.Drift)
	h.Explained, h.Unexplained = opt(b.Explained), opt(b.Unexplained)
	h.Comparisons, h.OutOfTolerance = b.Comparisons, b.OutOfTolerance
	h.UnexplainedBad = b.UnexplainedBeyondTolerance
	h.Chart = newChart(c, b, p)
	return h
}

// Chart geometry, in SVG user units.
const (
	chartW      = 760
	chartH      = 336
	plotLeft    = 90
	plotRight   = 740
	balTop      = 40
	balBottom   = 165
	driftTop    = 205
	driftBottom = 290
	// tickTimeY and tickDateY are the baselines of the time axis's two
	// label lines: the time of each tick, and the date where it changes.
	tickTimeY = driftBottom + 18
	tickDateY = driftBottom + 33
)

// chart is one currency's SVG chart: the balance over the period (top)
// and each comparison's drift and unexplained part (bottom), over a time
// axis fitted to the points.
type chart struct {
	Currency              string
	W, H                  int
	Left, Right           int
	BalTop, BalBottom     int
	DriftTop, DriftBottom int
	TimeY, DateY          int
	Balance               string // polyline points
	BalanceDots           []dot
	// Opening, when the opening snapshot was taken before the period, is
	// when it was taken; the chart draws it at the axis's start, hollow,
	// joined to the next point by a dashed segment (OpeningLine), since
	// the balance between the two is not known.
	Opening            string
	OpeningLine        string
	BalMax, BalMin     string
	Drift, Unexplained string
	DriftDots          []dot
	// DriftValueDots mark each check's whole drift where it differs from
	// its unexplained part, so a drift the checks explained still shows
	// as what it was (a one-point line draws nothing).
	DriftValueDots []dot
	// Labels write the value of the last balance snapshot and of the last
	// check beside their points: a single check is a point with its value.
	Labels             []valueLabel
	DriftMax, DriftMin string
	ZeroY              string
	Ticks              []xTick
	// From and To are the ends of the time axis, for the chart's
	// description.
	From, To string
	NoDrift  bool
}

type dot struct {
	X, Y  string
	Title string
	Bad   bool
	// Before: a snapshot from before the period, drawn at its start.
	Before bool
}

// valueLabel is a value written beside its point, inside the plot.
type valueLabel struct {
	X, Y, DY string
	Text     string
	Anchor   string
}

// newValueLabel places text beside the point (x, y): to its left when the
// point is in the right half of the plot, so the label is never cut off,
// and above it unless that leaves the plot.
func newValueLabel(x, y, text string, top int) valueLabel {
	l := valueLabel{X: x, Y: y, DY: "-8", Text: text, Anchor: "start"}
	if xf, err := strconv.ParseFloat(x, 64); err == nil && xf > (plotLeft+plotRight)/2 {
		l.Anchor = "end"
	}
	if yf, err := strconv.ParseFloat(y, 64); err == nil && yf-14 < float64(top) {
		l.DY = "16"
	}
	return l
}

// xTick is one labelled tick of the time axis: its time, and the date
// under it where the date differs from the tick before.
type xTick struct {
	X      string
	Time   string
	Date   string
	Anchor string // text-anchor: "end" near the right edge, else "middle"
}

func newChart(c *CurrencyTotals, b *BalanceSummary, p Period) *chart {
	ch := &chart{Currency: c.Currency, W: chartW, H: chartH, Left: plotLeft, Right: plotRight,
		BalTop: balTop, BalBottom: balBottom, DriftTop: driftTop, DriftBottom: driftBottom,
		TimeY: tickTimeY, DateY: tickDateY}
	times := make([]time.Time, 0, len(b.Series)+len(b.Drifts))
	for _, s := range b.Series {
		times = append(times, s.At)
	}
	for _, d := range b.Drifts {
		times = append(times, d.At)
	}
	ax := newTimeAxis(p, times)
	x := ax.x
	ch.Ticks = ax.ticks()
	ch.From, ch.To = ax.from.Format("2006-01-02 15:04:05"), ax.to.Format("2006-01-02 15:04:05")

	balMin, balMax := b.Series[0].Amount, b.Series[0].Amount
	for _, s := range b.Series {
		balMin, balMax = decimal.Min(balMin, s.Amount), decimal.Max(balMax, s.Amount)
	}
	ch.BalMin, ch.BalMax = c.Format(balMin), c.Format(balMax)
	pts := make([]string, 0, len(b.Series))
	for i, s := range b.Series {
		xs, ys := x(s.At), scaleY(s.Amount, balMin, balMax, balTop, balBottom)
		d := dot{X: xs, Y: ys, Before: s.At.Before(p.From),
			Title: c.Format(s.Amount) + " " + c.Currency + " at " + s.At.Format("2006-01-02 15:04:05") + " UTC"}
		if d.Before {
			d.Title += ", before the period"
		}
		ch.BalanceDots = append(ch.BalanceDots, d)
		if i == 0 && d.Before && len(b.Series) > 1 {
			ch.Opening = s.At.Format("2006-01-02 15:04")
			ch.OpeningLine = xs + "," + ys
			continue
		}
		if i == 1 && ch.Opening != "" {
			ch.OpeningLine += " " + xs + "," + ys
		}
		pts = append(pts, xs+","+ys)
	}
	ch.Balance = strings.Join(pts, " ")
	if n := len(ch.BalanceDots); n > 0 {
		last := b.Series[len(b.Series)-1]
		ch.Labels = append(ch.Labels, newValueLabel(ch.BalanceDots[n-1].X, ch.BalanceDots[n-1].Y,
			c.Format(last.Amount)+" "+c.Currency, balTop))
	}

	dMin, dMax := decimal.Zero, decimal.Zero
	for _, d := range b.Drifts {
		dMin = decimal.Min(dMin, d.Drift, d.Unexplained)
		dMax = decimal.Max(dMax, d.Drift, d.Unexplained)
	}
	// The zero line is labelled; the ends only when they are not zero.
	if !dMin.IsZero() {
		ch.DriftMin = c.Format(dMin)
	}
	if !dMax.IsZero() {
		ch.DriftMax = c.Format(dMax)
	}
	ch.ZeroY = scaleY(decimal.Zero, dMin, dMax, driftTop, driftBottom)
	ch.NoDrift = len(b.Drifts) == 0
	var dp, up []string
	for _, d := range b.Drifts {
		xs := x(d.At)
		dy, uy := scaleY(d.Drift, dMin, dMax, driftTop, driftBottom), scaleY(d.Unexplained, dMin, dMax, driftTop, driftBottom)
		dp, up = append(dp, xs+","+dy), append(up, xs+","+uy)
		title := fmt.Sprintf("at %s UTC: drift %s, explained %s, unexplained %s %s", d.At.Format("2006-01-02 15:04:05"),
			c.Format(d.Drift), c.Format(d.Explained), c.Format(d.Unexplained), c.Currency)
		ch.DriftDots = append(ch.DriftDots, dot{X: xs, Y: uy, Bad: !d.WithinTolerance, Title: title})
		if dy != uy {
			ch.DriftValueDots = append(ch.DriftValueDots, dot{X: xs, Y: dy, Title: title})
		}
	}
	if n := len(b.Drifts); n > 0 {
		last := b.Drifts[n-1]
		text := "drift " + c.Format(last.Drift)
		if !last.Unexplained.Equal(last.Drift) {
			text += ", unexplained " + c.Format(last.Unexplained)
		}
		y := scaleY(last.Drift, dMin, dMax, driftTop, driftBottom)
		ch.Labels = append(ch.Labels, newValueLabel(x(last.At), y, text+" "+c.Currency, driftTop))
	}
	ch.Drift, ch.Unexplained = strings.Join(dp, " "), strings.Join(up, " ")
	return ch
}

// Time axis fitting.
const (
	// minAxisSpan is the narrowest time axis: a single point gets a few
	// minutes around it rather than an axis with no width.
	minAxisSpan = 2 * time.Minute
	// axisPadDiv pads the axis by 1/axisPadDiv of the points' span on each
	// side, so the first and last points do not sit on the frame.
	axisPadDiv = 20
	// maxTickGaps bounds the gaps between ticks: at most maxTickGaps+1
	// labels fit under the 650-unit plot without touching.
	maxTickGaps = 6
	// tickEdge is how near the plot's right end (in plot units) a tick's
	// label is right-aligned instead of centred, so it is not cut off.
	tickEdge = 32
)

// tickSteps are the tick intervals a time axis may use, shortest first;
// each divides the next larger unit, so ticks fall on round times in UTC.
var tickSteps = []time.Duration{
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour,
	24 * time.Hour, 2 * 24 * time.Hour, 7 * 24 * time.Hour, 14 * 24 * time.Hour, 28 * 24 * time.Hour,
	91 * 24 * time.Hour, 182 * 24 * time.Hour, 364 * 24 * time.Hour,
}

// timeAxis maps [from, to] onto the plot's width.
type timeAxis struct {
	from, to time.Time
}

// newTimeAxis fits the axis to times, the chart's points: from the
// earliest to the latest, each kept inside the period (the opening
// snapshot, often taken before the period, sits at its start), padded on
// both sides and never narrower than minAxisSpan, and shifted rather than
// cut where the padding would leave the period. Without points the axis
// is the period.
func newTimeAxis(p Period, times []time.Time) timeAxis {
	if len(times) == 0 {
		return timeAxis{from: p.From, to: p.To}
	}
	clamp := func(t time.Time) time.Time {
		switch {
		case t.Before(p.From):
			return p.From
		case t.After(p.To):
			return p.To
		}
		return t
	}
	lo, hi := clamp(times[0]), clamp(times[0])
	for _, t := range times[1:] {
		t = clamp(t)
		if t.Before(lo) {
			lo = t
		}
		if t.After(hi) {
			hi = t
		}
	}
	span := hi.Sub(lo)
	pad := span / axisPadDiv
	if span+2*pad < minAxisSpan {
		pad = (minAxisSpan - span) / 2
	}
	lo, hi = lo.Add(-pad), hi.Add(pad)
	if lo.Before(p.From) {
		hi, lo = hi.Add(p.From.Sub(lo)), p.From
	}
	if hi.After(p.To) {
		lo, hi = lo.Add(-hi.Sub(p.To)), p.To
		if lo.Before(p.From) {
			lo = p.From
		}
	}
	return timeAxis{from: lo, to: hi}
}

// x is the plot x of t (clamped to the axis), with one decimal. The
// arithmetic is in integer milliseconds: no floating point anywhere near
// money, and the same output on every machine.
func (a timeAxis) x(t time.Time) string {
	span := max(a.to.Sub(a.from).Milliseconds(), 1)
	off := min(max(t.Sub(a.from).Milliseconds(), 0), span)
	tenths := int64(plotLeft)*10 + off*int64(plotRight-plotLeft)*10/span
	return strconv.FormatInt(tenths/10, 10) + "." + strconv.FormatInt(tenths%10, 10)
}

// ticks returns the axis's labelled ticks: the shortest step from
// tickSteps that needs at most maxTickGaps gaps, at its round multiples
// in UTC. Labels are times (with seconds when the step is under a
// minute), with the date beneath the first tick and wherever it changes;
// for steps of a day or more, dates alone.
func (a timeAxis) ticks() []xTick {
	span := a.to.Sub(a.from)
	step := tickSteps[len(tickSteps)-1]
	for _, s := range tickSteps {
		if s*maxTickGaps >= span {
			step = s
			break
		}
	}
	layout := "15:04"
	switch {
	case step < time.Minute:
		layout = "15:04:05"
	case step >= 24*time.Hour:
		layout = ""
	}
	var out []xTick
	lastDate := ""
	for t := a.from.Truncate(step); !t.After(a.to); t = t.Add(step) {
		if t.Before(a.from) {
			continue
		}
		tk := xTick{X: a.x(t), Anchor: "middle"}
		if t.Sub(a.from).Milliseconds()*(plotRight-plotLeft) > span.Milliseconds()*(plotRight-plotLeft-tickEdge) {
			tk.Anchor = "end"
		}
		date := t.Format(time.DateOnly)
		if layout == "" {
			tk.Time = date
		} else {
			tk.Time = t.Format(layout)
			if date != lastDate {
				tk.Date = date
			}
		}
		lastDate = date
		out = append(out, tk)
	}
	return out
}

// scaleY maps v in [lo, hi] to a y between top and bottom (larger values
// higher), with one decimal, in exact decimal arithmetic. A flat series
// sits in the middle.
func scaleY(v, lo, hi decimal.Decimal, top, bottom int) string {
	if hi.Equal(lo) {
		return strconv.Itoa((top+bottom)/2) + ".0"
	}
	h := decimal.NewFromInt(int64(bottom - top))
	off := v.Sub(lo).Mul(h).Div(hi.Sub(lo))
	return decimal.NewFromInt(int64(bottom)).Sub(off).StringFixed(1)
}
