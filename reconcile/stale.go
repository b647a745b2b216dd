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
// check is due, then the due watches (orders of quarantined or
// unauthenticated webhooks, orders handed over with watch). Each answer
// goes through the one write path as a poll, so a change publishes its
// event exactly as a webhook would. A check that changes nothing (or
// fails) postpones the order with exponential backoff; an order unchanged
// for GiveUpAfter gets a stuck_order finding, resolved once it is final.
//
// Counts: due, checked, changed, unchanged, errors, stuck_opened,
// stuck_resolved, mismatches, watches, watches_found, watches_missing.
func (r *Reconciler) RunStale(ctx context.Context) (Summary, error) {
	c := newCounts("due", "checked", "changed", "unchanged", "errors", "stuck_opened", "stuck_resolved",
		"mismatches", "watches", "watches_found", "watches_missing")
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

	var cursor store.DueCursor
	next := func(ctx context.Context) ([]store.DueOrder, error) {
		page, err := r.store.DueOrders(ctx, now, changedBefore, cursor, r.cfg.PageSize)
		if err != nil {
			return nil, err
		}
		if len(page) > 0 {
			cursor = page[len(page)-1].Cursor()
		}
		c.add("due", len(page))
		return page, nil
	}
	// Polling and recording overlap: a worker hands its answer to a
	// recording goroutine and polls the next order, so the rate is bound
	// by the limiter, not by how long a commit takes. The store groups
	// the concurrent writes into shared commits.
	rec := newRecorder(maxPendingWrites)
	err := pool(ctx, r.cfg.Concurrency, next, func(ctx context.Context, o store.DueOrder) {
		order, raw, callErr := r.client.GetStatus(ctx, o.MerchantOrderID)
		if callErr != nil && ctx.Err() != nil {
			return // shutting down: the order stays due
		}
		rec.do(func() {
			r.recordCheck(ctx, o, order, raw, callErr, c)
			p.step()
		})
	})
	rec.wait()
	if err != nil {
		return fmt.Errorf("due orders: %w", err)
	}

	n, err := r.store.ResolveSettledStuckOrders(ctx)
	c.add("stuck_resolved", n)
	if err != nil {
		return err
	}
	return r.watches(ctx, now, c)
}

// maxPendingWrites bounds the answers of a stale run waiting to be
// recorded (and so the memory they hold).
const maxPendingWrites = 256

// recorder runs recording functions on goroutines it owns, at most limit
// at a time; do blocks while the limit is reached.
type recorder struct {
	sem chan struct{}
	wg  sync.WaitGroup
}

func newRecorder(limit int) *recorder { return &recorder{sem: make(chan struct{}, limit)} }

func (rc *recorder) do(fn func()) {
	rc.sem <- struct{}{}
	rc.wg.Go(func() {
		defer func() { <-rc.sem }()
		fn()
	})
}

func (rc *recorder) wait() { rc.wg.Wait() }

// recordCheck records what a poll of one due order learned: the answer
// through the write path, backoff when nothing changed, a stuck_order
// finding when it has been unchanged for GiveUpAfter.
func (r *Reconciler) recordCheck(ctx context.Context, o store.DueOrder, order *provider.Order, raw json.RawMessage, callErr error, c *counts) {
	c.add("checked", 1)
	log := r.log.With("job", JobStale, "order", o.ProviderID, "merchantOrderId", o.MerchantOrderID)
	now := r.now()
	if callErr == nil && order.ID != o.ProviderID {
		callErr = fmt.Errorf("provider answers with order id %s for merchantOrderId %s, stored as %s",
			order.ID, o.MerchantOrderID, o.ProviderID)
	}
	var (
		res         store.Result
		stuck       bool
		wasMismatch bool
	)
	err := r.store.Write(ctx, func(tx *store.Tx) error {
		res, stuck, wasMismatch = store.Result{}, false, false
		unchanged := true
		if callErr == nil {
			obs := store.Observation{Source: store.SourcePoll, Order: order, Raw: raw, ObservedAt: now}
			var err error
			if res, err = applyPolled(tx, obs); err != nil {
				return err
			}
			unchanged = res.Outcome != store.OutcomeChanged && res.Outcome != store.OutcomeNew
			wasMismatch = res.Outcome == store.OutcomeStale && res.Previous != order.Status
		}
		if !unchanged {
			return nil
		}
		if _, err := tx.PostponeOrderCheck(o.ProviderID, now.Add(r.backoff(o.CheckAttempts))); err != nil {
			return err
		}
		if now.Sub(o.UpdatedAt) < r.cfg.GiveUpAfter {
			return nil
		}
		lastErr := ""
		if callErr != nil {
			lastErr = callErr.Error()
		}
		var err error
		_, stuck, err = tx.OpenFinding(store.FindingStuckOrder, o.ProviderID, stuckDetail{
			OrderID: o.ProviderID, MerchantOrderID: o.MerchantOrderID, Type: o.Type, Status: o.Status,
			LastChangeAt: o.UpdatedAt, CheckAttempts: o.CheckAttempts + 1, GiveUpAfter: r.cfg.GiveUpAfter.String(),
			LastError: lastErr,
		})
		return err
	})
	switch {
	case err != nil:
		c.add("errors", 1)
		log.Warn("record poll", "err", err)
		// The answer could not be stored (say, it collides with another
		// order); still postpone, so one bad order does not take every
		// run's budget.
		if ctx.Err() == nil {
			if perr := r.store.Write(ctx, func(tx *store.Tx) error {
				_, err := tx.PostponeOrderCheck(o.ProviderID, now.Add(r.backoff(o.CheckAttempts)))
				return err
			}); perr != nil {
				log.Warn("postpone order check", "err", perr)
			}
		}
		return
	case callErr != nil:
		c.add("errors", 1)
		log.Info("poll failed", "err", callErr)
	case res.Outcome == store.OutcomeChanged || res.Outcome == store.OutcomeNew:
		c.add("changed", 1)
		log.Info("poll found a change", "from", res.Previous, "to", order.Status, "event", res.EventID)
	default:
		c.add("unchanged", 1)
	}
	if wasMismatch {
		c.add("mismatches", 1)
	}
	if stuck {
		c.add("stuck_opened", 1)
		log.Warn("order stuck", "status", o.Status, "lastChange", o.UpdatedAt)
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
	order, raw, callErr := r.client.GetStatus(ctx, w.MerchantOrderID)
	if callErr != nil && ctx.Err() != nil {
		return
	}
	c.add("watches", 1)
	log := r.log.With("job", JobStale, "watch", w.MerchantOrderID, "reason", w.Reason)
	now := r.now()
	err := r.store.Write(ctx, func(tx *store.Tx) error {
		if callErr == nil {
			obs := store.Observation{Source: store.SourcePoll, Order: order, Raw: raw, ObservedAt: now}
			if _, err := applyPolled(tx, obs); err != nil {
				return err
			}
			if _, err := tx.ResolveFinding(FindingWatchNotFound, w.MerchantOrderID); err != nil {
				return err
			}
			return tx.ResolveWatch(w.MerchantOrderID)
		}
		if err := tx.PostponeWatch(w.MerchantOrderID, now.Add(r.backoff(w.Attempts))); err != nil {
			return err
		}
		if !isNotFound(callErr) || now.Sub(w.CreatedAt) < r.cfg.GiveUpAfter {
			return nil
		}
		_, _, err := tx.OpenFinding(FindingWatchNotFound, w.MerchantOrderID, watchDetail{
			MerchantOrderID: w.MerchantOrderID, Reason: w.Reason, WatchedSince: w.CreatedAt,
			CheckAttempts: w.Attempts + 1, GiveUpAfter: r.cfg.GiveUpAfter.String(),
		})
		return err
	})
	switch {
	case errors.Is(err, store.ErrConflict):
		// The provider's order collides with a stored one; the store
		// refused it. Keep watching with backoff for a human to see.
		c.add("errors", 1)
		log.Warn("watched order conflicts with a stored order", "err", err)
		_ = r.store.Write(ctx, func(tx *store.Tx) error {
			return tx.PostponeWatch(w.MerchantOrderID, now.Add(r.backoff(w.Attempts)))
		})
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

// watchDetail is the detail of a watch_not_found finding.
type watchDetail struct {
	MerchantOrderID string    `json:"merchantOrderId"`
	Reason          string    `json:"reason"`
	WatchedSince    time.Time `json:"watchedSince"`
	CheckAttempts   int       `json:"checkAttempts"`
	GiveUpAfter     string    `json:"giveUpAfter"`
}
