package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// stmts are the writer's prepared statements, prepared once on the writer's
// connection. They are used without a context (the writer's statements must
// never be interrupted by a caller's cancellation: SQLite rolls back the
// whole transaction on an interrupted write, which would sink the batch).
type stmts struct {
	begin, commit, rollback, savepoint, rollbackTo, release *sql.Stmt
	// A replicated log entry's op runs in a savepoint of its own, inside
	// the request's.
	opSavepoint, opRollbackTo, opRelease *sql.Stmt

	maxOrderID, maxDeliveryID, maxHistoryID *sql.Stmt

	orderByProviderID *sql.Stmt
	insertOrder       *sql.Stmt
	updateOrder       *sql.Stmt
	upsertDelivery    *sql.Stmt
	insertDelivery    *sql.Stmt
	seenBefore        *sql.Stmt
	insertHistory     *sql.Stmt
	bumpHistoryBody   *sql.Stmt
	bumpDelivery      *sql.Stmt
	bumpActivity      *sql.Stmt
	insertOrderEvent  *sql.Stmt
	insertEvent       *sql.Stmt
	insertTrace       *sql.Stmt
	stateRaw          *sql.Stmt
	lastBySource      *sql.Stmt
	advanceOutbox     *sql.Stmt

	all []*sql.Stmt
}

func prepare(ctx context.Context, conn *sql.Conn) (*stmts, error) {
	st := &stmts{}
	var errs []error
	p := func(dst **sql.Stmt, query string) {
		s, err := conn.PrepareContext(ctx, query)
		if err != nil {
			errs = append(errs, fmt.Errorf("%.40q: %w", query, err))
			return
		}
		*dst = s
		st.all = append(st.all, s)
	}
	p(&st.begin, "BEGIN IMMEDIATE")
	p(&st.commit, "COMMIT")
	p(&st.rollback, "ROLLBACK")
	p(&st.savepoint, "SAVEPOINT w")
	p(&st.rollbackTo, "ROLLBACK TO w")
	p(&st.release, "RELEASE w")
	p(&st.opSavepoint, "SAVEPOINT op")
	p(&st.opRollbackTo, "ROLLBACK TO op")
	p(&st.opRelease, "RELEASE op")

	p(&st.orderByProviderID, `SELECT id, merchant_order_id, type, status, fingerprint, learned_via
		FROM orders WHERE provider_id = ?`)
	p(&st.maxOrderID, `SELECT coalesce(max(id), 0) FROM orders`)
	p(&st.maxDeliveryID, `SELECT coalesce(max(id), 0) FROM deliveries`)
	p(&st.maxHistoryID, `SELECT coalesce(max(id), 0) FROM order_history`)
	p(&st.insertOrder, `INSERT INTO orders (id, provider_id, merchant_order_id, type, status, fingerprint,
			source_amount, source_currency, target_amount, target_currency, state_id, learned_via,
			created_at, first_seen_at, updated_at, completed_at, next_check_at, check_attempts, final_via,
			authorized_amount, authorized_currency, own_wallet_amount, own_wallet_currency, refunds)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?)
		ON CONFLICT DO NOTHING`)
	p(&st.updateOrder, `UPDATE orders SET status = ?, fingerprint = ?, type = ?,
			source_amount = ?, source_currency = ?, target_amount = ?, target_currency = ?,
			state_id = ?, learned_via = ?, created_at = coalesce(created_at, ?), updated_at = ?,
			completed_at = coalesce(completed_at, ?), next_check_at = ?, check_attempts = 0,
			final_via = coalesce(?, final_via), authorized_amount = ?, authorized_currency = ?,
			own_wallet_amount = ?, own_wallet_currency = ?, refunds = ?
		WHERE id = ?`)
	p(&st.upsertDelivery, `INSERT INTO deliveries (id, order_id, body_sha256, fingerprint, raw, headers, remote_addr,
			first_received_at, last_received_at, times_seen)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1)
		ON CONFLICT (order_id, body_sha256) DO UPDATE SET
			times_seen = times_seen + 1,
			last_received_at = max(last_received_at, excluded.last_received_at)
		RETURNING id, times_seen`)
	// A new order's first delivery cannot be a repeat: no RETURNING, no
	// conflict clause, a plain insert with the id drawn for it.
	p(&st.insertDelivery, `INSERT INTO deliveries (id, order_id, body_sha256, fingerprint, raw, headers, remote_addr,
			first_received_at, last_received_at, times_seen)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1)`)
	p(&st.seenBefore, `SELECT EXISTS (SELECT 1 FROM order_history WHERE order_id = ? AND fingerprint = ?)`)
	// A webhook that brings a new or changed state keeps its body and the
	// delivery's facts in the history row (body_sha256 onwards); other
	// rows leave those NULL.
	p(&st.insertHistory, `INSERT INTO order_history (id, order_id, fingerprint, status, source, outcome, observed_at,
			delivery_id, raw, body_sha256, headers, remote_addr, last_received_at, times_seen)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	// A byte-identical repeat of a body kept in a history row: at most
	// one row per order holds a given body (see bumpHistoryBody).
	p(&st.bumpHistoryBody, `UPDATE order_history SET times_seen = times_seen + 1,
			last_received_at = max(last_received_at, ?)
		WHERE order_id = ? AND fingerprint = ? AND body_sha256 = ?`)
	p(&st.bumpDelivery, `UPDATE deliveries SET times_seen = times_seen + 1,
			last_received_at = max(last_received_at, ?)
		WHERE order_id = ? AND body_sha256 = ?`)
	// Order events need no conflict clause (see the outbox table's
	// comment in the schema); other events drop repeats on event_id.
	p(&st.bumpActivity, `INSERT INTO activity_minutes (minute, webhooks, events) VALUES (?, ?, ?)
		ON CONFLICT (minute) DO UPDATE SET webhooks = webhooks + excluded.webhooks, events = events + excluded.events`)
	p(&st.insertOrderEvent, `INSERT INTO outbox (event_id, type, subject, event_subject, time, merchant_order_id,
			learned_via, state_id, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	p(&st.insertEvent, `INSERT INTO outbox (event_id, type, subject, event_subject, time, merchant_order_id,
			learned_via, data, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (event_id) WHERE state_id IS NULL DO NOTHING`)
	p(&st.insertTrace, `INSERT OR REPLACE INTO outbox_traces (seq, traceparent) VALUES (?, ?)`)
	p(&st.stateRaw, `SELECT h.source, coalesce(h.raw, d.raw) FROM orders o
		JOIN order_history h ON h.id = o.state_id
		LEFT JOIN deliveries d ON d.id = h.delivery_id
		WHERE o.id = ?`)
	p(&st.lastBySource, `SELECT coalesce(h.raw, d.raw) FROM order_history h
		LEFT JOIN deliveries d ON d.id = h.delivery_id
		WHERE h.order_id = ? AND h.status = ? AND h.source = ?
		ORDER BY h.id DESC LIMIT 1`)
	p(&st.advanceOutbox, `UPDATE outbox_cursor SET seq = ?1 WHERE seq < ?1`)
	if err := errors.Join(errs...); err != nil {
		st.close()
		return nil, err
	}
	return st, nil
}

func (st *stmts) close() error {
	var errs []error
	for _, s := range st.all {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}
