package reconcile

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
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
}

// WriteCSV writes the report of p as CSV (RFC 4180: CRLF line ends,
// quoting where needed, a header row). The order lines go to lines; the
// per-currency summary goes to summary, or, when summary is nil, to lines
// after an empty line, with its own header. Lines are written as they
// are read and totals kept per currency, so the report streams in one
// pass.
func (r *Reporter) WriteCSV(ctx context.Context, lines, summary io.Writer, p Period) error {
	rp, err := r.open(ctx, p)
	if err != nil {
		return err
	}
	defer rp.close()
	lw := csv.NewWriter(lines)
	lw.UseCRLF = true
	if err := lw.Write(CSVLineHeader); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	t := newTotals()
	fl := flagged{}
	rec := make([]string, len(CSVLineHeader))
	err = rp.lines(ctx, func(l *Line) error {
		t.add(l)
		fl.add(l)
		csvLine(rec, l)
		return lw.Write(rec)
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
	sw := lw
	if summary != nil {
		lw.Flush()
		if err := lw.Error(); err != nil {
			return fmt.Errorf("write csv: %w", err)
		}
		sw = csv.NewWriter(summary)
		sw.UseCRLF = true
	} else {
		// An empty line ends the lines section. csv.Writer writes a
		// one-field record of "" as a quoted "", so the line goes around it.
		lw.Flush()
		if err := lw.Error(); err != nil {
			return fmt.Errorf("write csv: %w", err)
		}
		if _, err := io.WriteString(lines, "\r\n"); err != nil {
			return fmt.Errorf("write csv: %w", err)
		}
	}
	if err := sw.Write(CSVSummaryHeader); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	for _, c := range cur {
		if err := sw.Write(append(csvSummary(c), csvVerdict(c, vs[c.Currency])...)); err != nil {
			return fmt.Errorf("write csv: %w", err)
		}
	}
	sw.Flush()
	if err := sw.Error(); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	return nil
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
		return append(rec, make([]string, len(CSVSummaryHeader)-len(csvVerdictHeader)-len(rec))...)
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
