package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/shopspring/decimal"

	"orderd/provider"
	"orderd/store"
)

// This file builds the finance report of a period: one line per order and
// per-currency totals with the provider's balance, from one consistent
// read of the store. The formats are in report_csv.go, report_json.go and
// report_html.go; files and the scheduled job in report_file.go.

// Report formats.
const (
	FormatCSV  = "csv"
	FormatJSON = "json"
	FormatHTML = "html"
)

// Formats lists the report formats.
var Formats = []string{FormatCSV, FormatJSON, FormatHTML}

// Defaults for ReportConfig.
const (
	// DefaultHTMLMaxLines caps the order lines (and findings) an HTML
	// report shows; the CSV and JSON reports have every one.
	DefaultHTMLMaxLines = 300
	// maxChartPoints bounds the points of one series of a chart.
	maxChartPoints = 500
	// refundSkew is how long before a period an order may have last
	// changed and still hold a refund that completed in the period: the
	// provider's clock may run ahead of orderd's.
	refundSkew = time.Hour
)

// TimeLayout is how reports write times: ISO 8601 in UTC with
// milliseconds, the precision the store keeps.
const TimeLayout = "2006-01-02T15:04:05.000Z"

// Period is a report period: From inclusive, To exclusive, in UTC.
type Period struct {
	From time.Time
	To   time.Time
}

// PeriodError is a period bound that cannot be used. Param names it
// ("from" or "to"); the CLI writes it as a flag, the API as a parameter.
type PeriodError struct {
	Param  string
	Value  string
	Reason string
}

func (e *PeriodError) Error() string {
	if e.Value == "" {
		return e.Param + " " + e.Reason
	}
	return fmt.Sprintf("%s %q %s", e.Param, e.Value, e.Reason)
}

// ParsePeriod reads a period's bounds: each a UTC date (2026-11-01,
// meaning its midnight) or an RFC 3339 time (2026-11-01T10:00:00+02:00).
// from must be before to. Errors are *PeriodError.
func ParsePeriod(from, to string) (Period, error) {
	f, err := parseBound("from", from)
	if err != nil {
		return Period{}, err
	}
	t, err := parseBound("to", to)
	if err != nil {
		return Period{}, err
	}
	if !f.Before(t) {
		return Period{}, &PeriodError{Param: "to", Value: to, Reason: "is not after from " + from}
	}
	return Period{From: f, To: t}, nil
}

func parseBound(param, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, &PeriodError{Param: param, Reason: "is required"}
	}
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		t, err = time.Parse(time.RFC3339Nano, s)
	}
	if err != nil {
		return time.Time{}, &PeriodError{Param: param, Value: s, Reason: "is not a date (2006-01-02) or an RFC 3339 time"}
	}
	if y := t.UTC().Year(); y < 1970 || y > 9999 {
		return time.Time{}, &PeriodError{Param: param, Value: s, Reason: "is out of range"}
	}
	return t.UTC(), nil
}

// Day returns the period of the UTC day that contains t.
func Day(t time.Time) Period {
	d := t.UTC().Truncate(24 * time.Hour)
	return Period{From: d, To: d.Add(24 * time.Hour)}
}

// String writes the period as "<from>-<to>", each bound as a date when it
// is a UTC midnight and as 20261101T103000Z otherwise, so it can be part
// of a file name.
func (p Period) String() string { return boundName(p.From) + "-" + boundName(p.To) }

func boundName(t time.Time) string {
	t = t.UTC()
	if t.Equal(t.Truncate(24 * time.Hour)) {
		return t.Format(time.DateOnly)
	}
	if t.Nanosecond() != 0 {
		return t.Format("20060102T150405.000Z")
	}
	return t.Format("20060102T150405Z")
}

// FileName is the report's file name in format: the name scheduled
// reports are written under and the API's Content-Disposition offers.
func (p Period) FileName(format string) string {
	return "orderd-reconciliation-" + p.String() + "." + format
}

// ReportStore is what the report needs of the store. *store.Store
// satisfies it.
type ReportStore interface {
	BeginReport(ctx context.Context) (*store.ReportTx, error)
}

var _ ReportStore = (*store.Store)(nil)

// ReportConfig configures a Reporter. The zero value is usable.
type ReportConfig struct {
	// Now is the clock (generatedAt, the scheduled day); nil means
	// time.Now.
	Now func() time.Time
	// Logger receives the reporter's log lines; nil discards them.
	Logger *slog.Logger
	// HTMLMaxLines caps the order lines and findings of an HTML report;
	// zero means DefaultHTMLMaxLines.
	HTMLMaxLines int
	// CSVGuardFormulas prefixes a ' to every CSV text cell that starts with
	// =, +, -, @, a tab or a CR, so that a spreadsheet shows it as text
	// rather than run it as a formula. Off, values are written exactly.
	CSVGuardFormulas bool
}

// Reporter writes finance reports from the store.
type Reporter struct {
	store   ReportStore
	now     func() time.Time
	log     *slog.Logger
	htmlMax int
	// csvGuard: ReportConfig.CSVGuardFormulas.
	csvGuard bool
	tmpl     *template.Template
	tmplErr  error
}

// NewReporter returns a Reporter reading st.
func NewReporter(st ReportStore, cfg ReportConfig) *Reporter {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.HTMLMaxLines <= 0 {
		cfg.HTMLMaxLines = DefaultHTMLMaxLines
	}
	r := &Reporter{store: st, now: cfg.Now, log: cfg.Logger, htmlMax: cfg.HTMLMaxLines, csvGuard: cfg.CSVGuardFormulas}
	r.tmpl, r.tmplErr = parseReportTemplates()
	return r
}

// WriteOptions adjust one written report.
type WriteOptions struct {
	// CSVHref is where an HTML report that cuts its table short points to
	// for the full CSV; empty means the sibling file Period.FileName("csv").
	CSVHref string
}

// Write writes the report of p in format to w. A CSV report written to
// one stream holds the order lines, an empty line, then the per-currency
// summary with its own header (WriteCSV writes them to two streams).
func (r *Reporter) Write(ctx context.Context, w io.Writer, p Period, format string, opts WriteOptions) error {
	switch format {
	case FormatCSV:
		return r.WriteCSV(ctx, w, nil, p)
	case FormatJSON:
		return r.WriteJSON(ctx, w, p)
	case FormatHTML:
		return r.WriteHTML(ctx, w, p, opts)
	default:
		return fmt.Errorf("report format %q is not one of %s", format, strings.Join(Formats, ", "))
	}
}

// WriteReport writes the report of [from, to) in format to w; it is the
// admin API's view of the reporter.
func (r *Reporter) WriteReport(ctx context.Context, w io.Writer, from, to time.Time, format, csvHref string) error {
	return r.Write(ctx, w, Period{From: from.UTC(), To: to.UTC()}, format, WriteOptions{CSVHref: csvHref})
}

// Line is one order line of a report.
type Line struct {
	OrderID         string
	MerchantOrderID string
	Type            string
	// Status is the order's status at the end of the period.
	Status string
	// Membership says why the order is in the period: store.ReportFinal
	// (final in the period), store.ReportOpen (created in the period, not
	// final by its end) or store.ReportRefund (final earlier; a refund of
	// it completed in the period).
	Membership  string
	CreatedAt   time.Time
	CompletedAt time.Time // zero for open lines
	// Authorized is what the order's own transaction charged (payin) or
	// sent (payout); nil when the provider did not say.
	Authorized *provider.Money
	// Requested is what the merchant asked for when it created the order
	// through orderd's gateway (a payin's invoice, a payout's amount),
	// set only while the provider's state states no amount (Authorized is
	// nil): orderd has seen no more than the creation answer.
	Requested *provider.Money
	// Merchant is what the merchant's wallet received (completed payin,
	// merchantTargetWallet) or gave (completed payout,
	// merchantSourceWallet), as the provider writes it; nil unless the
	// order completed in the period.
	Merchant *provider.Money
	// Fee is Authorized − Merchant for a payin, Merchant − Authorized for
	// a payout, when both are known and in the same currency.
	Fee *provider.Money
	// Refunded sums, per currency, the order's refund transactions that
	// completed in the period (for final lines: before its end). The
	// provider refunds in the order's currency, so there is at most one
	// entry in practice.
	Refunded []Refunded
	// LearnedVia is how orderd learned the state the line reports:
	// webhook, poll or gateway.
	LearnedVia   string
	OpenFindings []string
	// changedAt is when orderd last learned a new state of the order.
	changedAt time.Time
}

// currency is the currency the line's order is counted under.
func (l *Line) currency() string {
	switch {
	case l.Authorized != nil:
		return l.Authorized.Currency
	case l.Requested != nil:
		return l.Requested.Currency
	case l.Merchant != nil:
		return l.Merchant.Currency
	case len(l.Refunded) > 0:
		return l.Refunded[0].Money.Currency
	}
	return ""
}

// report is one report being written: the period and a consistent view
// of the store.
type report struct {
	r   *Reporter
	tx  *store.ReportTx
	p   Period
	gen time.Time
	// issued is the first digest issued for the period, when the period
	// has ended and one is recorded (hasIssued).
	issued    store.IssuedDigest
	hasIssued bool
}

// open starts a report of p; the caller closes it.
func (r *Reporter) open(ctx context.Context, p Period) (*report, error) {
	if !p.From.Before(p.To) {
		return nil, &PeriodError{Param: "to", Value: p.To.Format(TimeLayout), Reason: "is not after from " + p.From.Format(TimeLayout)}
	}
	tx, err := r.store.BeginReport(ctx)
	if err != nil {
		return nil, err
	}
	rp := &report{r: r, tx: tx, p: Period{From: p.From.UTC(), To: p.To.UTC()}, gen: r.now().UTC()}
	if !rp.gen.Before(rp.p.To) {
		if rp.issued, rp.hasIssued, err = tx.IssuedDigest(ctx, rp.p.From, rp.p.To, digestVersion()); err != nil {
			rp.close()
			return nil, err
		}
	}
	return rp, nil
}

func (rp *report) close() {
	if err := rp.tx.Close(); err != nil {
		rp.r.log.Warn("end report read", "err", err)
	}
}

// fill computes the line of o; false means o has no line in the period
// (a refund candidate with no refund completed in it).
func (rp *report) fill(l *Line, o *store.ReportOrder, a *orderAmounts) bool {
	*l = Line{
		OrderID:         o.ProviderID,
		MerchantOrderID: o.MerchantOrderID,
		Type:            string(o.Type),
		Status:          string(o.Status),
		Membership:      o.Membership,
		CreatedAt:       o.CreatedAt,
		CompletedAt:     o.CompletedAt,
		LearnedVia:      string(o.LearnedVia),
		OpenFindings:    append(l.OpenFindings[:0], o.OpenFindings...),
		Refunded:        l.Refunded[:0],
		changedAt:       o.UpdatedAt,
	}
	own := a.own(o.Type)
	if own != nil && own.Authorized != nil {
		l.Authorized = own.Authorized
	} else if m, ok := provider.RequestedAmount(o.Requested); ok {
		l.Requested = &m
	}
	// Refunds: for a final line, those completed before the period ended
	// (a refund completes after its order, so inside the period); for a
	// refund line, those completed in the period. A completed refund the
	// provider gave no completedAt for cannot be placed and counts with
	// its order's own line.
	for i := range a.Transactions {
		t := &a.Transactions[i]
		if t.Type != "refund" || t.Status != provider.StatusCompleted || t.Amount == nil {
			continue
		}
		at := t.CompletedAt
		switch o.Membership {
		case store.ReportFinal:
			if !at.IsZero() && !at.Before(rp.p.To) {
				continue
			}
		case store.ReportRefund:
			if at.IsZero() || at.Before(rp.p.From) || !at.Before(rp.p.To) {
				continue
			}
		default:
			continue
		}
		l.Refunded = addRefund(l.Refunded, *t.Amount)
	}
	if o.Membership == store.ReportRefund {
		return len(l.Refunded) > 0
	}
	if o.Membership != store.ReportFinal || o.Status != provider.StatusCompleted {
		return true
	}
	var m *provider.Money
	switch o.Type {
	case provider.TypePayin:
		m = a.MerchantTargetWallet
	case provider.TypePayout:
		m = a.MerchantSourceWallet
	}
	if m == nil && own != nil {
		m = own.MerchantWallet
	}
	if m == nil {
		return true
	}
	l.Merchant = m
	if l.Authorized != nil && l.Authorized.Currency == m.Currency {
		fee := provider.Money{Currency: m.Currency}
		if o.Type == provider.TypePayout {
			fee.Amount = m.Amount.Abs().Sub(l.Authorized.Amount.Abs())
		} else {
			fee.Amount = l.Authorized.Amount.Sub(m.Amount)
		}
		l.Fee = &fee
	}
	return true
}

// Refunded is the sum of an order's refunds in one currency.
type Refunded struct {
	Money provider.Money
	Count int
}

// addRefund adds one refund of m to the per-currency sums in list.
func addRefund(list []Refunded, m provider.Money) []Refunded {
	for i := range list {
		if list[i].Money.Currency == m.Currency {
			list[i].Money.Amount = list[i].Money.Amount.Add(m.Amount)
			list[i].Count++
			return list
		}
	}
	list = append(list, Refunded{Money: m, Count: 1})
	slices.SortFunc(list, func(a, b Refunded) int { return strings.Compare(a.Money.Currency, b.Money.Currency) })
	return list
}

// orderAmounts is the part of an order's JSON a report reads, parsed.
type orderAmounts struct {
	MerchantSourceWallet *provider.Money
	MerchantTargetWallet *provider.Money
	Transactions         []txAmounts
}

type txAmounts struct {
	Type           string
	Status         provider.Status
	Authorized     *provider.Money
	MerchantWallet *provider.Money
	Amount         *provider.Money
	CompletedAt    time.Time
}

// wireOrder is how the JSON is read: amounts and times as plain strings,
// parsed afterwards. provider.Money and provider.Time decode themselves
// with a nested json.Unmarshal each, which over a million orders costs
// more than everything else a report does.
type wireOrder struct {
	MerchantSourceWallet *wireMoney `json:"merchantSourceWallet"`
	MerchantTargetWallet *wireMoney `json:"merchantTargetWallet"`
	Transactions         []struct {
		Type           string          `json:"type"`
		Status         provider.Status `json:"status"`
		Authorized     *wireMoney      `json:"authorized"`
		MerchantWallet *wireMoney      `json:"merchantWallet"`
		Amount         *wireMoney      `json:"amount"`
		CompletedAt    *string         `json:"completedAt"`
	} `json:"transactions"`
}

type wireMoney struct {
	Amount   string `json:"amount"`
	Currency string `json:"currency"`
}

// decodeWith reads raw into a with fd, the token reader, and falls back to
// decode for a state it leaves alone; the transactions' slice is reused.
func (a *orderAmounts) decodeWith(fd *amountsDecoder, raw []byte) error {
	txs := a.Transactions[:0]
	*a = orderAmounts{Transactions: txs}
	if len(raw) > 0 && fd.decode(raw, a) == nil {
		return nil
	}
	return a.decode(raw)
}

// decode reads raw into a. The write path decoded every stored state
// with the provider's strict types, so an amount or time that does not
// parse here is a damaged row: it is an error, and the line shows what
// the store's columns say.
func (a *orderAmounts) decode(raw []byte) error {
	*a = orderAmounts{}
	if len(raw) == 0 {
		return errors.New("no stored state")
	}
	// A fresh value each time: decoding into a reused one would keep the
	// fields of an earlier order that this one does not state.
	var w wireOrder
	// JSON v2 reads the value in one pass (v1 validates it whole first,
	// then decodes). Its defaults are stricter than v1's — names matched
	// exactly, a name twice refused — which every stored state meets: the
	// write path refused any other. A state it refuses all the same (a
	// row damaged since) is read as v1 reads it.
	if jsonv2.Unmarshal(raw, &w) != nil {
		w = wireOrder{}
		if err := json.Unmarshal(raw, &w); err != nil {
			return err
		}
	}
	var err error
	money := func(m *wireMoney) *provider.Money {
		if m == nil || err != nil {
			return nil
		}
		var v provider.Money
		v, err = provider.NewMoney(m.Amount, m.Currency)
		return &v
	}
	a.MerchantSourceWallet = money(w.MerchantSourceWallet)
	a.MerchantTargetWallet = money(w.MerchantTargetWallet)
	a.Transactions = make([]txAmounts, len(w.Transactions))
	for i, t := range w.Transactions {
		at := &a.Transactions[i]
		at.Type, at.Status = t.Type, t.Status
		at.Authorized, at.MerchantWallet, at.Amount = money(t.Authorized), money(t.MerchantWallet), money(t.Amount)
		if t.CompletedAt != nil && *t.CompletedAt != "" && err == nil {
			var pt provider.Time
			pt, err = provider.ParseTime(*t.CompletedAt)
			at.CompletedAt = pt.Time
		}
	}
	if err != nil {
		*a = orderAmounts{}
		return err
	}
	return nil
}

// fromColumns sets a to the amounts the store keeps in the order's
// columns: the wallets, the own transaction (given the order's type, so
// own finds it first) and the completed refunds, which are all that fill
// reads of the transactions. The transactions' slice is reused.
func (a *orderAmounts) fromColumns(typ provider.OrderType, c *store.ReportAmounts) {
	txs := a.Transactions[:0]
	*a = orderAmounts{MerchantSourceWallet: c.MerchantSourceWallet, MerchantTargetWallet: c.MerchantTargetWallet}
	if c.Authorized != nil || c.OwnWallet != nil {
		txs = append(txs, txAmounts{Type: string(typ), Authorized: c.Authorized, MerchantWallet: c.OwnWallet})
	}
	for i := range c.Refunds {
		r := &c.Refunds[i]
		txs = append(txs, txAmounts{Type: "refund", Status: provider.StatusCompleted, Amount: &r.Amount,
			CompletedAt: r.CompletedAt})
	}
	a.Transactions = txs
}

// own is the order's own transaction: the first whose type is the
// order's, else the first that is not a refund (as the ledger reads it).
func (a *orderAmounts) own(typ provider.OrderType) *txAmounts {
	for i := range a.Transactions {
		if a.Transactions[i].Type == string(typ) {
			return &a.Transactions[i]
		}
	}
	for i := range a.Transactions {
		if a.Transactions[i].Type != "refund" {
			return &a.Transactions[i]
		}
	}
	return nil
}

// CurrencyTotals are the totals of one currency over a period. Every
// amount is totalled in its own currency: a payin authorized in one
// currency and credited in another adds its gross to the first and its
// net to the second.
type CurrencyTotals struct {
	Currency string
	// Orders counts the final and open lines whose order is counted under
	// this currency (its authorized currency), by status at the end of the
	// period; Open counts the open lines among them.
	Orders   int
	ByStatus map[string]int
	Open     int
	// Payins: completed payins final in the period; GrossAuthorized sums
	// their authorized amounts, MerchantNet what the merchant's wallet
	// received.
	Payins          int
	GrossAuthorized decimal.Decimal
	MerchantNet     decimal.Decimal
	PayinFees       decimal.Decimal
	// Payouts: completed payouts final in the period; PayoutAmount sums
	// what the merchant's wallet gave.
	Payouts      int
	PayoutAmount decimal.Decimal
	PayoutFees   decimal.Decimal
	// Refunds: refund transactions completed in the period, of any order.
	Refunds      int
	RefundAmount decimal.Decimal
	// Balance is the provider's balance over the period; nil when orderd
	// has no snapshot of this currency before the period's end.
	Balance *BalanceSummary

	// scale is the most decimals any amount of this currency had, so
	// totals are written like the provider writes its amounts ("0.00").
	scale int32
}

// Fees is the sum of the payin and payout fees.
func (c *CurrencyTotals) Fees() decimal.Decimal { return c.PayinFees.Add(c.PayoutFees) }

// Format writes d with at least the currency's usual decimals.
func (c *CurrencyTotals) Format(d decimal.Decimal) string {
	if -d.Exponent() < c.scale {
		return d.StringFixed(c.scale)
	}
	return provider.FormatAmount(d)
}

// BalanceSummary is the provider's balance of one currency over a period,
// from the balances job's snapshots and comparisons.
//
// When comparisons closed in the period, they are summed, each stretch of
// time once: a comparison that a later one from the same opening snapshot
// supersedes (the balances job keeps the opening while drift stays
// unexplained) is left out. Start is then the first counted comparison's
// opening snapshot — normally the last one before the period — and End the
// last one's closing snapshot. Without comparisons, Start is the last
// snapshot before the period (else its first) and End the last before its
// end, and the comparison figures are unknown (nil) unless the two are
// the same snapshot.
//
// Once the report's bridge is drawn, the figures are the bridge's (see
// alignBalance): Explained is then what people resolved (accepted as
// explained or written off), Unexplained the bridge's residual.
type BalanceSummary struct {
	Start, End                  store.BalanceSnapshot
	Actual                      decimal.Decimal
	Expected, Drift             *decimal.Decimal
	Explained, Unexplained      *decimal.Decimal
	Comparisons, OutOfTolerance int
	// Resolved: part of the drift was resolved by people (Explained is
	// not zero). UnexplainedBeyondTolerance: the residual is beyond the
	// currency's tolerance, the one figure shown as alarming.
	Resolved, UnexplainedBeyondTolerance bool
	// Series and Drifts are the chart's points, at most maxChartPoints
	// each (evenly thinned, the last always kept).
	Series []ChartPoint
	Drifts []DriftPoint
}

// ChartPoint is one balance snapshot on a chart.
type ChartPoint struct {
	At     time.Time
	Amount decimal.Decimal
}

// DriftPoint is one balance comparison on a chart.
type DriftPoint struct {
	At              time.Time // the closing snapshot
	Drift           decimal.Decimal
	Explained       decimal.Decimal
	Unexplained     decimal.Decimal
	WithinTolerance bool
}

// totals accumulates per-currency totals from lines.
type totals struct {
	by    map[string]*CurrencyTotals
	lines int
}

func newTotals() *totals { return &totals{by: map[string]*CurrencyTotals{}} }

func (t *totals) cur(ccy string) *CurrencyTotals {
	c, ok := t.by[ccy]
	if !ok {
		c = &CurrencyTotals{Currency: ccy, ByStatus: map[string]int{}}
		t.by[ccy] = c
	}
	return c
}

// seen widens the currency's scale to d's decimals.
func (c *CurrencyTotals) seen(d decimal.Decimal) {
	if s := -d.Exponent(); s > c.scale {
		c.scale = s
	}
}

func (t *totals) add(l *Line) {
	t.lines++
	for _, r := range l.Refunded {
		c := t.cur(r.Money.Currency)
		c.Refunds += r.Count
		c.RefundAmount = c.RefundAmount.Add(r.Money.Amount)
		c.seen(r.Money.Amount)
	}
	if l.Membership == store.ReportRefund {
		return
	}
	c := t.cur(l.currency())
	c.Orders++
	c.ByStatus[l.Status]++
	if l.Membership == store.ReportOpen {
		c.Open++
	}
	if l.Authorized != nil {
		c.seen(l.Authorized.Amount)
	}
	if l.Requested != nil {
		c.seen(l.Requested.Amount)
	}
	if l.Membership != store.ReportFinal || l.Status != string(provider.StatusCompleted) {
		return
	}
	switch provider.OrderType(l.Type) {
	case provider.TypePayin:
		c.Payins++
		if l.Authorized != nil {
			c.GrossAuthorized = c.GrossAuthorized.Add(l.Authorized.Amount)
		}
		if l.Merchant != nil {
			mc := t.cur(l.Merchant.Currency)
			mc.MerchantNet = mc.MerchantNet.Add(l.Merchant.Amount)
			mc.seen(l.Merchant.Amount)
		}
		if l.Fee != nil {
			c.PayinFees = c.PayinFees.Add(l.Fee.Amount)
		}
	case provider.TypePayout:
		mc := c
		if l.Merchant != nil {
			mc = t.cur(l.Merchant.Currency)
			mc.PayoutAmount = mc.PayoutAmount.Add(l.Merchant.Amount.Abs())
			mc.seen(l.Merchant.Amount)
		}
		mc.Payouts++
		if l.Fee != nil {
			c.PayoutFees = c.PayoutFees.Add(l.Fee.Amount)
		}
	}
}

// finish adds the balances of every currency with snapshots and returns
// the totals sorted by currency.
func (rp *report) finish(ctx context.Context, t *totals) ([]*CurrencyTotals, error) {
	ccys, err := rp.tx.BalanceCurrencies(ctx, rp.p.To)
	if err != nil {
		return nil, err
	}
	for _, ccy := range ccys {
		c := t.cur(ccy)
		if c.Balance, err = rp.balance(ctx, c); err != nil {
			return nil, err
		}
	}
	out := make([]*CurrencyTotals, 0, len(t.by))
	for _, k := range sortedKeys(t.by) {
		out = append(out, t.by[k])
	}
	return out, nil
}

// balance summarises one currency's balance over the period (see
// BalanceSummary).
func (rp *report) balance(ctx context.Context, c *CurrencyTotals) (*BalanceSummary, error) {
	p := rp.p
	b := &BalanceSummary{}
	var (
		sumExp, sumDrift, sumExpl, sumUnexpl decimal.Decimal
		counted                              int
		pending                              *store.BalanceDrift
		first                                *store.BalanceDrift
		drifts                               []DriftPoint
	)
	commit := func(d *store.BalanceDrift) {
		if first == nil {
			f := *d
			first = &f
		}
		counted++
		sumExp, sumDrift = sumExp.Add(d.Expected), sumDrift.Add(d.Drift)
		sumExpl, sumUnexpl = sumExpl.Add(d.Explained), sumUnexpl.Add(d.Unexplained)
	}
	err := rp.tx.Drifts(ctx, c.Currency, p.From, p.To, func(d store.BalanceDrift) error {
		b.Comparisons++
		if !d.WithinTolerance {
			b.OutOfTolerance++
		}
		if pending != nil && pending.Opening.ID != d.Opening.ID {
			commit(pending)
		}
		pending = &d
		drifts = append(drifts, DriftPoint{At: d.Closing.TakenAt, Drift: d.Drift, Explained: d.Explained,
			Unexplained: d.Unexplained, WithinTolerance: d.WithinTolerance})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if pending != nil {
		commit(pending)
		b.Start, b.End = first.Opening, pending.Closing
		b.Expected, b.Drift, b.Explained, b.Unexplained = &sumExp, &sumDrift, &sumExpl, &sumUnexpl
	} else {
		start, ok, err := rp.tx.LatestSnapshot(ctx, c.Currency, p.From)
		if err != nil {
			return nil, err
		}
		if !ok {
			if start, ok, err = rp.tx.FirstSnapshot(ctx, c.Currency, p.From, p.To); err != nil {
				return nil, err
			}
		}
		if !ok {
			return nil, nil
		}
		end, _, err := rp.tx.LatestSnapshot(ctx, c.Currency, p.To)
		if err != nil {
			return nil, err
		}
		b.Start, b.End = start, end
		if start.ID == end.ID {
			zero := decimal.Zero
			b.Expected, b.Drift, b.Explained, b.Unexplained = &zero, &zero, &zero, &zero
		}
	}
	b.Actual = b.End.Amount.Sub(b.Start.Amount)
	c.seen(b.Start.Amount)
	c.seen(b.End.Amount)

	// The chart: the starting snapshot, then every snapshot in the period
	// after it.
	series := []ChartPoint{{At: b.Start.TakenAt, Amount: b.Start.Amount}}
	err = rp.tx.Snapshots(ctx, c.Currency, p.From, p.To, func(s store.BalanceSnapshot) error {
		if s.ID != b.Start.ID && !s.TakenAt.Before(b.Start.TakenAt) {
			series = append(series, ChartPoint{At: s.TakenAt, Amount: s.Amount})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	b.Series = thin(series, maxChartPoints)
	b.Drifts = thin(drifts, maxChartPoints)
	return b, nil
}

// thin keeps at most n evenly spaced points of s, always the last.
func thin[T any](s []T, n int) []T {
	if len(s) <= n {
		return s
	}
	out := make([]T, 0, n)
	for i := range n - 1 {
		out = append(out, s[i*(len(s)-1)/(n-1)])
	}
	return append(out, s[len(s)-1])
}

// FindingSummary is one line about a finding for people: what it is about,
// read from its detail.
func FindingSummary(f store.Finding) string {
	var d struct {
		Reason          string `json:"reason"`
		Currency        string `json:"currency"`
		Unexplained     string `json:"unexplained"`
		Drift           string `json:"drift"`
		Tolerance       string `json:"tolerance"`
		MerchantOrderID string `json:"merchantOrderId"`
		Status          string `json:"status"`
		Evidence        string `json:"evidence"`
		Named           []struct {
			Settled bool `json:"settled"`
		} `json:"named"`
	}
	_ = json.Unmarshal(f.Detail, &d)
	switch {
	case f.Kind == store.FindingBalanceDrift && d.Unexplained != "":
		s := fmt.Sprintf("%s %s unexplained of a drift of %s (tolerance %s)", d.Unexplained, d.Currency, d.Drift, d.Tolerance)
		open := 0
		for _, n := range d.Named {
			if !n.Settled {
				open++
			}
		}
		switch d.Evidence {
		case EvidenceSettled:
			s += fmt.Sprintf("; the %d orders it was put down to have settled and the gap stayed", len(d.Named))
			if len(d.Named) == 1 {
				s = strings.Replace(s, "the 1 orders it was put down to have", "the order it was put down to has", 1)
			}
		case EvidenceUnsettled:
			s += fmt.Sprintf("; %d of the %d orders named as possible causes not settled yet", open, len(d.Named))
		}
		return s
	case d.Reason != "" && d.MerchantOrderID != "":
		return d.Reason + " (merchantOrderId " + d.MerchantOrderID + ")"
	case d.Reason != "":
		return d.Reason
	case d.MerchantOrderID != "":
		return "merchantOrderId " + d.MerchantOrderID
	}
	return ""
}
