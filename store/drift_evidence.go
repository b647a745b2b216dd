package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"orderd/provider"
)

// This file holds the reads behind a balance_drift finding's evidence: the
// orders in flight that no pending movement stands for yet (a gateway
// payin the customer has not paid), where each order a comparison named
// stands now, and the comparison before the latest.

// GatewayOrdersInFlight returns up to limit orders (0: all) in new or
// processing that show no movement to come in orderd's copy — the
// provider's create answer has no transactions, so LedgerEntries has no
// amount to derive — and that were created through the gateway in
// currency: their amount and currency are the gateway request's (a
// payin's invoice, gross of the fee the provider takes on completion; a
// payout's amount, negative). They are the orders a balance check asks
// about beside PendingMovements: a customer may have paid one whose
// webhook was lost. Oldest first.
func (s *Store) GatewayOrdersInFlight(ctx context.Context, currency string, limit int) ([]PendingMovement, error) {
	if limit <= 0 {
		limit = -1
	}
	// orders_due holds exactly the orders in new or processing; the
	// attempt is found by attempts_merchant_order, the pending movement
	// by ledger_pending's key.
	rows, err := s.rdb.QueryContext(ctx, `SELECT o.provider_id, o.merchant_order_id, o.type,
			coalesce(o.created_at, o.first_seen_at), a.request
		FROM orders o
		JOIN attempts a ON a.merchant_order_id = o.merchant_order_id AND a.kind = o.type AND a.state = 'created'
		WHERE o.status IN ('new', 'processing')
		  AND NOT EXISTS (SELECT 1 FROM ledger_pending p WHERE p.order_id = o.id)`)
	if err != nil {
		return nil, fmt.Errorf("gateway orders in flight: %w", err)
	}
	defer rows.Close()
	ccy := strings.ToLower(currency)
	var out []PendingMovement
	for rows.Next() {
		var (
			p       PendingMovement
			typ     string
			created int64
			req     []byte
		)
		if err := rows.Scan(&p.ProviderOrderID, &p.MerchantOrderID, &typ, &created, &req); err != nil {
			return nil, fmt.Errorf("gateway orders in flight: %w", err)
		}
		m, ok := requestMoney(req)
		if !ok || strings.ToLower(m.Currency) != ccy || m.Amount.IsZero() {
			continue
		}
		p.Kind, p.EntryKey, p.Currency, p.Since = PendingProcessing, "order", ccy, unixMilliUTC(created)
		p.Amount = m.Amount.Abs()
		if typ == string(provider.TypePayout) {
			p.Amount = p.Amount.Neg()
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("gateway orders in flight: %w", err)
	}
	slices.SortStableFunc(out, func(a, b PendingMovement) int { return a.Since.Compare(b.Since) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Settlement is where an order (or a creation not known as an order)
// stands now.
type Settlement struct {
	// Status is the order's status, or "creation <state>" for a gateway
	// creation orderd holds no order for, or "unknown".
	Status string
	// Settled: the order is final and no refund of it is in flight (its
	// movements are all in the ledger), or the creation was settled
	// without an order (rejected, not created).
	Settled bool
}

// Settlements returns where each of merchantOrderIDs stands, by
// merchantOrderId. The balances job calls it with the few orders a
// comparison named.
func (s *Store) Settlements(ctx context.Context, merchantOrderIDs []string) (map[string]Settlement, error) {
	out := make(map[string]Settlement, len(merchantOrderIDs))
	for _, mid := range merchantOrderIDs {
		if _, done := out[mid]; done || mid == "" {
			continue
		}
		var (
			status  string
			pending bool
		)
		err := s.rdb.QueryRowContext(ctx, `SELECT o.status,
				EXISTS (SELECT 1 FROM ledger_pending p WHERE p.order_id = o.id)
			FROM orders o WHERE o.merchant_order_id = ?`, mid).Scan(&status, &pending)
		switch {
		case err == nil:
			out[mid] = Settlement{Status: status, Settled: provider.Status(status).IsFinal() && !pending}
			continue
		case !errors.Is(err, sql.ErrNoRows):
			return nil, fmt.Errorf("settlement of %s: %w", mid, err)
		}
		var state string
		err = s.rdb.QueryRowContext(ctx, `SELECT state FROM attempts WHERE merchant_order_id = ?
			AND kind IN ('payin', 'payout') ORDER BY id DESC LIMIT 1`, mid).Scan(&state)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			out[mid] = Settlement{Status: "unknown"}
		case err != nil:
			return nil, fmt.Errorf("settlement of %s: %w", mid, err)
		default:
			st := AttemptState(state)
			// A created attempt without an order row is one whose order
			// orderd has not stored yet: not settled.
			out[mid] = Settlement{Status: "creation " + state, Settled: st == AttemptRejected || st == AttemptNotCreated}
		}
	}
	return out, nil
}

// PreviousBalanceDrift returns the newest comparison of currency whose
// closing snapshot was taken before the snapshot with id closingID; ok is
// false when there is none.
func (s *Store) PreviousBalanceDrift(ctx context.Context, currency string, closingID int64) (BalanceDrift, bool, error) {
	var id int64
	err := s.rdb.QueryRowContext(ctx, `SELECT id FROM balance_drifts WHERE currency = ? AND closing_id < ?
		ORDER BY closing_at DESC, id DESC LIMIT 1`, strings.ToLower(currency), closingID).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return BalanceDrift{}, false, nil
	}
	if err != nil {
		return BalanceDrift{}, false, fmt.Errorf("previous drift %s: %w", currency, err)
	}
	ds, err := s.balanceDrifts(ctx, `id = ?`, id)
	if err != nil || len(ds) == 0 {
		return BalanceDrift{}, false, err
	}
	return ds[0], true, nil
}

// AgreedAt returns when the comparison that closed at snapshot was made,
// if it found the books agreeing (or a person accepted its gap); ok is
// false otherwise, or when no comparison closed there.
func (s *Store) AgreedAt(ctx context.Context, snapshot BalanceSnapshot) (at time.Time, ok bool, err error) {
	var ms int64
	err = s.rdb.QueryRowContext(ctx, `SELECT computed_at FROM balance_drifts
		WHERE currency = ? AND closing_id = ? AND (within_tolerance OR accepted)
		ORDER BY id DESC LIMIT 1`, strings.ToLower(snapshot.Currency), snapshot.ID).Scan(&ms)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("agreed at snapshot %d: %w", snapshot.ID, err)
	}
	return unixMilliUTC(ms), true, nil
}
