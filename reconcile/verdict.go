package reconcile

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"orderd/provider"
	"orderd/store"
)

// This file decides whether a period closes, per currency: a verdict, the
// bridge from the opening balance to the closing one, and the breaks (open
// findings) that stop the close.

// Verdicts.
const (
	// VerdictReconciled: the bridge closes (residual within tolerance),
	// every order of the period is final and no finding stops the close.
	VerdictReconciled = "reconciled"
	// VerdictReconciledWithPending: no finding stops the close, but orders
	// are not final yet or a residual is waiting for the next balance
	// check (reconcile.drift_grace) to be explained or become a finding.
	VerdictReconciledWithPending = "reconciled_with_pending"
	// VerdictBreaks: open findings stop the close (see Verdict.Breaks).
	VerdictBreaks = "breaks"
	// VerdictIncomplete: a balance snapshot at either end of the period is
	// missing, so the bridge cannot be drawn.
	VerdictIncomplete = "incomplete"
)

// Break priorities.
const (
	PriorityHigh   = "high"
	PriorityMedium = "medium"
	PriorityLow    = "low"
)

// Verdict is whether a currency's period closes.
type Verdict struct {
	Verdict string
	Bridge  Bridge
	Breaks  []Break
}

// Bridge goes from the opening balance to the closing one:
//
//	expectedClosing = opening + payins + payouts + refunds + fees + other
//	residual        = closing - expectedClosing
//
// Payins, payouts and refunds are the ledger's movements placed between
// the two snapshots (as the balance checks count them), with the period's
// payin and payout fees shown apart: payins + fees is what the merchant's
// wallet was credited. Other is what people accepted from balance_drift
// findings (resolved as explained or written off). Opening and Closing
// are nil when the snapshot is missing; then so are ExpectedClosing and
// Residual.
type Bridge struct {
	Opening, Closing               *store.BalanceSnapshot
	Payins, Payouts, Refunds, Fees decimal.Decimal
	Other                          decimal.Decimal
	ExpectedClosing, Residual      *decimal.Decimal
	Tolerance                      decimal.Decimal
	// OpeningInferred: no snapshot was taken at or before the period's
	// start, but nothing moved the balance before the first one in it.
	OpeningInferred bool
}

// Break is an open finding that stops the close.
type Break struct {
	FindingID int64
	Kind      string
	Key       string
	// Amount is the money at stake, when one applies.
	Amount     *decimal.Decimal
	AgeSeconds int64
	Priority   string
}

// flaggedOrder is an order line with open findings: which currency's
// close they stop and the money at stake.
type flaggedOrder struct {
	currency string
	amount   *decimal.Decimal
}

// flagged collects the lines with open findings by provider order id and
// merchantOrderId (finding keys are one or the other).
type flagged map[string]flaggedOrder

func (f flagged) add(l *Line) {
	if len(l.OpenFindings) == 0 || l.Membership == store.ReportRefund {
		return
	}
	fo := flaggedOrder{currency: l.currency()}
	switch {
	case l.Authorized != nil:
		a := l.Authorized.Amount
		fo.amount = &a
	case l.Requested != nil:
		a := l.Requested.Amount
		fo.amount = &a
	}
	f[l.OrderID] = fo
	f[l.MerchantOrderID] = fo
}

// breakPriority ranks a finding kind: money known to be wrong first, then
// money whose fate is unknown, then records.
func breakPriority(kind string) string {
	switch kind {
	case store.FindingBalanceDrift, store.FindingMismatch, store.FindingAmountChanged, store.FindingIdentityConflict:
		return PriorityHigh
	case store.FindingStuckOrder, store.FindingUnresolvedCreation, store.FindingQuarantinedWebhook:
		return PriorityMedium
	}
	return PriorityLow
}

// verdicts decides the verdict of every currency in cur.
func (rp *report) verdicts(ctx context.Context, cur []*CurrencyTotals, fl flagged) (map[string]*Verdict, error) {
	out := make(map[string]*Verdict, len(cur))
	for _, c := range cur {
		v := &Verdict{Breaks: []Break{}}
		out[c.Currency] = v
		if err := rp.bridge(ctx, c, &v.Bridge); err != nil {
			return nil, err
		}
		alignBalance(c, &v.Bridge)
	}
	// Breaks: the findings open now that were found before the period
	// ended, placed in the currency they concern.
	asOf := rp.p.To
	if rp.gen.Before(asOf) {
		asOf = rp.gen
	}
	err := rp.tx.Findings(ctx, rp.p.From, rp.p.To, func(f store.Finding) error {
		if f.State != store.StatusOpen {
			return nil
		}
		b := Break{FindingID: f.ID, Kind: f.Kind, Key: f.Key, Priority: breakPriority(f.Kind),
			AgeSeconds: max(0, int64(asOf.Sub(f.FoundAt)/time.Second))}
		var ccys []string
		switch {
		case f.Kind == store.FindingBalanceDrift:
			ccys = []string{strings.ToLower(f.Key)}
			var d struct {
				Unexplained string `json:"unexplained"`
			}
			if json.Unmarshal(f.Detail, &d) == nil {
				if a, err := provider.ParseAmount(d.Unexplained); err == nil {
					b.Amount = &a
				}
			}
		case f.Kind == store.FindingQuarantinedWebhook:
			// An unreadable webhook may carry any currency's money.
			for _, c := range cur {
				ccys = append(ccys, c.Currency)
			}
		default:
			if fo, ok := fl[f.Key]; ok && fo.currency != "" {
				ccys, b.Amount = []string{fo.currency}, fo.amount
			}
		}
		for _, ccy := range ccys {
			if v, ok := out[ccy]; ok {
				v.Breaks = append(v.Breaks, b)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, c := range cur {
		v := out[c.Currency]
		slices.SortStableFunc(v.Breaks, func(a, b Break) int {
			if pa, pb := priorityRank(a.Priority), priorityRank(b.Priority); pa != pb {
				return pa - pb
			}
			return int(b.AgeSeconds - a.AgeSeconds)
		})
		br := v.Bridge
		switch {
		case br.Opening == nil || br.Closing == nil:
			v.Verdict = VerdictIncomplete
		case len(v.Breaks) > 0:
			v.Verdict = VerdictBreaks
		case c.Open > 0 || br.Residual.Abs().GreaterThan(br.Tolerance):
			v.Verdict = VerdictReconciledWithPending
		default:
			v.Verdict = VerdictReconciled
		}
	}
	return out, nil
}

// alignBalance makes the balance summary of c tell the bridge's story:
// one report, one set of figures. Start and end are the bridge's opening
// and closing snapshots; expected movement is what the ledger moved
// between them (payins, payouts, refunds and fees); drift is actual minus
// expected; its "explained" part is what people accounted for (the
// bridge's other: balance_drift findings resolved as explained or written
// off), and its unexplained part is the bridge's residual. Without a
// bridge (a snapshot missing at either end) those figures are unknown.
// The comparisons and the chart stay the balance checks' own.
func alignBalance(c *CurrencyTotals, br *Bridge) {
	b := c.Balance
	if b == nil {
		return
	}
	if br.Opening == nil || br.Closing == nil {
		b.Expected, b.Drift, b.Explained, b.Unexplained = nil, nil, nil, nil
		b.Resolved, b.UnexplainedBeyondTolerance = false, false
		return
	}
	b.Start, b.End = *br.Opening, *br.Closing
	b.Actual = br.Closing.Amount.Sub(br.Opening.Amount)
	exp := br.Payins.Add(br.Payouts).Add(br.Refunds).Add(br.Fees)
	drift := b.Actual.Sub(exp)
	other, residual := br.Other, *br.Residual
	b.Expected, b.Drift, b.Explained, b.Unexplained = &exp, &drift, &other, &residual
	b.Resolved = !other.IsZero()
	b.UnexplainedBeyondTolerance = residual.Abs().GreaterThan(br.Tolerance)
}

func priorityRank(p string) int {
	return slices.Index([]string{PriorityHigh, PriorityMedium, PriorityLow}, p)
}

// bridge fills the bridge of c's currency.
func (rp *report) bridge(ctx context.Context, c *CurrencyTotals, b *Bridge) error {
	ccy := c.Currency
	opening, ok, err := rp.tx.OpeningSnapshot(ctx, ccy, rp.p.From, rp.p.To)
	if err != nil {
		return err
	}
	if ok {
		b.Opening = &opening
		b.OpeningInferred = opening.TakenAt.After(rp.p.From)
		c.seen(opening.Amount)
	}
	closing, ok, err := rp.tx.LatestSnapshot(ctx, ccy, rp.p.To)
	if err != nil {
		return err
	}
	// A closing balance is one taken in the period: a snapshot from
	// before it says nothing about its end.
	if ok && !closing.TakenAt.Before(rp.p.From) {
		b.Closing = &closing
		c.seen(closing.Amount)
	}
	if b.Opening == nil || b.Closing == nil {
		return nil
	}
	err = rp.tx.BridgeMovements(ctx, ccy, b.Opening.TakenAt, b.Closing.TakenAt, func(m store.LedgerMovement) error {
		switch m.Kind {
		case store.MovementPayin:
			b.Payins = b.Payins.Add(m.Amount)
		case store.MovementPayout:
			b.Payouts = b.Payouts.Add(m.Amount)
		default:
			b.Refunds = b.Refunds.Add(m.Amount)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// The fees the period's orders paid, shown apart: the ledger moves the
	// net amounts, so payins + fees stays what the wallet was credited.
	b.Payins = b.Payins.Add(c.PayinFees)
	b.Payouts = b.Payouts.Add(c.PayoutFees)
	b.Fees = c.Fees().Neg()
	if b.Other, err = rp.tx.AcceptedDrift(ctx, ccy, b.Opening.TakenAt, b.Closing.TakenAt); err != nil {
		return err
	}
	if b.Tolerance, err = rp.tx.DriftToleranceAt(ctx, ccy, rp.p.To); err != nil {
		return err
	}
	exp := b.Opening.Amount.Add(b.Payins).Add(b.Payouts).Add(b.Refunds).Add(b.Fees).Add(b.Other)
	res := b.Closing.Amount.Sub(exp)
	b.ExpectedClosing, b.Residual = &exp, &res
	return nil
}

// jsonVerdict is a currency's verdict in the JSON report.
type jsonVerdict struct {
	Verdict string      `json:"verdict"`
	Bridge  jsonBridge  `json:"bridge"`
	Breaks  []jsonBreak `json:"breaks"`
}

type jsonBridge struct {
	Opening         *string         `json:"opening"`
	Movements       jsonBridgeMoves `json:"movements"`
	ExpectedClosing *string         `json:"expectedClosing"`
	Closing         *string         `json:"closing"`
	Residual        *string         `json:"residual"`
}

// jsonBridgeMoves are null when the bridge is incomplete: no movement
// was counted, and 0.00 would read as "nothing moved".
type jsonBridgeMoves struct {
	Payins  *string `json:"payins"`
	Payouts *string `json:"payouts"`
	Refunds *string `json:"refunds"`
	Fees    *string `json:"fees"`
	Other   *string `json:"other"`
}

type jsonBreak struct {
	FindingID  int64   `json:"findingId"`
	Kind       string  `json:"kind"`
	Key        string  `json:"key"`
	Amount     *string `json:"amount,omitempty"`
	AgeSeconds int64   `json:"ageSeconds"`
	Priority   string  `json:"priority"`
}

func newJSONVerdict(c *CurrencyTotals, v *Verdict) jsonVerdict {
	opt := func(d *decimal.Decimal) *string {
		if d == nil {
			return nil
		}
		s := c.Format(*d)
		return &s
	}
	b := v.Bridge
	j := jsonVerdict{Verdict: v.Verdict, Breaks: make([]jsonBreak, 0, len(v.Breaks)), Bridge: jsonBridge{
		ExpectedClosing: opt(b.ExpectedClosing), Residual: opt(b.Residual),
	}}
	if b.ExpectedClosing != nil {
		j.Bridge.Movements = jsonBridgeMoves{Payins: opt(&b.Payins), Payouts: opt(&b.Payouts),
			Refunds: opt(&b.Refunds), Fees: opt(&b.Fees), Other: opt(&b.Other)}
	}
	if b.Opening != nil {
		j.Bridge.Opening = opt(&b.Opening.Amount)
	}
	if b.Closing != nil {
		j.Bridge.Closing = opt(&b.Closing.Amount)
	}
	for _, br := range v.Breaks {
		j.Breaks = append(j.Breaks, jsonBreak{FindingID: br.FindingID, Kind: br.Kind, Key: br.Key,
			Amount: opt(br.Amount), AgeSeconds: br.AgeSeconds, Priority: br.Priority})
	}
	return j
}

// jsonCurrencyVerdict is a currency of the JSON report: its totals, then
// its verdict.
type jsonCurrencyVerdict struct {
	jsonCurrency
	jsonVerdict
}

// csvVerdict is the verdict's part of a CSV summary row: the columns
// verdict to break_kinds of CSVSummaryHeader.
func csvVerdict(c *CurrencyTotals, v *Verdict) []string {
	opt := func(d *decimal.Decimal) string {
		if d == nil {
			return ""
		}
		return c.Format(*d)
	}
	b := v.Bridge
	var opening, closing string
	if b.Opening != nil {
		opening = c.Format(b.Opening.Amount)
	}
	if b.Closing != nil {
		closing = c.Format(b.Closing.Amount)
	}
	kinds := make([]string, 0, len(v.Breaks))
	for _, br := range v.Breaks {
		kinds = append(kinds, br.Kind)
	}
	moves := make([]string, 5)
	if b.ExpectedClosing != nil {
		moves = []string{c.Format(b.Payins), c.Format(b.Payouts), c.Format(b.Refunds), c.Format(b.Fees), c.Format(b.Other)}
	}
	rec := append([]string{v.Verdict, opening}, moves...)
	return append(rec, opt(b.ExpectedClosing), closing, opt(b.Residual), strconv.Itoa(len(v.Breaks)), strings.Join(kinds, ";"))
}

// htmlVerdict is a currency's verdict in the HTML report.
type htmlVerdict struct {
	Currency, Verdict, Label, Class        string
	Opening, OpeningAt, Closing, ClosingAt string
	Payins, Payouts, Refunds, Fees, Other  string
	Expected, Residual                     string
	ResidualBad                            bool
	Breaks                                 []htmlBreak
	// MoreBreaks: the breaks past the HTML report's cap, which the JSON
	// report lists.
	MoreBreaks int
}

type htmlBreak struct {
	Break
	Amount, Age string
}

// verdictLabels are the verdicts as people read them, and their colour.
var verdictLabels = map[string][2]string{
	VerdictReconciled:            {"reconciled", "ok"},
	VerdictReconciledWithPending: {"reconciled, with pending", "pending"},
	VerdictBreaks:                {"breaks", "bad"},
	VerdictIncomplete:            {"incomplete: a balance snapshot is missing", "unknown"},
}

// newHTMLVerdict is v as the HTML report shows it. It lists at most
// maxBreaks breaks, the first in priority order, and says how many more the
// JSON report lists: a period with thousands of open findings keeps the
// page readable and small.
func newHTMLVerdict(c *CurrencyTotals, v *Verdict, maxBreaks int) htmlVerdict {
	b := v.Bridge
	dash := func(d *decimal.Decimal) string {
		if d == nil {
			return "–"
		}
		return c.Format(*d)
	}
	money := func(d decimal.Decimal) string { return c.Format(d) }
	h := htmlVerdict{Currency: c.Currency, Verdict: v.Verdict, Label: verdictLabels[v.Verdict][0],
		Class: verdictLabels[v.Verdict][1], Opening: "no snapshot", Closing: "no snapshot",
		Payins: "–", Payouts: "–", Refunds: "–", Fees: "–", Other: "–",
		Expected: dash(b.ExpectedClosing), Residual: dash(b.Residual),
		ResidualBad: b.Residual != nil && b.Residual.Abs().GreaterThan(b.Tolerance)}
	if b.ExpectedClosing != nil {
		h.Payins, h.Payouts, h.Refunds = money(b.Payins), money(b.Payouts), money(b.Refunds)
		h.Fees, h.Other = money(b.Fees), money(b.Other)
	}
	if b.Opening != nil {
		h.Opening, h.OpeningAt = money(b.Opening.Amount), b.Opening.TakenAt.Format("2006-01-02 15:04:05")
	}
	if b.Closing != nil {
		h.Closing, h.ClosingAt = money(b.Closing.Amount), b.Closing.TakenAt.Format("2006-01-02 15:04:05")
	}
	for i, br := range v.Breaks {
		if i == maxBreaks {
			h.MoreBreaks = len(v.Breaks) - maxBreaks
			break
		}
		hb := htmlBreak{Break: br, Age: (time.Duration(br.AgeSeconds) * time.Second).String()}
		if br.Amount != nil {
			hb.Amount = money(*br.Amount) + " " + c.Currency
		}
		h.Breaks = append(h.Breaks, hb)
	}
	return h
}
