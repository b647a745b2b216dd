package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"orderd/provider"
	"orderd/store"
)

// FindingWatchNotFound is the kind of finding for a watched order that the
// provider still does not know after GiveUpAfter.
const FindingWatchNotFound = "watch_not_found"

// RunStale polls the orders that webhooks left hanging: orders in new or
// processing whose last change is older than StaleAfter and whose next
// check is due, final orders with a refund orderd has known in flight for
// StaleAfter whose next check is due (a refund ends at the provider on its
// own, and nothing says that sends a webhook), then the due watches (orders of quarantined or
// unauthenticated webhooks, orders handed over with watch). Each answer
// goes through the one write path as a poll, so a change publishes its
// event exactly as a webhook would. A check that changes nothing (or
// fails) postpones the order with exponential backoff; an order unchanged
// for GiveUpAfter gets a stuck_order finding, resolved once it is final.
//
// Counts: due, refunds_due (final orders with a refund in flight, also
// counted in due), checked, changed, unchanged, errors, conflicts (answers
// refused as identity conflicts, also counted in errors), stuck_opened,
// stuck_resolved, mismatches, watches, watches_found, watches_missing.
func (r *Reconciler) RunStale(ctx context.Context) (Summary, error) {
	c := newCounts("due", "refunds_due", "checked", "changed", "unchanged", "errors", "conflicts", "stuck_opened",
		"stuck_resolved", "mismatches", "watches", "watches_found", "watches_missing")
	return r.record(ctx, JobStale, c, func(ctx context.Context, _ int64) error {
		return r.stale(ctx, c)
	})
}

func (r *Reconciler) stale(ctx context.Context, c *counts) error {
	now := r.now()
	changedBefore := now.Add(-r.cfg.StaleAfter)
	// Counting costs a pass over the due set; only a progress bar needs it.
	total := 0
	if r.cfg.Progress != nil {
		var err error
		if total, err = r.store.CountDueOrders(ctx, now, changedBefore); err != nil {
			return err
		}
	}
	p := r.newProgress(JobStale, total)

	// The refunds in flight are read from the ledger's pending movements:
	// bring them up to date with what orderd has learned.
	n, err := r.store.UpdateLedger(ctx, 0)
	if err != nil {
		return err
	}
	if n > 0 {
		r.log.Debug("ledger updated", "job", JobStale, "states", n)
	}
	var (
		cursor    store.DueCursor
		refunding bool
		afterID   int64
	)
	next := func(ctx context.Context) ([]store.DueOrder, error) {
		if !refunding {
			page, err := r.store.DueOrders(ctx, now, changedBefore, cursor, r.cfg.PageSize)
			if err != nil {
				return nil, err
			}
			if len(page) > 0 {
				cursor = page[len(page)-1].Cursor()
				c.add("due", len(page))
				return page, nil
			}
			refunding = true
		}
		page, err := r.store.RefundingOrders(ctx, now, changedBefore, afterID, r.cfg.PageSize)
		if err != nil {
			return nil, err
		}
		if len(page) > 0 {
			afterID = page[len(page)-1].ID
		}
		c.add("due", len(page))
		c.add("refunds_due", len(page))
		return page, nil
	}
	// Polling and recording overlap: a worker hands its answer to the
	// recorders and polls the next order, so the rate is bound by the
	// limiter, not by commits. The recorders write the answers in batches,
	// one store write (one savepoint in a shared commit) per batch.
	answers := make(chan pollAnswer, maxPendingAnswers)
	var recorders sync.WaitGroup
	for range recorderCount {
		recorders.Go(func() {
			batch := make([]pollAnswer, 0, recordBatch)
			for a := range answers {
				batch = append(batch[:0], a)
			fill:
				for len(batch) < recordBatch {
					select {
					case a, ok := <-answers:
						if !ok {
							break fill
						}
						batch = append(batch, a)
					default:
						break fill
					}
				}
				r.recordChecks(ctx, batch, c)
				for range batch {
					p.step()
				}
			}
		})
	}
	err = pool(ctx, r.cfg.Concurrency, next, func(ctx context.Context, o store.DueOrder) {
		asked := r.now()
		order, raw, callErr := r.client.GetStatus(ctx, o.MerchantOrderID)
		if callErr != nil && ctx.Err() != nil {
			return // shutting down: the order stays due
		}
		answers <- pollAnswer{due: o, order: order, raw: raw, err: callErr, asked: asked}
	})
	close(answers)
	recorders.Wait()
	if err != nil {
		return fmt.Errorf("due orders: %w", err)
	}

	n, err = r.store.ResolveSettledStuckOrders(ctx)
	c.add("stuck_resolved", n)
	if err != nil {
		return err
	}
	return r.watches(ctx, now, c)
}

// Recording of stale polls: answers waiting (bounding the memory they
// hold), goroutines writing them, and answers per write. A batch's write
// holds the store's writer for about a millisecond per 10 answers, short
// against a webhook's ack budget.
const (
	maxPendingAnswers = 256
	recorderCount     = 4
	recordBatch       = 16
)

// pollAnswer is the provider's answer about one due order.
type pollAnswer struct {
	due   store.DueOrder
	order *provider.Order
	raw   json.RawMessage
	err   error
	asked time.Time // when the question was sent
}

// recordChecks records a batch of answers in one write; if that write
// fails (one answer the store refuses sinks its batch), each answer is
// recorded alone.
func (r *Reconciler) recordChecks(ctx context.Context, batch []pollAnswer, c *counts) {
	now := r.now()
	answers := make([]polled, len(batch))
	for i, a := range batch {
		answers[i] = polled{Due: a.due, Order: a.order, Raw: a.raw, Err: errorText(a.err),
			Next: now.Add(r.backoff(a.due.CheckAttempts)), Asked: a.asked}
	}
	record := func(answers []polled) ([]checked, error) {
		return store.ExecAs[[]checked](ctx, r.store, &recordChecksCmd{Answers: answers, Now: now, GiveUpAfter: r.cfg.GiveUpAfter})
	}
	outs, err := record(answers)
	if err == nil && len(outs) != len(batch) {
		err = fmt.Errorf("recorded %d of %d answers", len(outs), len(batch))
	}
	if err == nil {
		for i, a := range batch {
			r.countCheck(a, outs[i], c)
		}
		return
	}
	if ctx.Err() != nil {
		return
	}
	for i, a := range batch {
		out, err := record(answers[i : i+1])
		if err == nil && len(out) == 1 {
			r.countCheck(a, out[0], c)
			continue
		}
		c.add("checked", 1)
		c.add("errors", 1)
		log := r.log.With("job", JobStale, "order", a.due.ProviderID, "merchantOrderId", a.due.MerchantOrderID)
		log.Warn("record poll", "err", err)
		// The answer could not be stored (say, it collides with another
		// order); still postpone, so one bad order does not take every
		// run's budget.
		if ctx.Err() == nil {
			if _, perr := r.store.Exec(ctx, &postponeCheckCmd{ProviderID: a.due.ProviderID, Next: answers[i].Next,
				Refund: a.due.Status.IsFinal()}); perr != nil {
				log.Warn("postpone order check", "err", perr)
			}
		}
	}
}

// recordCheck records what a poll of one due order learned, inside tx: the
// answer through the write path; backoff when nothing changed (or the
// call failed); a stuck_order finding when the order has been unchanged
// for GiveUpAfter.
func recordCheck(tx *store.Tx, a polled, now time.Time, giveUpAfter time.Duration, legacy bool) (checked, error) {
	var out checked
	o := a.Due
	if a.Err == "" && a.Order == nil {
		return out, fmt.Errorf("poll of %s has neither an order nor an error", o.ProviderID)
	}
	switch obs := (store.Observation{Source: store.SourcePoll, Order: a.Order, Raw: a.Raw, ObservedAt: now}); {
	case a.Err != "":
	case a.Order.ID != o.ProviderID:
		// Asked by merchantOrderId, the provider answers with another
		// order: nothing is applied, a person must look.
		reason := fmt.Sprintf("provider answers with order id %s for merchantOrderId %s, stored as %s",
			a.Order.ID, o.MerchantOrderID, o.ProviderID)
		if legacy {
			return out, errors.New(reason)
		}
		if _, err := tx.RecordIdentityConflict(obs, reason); err != nil {
			return out, err
		}
		out.Res.Outcome = outcomeConflict
	default:
		var (
			err      error
			disagree bool
		)
		if out.Res, disagree, err = applyPoll(tx, obs, a.Asked, legacy); err != nil {
			return out, err
		}
		if out.Res.Outcome == store.OutcomeChanged || out.Res.Outcome == store.OutcomeNew {
			return out, nil
		}
		out.Mismatch = out.Res.Outcome == store.OutcomeStale && out.Res.Previous != a.Order.Status
		if !a.Asked.IsZero() {
			// A poll asked before the stored state arrived is no
			// disagreement; a conflicting final status always is.
			out.Mismatch = disagree || out.Mismatch && a.Order.Status.IsFinal() && out.Res.Previous.IsFinal()
		}
	}
	postpone := tx.PostponeOrderCheck
	if o.Status.IsFinal() { // polled for its refund in flight
		postpone = tx.PostponeRefundCheck
	}
	if _, err := postpone(o.ProviderID, a.Next); err != nil {
		return out, err
	}
	// A final order polled for its refund is not stuck: its own status is
	// settled, and a stuck_order finding would be resolved at once.
	if o.Status.IsFinal() || now.Sub(o.UpdatedAt) < giveUpAfter {
		return out, nil
	}
	var err error
	_, out.Stuck, err = tx.OpenFinding(store.FindingStuckOrder, o.ProviderID, stuckDetail{
		OrderID: o.ProviderID, MerchantOrderID: o.MerchantOrderID, Type: o.Type, Status: o.Status,
		LastChangeAt: o.UpdatedAt, CheckAttempts: o.CheckAttempts + 1, GiveUpAfter: giveUpAfter.String(),
		LastError: a.Err,
	})
	return out, err
}

// countCheck tallies and logs one recorded answer.
func (r *Reconciler) countCheck(a pollAnswer, out checked, c *counts) {
	c.add("checked", 1)
	o := a.due
	switch {
	case a.err != nil:
		c.add("errors", 1)
		r.log.Info("poll failed", "job", JobStale, "order", o.ProviderID, "merchantOrderId", o.MerchantOrderID, "err", a.err)
	case out.Res.Outcome == outcomeConflict:
		c.add("errors", 1)
		c.add("conflicts", 1)
		r.log.Warn("polled order conflicts with a stored order; identity_conflict finding open", "job", JobStale,
			"order", o.ProviderID, "merchantOrderId", o.MerchantOrderID, "answered", a.order.ID)
	case out.Res.Outcome == store.OutcomeChanged || out.Res.Outcome == store.OutcomeNew:
		c.add("changed", 1)
		r.log.Info("poll found a change", "job", JobStale, "order", o.ProviderID, "merchantOrderId", o.MerchantOrderID,
			"from", out.Res.Previous, "to", a.order.Status, "event", out.Res.EventID)
	default:
		c.add("unchanged", 1)
	}
	if out.Mismatch {
		c.add("mismatches", 1)
	}
	if out.Stuck {
		c.add("stuck_opened", 1)
		r.log.Warn("order stuck", "job", JobStale, "order", o.ProviderID, "merchantOrderId", o.MerchantOrderID,
			"status", o.Status, "lastChange", o.UpdatedAt)
	}
}

// stuckDetail is the detail of a stuck_order finding.
type stuckDetail struct {
	OrderID         string             `json:"orderId"`
	MerchantOrderID string             `json:"merchantOrderId"`
	Type            provider.OrderType `json:"type"`
	Status          provider.Status    `json:"status"`
	LastChangeAt    time.Time          `json:"lastChangeAt"`
	CheckAttempts   int                `json:"checkAttempts"`
	GiveUpAfter     string             `json:"giveUpAfter"`
	LastError       string             `json:"lastError,omitempty"`
}

// watches polls the due watches: a found order goes through the write path
// and its watch is resolved; ORDER_NOT_FOUND keeps watching with backoff
// and, after GiveUpAfter, opens a watch_not_found finding.
func (r *Reconciler) watches(ctx context.Context, now time.Time, c *counts) error {
	var cursor store.DueCursor
	next := func(ctx context.Context) ([]store.DueWatch, error) {
		page, err := r.store.DueWatches(ctx, now, cursor, r.cfg.PageSize)
		if err != nil {
			return nil, err
		}
		if len(page) > 0 {
			cursor = page[len(page)-1].Cursor()
		}
		return page, nil
	}
	err := pool(ctx, r.cfg.Concurrency, next, func(ctx context.Context, w store.DueWatch) {
		r.checkWatch(ctx, w, c)
	})
	if err != nil {
		return fmt.Errorf("due watches: %w", err)
	}
	return nil
}

func (r *Reconciler) checkWatch(ctx context.Context, w store.DueWatch, c *counts) {
	asked := r.now()
	order, raw, callErr := r.client.GetStatus(ctx, w.MerchantOrderID)
	if callErr != nil && ctx.Err() != nil {
		return
	}
	c.add("watches", 1)
	log := r.log.With("job", JobStale, "watch", w.MerchantOrderID, "reason", w.Reason)
	now := r.now()
	next := now.Add(r.backoff(w.Attempts))
	conflict, err := store.ExecAs[bool](ctx, r.store, &watchPollCmd{W: w, Order: order, Raw: raw, Err: errorText(callErr),
		NotFound: isNotFound(callErr), Now: now, Next: next, GiveUpAfter: r.cfg.GiveUpAfter, Asked: asked})
	switch {
	case err == nil && conflict:
		// The provider's order collides with a stored one; the store
		// refused it, the command opened an identity_conflict finding
		// and keeps watching with backoff.
		c.add("errors", 1)
		c.add("conflicts", 1)
		log.Warn("watched order conflicts with a stored order; identity_conflict finding open", "answered", order.ID)
	case err != nil:
		c.add("errors", 1)
		log.Warn("record watch poll", "err", err)
	case callErr == nil:
		c.add("watches_found", 1)
		log.Info("watched order found", "status", order.Status)
	case isNotFound(callErr):
		c.add("watches_missing", 1)
	default:
		c.add("errors", 1)
		log.Info("watch poll failed", "err", callErr)
	}
}

// unverifiedWatchPolls is how many ORDER_NOT_FOUND answers a watch opened
// by an unverified webhook gets before it is dropped; with the default
// backoff they span about half an hour, long enough for a real order whose
// webhook failed during a key rotation to be found at its first poll.
const unverifiedWatchPolls = 5

// watchDetail is the detail of a watch_not_found finding.
type watchDetail struct {
	MerchantOrderID string    `json:"merchantOrderId"`
	Reason          string    `json:"reason"`
	WatchedSince    time.Time `json:"watchedSince"`
	CheckAttempts   int       `json:"checkAttempts"`
	GiveUpAfter     string    `json:"giveUpAfter"`
}
