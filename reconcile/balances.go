package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"orderd/provider"
	"orderd/store"
)

// maxPendingCandidates bounds how many pending movements per currency are
// offered to Explain; beyond it the oldest are used.
const maxPendingCandidates = 20_000

// RunBalances snapshots the provider's balance per currency and compares
// each with the ledger of movements orderd has observed:
//
//	actual   = closing balance - opening balance
//	expected = movements placed between the two snapshots
//	drift    = actual - expected
//
// The opening snapshot is the previous one, or, while an earlier
// comparison left drift unexplained beyond tolerance, the snapshot where
// the books last balanced, so a movement learned late can still explain
// it and real missing money keeps showing until it is explained.
//
// The books agree when the drift is within DriftTolerance. Only then does
// the currency's balance_drift finding resolve by itself (unless a person
// reopened it: then only a person resolves it again). The orders whose
// amounts could account for a drift (see Explain: completions near either
// snapshot, orders still processing, refunds in flight, in-doubt
// creations) are evidence for a person, named in the comparison's detail
// with whether each has settled since; that their amounts sum to the gap
// never makes it agree. A drift beyond tolerance opens (or refreshes) a
// balance_drift finding keyed by currency, which queues a
// reconcile.balance_drift event. Every comparison is stored in
// balance_drifts.
//
// A comparison that does not add up first asks the provider (get-status)
// about the orders that could explain it — the currency's orders still
// processing or refunding, and those whose final state orderd learned
// after the snapshot — at most Config.DriftPolls of them, paced by the
// client's rate limit, and applies the answers through the one write
// path; then it compares again. A finding opens only when an amount is
// still unexplained at Config.DriftGrace consecutive checks.
//
// Counts: ledger_states, currencies, compared, drifting, polled, learned,
// findings_opened, findings_resolved.
func (r *Reconciler) RunBalances(ctx context.Context) (Summary, error) {
	c := newCounts("ledger_states", "currencies", "compared", "drifting", "polled", "learned", "findings_opened", "findings_resolved")
	return r.record(ctx, JobBalances, c, func(ctx context.Context, runID int64) error {
		return r.balances(ctx, runID, c)
	})
}

func (r *Reconciler) balances(ctx context.Context, runID int64, c *counts) error {
	// Bring the ledger up to date before the snapshot, then once more
	// after it, so the comparison sees everything orderd knew at the time.
	n, err := r.store.UpdateLedger(ctx, 0)
	c.add("ledger_states", n)
	if err != nil {
		return err
	}
	// The client's error names its endpoint ("balances: ...") and the run's
	// error is prefixed with the job's name: nothing to add here.
	bs, err := r.client.Balances(ctx)
	if err != nil {
		return err
	}
	takenAt := r.now()
	n, err = r.store.UpdateLedger(ctx, 0)
	c.add("ledger_states", n)
	if err != nil {
		return err
	}
	slices.SortFunc(bs, func(a, b provider.Balance) int { return strings.Compare(a.Currency, b.Currency) })
	p := r.newProgress(JobBalances, len(bs))
	var errs []error
	for _, b := range bs {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		c.add("currencies", 1)
		if err := r.compare(ctx, runID, b, takenAt, c); err != nil {
			errs = append(errs, err)
			r.log.Warn("balance comparison failed", "job", JobBalances, "currency", b.Currency, "err", err)
		}
		p.step()
	}
	return errors.Join(errs...)
}

// compare stores the snapshot of one currency and its comparison.
func (r *Reconciler) compare(ctx context.Context, runID int64, b provider.Balance, takenAt time.Time, c *counts) error {
	m, err := b.Money()
	if err != nil {
		return fmt.Errorf("balance %s: %w", b.Currency, err)
	}
	ccy := strings.ToLower(m.Currency)
	closing, err := r.store.InsertBalanceSnapshot(ctx, ccy, m.Amount, takenAt, runID)
	if err != nil {
		return err
	}
	opening, ok, err := r.store.DriftOpening(ctx, closing)
	if err != nil {
		return err
	}
	if !ok {
		return nil // the first snapshot of this currency
	}
	d, det, err := r.drift(ctx, opening, closing, nil)
	if err != nil {
		return err
	}
	if !d.WithinTolerance {
		// Before calling it a drift, ask the provider about the orders
		// that could explain it: a completion orderd has not heard of yet
		// is timing, not missing money.
		asked, err := r.askAboutDrift(ctx, ccy, closing.TakenAt, d.Drift, c)
		if err != nil {
			return err
		}
		if asked.changed > 0 || len(asked.stillPending) > 0 {
			n, err := r.store.UpdateLedger(ctx, 0)
			c.add("ledger_states", n)
			if err != nil {
				return err
			}
			if d, det, err = r.drift(ctx, opening, closing, asked.stillPending); err != nil {
				return err
			}
		}
	}
	if err := r.nameCandidates(ctx, &det, d.WithinTolerance); err != nil {
		return err
	}
	if d.Detail, err = json.Marshal(det); err != nil {
		return fmt.Errorf("drift detail: %w", err)
	}
	d.RunID = runID
	c.add("compared", 1)
	if !d.WithinTolerance {
		c.add("drifting", 1)
	}
	rec, err := store.ExecAs[driftRecorded](ctx, r.store, &recordDriftCmd{Currency: ccy, Drift: d, Grace: r.cfg.DriftGrace})
	opened, resolved := rec.Opened, rec.Resolved
	if err != nil {
		return fmt.Errorf("record drift of %s: %w", ccy, err)
	}
	log := r.log.With("job", JobBalances, "currency", ccy)
	switch {
	case opened:
		c.add("findings_opened", 1)
		log.Warn("balance drift unexplained", "drift", d.Drift, "unexplained", d.Unexplained, "tolerance", d.Tolerance)
	case rec.Waiting:
		log.Info("balance drift unexplained; waiting for the next check before a finding",
			"drift", d.Drift, "unexplained", d.Unexplained, "checks", rec.Checks, "grace", r.cfg.DriftGrace)
	case rec.HeldOpen:
		log.Info("balance agrees; the balance_drift finding a person reopened stays open until a person resolves it",
			"drift", d.Drift)
	case resolved:
		c.add("findings_resolved", 1)
		log.Info("balance agrees again from where the books last agreed; balance_drift finding resolved",
			"drift", d.Drift, "opening", d.Opening.ID)
	case !d.WithinTolerance:
		log.Info("balance drift unexplained; the finding stays open", "drift", d.Drift,
			"attributed", det.Attributed, "evidence", det.Evidence)
	default:
		log.Debug("balance compared", "drift", d.Drift)
	}
	return nil
}

// maxNamed bounds the orders a comparison's detail names: the first ones
// named are kept, the rest counted.
const maxNamed = 20

// nameCandidates fills det.Named: the orders the comparisons of this
// stretch (those from the same opening snapshot while the books do not
// agree) named as possible causes of the drift, with where each stands
// now, and det.Evidence, which sums them up. An order stays named once
// named, so a person sees that the orders it was put down to settled and
// the gap stayed.
func (r *Reconciler) nameCandidates(ctx context.Context, det *DriftDetail, agreed bool) error {
	var named []NamedOrder
	if !agreed {
		prev, ok, err := r.store.PreviousBalanceDrift(ctx, det.Currency, det.Closing.ID)
		if err != nil {
			return err
		}
		if ok && !prev.WithinTolerance && prev.Opening.ID == det.Opening.ID {
			var pd DriftDetail
			if json.Unmarshal(prev.Detail, &pd) == nil {
				named, det.NamedLeftOut = pd.Named, pd.NamedLeftOut
			}
		}
	}
	key := func(o PartOrder) string {
		if o.MerchantOrderID != "" {
			return o.MerchantOrderID + "/" + o.Entry
		}
		return o.OrderID + "/" + o.Entry
	}
	have := map[string]bool{}
	for _, n := range named {
		have[key(n.PartOrder)] = true
	}
	for _, p := range det.Parts {
		for _, o := range p.Orders {
			if have[key(o)] {
				continue
			}
			have[key(o)] = true
			if len(named) >= maxNamed {
				det.NamedLeftOut++
				continue
			}
			named = append(named, NamedOrder{PartOrder: o, Kind: p.Kind, NamedAt: det.Closing.TakenAt})
		}
	}
	mids := make([]string, 0, len(named))
	for _, n := range named {
		mids = append(mids, n.MerchantOrderID)
	}
	st, err := r.store.Settlements(ctx, mids)
	if err != nil {
		return err
	}
	det.Evidence = EvidenceNone
	for i := range named {
		s := st[named[i].MerchantOrderID]
		named[i].Status, named[i].Settled = s.Status, s.Settled
		switch {
		case !s.Settled:
			det.Evidence = EvidenceUnsettled
		case det.Evidence == EvidenceNone:
			det.Evidence = EvidenceSettled
		}
	}
	det.Named = named
	return nil
}

// asked is what askAboutDrift learned.
type asked struct {
	// changed counts the orders and watches whose state changed.
	changed int
	// stillPending holds the merchantOrderIds the provider still shows in
	// flight after the snapshot: they moved no money by it, so they
	// explain none of the drift.
	stillPending map[string]bool
}

// askAboutDrift polls what could explain a drift of currency at a
// snapshot taken at takenAt, at most Config.DriftPolls calls, and applies
// the answers through the one write path: the currency's orders in
// flight, the orders whose final state orderd learned only after the
// snapshot with no completion time from the provider, its creations
// still in doubt, and the orders handed to orderd to follow that it has
// not seen yet (their currency is unknown until then). A failed call is
// logged and skipped: the comparison then stands on what orderd knew.
func (r *Reconciler) askAboutDrift(ctx context.Context, ccy string, takenAt time.Time, drift decimal.Decimal, c *counts) (asked, error) {
	out := asked{stillPending: map[string]bool{}}
	limit := r.cfg.DriftPolls
	if limit <= 0 {
		return out, nil
	}
	var mids []string
	seen := map[string]bool{}
	add := func(mid string) {
		if mid != "" && !seen[mid] && len(mids) < limit {
			seen[mid] = true
			mids = append(mids, mid)
		}
	}
	pending, err := r.inFlight(ctx, ccy, maxPendingCandidates)
	if err != nil {
		return out, err
	}
	// Most likely first: an order whose movement has the drift's sign
	// (a payin for money that appeared, a payout or refund for money that
	// went), then the oldest, which had the longest time to finish
	// unheard of.
	slices.SortStableFunc(pending, func(a, b store.PendingMovement) int {
		ma, mb := a.Amount.Sign() == drift.Sign(), b.Amount.Sign() == drift.Sign()
		if ma != mb {
			if ma {
				return -1
			}
			return 1
		}
		return a.Since.Compare(b.Since)
	})
	for _, p := range pending {
		add(p.MerchantOrderID)
	}
	// Where these belong is a guess until the provider says.
	late, err := r.store.LedgerMovements(ctx, ccy, takenAt.Add(-r.cfg.BoundaryWindow), r.now().Add(time.Millisecond))
	if err != nil {
		return out, err
	}
	for _, m := range late {
		if !m.PlacedByProvider && m.LearnedAt.After(takenAt) {
			add(m.MerchantOrderID)
		}
	}
	creations, err := r.store.UnsettledCreations(ctx)
	if err != nil {
		return out, err
	}
	for _, u := range creations {
		if u.Currency == ccy {
			add(u.MerchantOrderID)
		}
	}
	log := r.log.With("job", JobBalances, "currency", ccy)
	for _, mid := range mids {
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		c.add("polled", 1)
		asked := r.now()
		order, raw, err := r.client.GetStatus(ctx, mid)
		if err != nil {
			if !isNotFound(err) {
				log.Warn("drift: get-status failed", "merchantOrderId", mid, "err", err)
			}
			continue
		}
		res, err := store.ExecAs[store.Result](ctx, r.store, &applyPolledCmd{
			Obs:   store.Observation{Source: store.SourcePoll, Order: order, Raw: raw, ObservedAt: r.now()},
			Asked: asked,
		})
		if err != nil {
			return out, fmt.Errorf("apply %s: %w", mid, err)
		}
		if res.Outcome == store.OutcomeNew || res.Outcome == store.OutcomeChanged {
			out.changed++
			c.add("learned", 1)
			log.Info("drift: learned a change from the provider", "merchantOrderId", mid, "status", order.Status, "event", res.EventID)
		}
		if res.Outcome != outcomeConflict && orderInFlight(order) {
			out.stillPending[mid] = true
		}
	}
	// Watched orders orderd has not seen: any currency's.
	if left := limit - len(mids); left > 0 {
		ws, err := r.store.DueWatches(ctx, r.now().Add(100*365*24*time.Hour), store.DueCursor{}, left)
		if err != nil {
			return out, err
		}
		for _, w := range ws {
			c.add("polled", 1)
			before := c.get("watches_found")
			r.checkWatch(ctx, w, c)
			if c.get("watches_found") > before {
				out.changed++
				c.add("learned", 1)
			}
		}
	}
	return out, nil
}

// inFlight returns the currency's movements that may still happen, at
// most limit of each source: the pending movements orderd derived from
// order states, and the gateway's orders in flight that show no
// transaction yet (a payin the customer has not paid, as far as orderd
// knows), whose amount is the gateway request's.
func (r *Reconciler) inFlight(ctx context.Context, ccy string, limit int) ([]store.PendingMovement, error) {
	pending, err := r.store.PendingMovements(ctx, ccy, limit)
	if err != nil {
		return nil, err
	}
	gw, err := r.store.GatewayOrdersInFlight(ctx, ccy, limit)
	if err != nil {
		return nil, err
	}
	return append(pending, gw...), nil
}

// orderInFlight reports whether every movement of o is still to happen:
// the order is not final, or it is and every refund of it is not final.
func orderInFlight(o *provider.Order) bool {
	if !o.Status.IsFinal() {
		return true
	}
	refunds := 0
	for _, t := range o.Transactions {
		if t.Type == "refund" {
			refunds++
			if t.Status.IsFinal() {
				return false
			}
		}
	}
	return refunds > 0
}

// DriftDetail is the detail of a balance_drift finding and of a stored
// comparison (balance_drifts.detail). Amounts are numeric strings.
//
// Drift is measured from the last snapshot at which the books agreed.
// Unexplained is the whole drift: nothing but the books agreeing again (or
// a person) accounts for it. Explained stays "0.00"; comparisons made
// before attribution stopped counting as explanation wrote there the part
// their candidates summed to. Attributed and Parts are the orders whose
// amounts could account for the drift, and Named every order the
// comparisons from the same opening snapshot named, with whether each
// has settled since: evidence for a person to check.
type DriftDetail struct {
	Currency          string      `json:"currency"`
	Opening           SnapshotRef `json:"opening"`
	Closing           SnapshotRef `json:"closing"`
	Actual            string      `json:"actual"`
	Expected          string      `json:"expected"`
	ExpectedMovements int         `json:"expectedMovements"`
	Drift             string      `json:"drift"`
	Explained         string      `json:"explained"`
	Unexplained       string      `json:"unexplained"`
	Tolerance         string      `json:"tolerance"`
	WithinTolerance   bool        `json:"withinTolerance"`
	// Method is how the parts were chosen: exact, partial or none.
	Method     string `json:"method"`
	Candidates int    `json:"candidates"`
	Parts      []Part `json:"parts"`
	// Attributed is the sum of Parts.
	Attributed string `json:"attributed,omitempty"`
	// Carried are movements placed just before the opening snapshot that
	// orderd learned only after the books agreed there: that agreement did
	// not count them, so neither did the provider's balance at that
	// snapshot (its clock ran behind), and this comparison counts them in
	// Expected.
	Carried []PartOrder `json:"carried,omitempty"`
	// Named, NamedLeftOut and Evidence: see NamedOrder.
	Named        []NamedOrder `json:"named,omitempty"`
	NamedLeftOut int          `json:"namedLeftOut,omitempty"`
	Evidence     string       `json:"evidence,omitempty"`
}

// Evidence values: what the orders a drift was put down to say about it.
const (
	// EvidenceNone: no order could account for any of it.
	EvidenceNone = "none"
	// EvidenceUnsettled: an order named is not final yet; when it
	// settles, its movement is counted and the books may agree.
	EvidenceUnsettled = "unsettled"
	// EvidenceSettled: every order named settled and the gap stayed: it
	// is plainly unexplained.
	EvidenceSettled = "settled"
)

// NamedOrder is an order a comparison named as a possible cause of a
// drift, and where it stands at the latest comparison.
type NamedOrder struct {
	PartOrder
	// Kind is the part it was named in (boundary, processing, …).
	Kind string `json:"kind"`
	// NamedAt is the closing snapshot of the comparison that first named
	// it.
	NamedAt time.Time `json:"namedAt"`
	// Status is the order's status now ("creation <state>" for a creation
	// orderd holds no order for).
	Status string `json:"status"`
	// Settled: final, and its movements are in the ledger.
	Settled bool `json:"settled"`
}

// SnapshotRef is one balance snapshot in a DriftDetail.
type SnapshotRef struct {
	ID      int64     `json:"id"`
	Amount  string    `json:"amount"`
	TakenAt time.Time `json:"takenAt"`
}

// drift computes the comparison between two snapshots of one currency:
// the books agree (WithinTolerance) when actual minus expected is within
// the currency's tolerance. stillPending names orders the provider showed
// in flight after the closing snapshot: they are no candidates. The
// returned comparison's Detail is left for the caller to fill from det.
func (r *Reconciler) drift(ctx context.Context, opening, closing store.BalanceSnapshot, stillPending map[string]bool) (store.BalanceDrift, DriftDetail, error) {
	ccy := closing.Currency
	t0, t1 := opening.TakenAt, closing.TakenAt
	expected, nMoves, err := r.store.LedgerSum(ctx, ccy, t0, t1)
	if err != nil {
		return store.BalanceDrift{}, DriftDetail{}, err
	}
	carried, err := r.carriedAcross(ctx, opening)
	if err != nil {
		return store.BalanceDrift{}, DriftDetail{}, err
	}
	var carriedRefs []PartOrder
	for _, m := range carried {
		expected = expected.Add(m.Amount)
		nMoves++
		carriedRefs = append(carriedRefs, PartOrder{OrderID: m.ProviderOrderID, MerchantOrderID: m.MerchantOrderID,
			Entry: m.Kind, Amount: formatSigned(m.Amount), At: m.PlacedAt, Note: "placed just before the opening snapshot, learned after the books agreed there"})
	}
	actual := closing.Amount.Sub(opening.Amount)
	drift := actual.Sub(expected)

	skip := map[string]bool{}
	for _, m := range carried {
		skip[m.ProviderOrderID+"/"+m.EntryKey] = true
	}
	cands, err := r.candidates(ctx, ccy, t0, t1, stillPending, skip)
	if err != nil {
		return store.BalanceDrift{}, DriftDetail{}, err
	}
	ex := Explain(drift, cands)
	tol := r.cfg.DriftTolerance[ccy]
	// Attribution is evidence, not resolution: only the drift itself
	// being within tolerance means the books agree.
	within := drift.Abs().LessThanOrEqual(tol)

	det := DriftDetail{
		Currency:          ccy,
		Opening:           SnapshotRef{opening.ID, provider.FormatAmount(opening.Amount), t0},
		Closing:           SnapshotRef{closing.ID, provider.FormatAmount(closing.Amount), t1},
		Actual:            formatSigned(actual),
		Expected:          formatSigned(expected),
		ExpectedMovements: nMoves,
		Drift:             formatSigned(drift),
		Explained:         formatSigned(decimal.Zero),
		Unexplained:       formatSigned(drift),
		Tolerance:         formatSigned(tol),
		WithinTolerance:   within,
		Method:            ex.Method,
		Candidates:        len(cands),
		Parts:             ex.Parts,
		Attributed:        formatSigned(ex.Explained),
		Carried:           carriedRefs,
	}
	if det.Parts == nil {
		det.Parts = []Part{}
	}
	return store.BalanceDrift{
		Currency: ccy, Opening: opening, Closing: closing,
		Actual: actual, Expected: expected, Drift: drift,
		Explained: decimal.Zero, Unexplained: drift,
		Tolerance: tol, WithinTolerance: within,
		ComputedAt: r.now(),
	}, det, nil
}

// carriedAcross returns the movements placed within BoundaryWindow before
// the opening snapshot that orderd learned after the comparison that
// closed at that snapshot was made, when that comparison agreed (or a
// person accepted it). They were not counted when the books agreed there,
// so the provider's balance at that snapshot did not hold them either:
// its clock runs behind orderd's, and a completion just after the
// snapshot carries a completedAt just before it.
func (r *Reconciler) carriedAcross(ctx context.Context, opening store.BalanceSnapshot) ([]store.LedgerMovement, error) {
	w := r.cfg.BoundaryWindow
	if w <= 0 {
		return nil, nil
	}
	agreedAt, ok, err := r.store.AgreedAt(ctx, opening)
	if err != nil || !ok {
		return nil, err
	}
	moves, err := r.store.LedgerMovements(ctx, opening.Currency, opening.TakenAt.Add(-w), opening.TakenAt)
	if err != nil {
		return nil, err
	}
	var out []store.LedgerMovement
	for _, m := range moves {
		if m.LearnedAt.After(agreedAt) {
			out = append(out, m)
		}
	}
	return out, nil
}

// candidates collects what may explain a drift of currency between t0 and
// t1.
//
// Boundary: a movement placed within BoundaryWindow of a snapshot may sit
// on the other side of it in the provider's books. Placed just after the
// opening (counted as expected, but perhaps already in the opening
// balance) or just before the closing (counted, but perhaps not yet in the
// closing balance) it contributes minus its amount; placed just before the
// opening (not counted, perhaps not yet in the opening balance) or just
// after the closing (not counted, perhaps already in the closing balance)
// it contributes its amount.
//
// Pending: an order still processing or a refund in flight may already be
// in the provider's balance, contributing the amount it would move.
// Unsettled creations likewise, unless their order is already known.
// Carried names the movements the comparison already counts across the
// opening snapshot (see carriedAcross): they are no candidates.
func (r *Reconciler) candidates(ctx context.Context, ccy string, t0, t1 time.Time, stillPending, carried map[string]bool) ([]Candidate, error) {
	w := r.cfg.BoundaryWindow
	var cands []Candidate
	known := map[string]bool{}
	if w > 0 {
		// One pass over each snapshot's window; a movement is attributed to
		// the nearer snapshot when the windows overlap.
		type window struct {
			from, to time.Time
			snap     time.Time
			name     string
		}
		mid := t0.Add(t1.Sub(t0) / 2)
		seen := map[string]bool{}
		for _, win := range []window{
			{t0.Add(-w - time.Millisecond), minTime(t0.Add(w), mid), t0, "opening"},
			{maxTime(t1.Add(-w), mid), t1.Add(w), t1, "closing"},
		} {
			moves, err := r.store.LedgerMovements(ctx, ccy, win.from, win.to)
			if err != nil {
				return nil, err
			}
			for _, m := range moves {
				key := m.ProviderOrderID + "/" + m.EntryKey
				if seen[key] || carried[key] {
					continue
				}
				seen[key] = true
				after := m.PlacedAt.After(win.snap)
				amount, note := m.Amount, ""
				switch {
				case after && win.name == "opening":
					amount, note = amount.Neg(), "placed just after the opening snapshot"
				case !after && win.name == "opening":
					note = "placed just before the opening snapshot"
				case !after && win.name == "closing":
					amount, note = amount.Neg(), "placed just before the closing snapshot"
				default:
					note = "placed just after the closing snapshot"
				}
				cands = append(cands, Candidate{Kind: PartBoundary, Amount: amount, Ref: PartOrder{
					OrderID: m.ProviderOrderID, MerchantOrderID: m.MerchantOrderID, Entry: m.Kind,
					At: m.PlacedAt, Note: note,
				}})
			}
		}
	}
	pending, err := r.inFlight(ctx, ccy, maxPendingCandidates)
	if err != nil {
		return nil, err
	}
	for _, p := range pending {
		known[p.MerchantOrderID] = true
		if stillPending[p.MerchantOrderID] {
			continue // the provider said it has not moved yet
		}
		kind, entry := PartProcessing, "order"
		if p.Kind == store.PendingRefundInFlight {
			kind, entry = PartRefundInFlight, "refund"
		}
		cands = append(cands, Candidate{Kind: kind, Amount: p.Amount, Ref: PartOrder{
			OrderID: p.ProviderOrderID, MerchantOrderID: p.MerchantOrderID, Entry: entry, At: p.Since,
		}})
	}
	creations, err := r.store.UnsettledCreations(ctx)
	if err != nil {
		return nil, err
	}
	for _, u := range creations {
		if u.Currency != ccy || (u.Kind != "refund" && known[u.MerchantOrderID]) || stillPending[u.MerchantOrderID] {
			continue
		}
		cands = append(cands, Candidate{Kind: PartInDoubt, Amount: u.Amount, Ref: PartOrder{
			MerchantOrderID: u.MerchantOrderID, AttemptID: u.AttemptID, Entry: u.Kind, At: u.CreatedAt,
			Note: "creation " + u.State,
		}})
	}
	return cands, nil
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
