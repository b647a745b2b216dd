package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"orderd/provider"
)

// The reads a report's verdict and bridge need: the balance at either end
// of the period and the ledger between them.

// OpeningSnapshot returns the balance of currency at the start of the
// period [from, to): the newest snapshot taken at or before from, else the
// first snapshot in the period when no ledger movement of currency is
// placed between from and it (nothing moved the balance before it). ok is
// false when neither exists: the opening balance is unknown.
func (r *ReportTx) OpeningSnapshot(ctx context.Context, currency string, from, to time.Time) (snap BalanceSnapshot, ok bool, err error) {
	if snap, ok, err = r.LatestSnapshot(ctx, currency, from.Add(time.Millisecond)); err != nil || ok {
		return snap, ok, err
	}
	if snap, ok, err = r.FirstSnapshot(ctx, currency, from, to); err != nil || !ok {
		return snap, ok, err
	}
	var moved int
	if err := r.tx.QueryRowContext(ctx, `SELECT count(*) FROM ledger_movements
		WHERE currency = ? AND placed_at >= ? AND placed_at <= ?`,
		strings.ToLower(currency), from.UnixMilli(), snap.TakenAt.UnixMilli()).Scan(&moved); err != nil {
		return BalanceSnapshot{}, false, fmt.Errorf("report opening %s: %w", currency, err)
	}
	return snap, moved == 0, nil
}

// BridgeMovements calls fn with the ledger movements of currency placed in
// (after, upTo], oldest first.
func (r *ReportTx) BridgeMovements(ctx context.Context, currency string, after, upTo time.Time, fn func(LedgerMovement) error) error {
	rows, err := r.tx.QueryContext(ctx, `SELECT provider_order_id, merchant_order_id, kind, amount
		FROM ledger_movements WHERE currency = ? AND placed_at > ? AND placed_at <= ? ORDER BY placed_at, id`,
		strings.ToLower(currency), after.UnixMilli(), upTo.UnixMilli())
	if err != nil {
		return fmt.Errorf("report ledger %s: %w", currency, err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			m      LedgerMovement
			amount string
		)
		if err := rows.Scan(&m.ProviderOrderID, &m.MerchantOrderID, &m.Kind, &amount); err != nil {
			return fmt.Errorf("report ledger %s: %w", currency, err)
		}
		if m.Amount, err = provider.ParseAmount(amount); err != nil {
			return fmt.Errorf("report ledger movement of %s: %w", m.ProviderOrderID, err)
		}
		m.Currency = strings.ToLower(currency)
		if err := fn(m); err != nil {
			return err
		}
	}
	return rows.Err()
}

// AcceptedDrift returns the unexplained amounts people accepted (their
// balance_drift finding resolved as explained or written off) in the
// comparisons of currency that closed in (after, upTo].
func (r *ReportTx) AcceptedDrift(ctx context.Context, currency string, after, upTo time.Time) (decimal.Decimal, error) {
	rows, err := r.tx.QueryContext(ctx, `SELECT unexplained FROM balance_drifts
		WHERE currency = ? AND accepted = 1 AND closing_at > ? AND closing_at <= ?`,
		strings.ToLower(currency), after.UnixMilli(), upTo.UnixMilli())
	if err != nil {
		return decimal.Zero, fmt.Errorf("report accepted drift %s: %w", currency, err)
	}
	defer rows.Close()
	sum := decimal.Zero
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return decimal.Zero, fmt.Errorf("report accepted drift %s: %w", currency, err)
		}
		d, err := provider.ParseAmount(s)
		if err != nil {
			return decimal.Zero, fmt.Errorf("report accepted drift %s: %w", currency, err)
		}
		sum = sum.Add(d)
	}
	return sum, rows.Err()
}

// DriftToleranceAt returns the tolerance the newest comparison of currency
// closed before before was made with; zero when there is none.
func (r *ReportTx) DriftToleranceAt(ctx context.Context, currency string, before time.Time) (decimal.Decimal, error) {
	var s string
	err := r.tx.QueryRowContext(ctx, `SELECT tolerance FROM balance_drifts WHERE currency = ? AND closing_at < ?
		ORDER BY closing_at DESC, id DESC LIMIT 1`, strings.ToLower(currency), before.UnixMilli()).Scan(&s)
	if errors.Is(err, sql.ErrNoRows) {
		return decimal.Zero, nil
	}
	if err != nil {
		return decimal.Zero, fmt.Errorf("report tolerance %s: %w", currency, err)
	}
	return provider.ParseAmount(s)
}
