package reconcile

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"orderd/store"
)

// RunDoubt settles the creations left in doubt (a 5xx, timeout or network
// fault during a create, or a daemon stopped mid-call) once they are older
// than DoubtMinAge: get-status by merchantOrderId either finds the order
// (the attempt becomes created and the order is stored through the write
// path) or answers ORDER_NOT_FOUND, which proves it was not created (the
// attempt becomes not_created and an order.not_created event tells the
// platform it is safe to retry). Any other answer postpones the attempt
// with backoff; one still unsettled UnresolvedAfter after it was made gets
// an unresolved_creation finding, resolved when it settles.
//
// Counts: due, created, not_created, postponed, unresolved_opened, errors.
func (r *Reconciler) RunDoubt(ctx context.Context) (Summary, error) {
	c := newCounts("due", "created", "not_created", "postponed", "unresolved_opened", "errors")
	return r.record(ctx, JobDoubt, c, func(ctx context.Context, _ int64) error {
		return r.doubt(ctx, c)
	})
}

func (r *Reconciler) doubt(ctx context.Context, c *counts) error {
	now := r.now()
	olderThan := now.Add(-r.cfg.DoubtMinAge)
	p := r.newProgress(JobDoubt, 0)
	// Settled and postponed attempts leave the due set, so the same query
	// pages forward; seen guards against an attempt that could not be
	// postponed coming back in the same run.
	seen := map[int64]bool{}
	next := func(ctx context.Context) ([]store.Attempt, error) {
		page, err := r.store.DueInDoubtAttempts(ctx, olderThan, now, r.cfg.PageSize)
		if err != nil {
			return nil, err
		}
		fresh := page[:0]
		for _, a := range page {
			if !seen[a.ID] {
				seen[a.ID] = true
				fresh = append(fresh, a)
			}
		}
		c.add("due", len(fresh))
		return fresh, nil
	}
	err := pool(ctx, r.cfg.Concurrency, next, func(ctx context.Context, a store.Attempt) {
		r.settle(ctx, a, c)
		p.step()
	})
	if err != nil {
		return fmt.Errorf("in-doubt attempts: %w", err)
	}
	return nil
}

// settle checks one in-doubt attempt at the provider.
func (r *Reconciler) settle(ctx context.Context, a store.Attempt, c *counts) {
	log := r.log.With("job", JobDoubt, "attempt", a.ID, "kind", a.Kind, "merchantOrderId", a.MerchantOrderID)
	order, raw, callErr := r.client.GetStatus(ctx, a.MerchantOrderID)
	if callErr != nil && ctx.Err() != nil {
		return
	}
	now := r.now()
	var err error
	switch {
	case callErr == nil:
		obs := store.Observation{Source: store.SourcePoll, Order: order, Raw: raw, ObservedAt: now}
		if err = r.store.SettleAttemptCreated(ctx, a.ID, obs); err == nil {
			c.add("created", 1)
			log.Info("in-doubt creation was created", "order", order.ID, "status", order.Status)
			r.resolveUnresolved(ctx, a)
			return
		}
	case isNotFound(callErr):
		if err = r.store.SettleAttemptNotCreated(ctx, a.ID); err == nil {
			c.add("not_created", 1)
			log.Info("in-doubt creation was not created")
			r.resolveUnresolved(ctx, a)
			return
		}
	default:
		err = callErr
	}
	// Inconclusive: try again later, and tell a human once it has been
	// open too long.
	if callErr == nil || isNotFound(callErr) {
		c.add("errors", 1)
		log.Warn("settle in-doubt creation", "err", err)
	}
	c.add("postponed", 1)
	if perr := r.store.PostponeAttempt(ctx, a.ID, now.Add(r.backoff(a.CheckAttempts))); perr != nil {
		c.add("errors", 1)
		log.Warn("postpone in-doubt creation", "err", perr)
	}
	if now.Sub(a.CreatedAt) < r.cfg.UnresolvedAfter {
		return
	}
	var (
		opened  bool
		lastErr = err.Error()
	)
	detail, werr := json.Marshal(unresolvedDetail{
		AttemptID: a.ID, Kind: string(a.Kind), MerchantOrderID: a.MerchantOrderID, State: string(a.State),
		CreatedAt: a.CreatedAt, CheckAttempts: a.CheckAttempts + 1, LastError: lastErr,
		UnresolvedAfter: r.cfg.UnresolvedAfter.String(),
	})
	if werr == nil {
		opened, werr = store.ExecAs[bool](ctx, r.store, &store.OpenFindingCmd{
			FindingKind: store.FindingUnresolvedCreation, Key: a.MerchantOrderID, Detail: detail})
	}
	if werr != nil {
		c.add("errors", 1)
		log.Warn("open unresolved_creation finding", "err", werr)
		return
	}
	if opened {
		c.add("unresolved_opened", 1)
		log.Warn("in-doubt creation unresolved", "since", a.CreatedAt, "err", err)
	}
}

func (r *Reconciler) resolveUnresolved(ctx context.Context, a store.Attempt) {
	_, err := r.store.Exec(ctx, &store.ResolveFindingsCmd{
		FindingKind: store.FindingUnresolvedCreation, Keys: []string{a.MerchantOrderID}})
	if err != nil {
		r.log.Warn("resolve unresolved_creation finding", "attempt", a.ID, "err", err)
	}
}

// unresolvedDetail is the detail of an unresolved_creation finding.
type unresolvedDetail struct {
	AttemptID       int64     `json:"attemptId"`
	Kind            string    `json:"kind"`
	MerchantOrderID string    `json:"merchantOrderId"`
	State           string    `json:"state"`
	CreatedAt       time.Time `json:"createdAt"`
	CheckAttempts   int       `json:"checkAttempts"`
	LastError       string    `json:"lastError"`
	UnresolvedAfter string    `json:"unresolvedAfter"`
}
