package reconcile

import (
	"slices"
	"time"

	"github.com/shopspring/decimal"

	"orderd/provider"
)

// Kinds of a drift explanation's parts.
const (
	// PartBoundary: a completion within BoundaryWindow of either
	// snapshot, which the provider's balance may or may not already show
	// at that snapshot.
	PartBoundary = "boundary"
	// PartProcessing: an order orderd still sees in new or processing,
	// which the provider may already have moved money for.
	PartProcessing = "processing"
	// PartInDoubt: a creation whose outcome orderd does not know yet.
	PartInDoubt = "in_doubt"
	// PartRefundInFlight: a refund transaction not final yet.
	PartRefundInFlight = "refund_in_flight"
)

// partOrder ranks the kinds: timing evidence first, then what is known to
// be in flight, then what may not exist at all.
var partOrder = []string{PartBoundary, PartProcessing, PartRefundInFlight, PartInDoubt}

// Candidate is one possible explanation of part of a drift.
type Candidate struct {
	Kind string
	// Amount is the candidate's signed contribution to the drift (actual
	// minus expected): for example a payin credited by the provider while
	// orderd still sees it processing contributes its amount; a payin
	// completed just after the opening snapshot, which the opening
	// balance already showed, contributes minus its amount.
	Amount decimal.Decimal
	Ref    PartOrder
}

// PartOrder names the order (or creation) behind a candidate.
type PartOrder struct {
	OrderID         string `json:"orderId,omitempty"`
	MerchantOrderID string `json:"merchantOrderId,omitempty"`
	AttemptID       int64  `json:"attemptId,omitempty"`
	// Entry is the movement: payin, payout, refund, or the attempt's kind.
	Entry string `json:"entry"`
	// Amount is the contribution to the drift, signed.
	Amount string `json:"amount"`
	// At is when the movement was placed (boundary), or since when it is
	// pending.
	At   time.Time `json:"at"`
	Note string    `json:"note,omitempty"`
}

// Part is the sum of the chosen candidates of one kind.
type Part struct {
	Kind   string      `json:"kind"`
	Amount string      `json:"amount"`
	Orders []PartOrder `json:"orders"`
}

// Explanation methods.
const (
	// MethodExact: a subset of the candidates sums to the drift exactly.
	MethodExact = "exact"
	// MethodPartial: no subset matched; the greedy pass explained part.
	MethodPartial = "partial"
	// MethodNone: nothing explains any of the drift (or there is none).
	MethodNone = "none"
)

// Explanation is the attribution of a drift.
type Explanation struct {
	Method      string
	Explained   decimal.Decimal
	Unexplained decimal.Decimal
	Parts       []Part
}

// maxSubset bounds the size of the exact subsets tried; searchBudget
// bounds the work (additions) spent trying them.
const (
	maxSubset    = 4
	searchBudget = 300_000
)

// Explain attributes drift to candidates. The method, in order:
//
//  1. Exact subset match: the smallest set of at most four candidates
//     whose amounts sum to the drift exactly, found by trying sizes 1 to 4
//     with a hash of amounts for the last member (so sizes 1 and 2 cost
//     one pass), within a fixed budget of additions. Among sets of the same
//     size, the one reached first in candidate order wins: boundary before
//     processing before refunds in flight before in-doubt creations, and
//     within a kind larger amounts first.
//  2. Otherwise, greedy: in the same order, take every candidate whose
//     amount has the sign of what is left and is not larger than it, so
//     the unexplained rest only shrinks towards zero and never flips sign.
//
// What remains is unexplained. A candidate's amount matching is evidence,
// not proof; the parts name the orders so a human can check.
func Explain(drift decimal.Decimal, cands []Candidate) Explanation {
	ex := Explanation{Method: MethodNone, Explained: decimal.Zero, Unexplained: drift}
	if drift.IsZero() {
		return ex
	}
	cs := make([]Candidate, 0, len(cands))
	for _, c := range cands {
		if !c.Amount.IsZero() {
			cs = append(cs, c)
		}
	}
	rank := func(kind string) int {
		if i := slices.Index(partOrder, kind); i >= 0 {
			return i
		}
		return len(partOrder)
	}
	slices.SortStableFunc(cs, func(a, b Candidate) int {
		if ra, rb := rank(a.Kind), rank(b.Kind); ra != rb {
			return ra - rb
		}
		return b.Amount.Abs().Cmp(a.Amount.Abs())
	})
	if pick := exactSubset(drift, cs); pick != nil {
		ex.Method = MethodExact
		return ex.with(cs, pick)
	}
	var pick []int
	left := drift
	for i, c := range cs {
		if c.Amount.Sign() == left.Sign() && c.Amount.Abs().LessThanOrEqual(left.Abs()) {
			pick = append(pick, i)
			left = left.Sub(c.Amount)
			if left.IsZero() {
				break
			}
		}
	}
	if len(pick) == 0 {
		return ex
	}
	ex.Method = MethodPartial
	if left.IsZero() {
		ex.Method = MethodExact
	}
	return ex.with(cs, pick)
}

// with fills the explanation from the chosen candidates.
func (ex Explanation) with(cs []Candidate, pick []int) Explanation {
	byKind := map[string]*Part{}
	var order []string
	sums := map[string]decimal.Decimal{}
	for _, i := range pick {
		c := cs[i]
		p, ok := byKind[c.Kind]
		if !ok {
			p = &Part{Kind: c.Kind}
			byKind[c.Kind] = p
			order = append(order, c.Kind)
		}
		ref := c.Ref
		ref.Amount = formatSigned(c.Amount)
		p.Orders = append(p.Orders, ref)
		sums[c.Kind] = sums[c.Kind].Add(c.Amount)
		ex.Explained = ex.Explained.Add(c.Amount)
	}
	for _, k := range order {
		p := byKind[k]
		p.Amount = formatSigned(sums[k])
		ex.Parts = append(ex.Parts, *p)
	}
	ex.Unexplained = ex.Unexplained.Sub(ex.Explained)
	return ex
}

// exactSubset returns the indexes of the first smallest subset of cs (at
// most maxSubset members) summing to target, or nil.
func exactSubset(target decimal.Decimal, cs []Candidate) []int {
	index := make(map[string][]int, len(cs))
	for i, c := range cs {
		k := c.Amount.String()
		index[k] = append(index[k], i)
	}
	// last finds a member after position from with amount want.
	last := func(want decimal.Decimal, from int) int {
		for _, j := range index[want.String()] {
			if j > from {
				return j
			}
		}
		return -1
	}
	budget := searchBudget
	for size := 1; size <= maxSubset && size <= len(cs); size++ {
		chosen := make([]int, 0, size)
		var rec func(start int, left decimal.Decimal) bool
		rec = func(start int, left decimal.Decimal) bool {
			if len(chosen) == size-1 {
				prev := -1
				if len(chosen) > 0 {
					prev = chosen[len(chosen)-1]
				}
				if j := last(left, max(prev, start-1)); j >= 0 {
					chosen = append(chosen, j)
					return true
				}
				return false
			}
			for i := start; i < len(cs); i++ {
				if budget--; budget < 0 {
					return false
				}
				chosen = append(chosen, i)
				if rec(i+1, left.Sub(cs[i].Amount)) {
					return true
				}
				chosen = chosen[:len(chosen)-1]
			}
			return false
		}
		if rec(0, target) {
			slices.Sort(chosen)
			return chosen
		}
		if budget < 0 {
			return nil
		}
	}
	return nil
}

// formatSigned writes a signed amount with at least two decimals, as
// money is shown elsewhere.
func formatSigned(d decimal.Decimal) string {
	if d.Exponent() > -2 {
		return d.StringFixed(2)
	}
	return provider.FormatAmount(d)
}
