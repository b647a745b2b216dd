package reconcile

import (
	"context"
	"fmt"
	"sync"
	"time"

	"orderd/provider"
	"orderd/store"
)

// requisitePage is the page size of get-orders-list (the fake's maximum;
// the spec names none).
const requisitePage = 100

// maxRequisitePages bounds one requisite's sweep, in case a provider
// ignores offset and answers the same page forever.
const maxRequisitePages = 10_000

// RunRequisites sweeps every active deposit requisite, and once more each
// deactivated one not yet swept past its deactivation: deposits create
// orders by themselves, and a lost webhook would mean money received that
// the merchant never credits. For each requisite the sweep pages through
// client-requisite/get-orders-list from its last sweep (less
// RequisiteOverlap) to now and feeds every order through the one write
// path as a poll. Orders that no webhook brought (new to orderd) are
// counted in orderd_requisite_orders_recovered_total.
//
// Requisites are registered with store.Tx.UpsertRequisite (by the gateway
// and the watch endpoint); those created through the gateway are also
// picked up from its attempts at the start of each run.
//
// Counts: requisites, pages, orders, recovered, changed, conflicts
// (orders refused as identity conflicts, also counted in errors), errors
// (those conflicts and the requisites whose sweep failed). A run fails only
// when no requisite could be swept.
func (r *Reconciler) RunRequisites(ctx context.Context) (Summary, error) {
	c := newCounts("requisites", "pages", "orders", "recovered", "changed", "conflicts", "errors")
	return r.record(ctx, JobRequisites, c, func(ctx context.Context, _ int64) error {
		return r.requisites(ctx, c)
	})
}

func (r *Reconciler) requisites(ctx context.Context, c *counts) error {
	if err := r.syncGatewayRequisites(ctx); err != nil {
		return err
	}
	list, err := r.store.RequisitesToSweep(ctx)
	if err != nil {
		return err
	}
	c.add("requisites", len(list))
	p := r.newProgress(JobRequisites, len(list))
	now := r.now()
	var (
		mu     sync.Mutex
		failed []string
		done   bool
	)
	next := func(context.Context) ([]store.Requisite, error) {
		if done {
			return nil, nil
		}
		done = true
		return list, nil
	}
	err = pool(ctx, r.cfg.Concurrency, next, func(ctx context.Context, req store.Requisite) {
		if err := r.sweep(ctx, req, now, c); err != nil && ctx.Err() == nil {
			c.add("errors", 1)
			r.log.Warn("requisite sweep failed", "job", JobRequisites, "requisite", req.ID, "err", err)
			mu.Lock()
			failed = append(failed, req.ID)
			mu.Unlock()
		}
		p.step()
	})
	if err != nil {
		return err
	}
	// One requisite that cannot be swept (say, an id the provider does not
	// know) leaves the run partial, like an order the stale job could not
	// check; the others were swept. Only when none could be is the run a
	// failure.
	if len(failed) > 0 && len(failed) == len(list) {
		return fmt.Errorf("sweep of every requisite failed (%d; first: %s)", len(list), failed[0])
	}
	return nil
}

// syncGatewayRequisites registers the requisites the gateway created that
// the sweep does not know yet.
func (r *Reconciler) syncGatewayRequisites(ctx context.Context) error {
	ids, err := r.store.GatewayRequisites(ctx)
	if err != nil || len(ids) == 0 {
		return err
	}
	known, err := r.store.Requisites(ctx, false)
	if err != nil {
		return err
	}
	have := make(map[string]bool, len(known))
	for _, k := range known {
		have[k.ID] = true
	}
	var missing []string
	for _, id := range ids {
		if !have[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	cmd := &store.UpsertRequisitesCmd{}
	for _, id := range missing {
		cmd.Requisites = append(cmd.Requisites, store.Requisite{ID: id, Source: store.RequisiteFromGateway})
	}
	_, err = r.store.Exec(ctx, cmd)
	return err
}

// sweep pages through one requisite's orders created in [from, to).
func (r *Reconciler) sweep(ctx context.Context, req store.Requisite, to time.Time, c *counts) error {
	from := req.LastSweptAt
	if from.IsZero() {
		from = req.CreatedAt
	}
	from = from.Add(-r.cfg.RequisiteOverlap)
	log := r.log.With("job", JobRequisites, "requisite", req.ID)
	recovered := 0
	for page, offset := 0, 0; page < maxRequisitePages; page++ {
		asked := r.now()
		orders, err := r.client.RequisiteOrders(ctx, provider.RequisiteOrdersRequest{
			ID: req.ID, CreatedAtFrom: from, CreatedAtTo: to, Limit: requisitePage, Offset: offset,
		})
		if !req.Active && provider.ErrorCode(err) == provider.CodeWalletNotFound {
			// The last sweep of a deactivated requisite the provider
			// does not know (an id registered by mistake): it never
			// took a deposit, so there is nothing left to find.
			log.Info("deactivated requisite unknown to the provider; its sweep ends", "err", err)
			return r.store.MarkRequisiteSwept(ctx, req.ID, to, recovered)
		}
		if err != nil {
			return fmt.Errorf("list orders from offset %d: %w", offset, err)
		}
		c.add("pages", 1)
		for _, ro := range orders {
			c.add("orders", 1)
			res, err := store.ExecAs[store.Result](ctx, r.store, &applyPolledCmd{
				Obs:   store.Observation{Source: store.SourcePoll, Order: ro.Order, Raw: ro.Raw, ObservedAt: r.now()},
				Asked: asked,
			})
			switch {
			case err == nil && res.Outcome == outcomeConflict:
				// The order collides with a stored one: nothing was
				// stored and an identity_conflict finding is open; a
				// retry would collide again, so the sweep goes on.
				c.add("errors", 1)
				c.add("conflicts", 1)
				log.Warn("listed order conflicts with a stored order; identity_conflict finding open",
					"order", ro.Order.ID, "merchantOrderId", ro.Order.MerchantOrderID)
			case err != nil:
				return fmt.Errorf("apply %s: %w", ro.Order.MerchantOrderID, err)
			case res.Outcome == store.OutcomeNew:
				recovered++
				c.add("recovered", 1)
				r.metrics.recoveredOrder()
				log.Info("recovered an order no webhook brought", "merchantOrderId", ro.Order.MerchantOrderID,
					"status", ro.Order.Status, "event", res.EventID)
			case res.Outcome == store.OutcomeChanged:
				c.add("changed", 1)
			}
		}
		if len(orders) < requisitePage {
			return r.store.MarkRequisiteSwept(ctx, req.ID, to, recovered)
		}
		offset += len(orders)
	}
	return fmt.Errorf("more than %d pages of orders", maxRequisitePages)
}
