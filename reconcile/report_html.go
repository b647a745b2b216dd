package reconcile

import (
	"bufio"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"orderd/provider"
	"orderd/store"
)

//go:embed report.html.tmpl
var reportHTML string

func parseReportTemplates() (*template.Template, error) {
	t, err := template.New("report").Funcs(template.FuncMap{
		"time": func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			return t.UTC().Format("2006-01-02 15:04:05")
		},
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
		"count":   func(n int) string { return groupThousands(strconv.Itoa(n)) },
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
	return t, nil
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
	// Bad: a balance check in the period left drift beyond tolerance.
	Bad bool
}

// WriteHTML writes the report of p as one self-contained HTML page: no
// scripts, no external requests (a Content-Security-Policy forbids them),
// inline styles and an inline SVG chart of balance and drift per
// currency. The order lines and the findings are cut at the configured
// maximum (DefaultHTMLMaxLines) with a note pointing to the CSV and JSON
// reports, which hold all of them. Rows are rendered as they are read.
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
	if err := rp.lines(ctx, func(l *Line) error { t.add(l); return nil }); err != nil {
		return fmt.Errorf("write html: %w", err)
	}
	cur, err := rp.finish(ctx, t)
	if err != nil {
		return fmt.Errorf("write html: %w", err)
	}
	findings := 0
	if err := rp.tx.Findings(ctx, rp.p.From, rp.p.To, func(store.Finding) error { findings++; return nil }); err != nil {
		return fmt.Errorf("write html: %w", err)
	}
	head := htmlHead{
		From: rp.p.From.Format("2006-01-02 15:04:05"), To: rp.p.To.Format("2006-01-02 15:04:05"),
		Generated: rp.gen.Format("2006-01-02 15:04:05"), FileName: rp.p.FileName(FormatHTML),
		Lines: t.lines, Findings: findings, Max: r.htmlMax,
		CSVHref: opts.CSVHref, JSONHref: strings.TrimSuffix(opts.CSVHref, FormatCSV) + FormatJSON,
	}
	if head.CSVHref == "" {
		head.CSVHref, head.JSONHref = rp.p.FileName(FormatCSV), rp.p.FileName(FormatJSON)
	}
	for _, c := range cur {
		head.Currencies = append(head.Currencies, newHTMLCurrency(c, rp.p))
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
	n = 0
	err = rp.lines(ctx, func(l *Line) error {
		if n == r.htmlMax {
			return errStop
		}
		n++
		return exec("line", l)
	})
	if err != nil && !errors.Is(err, errStop) {
		return fmt.Errorf("write html: %w", err)
	}
	if err := exec("lines-end", head); err != nil {
		return fmt.Errorf("write html: %w", err)
	}
	err = rp.tx.Runs(ctx, rp.p.From, rp.p.To, func(run store.ReconcileRun) error { return exec("run", run) })
	if err != nil {
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
	h.Comparisons, h.OutOfTolerance, h.Bad = b.Comparisons, b.OutOfTolerance, b.OutOfTolerance > 0
	h.Chart = newChart(c, b, p)
	return h
}

// Chart geometry, in SVG user units.
const (
	chartW      = 760
	chartH      = 330
	plotLeft    = 90
	plotRight   = 740
	balTop      = 40
	balBottom   = 165
	driftTop    = 205
	driftBottom = 290
)

// chart is one currency's SVG chart: the balance over the period (top)
// and each comparison's drift and unexplained part (bottom).
type chart struct {
	Currency              string
	W, H                  int
	Left, Right           int
	BalTop, BalBottom     int
	DriftTop, DriftBottom int
	Balance               string // polyline points
	BalanceDots           []dot
	BalMax, BalMin        string
	Drift, Unexplained    string
	DriftDots             []dot
	DriftMax, DriftMin    string
	ZeroY                 string
	XLabels               []xLabel
	NoDrift               bool
}

type dot struct {
	X, Y  string
	Title string
	Bad   bool
}

type xLabel struct {
	X      int
	Text   string
	Anchor string
}

func newChart(c *CurrencyTotals, b *BalanceSummary, p Period) *chart {
	ch := &chart{Currency: c.Currency, W: chartW, H: chartH, Left: plotLeft, Right: plotRight,
		BalTop: balTop, BalBottom: balBottom, DriftTop: driftTop, DriftBottom: driftBottom}
	x := func(t time.Time) string {
		span := p.To.Sub(p.From).Milliseconds()
		off := min(max(t.Sub(p.From).Milliseconds(), 0), span)
		// Tenths of a unit in integers: no floating point anywhere near money.
		tenths := int64(plotLeft)*10 + off*int64(plotRight-plotLeft)*10/span
		return strconv.FormatInt(tenths/10, 10) + "." + strconv.FormatInt(tenths%10, 10)
	}
	balMin, balMax := b.Series[0].Amount, b.Series[0].Amount
	for _, s := range b.Series {
		balMin, balMax = decimal.Min(balMin, s.Amount), decimal.Max(balMax, s.Amount)
	}
	ch.BalMin, ch.BalMax = c.Format(balMin), c.Format(balMax)
	pts := make([]string, 0, len(b.Series))
	for _, s := range b.Series {
		xs, ys := x(s.At), scaleY(s.Amount, balMin, balMax, balTop, balBottom)
		pts = append(pts, xs+","+ys)
		ch.BalanceDots = append(ch.BalanceDots, dot{X: xs, Y: ys,
			Title: c.Format(s.Amount) + " " + c.Currency + " at " + s.At.Format("2006-01-02 15:04:05") + " UTC"})
	}
	ch.Balance = strings.Join(pts, " ")

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
		ch.DriftDots = append(ch.DriftDots, dot{X: xs, Y: uy, Bad: !d.WithinTolerance,
			Title: fmt.Sprintf("at %s UTC: drift %s, explained %s, unexplained %s %s", d.At.Format("2006-01-02 15:04:05"),
				c.Format(d.Drift), c.Format(d.Explained), c.Format(d.Unexplained), c.Currency)})
	}
	ch.Drift, ch.Unexplained = strings.Join(dp, " "), strings.Join(up, " ")
	mid := p.From.Add(p.To.Sub(p.From) / 2)
	ch.XLabels = []xLabel{
		{X: plotLeft, Text: p.From.Format("2006-01-02 15:04"), Anchor: "start"},
		{X: (plotLeft + plotRight) / 2, Text: mid.Format("2006-01-02 15:04"), Anchor: "middle"},
		{X: plotRight, Text: p.To.Format("2006-01-02 15:04") + " UTC", Anchor: "end"},
	}
	return ch
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
