package reconcile

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"orderd/provider"
)

// CSVLineHeader is the header of the CSV order lines.
var CSVLineHeader = []string{
	"order_id", "merchant_order_id", "type", "status", "membership", "created_at", "completed_at",
	"authorized_amount", "authorized_currency", "merchant_amount", "merchant_currency",
	"fee_amount", "fee_currency", "refunded_amount", "refunded_currency", "learned_via", "open_findings",
	"requested_amount", "requested_currency",
}

// CSVSummaryHeader is the header of the CSV per-currency summary.
var CSVSummaryHeader = []string{
	"currency", "orders", "completed", "rejected", "open",
	"payins", "gross_authorized", "merchant_net", "payouts", "payout_amount", "fees",
	"refunds", "refund_amount",
	"starting_balance", "starting_balance_at", "ending_balance", "ending_balance_at",
	"actual_movement", "expected_movement", "drift", "drift_explained", "drift_unexplained",
	"balance_comparisons", "comparisons_out_of_tolerance",
	// The verdict (verdict.go).
	"verdict", "bridge_opening", "bridge_payins", "bridge_payouts", "bridge_refunds", "bridge_fees",
	"bridge_other", "bridge_expected_closing", "bridge_closing", "bridge_residual", "breaks", "break_kinds",
	// The report's digest, the same on every row and as in the JSON and
	// HTML reports of the period (digester).
	"digest",
}

// csvLineText and csvSummaryText mark the text columns of each CSV: the
// values stored as the provider or orderd wrote them (ids, type, status,
// membership, currencies, how the order was learned, finding kinds). The
// others are amounts and times orderd formats itself, which never start
// with anything a spreadsheet reads as a formula but a minus sign, and a
// negative amount must stay a number.
var (
	csvLineText = textColumns(CSVLineHeader, "order_id", "merchant_order_id", "type", "status", "membership",
		"authorized_currency", "merchant_currency", "fee_currency", "refunded_currency", "learned_via", "open_findings",
		"requested_currency")
	csvSummaryText = textColumns(CSVSummaryHeader, "currency", "verdict", "break_kinds", "digest")
)

// textColumns marks the columns of header that names names.
func textColumns(header []string, names ...string) []bool {
	text := make([]bool, len(header))
	for i, h := range header {
		text[i] = slices.Contains(names, h)
	}
	return text
}

// csvGuardedColumn is the last column of the summary when the formula
// guard is on: the report says that its text cells may carry a leading '.
const csvGuardedColumn = "formulas_guarded"

// WriteCSV writes the report of p as CSV (RFC 4180: CRLF line ends,
// quoting where needed, a header row). Every value is written exactly as
// stored: a field holding a comma, a quote, a CR, an LF or a leading space
// or tab is quoted, and everything inside the quotes is the value's bytes
// (quotes doubled), so an RFC 4180 reader gets back each CR, LF and CRLF
// as it was. With ReportConfig.CSVGuardFormulas, a text cell starting
// with =, +, -, @, a tab or a CR gets a leading ' so that a spreadsheet
// shows it as text, and the summary says so in a last column. The order
// lines go to lines; the per-currency summary goes to summary, or, when
// summary is nil, to lines after an empty line, with its own header.
// Lines are written as they are read and totals kept per currency, so
// the report streams in one pass.
func (r *Reporter) WriteCSV(ctx context.Context, lines, summary io.Writer, p Period) error {
	rp, err := r.open(ctx, p)
	if err != nil {
		return err
	}
	defer rp.close()
	lw := newCSVWriter(lines, r.csvGuard, csvLineText)
	lw.record(CSVLineHeader)
	t := newTotals()
	fl := flagged{}
	rec := make([]string, len(CSVLineHeader))
	// The digest takes each line as the JSON report writes it, so the
	// two reports carry the same one.
	dg, le := newDigester(rp.p), newLineEncoder()
	err = rp.lines(ctx, func(l *Line) error {
		t.add(l)
		fl.add(l)
		dg.line(le.line(l))
		csvLine(rec, l)
		return lw.record(rec)
	})
	if err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	cur, err := rp.finish(ctx, t)
	if err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	vs, err := rp.verdicts(ctx, cur, fl)
	if err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	digest, err := rp.digest(ctx, dg, cur, vs)
	if err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	sw := lw
	if summary != nil {
		if err := lw.flush(); err != nil {
			return fmt.Errorf("write csv: %w", err)
		}
		sw = newCSVWriter(summary, r.csvGuard, csvSummaryText)
	} else {
		sw.text = csvSummaryText
		sw.raw("\r\n") // an empty line ends the lines section
	}
	header := CSVSummaryHeader
	if r.csvGuard {
		header = append(slices.Clip(header), csvGuardedColumn)
	}
	sw.record(header)
	for _, c := range cur {
		rec := append(csvSummary(c), csvVerdict(c, vs[c.Currency])...)
		rec = append(rec, digest)
		if r.csvGuard {
			rec = append(rec, "true")
		}
		sw.record(rec)
	}
	if err := sw.flush(); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	return nil
}

// csvWriter writes RFC 4180 records exactly (see WriteCSV), buffered.
// encoding/csv's Writer is not used: with UseCRLF it turns a lone CR
// inside a value into CRLF, so two different values would read back alike.
type csvWriter struct {
	w     *bufio.Writer
	guard bool
	// text marks the columns the formula guard applies to.
	text []bool
	err  error
}

func newCSVWriter(w io.Writer, guard bool, text []bool) *csvWriter {
	return &csvWriter{w: bufio.NewWriterSize(w, 64<<10), guard: guard, text: text}
}

// record writes one record and its CRLF; the first write error is kept
// and returned from then on.
func (c *csvWriter) record(fields []string) error {
	if c.err != nil {
		return c.err
	}
	for i, f := range fields {
		if i > 0 {
			c.w.WriteByte(',')
		}
		if c.guard && i < len(c.text) && c.text[i] && f != "" && strings.IndexByte("=+-@\t\r", f[0]) >= 0 {
			c.field("'" + f)
			continue
		}
		c.field(f)
	}
	_, c.err = c.w.WriteString("\r\n")
	return c.err
}

// field writes one value, quoted when it needs to be.
func (c *csvWriter) field(f string) {
	if !csvNeedsQuotes(f) {
		c.w.WriteString(f)
		return
	}
	c.w.WriteByte('"')
	for {
		i := strings.IndexByte(f, '"')
		if i < 0 {
			break
		}
		c.w.WriteString(f[:i+1])
		c.w.WriteByte('"')
		f = f[i+1:]
	}
	c.w.WriteString(f)
	c.w.WriteByte('"')
}

// csvNeedsQuotes: a separator, a quote or a line break inside, or a
// leading space or tab, which some readers trim.
func csvNeedsQuotes(f string) bool {
	if f == "" {
		return false
	}
	if f[0] == ' ' || f[0] == '\t' {
		return true
	}
	for i := 0; i < len(f); i++ {
		switch f[i] {
		case ',', '"', '\r', '\n':
			return true
		}
	}
	return false
}

func (c *csvWriter) raw(s string) {
	if c.err == nil {
		_, c.err = c.w.WriteString(s)
	}
}

func (c *csvWriter) flush() error {
	if c.err != nil {
		return c.err
	}
	c.err = c.w.Flush()
	return c.err
}

// csvLine fills rec with l's fields.
func csvLine(rec []string, l *Line) {
	rec[0], rec[1], rec[2], rec[3], rec[4] = l.OrderID, l.MerchantOrderID, l.Type, l.Status, l.Membership
	rec[5], rec[6] = csvTime(l.CreatedAt), csvTime(l.CompletedAt)
	rec[7], rec[8] = csvMoney(l.Authorized)
	rec[9], rec[10] = csvMoney(l.Merchant)
	rec[11], rec[12] = csvMoney(l.Fee)
	rec[13], rec[14] = "", ""
	for i, rf := range l.Refunded {
		if i > 0 {
			rec[13] += ";"
			rec[14] += ";"
		}
		rec[13] += provider.FormatAmount(rf.Money.Amount)
		rec[14] += rf.Money.Currency
	}
	rec[15], rec[16] = l.LearnedVia, strings.Join(l.OpenFindings, ";")
	rec[17], rec[18] = csvMoney(l.Requested)
}

func csvSummary(c *CurrencyTotals) []string {
	rec := []string{
		c.Currency, strconv.Itoa(c.Orders), strconv.Itoa(c.ByStatus[string(provider.StatusCompleted)]),
		strconv.Itoa(c.ByStatus[string(provider.StatusRejected)]), strconv.Itoa(c.Open),
		strconv.Itoa(c.Payins), c.Format(c.GrossAuthorized), c.Format(c.MerchantNet),
		strconv.Itoa(c.Payouts), c.Format(c.PayoutAmount), c.Format(c.Fees()),
		strconv.Itoa(c.Refunds), c.Format(c.RefundAmount),
	}
	b := c.Balance
	if b == nil {
		return append(rec, make([]string, slices.Index(CSVSummaryHeader, "verdict")-len(rec))...)
	}
	opt := func(d *decimal.Decimal) string {
		if d == nil {
			return ""
		}
		return c.Format(*d)
	}
	return append(rec,
		c.Format(b.Start.Amount), csvTime(b.Start.TakenAt), c.Format(b.End.Amount), csvTime(b.End.TakenAt),
		c.Format(b.Actual), opt(b.Expected), opt(b.Drift), opt(b.Explained), opt(b.Unexplained),
		strconv.Itoa(b.Comparisons), strconv.Itoa(b.OutOfTolerance))
}

func csvTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(TimeLayout)
}

func csvMoney(m *provider.Money) (amount, currency string) {
	if m == nil {
		return "", ""
	}
	return provider.FormatAmount(m.Amount), m.Currency
}
