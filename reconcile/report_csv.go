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
	"orderd/store"
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
	// For a period that has ended: the first digest issued for it, when,
	// the ids of the orders whose lines changed since (space-separated)
	// and the changes orderd cannot name (report_issued.go); empty while
	// the period has not ended.
	"first_issued_digest", "first_issued_at", "changed_order_ids", "unnamed_changes",
}

// CSVFindingHeader is the header of the CSV findings section: one row per
// action in a finding's trail (a finding nobody acted on has one row with
// the action columns empty), the finding's columns repeated on each.
var CSVFindingHeader = []string{
	"finding_id", "kind", "key", "state", "status", "found_at", "resolved_at", "resolution", "resolved_by",
	"summary", "action", "action_by", "action_resolution", "action_note", "action_at",
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
	csvSummaryText = textColumns(CSVSummaryHeader, "currency", "verdict", "break_kinds", "digest",
		"first_issued_digest", "changed_order_ids")
	csvFindingText = textColumns(CSVFindingHeader, "kind", "key", "state", "status", "resolution", "resolved_by",
		"summary", "action", "action_by", "action_resolution", "action_note")
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
// the report streams in one pass. The findings, one row per action of
// their trails, follow the summary after an empty line when summary is
// nil; with a summary of its own, WriteCSV leaves them out (WriteCSVParts
// writes them to a third stream).
func (r *Reporter) WriteCSV(ctx context.Context, lines, summary io.Writer, p Period) error {
	if summary != nil {
		return r.WriteCSVParts(ctx, lines, summary, io.Discard, p)
	}
	return r.WriteCSVParts(ctx, lines, nil, nil, p)
}

// WriteCSVParts is WriteCSV with the findings section (CSVFindingHeader)
// written to findings; when summary is nil, findings must be nil too and
// every section goes to lines, one after the other, each after an empty
// line.
func (r *Reporter) WriteCSVParts(ctx context.Context, lines, summary, findings io.Writer, p Period) error {
	rp, err := r.open(ctx, p)
	if err != nil {
		return err
	}
	defer rp.close()
	lw := newCSVWriter(lines, r.csvGuard, csvLineText)
	lw.record(CSVLineHeader)
	t := newTotals()
	fl := flagged{}
	// The digest takes each line as the JSON report writes it, so the
	// two reports carry the same one.
	dg, le := rp.newDigester(), newLineEncoder()
	err = rp.lines(ctx, func(l *Line) error {
		t.add(l)
		fl.add(l)
		dg.line(l, le.line(l))
		return lw.line(l)
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
	fi, err := rp.firstIssue(ctx, &dg.fp, digest)
	if err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	issue := []string{"", "", "", ""}
	if fi != nil {
		issue = []string{fi.Digest, csvTime(fi.IssuedAt), strings.Join(fi.changedIDs(), " "), strconv.Itoa(fi.Unnamed)}
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
		rec = append(rec, issue...)
		if r.csvGuard {
			rec = append(rec, "true")
		}
		sw.record(rec)
	}
	// The findings with their trails: a person signing the period off
	// sees who resolved what, how and why.
	fw := sw
	if summary != nil {
		if err := sw.flush(); err != nil {
			return fmt.Errorf("write csv: %w", err)
		}
		fw = newCSVWriter(findings, r.csvGuard, csvFindingText)
	} else {
		fw.text = csvFindingText
		fw.raw("\r\n") // an empty line ends the summary section
	}
	fw.record(CSVFindingHeader)
	err = rp.tx.Findings(ctx, rp.p.From, rp.p.To, func(f store.Finding) error {
		for _, rec := range csvFinding(f) {
			fw.record(rec)
		}
		return fw.err
	})
	if err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	if err := fw.flush(); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	return nil
}

// csvFinding returns the rows of f in the findings section.
func csvFinding(f store.Finding) [][]string {
	var resolved string
	if f.ResolvedAt != nil {
		resolved = csvTime(*f.ResolvedAt)
	}
	head := []string{strconv.FormatInt(f.ID, 10), f.Kind, f.Key, f.State, f.Status, csvTime(f.FoundAt), resolved,
		f.Resolution, f.ResolvedBy, FindingSummary(f)}
	if len(f.Trail) == 0 {
		return [][]string{append(head, "", "", "", "", "")}
	}
	out := make([][]string, 0, len(f.Trail))
	for _, a := range f.Trail {
		out = append(out, append(slices.Clip(head), a.Action, a.By, a.Resolution, a.Note, csvTime(a.At)))
	}
	return out
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
	// rec is the record being written and val a value being formatted,
	// reused from line to line.
	rec, val []byte
}

// newCSVWriter buffers 1 MiB: a month's lines are hundreds of MiB.
func newCSVWriter(w io.Writer, guard bool, text []bool) *csvWriter {
	return &csvWriter{w: bufio.NewWriterSize(w, 1<<20), guard: guard, text: text}
}

// record writes one record and its CRLF; the first write error is kept
// and returned from then on.
func (c *csvWriter) record(fields []string) error {
	if c.err != nil {
		return c.err
	}
	b := c.rec[:0]
	for i, f := range fields {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendCSVField(b, f, c.guarded(i))
	}
	return c.end(b)
}

// guarded: the formula guard applies to column i.
func (c *csvWriter) guarded(i int) bool { return c.guard && i < len(c.text) && c.text[i] }

// end writes the record b and its CRLF.
func (c *csvWriter) end(b []byte) error {
	b = append(b, '\r', '\n')
	c.rec = b
	_, c.err = c.w.Write(b)
	return c.err
}

// line writes l as one record of CSVLineHeader's columns, formatting its
// amounts and times into a reused buffer.
func (c *csvWriter) line(l *Line) error {
	if c.err != nil {
		return c.err
	}
	b := c.rec[:0]
	b = appendCSVField(b, l.OrderID, c.guarded(0))
	b = append(b, ',')
	b = appendCSVField(b, l.MerchantOrderID, c.guarded(1))
	b = append(b, ',')
	b = appendCSVField(b, l.Type, c.guarded(2))
	b = append(b, ',')
	b = appendCSVField(b, l.Status, c.guarded(3))
	b = append(b, ',')
	b = appendCSVField(b, l.Membership, c.guarded(4))
	b = append(b, ',')
	b = c.value(b, appendStamp(c.val[:0], l.CreatedAt), 5)
	b = append(b, ',')
	b = c.value(b, appendStamp(c.val[:0], l.CompletedAt), 6)
	b = append(b, ',')
	b = c.money(b, l.Authorized, 7)
	b = append(b, ',')
	b = c.money(b, l.Merchant, 9)
	b = append(b, ',')
	b = c.money(b, l.Fee, 11)
	b = append(b, ',')
	v := c.val[:0]
	for i, rf := range l.Refunded {
		if i > 0 {
			v = append(v, ';')
		}
		v = appendAmount(v, rf.Money.Amount)
	}
	b = c.value(b, v, 13)
	b = append(b, ',')
	v = c.val[:0]
	for i, rf := range l.Refunded {
		if i > 0 {
			v = append(v, ';')
		}
		v = append(v, rf.Money.Currency...)
	}
	b = c.value(b, v, 14)
	b = append(b, ',')
	b = appendCSVField(b, l.LearnedVia, c.guarded(15))
	b = append(b, ',')
	v = c.val[:0]
	for i, k := range l.OpenFindings {
		if i > 0 {
			v = append(v, ';')
		}
		v = append(v, k...)
	}
	b = c.value(b, v, 16)
	b = append(b, ',')
	b = c.money(b, l.Requested, 17)
	return c.end(b)
}

// value appends v, formatted in c.val, as column i; c.val keeps the
// buffer for the next value.
func (c *csvWriter) value(b, v []byte, i int) []byte {
	c.val = v
	return appendCSVField(b, v, c.guarded(i))
}

// money appends m as the columns i (amount) and i+1 (currency).
func (c *csvWriter) money(b []byte, m *provider.Money, i int) []byte {
	if m == nil {
		return append(b, ',')
	}
	b = c.value(b, appendAmount(c.val[:0], m.Amount), i)
	b = append(b, ',')
	return appendCSVField(b, m.Currency, c.guarded(i+1))
}

// appendCSVField appends one value, quoted when it needs to be: a
// separator, a quote or a line break inside, or a leading space or tab,
// which some readers trim. With guard, a value starting with =, +, -, @,
// a tab or a CR gets a leading ' first.
func appendCSVField[T string | []byte](b []byte, f T, guard bool) []byte {
	prefix := guard && len(f) > 0 && (f[0] == '=' || f[0] == '+' || f[0] == '-' || f[0] == '@' || f[0] == '\t' || f[0] == '\r')
	quote := !prefix && len(f) > 0 && (f[0] == ' ' || f[0] == '\t')
	for i := 0; i < len(f) && !quote; i++ {
		switch f[i] {
		case ',', '"', '\r', '\n':
			quote = true
		}
	}
	if quote {
		b = append(b, '"')
	}
	if prefix {
		b = append(b, '\'')
	}
	if !quote {
		return append(b, f...)
	}
	for i := 0; i < len(f); i++ {
		if f[i] == '"' {
			b = append(b, '"')
		}
		b = append(b, f[i])
	}
	return append(b, '"')
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
