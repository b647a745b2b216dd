package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// QuarantinedWebhook is a signed webhook body that did not parse as an
// order. It is kept so nothing authenticated is lost.
type QuarantinedWebhook struct {
	Raw        []byte
	Header     http.Header
	RemoteAddr string
	// Reason says why it did not parse (the decoder's error).
	Reason string
	// OrderID and MerchantOrderID are what could be read of the order's
	// identity, if anything.
	OrderID         string
	MerchantOrderID string
	ReceivedAt      time.Time
}

// Quarantine stores a signed body that did not parse. The first copy of a
// body opens a "quarantined_webhook" finding (and its event) and, when the
// order's merchantOrderId can be read or looked up, a watch so the
// reconciler polls the order. A byte-identical repeat bumps the stored
// copy's counter.
func (s *Store) Quarantine(ctx context.Context, q QuarantinedWebhook) error {
	if len(q.Raw) == 0 {
		return errors.New("quarantine: body is empty")
	}
	if q.Reason == "" {
		q.Reason = "unparseable order"
	}
	_, err := s.Exec(ctx, &quarantineCmd{Q: q})
	return err
}

// quarantineCmd is Quarantine's command.
type quarantineCmd struct{ Q QuarantinedWebhook }

func (*quarantineCmd) Kind() string { return "quarantine" }

func (c *quarantineCmd) Apply(tx *Tx) (any, error) {
	return nil, c.apply(tx)
}

func (c *quarantineCmd) apply(tx *Tx) error {
	q := c.Q
	at := q.ReceivedAt
	if at.IsZero() {
		at = tx.Now()
	}
	sum := sha256.Sum256(q.Raw)
	var headers any
	if h := selectHeaders(q.Header); h != nil {
		headers = h
	}
	var id, seen int64
	err := tx.QueryRow(`INSERT INTO quarantine (body_sha256, raw, headers, remote_addr, reason, order_id,
			merchant_order_id, received_at, last_received_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (body_sha256) DO UPDATE SET
			times_seen = times_seen + 1,
			last_received_at = max(last_received_at, excluded.last_received_at)
		RETURNING id, times_seen`,
		sum[:], q.Raw, headers, nullString(q.RemoteAddr), q.Reason, nullString(q.OrderID),
		nullString(q.MerchantOrderID), at.UnixMilli(), at.UnixMilli()).Scan(&id, &seen)
	if err != nil {
		return fmt.Errorf("quarantine: %w", err)
	}
	if seen > 1 {
		return nil
	}
	merchantID := q.MerchantOrderID
	if merchantID == "" && q.OrderID != "" {
		err := tx.QueryRow(`SELECT merchant_order_id FROM orders WHERE provider_id = ?`, q.OrderID).Scan(&merchantID)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("quarantine: look up order %s: %w", q.OrderID, err)
		}
	}
	key := q.OrderID
	if key == "" {
		key = merchantID
	}
	if key == "" {
		key = "quarantine-" + strconv.FormatInt(id, 10)
	}
	detail := map[string]any{
		"quarantineId":    id,
		"reason":          q.Reason,
		"orderId":         q.OrderID,
		"merchantOrderId": merchantID,
		"receivedAt":      at.UTC(),
	}
	if _, _, err := tx.OpenFinding(FindingQuarantinedWebhook, key, detail); err != nil {
		return fmt.Errorf("quarantine: %w", err)
	}
	if merchantID != "" {
		if err := tx.UpsertWatch(Watch{MerchantOrderID: merchantID, ProviderOrderID: q.OrderID,
			Reason: "quarantined webhook: " + q.Reason, NextCheckAt: at}); err != nil {
			return fmt.Errorf("quarantine: %w", err)
		}
	}
	return nil
}
