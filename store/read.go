package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"orderd/provider"
)

// OrderView is an order as orderd knows it: the current provider JSON and
// when and how each state was learned.
type OrderView struct {
	ProviderID      string
	MerchantOrderID string
	Type            provider.OrderType
	Status          provider.Status
	Fingerprint     string
	// Order is the current state exactly as received (compacted).
	Order       json.RawMessage
	LearnedVia  Source
	FirstSeenAt time.Time
	// UpdatedAt is the last change of state as orderd saw it.
	UpdatedAt time.Time
	// CompletedAt is when the order reached its final status (the
	// provider's completedAt when given); zero while not final.
	CompletedAt time.Time
	// NextCheckAt is when the reconciler polls it next; zero when final.
	NextCheckAt   time.Time
	CheckAttempts int
	History       []HistoryEntry
}

// HistoryEntry is one observed state of an order.
type HistoryEntry struct {
	Status      provider.Status `json:"status"`
	Fingerprint string          `json:"fingerprint"`
	Source      Source          `json:"source"`
	ObservedAt  time.Time       `json:"observedAt"`
	Outcome     Outcome         `json:"outcome"`
}

// OrderByMerchantID's queries: one order by its unique merchantOrderId,
// then its history along the (order_id, fingerprint) index.
const (
	orderByMerchantIDQuery = `SELECT id, provider_id, merchant_order_id, type, status, fingerprint,
			raw, learned_via, first_seen_at, updated_at, completed_at, next_check_at, check_attempts
		FROM orders_current WHERE merchant_order_id = ?`
	orderHistoryQuery = `SELECT status, fingerprint, source, observed_at, outcome
		FROM order_history WHERE order_id = ? ORDER BY id`
)

// OrderByMerchantID returns the order with this merchantOrderId and its
// history (oldest first), or ErrNotFound.
func (s *Store) OrderByMerchantID(ctx context.Context, merchantOrderID string) (*OrderView, error) {
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("order %s: %w", merchantOrderID, err)
	}
	defer tx.Rollback()
	var (
		v                    OrderView
		id                   int64
		raw                  []byte
		first, updated       int64
		completed, nextCheck sql.NullInt64
	)
	err = tx.QueryRowContext(ctx, orderByMerchantIDQuery, merchantOrderID).Scan(&id, &v.ProviderID, &v.MerchantOrderID, &v.Type,
		&v.Status, &v.Fingerprint, &raw, &v.LearnedVia, &first, &updated, &completed, &nextCheck, &v.CheckAttempts)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("order %s: %w", merchantOrderID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("order %s: %w", merchantOrderID, err)
	}
	v.Order = compactJSON(raw)
	v.FirstSeenAt = time.UnixMilli(first).UTC()
	v.UpdatedAt = time.UnixMilli(updated).UTC()
	if completed.Valid {
		v.CompletedAt = time.UnixMilli(completed.Int64).UTC()
	}
	if nextCheck.Valid {
		v.NextCheckAt = time.UnixMilli(nextCheck.Int64).UTC()
	}
	rows, err := tx.QueryContext(ctx, orderHistoryQuery, id)
	if err != nil {
		return nil, fmt.Errorf("order %s: history: %w", merchantOrderID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			e  HistoryEntry
			at int64
		)
		if err := rows.Scan(&e.Status, &e.Fingerprint, &e.Source, &at, &e.Outcome); err != nil {
			return nil, fmt.Errorf("order %s: history: %w", merchantOrderID, err)
		}
		e.ObservedAt = time.UnixMilli(at).UTC()
		v.History = append(v.History, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("order %s: history: %w", merchantOrderID, err)
	}
	return &v, nil
}

// compactJSON returns b compacted, or b unchanged if it is not valid JSON
// (it was valid when stored, so that would be a damaged row worth seeing
// as is).
func compactJSON(b []byte) json.RawMessage {
	c, err := compact(b)
	if err != nil {
		return b
	}
	return c
}

// scanStrings reads every row of a one-column query as a string and closes
// rows.
func scanStrings(rows *sql.Rows) ([]string, error) {
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
