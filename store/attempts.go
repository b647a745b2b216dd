package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// AttemptKind says what an attempt asks the provider to do.
type AttemptKind string

// Attempt kinds.
const (
	AttemptPayin               AttemptKind = "payin"
	AttemptPayout              AttemptKind = "payout"
	AttemptRefund              AttemptKind = "refund"
	AttemptRequisite           AttemptKind = "requisite"
	AttemptRequisiteDeactivate AttemptKind = "requisite_deactivate"
)

// AttemptState is where an attempt stands.
type AttemptState string

// Attempt states. pending: committed, the provider is being called;
// created: the provider did it; rejected: the provider definitely refused
// (or the request never left orderd); in_doubt: the provider may or may not
// have done it, get-status must settle it; not_created: get-status proved it
// was not done, so the same request is safe to send again.
const (
	AttemptPending    AttemptState = "pending"
	AttemptCreated    AttemptState = "created"
	AttemptRejected   AttemptState = "rejected"
	AttemptInDoubt    AttemptState = "in_doubt"
	AttemptNotCreated AttemptState = "not_created"
)

// Settled reports whether the state is an attempt's last one.
func (s AttemptState) Settled() bool {
	return s == AttemptCreated || s == AttemptRejected || s == AttemptNotCreated
}

// AttemptOrigin says who made the call an attempt stands for.
type AttemptOrigin string

// Attempt origins: the gateway called the provider itself; a platform that
// called the provider itself handed an in-doubt creation over with watch.
const (
	OriginGateway AttemptOrigin = "gateway"
	OriginWatch   AttemptOrigin = "watch"
)

// Attempt is one creation (or requisite action) at the provider, recorded
// before the provider is called.
type Attempt struct {
	ID     int64
	Kind   AttemptKind
	Origin AttemptOrigin
	// MerchantOrderID is the order the attempt creates (payin, payout) or
	// refunds; empty for requisites.
	MerchantOrderID string
	// IdempotencyKey groups the attempts that must not run twice.
	IdempotencyKey string
	// Request is the body sent (or to be sent) to the provider.
	Request json.RawMessage
	// RequestHash identifies the request whatever its JSON formatting.
	RequestHash string
	State       AttemptState
	// ErrorCode is the provider's code of a rejection.
	ErrorCode string
	// Detail says in a few words why an attempt is in doubt or rejected.
	Detail string
	// Response is the provider's data for a created attempt, or its error
	// object for a rejected one; nil otherwise.
	Response  json.RawMessage
	CreatedAt time.Time
	UpdatedAt time.Time
	// SettledAt is when the attempt reached created, rejected or
	// not_created; zero before.
	SettledAt time.Time
	// NextCheckAt is when the reconciler may next ask get-status about an
	// in-doubt attempt.
	NextCheckAt   time.Time
	CheckAttempts int
}

// ErrAttemptConflict is matched (errors.Is) by an *AttemptConflictError.
var ErrAttemptConflict = errors.New("idempotency key already used with a different request")

// AttemptConflictError is returned by BeginAttempt when the key already
// belongs to a live attempt with a different request.
type AttemptConflictError struct {
	// Existing is the attempt that holds the key.
	Existing Attempt
}

func (e *AttemptConflictError) Error() string {
	return fmt.Sprintf("attempt %d (%s) holds key %q: %v", e.Existing.ID, e.Existing.State,
		e.Existing.IdempotencyKey, ErrAttemptConflict)
}

// Is makes errors.Is(err, ErrAttemptConflict) true.
func (e *AttemptConflictError) Is(target error) bool { return target == ErrAttemptConflict }

// NewAttempt describes an attempt to begin.
type NewAttempt struct {
	Kind            AttemptKind
	Origin          AttemptOrigin
	MerchantOrderID string
	IdempotencyKey  string
	Request         json.RawMessage
	RequestHash     string
	// State is AttemptPending for a call about to be made, AttemptInDoubt
	// for a creation handed over by a platform.
	State AttemptState
	// Detail is recorded with the new attempt (why it is in doubt).
	Detail string
	// AnyRequest makes any live attempt holding the key count as this one,
	// whatever its request (a platform's watch refers to an order, not to
	// a body).
	AnyRequest bool
	// RetryRejected says whether an identical repeat of a rejected attempt
	// is a new attempt, unless the rejection's code is one of FinalCodes:
	// the other codes' causes lie outside the request (the provider or the
	// merchant's account), so the same request can succeed later. False
	// means never.
	RetryRejected bool
	FinalCodes    []string
}

// BeginAttempt commits a new attempt, unless the idempotency key already
// has one this request must reuse. In one transaction it reads the latest
// attempt with the key and decides:
//   - none, or one that is not_created: a new attempt;
//   - a rejected one: a new attempt for a different request (a corrected
//     one) or when RetryRejected says so; otherwise the rejected one;
//   - a pending, in-doubt or created one: that attempt for an identical
//     request (or with AnyRequest); an *AttemptConflictError otherwise.
//
// It returns the attempt and whether it is new. A new attempt is durable
// when BeginAttempt returns, so the provider may be called.
func (s *Store) BeginAttempt(ctx context.Context, na NewAttempt) (Attempt, bool, error) {
	switch {
	case na.IdempotencyKey == "":
		return Attempt{}, false, errors.New("begin attempt: idempotency key is empty")
	case na.RequestHash == "":
		return Attempt{}, false, errors.New("begin attempt: request hash is empty")
	case !json.Valid(na.Request):
		return Attempt{}, false, errors.New("begin attempt: request is not valid JSON")
	case na.State != AttemptPending && na.State != AttemptInDoubt:
		return Attempt{}, false, fmt.Errorf("begin attempt: a new attempt cannot be %q", na.State)
	}
	if na.Origin == "" {
		na.Origin = OriginGateway
	}
	r, err := ExecAs[beginResult](ctx, s, &beginAttemptCmd{NA: na})
	if err != nil {
		return Attempt{}, false, fmt.Errorf("begin attempt %s: %w", na.IdempotencyKey, err)
	}
	return r.A, r.IsNew, nil
}

// beginResult is BeginAttempt's answer.
type beginResult struct {
	A     Attempt
	IsNew bool
}

// beginAttemptCmd is BeginAttempt's command.
type beginAttemptCmd struct{ NA NewAttempt }

func (*beginAttemptCmd) Kind() string { return "attempt.begin" }

func (c *beginAttemptCmd) Apply(tx *Tx) (any, error) {
	var r beginResult
	err := c.apply(tx, &r.A, &r.IsNew)
	return r, err
}

func (c *beginAttemptCmd) apply(tx *Tx, a *Attempt, isNew *bool) error {
	na := c.NA
	prev, err := scanAttempt(tx.QueryRow(`SELECT `+attemptColumns+` FROM attempts
		WHERE idempotency_key = ? ORDER BY id DESC LIMIT 1`, na.IdempotencyKey))
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return err
	default:
		if reuse, err := reuseAttempt(prev, na); reuse || err != nil {
			*a = prev
			return err
		}
	}
	now := tx.Now().UnixMilli()
	var next any
	if na.State == AttemptInDoubt {
		next = now
	}
	id, err := insertID(tx, `INSERT INTO attempts (kind, origin, merchant_order_id, idempotency_key,
			request, request_hash, state, detail, created_at, updated_at, next_check_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		string(na.Kind), string(na.Origin), na.MerchantOrderID, na.IdempotencyKey, []byte(na.Request),
		na.RequestHash, string(na.State), na.Detail, now, now, next)
	if err != nil {
		return fmt.Errorf("insert attempt: %w", err)
	}
	*a, err = txAttempt(tx, id)
	*isNew = true
	return err
}

// reuseAttempt decides whether na must reuse prev (true), may start a new
// attempt (false), or conflicts with it (error).
func reuseAttempt(prev Attempt, na NewAttempt) (bool, error) {
	same := prev.RequestHash == na.RequestHash
	switch prev.State {
	case AttemptNotCreated:
		return false, nil
	case AttemptRejected:
		if na.AnyRequest || !same {
			return false, nil
		}
		return !na.RetryRejected || slices.Contains(na.FinalCodes, prev.ErrorCode), nil
	default:
		if same || na.AnyRequest {
			return true, nil
		}
		return false, &AttemptConflictError{Existing: prev}
	}
}

// AttemptOutcome is the provider's answer to a pending attempt's call.
type AttemptOutcome struct {
	// State is AttemptCreated, AttemptRejected or AttemptInDoubt.
	State     AttemptState
	ErrorCode string
	Detail    string
	// Response is the provider's data (created) or error object
	// (rejected).
	Response json.RawMessage
	// Observation, when set, is the created order; it goes through the
	// one write path in the same transaction as the attempt's update.
	Observation *Observation
	// Watch, when set, asks the reconciler to poll an order (for example
	// the refunded order, whose refund transaction the create answer does
	// not fully show).
	Watch *Watch
	// Requisite, when set, registers a created requisite for the
	// reconciler's sweep.
	Requisite *Requisite
	// DeactivatedRequisite, when set, is the id of a requisite the
	// provider deactivated; the sweep stops.
	DeactivatedRequisite string
}

// FinishAttempt records the answer to a pending attempt's call, together
// with the created order when there is one. If the attempt is no longer
// pending (a reconciler settled it meanwhile) the attempt is left as it is,
// but the order is still applied, since it is the provider's truth. It
// returns the attempt as stored afterwards.
func (s *Store) FinishAttempt(ctx context.Context, id int64, out AttemptOutcome) (Attempt, error) {
	switch out.State {
	case AttemptCreated, AttemptRejected, AttemptInDoubt:
	default:
		return Attempt{}, fmt.Errorf("finish attempt %d: outcome state %q", id, out.State)
	}
	if out.Response != nil && !json.Valid(out.Response) {
		return Attempt{}, fmt.Errorf("finish attempt %d: response is not valid JSON", id)
	}
	a, err := ExecAs[Attempt](ctx, s, &finishAttemptCmd{ID: id, Out: out})
	if err != nil {
		return Attempt{}, fmt.Errorf("finish attempt %d: %w", id, err)
	}
	return a, nil
}

// finishAttemptCmd is FinishAttempt's command.
type finishAttemptCmd struct {
	ID  int64
	Out AttemptOutcome
	// legacy: an entry of the kind written before a created order that
	// contradicts a stored identity opened a finding; it applies as it
	// did then (see the reconcile package's commands for why).
	legacy bool
}

func (c *finishAttemptCmd) Kind() string {
	if c.legacy {
		return "attempt.finish"
	}
	return "attempt.finish.2"
}

func (c *finishAttemptCmd) Apply(tx *Tx) (any, error) { return c.apply(tx) }

func (c *finishAttemptCmd) apply(tx *Tx) (Attempt, error) {
	id, out := c.ID, c.Out
	detail := out.Detail
	if out.Observation != nil {
		if _, err := tx.ApplyObservation(*out.Observation); err != nil {
			if !errors.Is(err, ErrConflict) {
				return Attempt{}, err
			}
			// The provider created the order; that it contradicts a
			// stored one is for a human (an identity_conflict finding),
			// not a reason to lose the attempt's outcome.
			detail = joinDetail(detail, err.Error())
			if !c.legacy {
				if _, ferr := tx.RecordIdentityConflict(*out.Observation, err.Error()); ferr != nil {
					return Attempt{}, ferr
				}
			}
		}
	}
	if out.Watch != nil {
		if err := tx.UpsertWatch(*out.Watch); err != nil {
			return Attempt{}, err
		}
	}
	if out.Requisite != nil {
		if err := tx.UpsertRequisite(*out.Requisite); err != nil {
			return Attempt{}, err
		}
	}
	if out.DeactivatedRequisite != "" {
		if err := tx.DeactivateRequisite(out.DeactivatedRequisite); err != nil {
			return Attempt{}, err
		}
	}
	now := tx.Now().UnixMilli()
	var settled, next any
	if out.State.Settled() {
		settled = now
	} else {
		next = now
	}
	if _, err := tx.Exec(`UPDATE attempts SET state = ?, error_code = ?, detail = ?, response = ?,
			updated_at = ?, settled_at = ?, next_check_at = ?
		WHERE id = ? AND state = 'pending'`,
		string(out.State), out.ErrorCode, detail, nullBytes(out.Response), now, settled, next, id); err != nil {
		return Attempt{}, fmt.Errorf("update attempt: %w", err)
	}
	return txAttempt(tx, id)
}

// RecoverPendingAttempts turns every pending attempt into an in-doubt one
// and returns how many there were. A pending attempt at start means orderd
// stopped between committing it and recording the provider's answer, so
// the provider may or may not have acted. The daemon calls it once at
// start, before the admin API serves; never while a gateway is running on
// the same database, whose calls in flight are pending too.
func (s *Store) RecoverPendingAttempts(ctx context.Context) (int64, error) {
	n, err := ExecAs[int64](ctx, s, recoverPendingCmd{})
	if err != nil {
		return 0, fmt.Errorf("recover pending attempts: %w", err)
	}
	return n, nil
}

// recoverPendingCmd is RecoverPendingAttempts' command.
type recoverPendingCmd struct{}

func (recoverPendingCmd) Kind() string { return "attempt.recover_pending" }

func (recoverPendingCmd) Apply(tx *Tx) (any, error) {
	now := tx.Now().UnixMilli()
	res, err := tx.Exec(`UPDATE attempts SET state = 'in_doubt', updated_at = ?, next_check_at = ?,
			detail = 'orderd stopped before the provider answered'
		WHERE state = 'pending'`, now, now)
	if err != nil {
		return nil, err
	}
	return res.RowsAffected()
}

// DueInDoubtAttempts returns up to limit payin and payout attempts that the
// reconciler should settle with get-status now: in doubt, or pending for
// so long that the call is certainly over; created at or before olderThan
// (so a creation still in flight is not declared absent); and due
// (next_check_at at or before now). Most overdue first.
//
// Refund and requisite attempts are not returned: get-status by
// merchantOrderId cannot prove a refund or a requisite absent, so those
// stay in doubt for a human (GET /v1/attempts?state=in_doubt).
func (s *Store) DueInDoubtAttempts(ctx context.Context, olderThan, now time.Time, limit int) ([]Attempt, error) {
	if limit <= 0 {
		limit = 100
	}
	as, err := queryAttempts(ctx, s.rdb, `SELECT `+attemptColumns+` FROM attempts
		WHERE state IN ('in_doubt', 'pending') AND kind IN ('payin', 'payout')
			AND created_at <= ? AND coalesce(next_check_at, 0) <= ?
		ORDER BY coalesce(next_check_at, created_at), id
		LIMIT ?`, olderThan.UnixMilli(), now.UnixMilli(), limit)
	if err != nil {
		return nil, fmt.Errorf("due in-doubt attempts: %w", err)
	}
	return as, nil
}

// SettleAttemptCreated records that get-status found the attempt's order:
// the order goes through the one write path (obs, usually SourcePoll) and
// the attempt becomes created, in one transaction. Settling an attempt that
// is already settled changes nothing but the order. A found order that
// contradicts a stored identity is not applied, but the attempt is still
// settled as created (the provider made it), with the conflict in its
// detail and an identity_conflict finding.
func (s *Store) SettleAttemptCreated(ctx context.Context, id int64, obs Observation) error {
	if _, err := s.Exec(ctx, &settleCreatedCmd{ID: id, Obs: obs}); err != nil {
		return fmt.Errorf("settle attempt %d as created: %w", id, err)
	}
	return nil
}

// settleCreatedCmd is SettleAttemptCreated's command.
type settleCreatedCmd struct {
	ID  int64
	Obs Observation
	// rules is the version of the rules an entry was written with, which
	// it keeps on replay; 0 is the latest (3). Up to 1 a found order that
	// contradicts a stored identity failed the command (since 2 it settles
	// the attempt with an identity_conflict finding); up to 2 a found order
	// of another type than the attempt's settled it as created (since 3
	// it fails the command).
	rules int
}

func (c *settleCreatedCmd) Kind() string {
	switch c.rules {
	case 1:
		return "attempt.settle_created"
	case 2:
		return "attempt.settle_created.2"
	}
	return "attempt.settle_created.3"
}

func (c *settleCreatedCmd) Apply(tx *Tx) (any, error) { return nil, c.apply(tx) }

func (c *settleCreatedCmd) apply(tx *Tx) error {
	id, obs := c.ID, c.Obs
	a, err := txAttempt(tx, id)
	if err != nil {
		return err
	}
	if obs.Order != nil && a.MerchantOrderID != "" && obs.Order.MerchantOrderID != a.MerchantOrderID {
		return fmt.Errorf("order %q is not the attempt's %q", obs.Order.MerchantOrderID, a.MerchantOrderID)
	}
	if c.rules == 0 && obs.Order != nil && string(obs.Order.Type) != string(a.Kind) {
		// The merchantOrderId is another order's, of another type: this
		// creation was not it. Whether it was made at all get-status
		// cannot say, so the attempt stays in doubt for a human (an
		// unresolved_creation finding in time), never "created".
		return fmt.Errorf("%w: get-status found a %s under merchantOrderId %q, not the attempt's %s",
			ErrConflict, obs.Order.Type, a.MerchantOrderID, a.Kind)
	}
	detail := a.Detail
	if _, err := tx.ApplyObservation(obs); err != nil {
		if c.rules == 1 || !errors.Is(err, ErrConflict) {
			return err
		}
		// The provider created the order, so the creation is settled;
		// that the order contradicts a stored one is for a human.
		detail = joinDetail(detail, err.Error())
		if _, err := tx.RecordIdentityConflict(obs, err.Error()); err != nil {
			return err
		}
	}
	now := tx.Now().UnixMilli()
	_, err = tx.Exec(`UPDATE attempts SET state = 'created', response = ?, detail = ?, updated_at = ?, settled_at = ?,
			next_check_at = NULL
		WHERE id = ? AND state IN ('in_doubt', 'pending')`, []byte(obs.Raw), detail, now, now, id)
	return err
}

// notCreatedData is the data of an order.not_created event.
type notCreatedData struct {
	AttemptID       int64           `json:"attemptId"`
	Kind            AttemptKind     `json:"kind"`
	Origin          AttemptOrigin   `json:"origin"`
	MerchantOrderID string          `json:"merchantOrderId"`
	Request         json.RawMessage `json:"request"`
	CreatedAt       time.Time       `json:"createdAt"`
	SettledAt       time.Time       `json:"settledAt"`
}

// SettleAttemptNotCreated records that get-status proved the attempt's
// order absent (ORDER_NOT_FOUND): the attempt becomes not_created and an
// order.not_created event is queued on orders.<kind>.not_created, with id
// EventID(merchantOrderId, "order.not_created") and the attempt as data.
// Settling an attempt that is already settled changes nothing.
func (s *Store) SettleAttemptNotCreated(ctx context.Context, id int64) error {
	if _, err := s.Exec(ctx, &settleNotCreatedCmd{ID: id}); err != nil {
		return fmt.Errorf("settle attempt %d as not created: %w", id, err)
	}
	return nil
}

// settleNotCreatedCmd is SettleAttemptNotCreated's command.
type settleNotCreatedCmd struct{ ID int64 }

func (*settleNotCreatedCmd) Kind() string { return "attempt.settle_not_created" }

func (c *settleNotCreatedCmd) Apply(tx *Tx) (any, error) { return nil, c.apply(tx) }

func (c *settleNotCreatedCmd) apply(tx *Tx) error {
	id := c.ID
	a, err := txAttempt(tx, id)
	if err != nil {
		return err
	}
	if a.State != AttemptInDoubt && a.State != AttemptPending {
		return nil
	}
	if a.MerchantOrderID == "" {
		return errors.New("attempt has no merchantOrderId")
	}
	now := tx.Now()
	if _, err := tx.Exec(`UPDATE attempts SET state = 'not_created', updated_at = ?, settled_at = ?,
			next_check_at = NULL
		WHERE id = ?`, now.UnixMilli(), now.UnixMilli(), id); err != nil {
		return err
	}
	data, err := json.Marshal(notCreatedData{
		AttemptID: a.ID, Kind: a.Kind, Origin: a.Origin, MerchantOrderID: a.MerchantOrderID,
		Request: a.Request, CreatedAt: a.CreatedAt, SettledAt: time.UnixMilli(now.UnixMilli()).UTC(),
	})
	if err != nil {
		return err
	}
	_, err = tx.InsertEvent(OutboxEvent{
		ID:              EventID(a.MerchantOrderID, EventOrderNotCreated),
		Type:            EventOrderNotCreated,
		Subject:         OrderSubject(string(a.Kind), "not_created"),
		EventSubject:    a.MerchantOrderID,
		Time:            now,
		MerchantOrderID: a.MerchantOrderID,
		LearnedVia:      SourcePoll,
		Data:            data,
	})
	return err
}

// PostponeAttempt records an inconclusive check of an in-doubt attempt: it
// is due again at next, and its check counter grows.
func (s *Store) PostponeAttempt(ctx context.Context, id int64, next time.Time) error {
	if _, err := s.Exec(ctx, &postponeAttemptCmd{ID: id, Next: next}); err != nil {
		return fmt.Errorf("postpone attempt %d: %w", id, err)
	}
	return nil
}

// postponeAttemptCmd is PostponeAttempt's command.
type postponeAttemptCmd struct {
	ID   int64
	Next time.Time
}

func (*postponeAttemptCmd) Kind() string { return "attempt.postpone" }

func (c *postponeAttemptCmd) Apply(tx *Tx) (any, error) { return nil, c.apply(tx) }

func (c *postponeAttemptCmd) apply(tx *Tx) error {
	id, next := c.ID, c.Next
	res, err := tx.Exec(`UPDATE attempts SET next_check_at = ?, check_attempts = check_attempts + 1,
			updated_at = ?
		WHERE id = ?`, next.UnixMilli(), tx.Now().UnixMilli(), id)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return ErrNotFound
	}
	return err
}

// AttemptByID returns one attempt or ErrNotFound.
func (s *Store) AttemptByID(ctx context.Context, id int64) (Attempt, error) {
	a, err := scanAttempt(s.rdb.QueryRowContext(ctx, `SELECT `+attemptColumns+` FROM attempts WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Attempt{}, fmt.Errorf("attempt %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Attempt{}, fmt.Errorf("attempt %d: %w", id, err)
	}
	return a, nil
}

// AttemptsByMerchantID returns the attempts about one merchantOrderId,
// oldest first (none is not an error).
func (s *Store) AttemptsByMerchantID(ctx context.Context, merchantOrderID string) ([]Attempt, error) {
	if merchantOrderID == "" {
		return nil, nil
	}
	as, err := queryAttempts(ctx, s.rdb, `SELECT `+attemptColumns+` FROM attempts
		WHERE merchant_order_id = ? ORDER BY id`, merchantOrderID)
	if err != nil {
		return nil, fmt.Errorf("attempts of %s: %w", merchantOrderID, err)
	}
	return as, nil
}

// AttemptQuery selects attempts for a listing. Zero fields do not filter.
type AttemptQuery struct {
	State AttemptState
	Kind  AttemptKind
	// AfterID continues a listing after the attempt with this id.
	AfterID int64
	// Limit bounds the page; zero means 50, at most 1000.
	Limit int
}

// ListAttempts returns a page of attempts in id order.
func (s *Store) ListAttempts(ctx context.Context, q AttemptQuery) ([]Attempt, error) {
	var (
		where = []string{"id > ?"}
		args  = []any{q.AfterID}
	)
	if q.State != "" {
		where, args = append(where, "state = ?"), append(args, string(q.State))
	}
	if q.Kind != "" {
		where, args = append(where, "kind = ?"), append(args, string(q.Kind))
	}
	args = append(args, pageLimit(q.Limit))
	as, err := queryAttempts(ctx, s.rdb, `SELECT `+attemptColumns+` FROM attempts
		WHERE `+strings.Join(where, " AND ")+` ORDER BY id LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("list attempts: %w", err)
	}
	return as, nil
}

// GatewayRequisites returns the ids of the requisites created through the
// gateway and not deactivated through it, for the reconciler's requisite
// sweep.
func (s *Store) GatewayRequisites(ctx context.Context) ([]string, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT DISTINCT json_extract(c.response, '$.id') FROM attempts c
		WHERE c.kind = 'requisite' AND c.state = 'created' AND json_valid(c.response)
			AND json_extract(c.response, '$.id') IS NOT NULL
			AND NOT EXISTS (SELECT 1 FROM attempts d WHERE d.kind = 'requisite_deactivate'
				AND d.state = 'created' AND d.idempotency_key = 'deactivate:' || json_extract(c.response, '$.id'))
		ORDER BY c.id`)
	if err != nil {
		return nil, fmt.Errorf("gateway requisites: %w", err)
	}
	ids, err := scanStrings(rows)
	if err != nil {
		return nil, fmt.Errorf("gateway requisites: %w", err)
	}
	return ids, nil
}

// RequisiteDeactivateKey is the idempotency key of deactivating the
// requisite with id; GatewayRequisites relies on it.
func RequisiteDeactivateKey(id string) string { return "deactivate:" + id }

// OrderQuery selects orders for a listing. Zero fields do not filter.
type OrderQuery struct {
	Status string
	Type   string
	// From (inclusive) and To (exclusive) bound when the order was
	// created: the provider's createdAt, else when orderd first saw it.
	From, To time.Time
	// AfterID continues a listing after the order with this row id.
	AfterID int64
	// Limit bounds the page; zero means 50, at most 1000.
	Limit int
}

// OrderSummary is one order of a listing.
type OrderSummary struct {
	// RowID is the store's integer id, the listing's keyset.
	RowID           int64
	ProviderID      string
	MerchantOrderID string
	Type            string
	Status          string
	LearnedVia      Source
	// CreatedAt is the provider's createdAt; zero when it never said.
	CreatedAt   time.Time
	FirstSeenAt time.Time
	UpdatedAt   time.Time
	CompletedAt time.Time
	// Order is the current state exactly as received (compacted).
	Order json.RawMessage
}

// DefaultOrderScan is how many orders one page of a filtered order listing
// walks at most: about 20 ms of reading on the development machine.
const DefaultOrderScan = 20_000

// OrderPage is one page of an order listing.
type OrderPage struct {
	Orders []OrderSummary
	// ScannedTo is not zero when a filtered page stopped at its bound
	// (Options.OrderScan orders walked) before it held Limit orders: the
	// orders up to this row id are listed, and the listing goes on after
	// it, so a page may hold fewer orders, or none, and still not be the
	// last.
	ScannedTo int64
}

// OrdersPage returns orders in row id order, keyset-paged on the row id so
// that a listing sees every order exactly once even while orders arrive.
// No index serves the filters (each would cost the write path), so a
// filtered page walks the orders by row id; a filter that few orders or
// none match would walk them all, in proportion to the database, so the
// walk stops after Options.OrderScan orders and the page says where
// (OrderPage.ScannedTo).
func (s *Store) OrdersPage(ctx context.Context, q OrderQuery) (OrderPage, error) {
	var page OrderPage
	bound := int64(-1)
	if q.filtered() {
		err := s.rdb.QueryRowContext(ctx, orderScanBoundQuery, q.AfterID, s.opts.OrderScan-1).Scan(&bound)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			bound = -1 // fewer orders left than the bound: walk them all
		case err != nil:
			return page, fmt.Errorf("list orders: %w", err)
		}
	}
	query, args := ordersPageQuery(q, bound)
	out, err := s.orderSummaries(ctx, query, args...)
	if err != nil {
		return page, fmt.Errorf("list orders: %w", err)
	}
	page.Orders = out
	if bound >= 0 && len(out) < pageLimit(q.Limit) {
		page.ScannedTo = bound
	}
	return page, nil
}

// orderScanBoundQuery finds the row id of the order a bounded walk from a
// row id stops at: the primary key alone, read in order.
const orderScanBoundQuery = `SELECT id FROM orders WHERE id > ? ORDER BY id LIMIT 1 OFFSET ?`

// filtered says whether q filters, beyond the row id.
func (q OrderQuery) filtered() bool {
	return q.Status != "" || q.Type != "" || !q.From.IsZero() || !q.To.IsZero()
}

// HasOddOrderWord reports whether a stored order has status (field
// "status") or type (field "type") value, for a value the provider does not
// document: the partial indexes of migration 0011 hold those orders alone,
// so the answer costs a lookup. It is false for a documented value.
func (s *Store) HasOddOrderWord(ctx context.Context, field, value string) (bool, error) {
	var q string
	switch field {
	case "status":
		q = oddStatusQuery
	case "type":
		q = oddTypeQuery
	default:
		return false, fmt.Errorf("order word: unknown field %q", field)
	}
	var held bool
	if err := s.rdb.QueryRowContext(ctx, q, value).Scan(&held); err != nil {
		return false, fmt.Errorf("order word: %w", err)
	}
	return held, nil
}

// The queries of HasOddOrderWord repeat their partial index's condition,
// so SQLite may read it.
const (
	oddStatusQuery = `SELECT EXISTS (SELECT 1 FROM orders WHERE status = ?
		AND status NOT IN ('new', 'processing', 'completed', 'rejected'))`
	oddTypeQuery = `SELECT EXISTS (SELECT 1 FROM orders WHERE type = ? AND type NOT IN ('payin', 'payout'))`
)

// ordersPageQuery is OrdersPage's query and its arguments; a bound of 0
// or more stops the walk at that row id.
func ordersPageQuery(q OrderQuery, bound int64) (string, []any) {
	var (
		where = []string{"o.id > ?"}
		args  = []any{q.AfterID}
	)
	if bound >= 0 {
		where, args = append(where, "o.id <= ?"), append(args, bound)
	}
	if q.Status != "" {
		where, args = append(where, "o.status = ?"), append(args, q.Status)
	}
	if q.Type != "" {
		where, args = append(where, "o.type = ?"), append(args, q.Type)
	}
	if !q.From.IsZero() {
		where, args = append(where, "coalesce(o.created_at, o.first_seen_at) >= ?"), append(args, q.From.UnixMilli())
	}
	if !q.To.IsZero() {
		where, args = append(where, "coalesce(o.created_at, o.first_seen_at) < ?"), append(args, q.To.UnixMilli())
	}
	args = append(args, pageLimit(q.Limit))
	return orderSummaryColumns + `WHERE ` + strings.Join(where, " AND ") + ` ORDER BY o.id LIMIT ?`, args
}

// FindingQuery selects findings for a listing. Zero fields do not filter.
type FindingQuery struct {
	// State is "open", "resolved" or empty for both.
	State string
	Kind  string
	// AfterID continues a listing after the finding with this id.
	AfterID int64
	// Limit bounds the page; zero means 50, at most 1000.
	Limit int
}

// FindingsPage returns findings in id order.
func (s *Store) FindingsPage(ctx context.Context, q FindingQuery) ([]Finding, error) {
	query, args, err := findingsPageQuery(q)
	if err != nil {
		return nil, err
	}
	rows, err := s.rdb.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list findings: %w", err)
	}
	defer rows.Close()
	var out []Finding
	for rows.Next() {
		f, err := scanFinding(rows)
		if err != nil {
			return nil, fmt.Errorf("list findings: %w", err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list findings: %w", err)
	}
	rows.Close()
	if err := loadTrails(ctx, s.rdb, out); err != nil {
		return nil, err
	}
	return out, nil
}

// recentlyResolvedQuery walks findings_resolved (migration 0013) from its
// end: the latest resolutions first, without reading older ones.
const recentlyResolvedQuery = `SELECT ` + findingColumns + `
	FROM findings WHERE resolved_at IS NOT NULL ORDER BY resolved_at DESC, id DESC LIMIT ?`

// RecentlyResolvedFindings returns the limit findings resolved last (by a
// person or by the reconciler), the latest first, with their trails.
func (s *Store) RecentlyResolvedFindings(ctx context.Context, limit int) ([]Finding, error) {
	rows, err := s.rdb.QueryContext(ctx, recentlyResolvedQuery, pageLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("recently resolved findings: %w", err)
	}
	defer rows.Close()
	var out []Finding
	for rows.Next() {
		f, err := scanFinding(rows)
		if err != nil {
			return nil, fmt.Errorf("recently resolved findings: %w", err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("recently resolved findings: %w", err)
	}
	rows.Close()
	if err := loadTrails(ctx, s.rdb, out); err != nil {
		return nil, err
	}
	return out, nil
}

// findingsPageQuery is FindingsPage's query and its arguments.
func findingsPageQuery(q FindingQuery) (string, []any, error) {
	var (
		where = []string{"id > ?"}
		args  = []any{q.AfterID}
	)
	switch q.State {
	case "":
	case "open":
		where = append(where, "resolved_at IS NULL")
	case "resolved":
		where = append(where, "resolved_at IS NOT NULL")
	default:
		return "", nil, fmt.Errorf("list findings: unknown state %q", q.State)
	}
	if q.Kind != "" {
		where, args = append(where, "kind = ?"), append(args, q.Kind)
	}
	args = append(args, pageLimit(q.Limit))
	return `SELECT ` + findingColumns + `
		FROM findings WHERE ` + strings.Join(where, " AND ") + ` ORDER BY id LIMIT ?`, args, nil
}

const attemptColumns = `id, kind, origin, merchant_order_id, idempotency_key, request, request_hash, state,
	error_code, detail, response, created_at, updated_at, settled_at, next_check_at, check_attempts`

type rowScanner interface {
	Scan(dest ...any) error
}

func scanAttempt(r rowScanner) (Attempt, error) {
	var (
		a                   Attempt
		req, resp           []byte
		created, updated    int64
		settled, nextCheck  sql.NullInt64
		kind, origin, state string
	)
	if err := r.Scan(&a.ID, &kind, &origin, &a.MerchantOrderID, &a.IdempotencyKey, &req, &a.RequestHash,
		&state, &a.ErrorCode, &a.Detail, &resp, &created, &updated, &settled, &nextCheck, &a.CheckAttempts); err != nil {
		return Attempt{}, err
	}
	a.Kind, a.Origin, a.State = AttemptKind(kind), AttemptOrigin(origin), AttemptState(state)
	a.Request = json.RawMessage(req)
	if resp != nil {
		a.Response = json.RawMessage(resp)
	}
	a.CreatedAt = time.UnixMilli(created).UTC()
	a.UpdatedAt = time.UnixMilli(updated).UTC()
	a.SettledAt = msTime(settled)
	a.NextCheckAt = msTime(nextCheck)
	return a, nil
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func queryAttempts(ctx context.Context, q querier, query string, args ...any) ([]Attempt, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var as []Attempt
	for rows.Next() {
		a, err := scanAttempt(rows)
		if err != nil {
			return nil, err
		}
		as = append(as, a)
	}
	return as, rows.Err()
}

func txAttempt(tx *Tx, id int64) (Attempt, error) {
	a, err := scanAttempt(tx.QueryRow(`SELECT `+attemptColumns+` FROM attempts WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Attempt{}, fmt.Errorf("attempt %d: %w", id, ErrNotFound)
	}
	return a, err
}

func insertID(tx *Tx, query string, args ...any) (int64, error) {
	var id int64
	err := tx.QueryRow(query, args...).Scan(&id)
	return id, err
}

func msTime(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMilli(v.Int64).UTC()
}

func nullBytes(b []byte) any {
	if b == nil {
		return nil
	}
	return []byte(b)
}

func joinDetail(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// pageLimit bounds a listing's page size: 50 by default, at most 1000
// (the API asks for one row more than it shows, to know whether a next
// page exists).
func pageLimit(n int) int {
	switch {
	case n <= 0:
		return 50
	case n > 1000:
		return 1000
	}
	return n
}

// AddWatch puts an order on the reconciler's watch list, or refreshes its
// entry (see Tx.UpsertWatch): the watch endpoint's "created" state.
func (s *Store) AddWatch(ctx context.Context, w Watch) error {
	if _, err := s.Exec(ctx, &watchCmd{W: w}); err != nil {
		return fmt.Errorf("add watch: %w", err)
	}
	return nil
}

// watchCmd is AddWatch's and MarkForPoll's command.
type watchCmd struct{ W Watch }

func (*watchCmd) Kind() string { return "watch" }

func (c *watchCmd) Apply(tx *Tx) (any, error) { return nil, tx.UpsertWatch(c.W) }
