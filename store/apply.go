package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"time"

	"orderd/internal/jsonenc"
	"orderd/provider"
)

// EventID is the deterministic id of an event: the hex SHA-256 of parts,
// each followed by a NUL byte, so ("ab","c") and ("a","bc") differ. Order
// events use EventID(order id, fingerprint, event type); the same state
// therefore has the same id from any source or instance.
func EventID(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// SubjectToken reduces s to one NATS subject token: lowercased, every
// character outside [a-z0-9_-] replaced by "_", and "unknown" when empty.
func SubjectToken(s string) string {
	if s == "" {
		return "unknown"
	}
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}

// OrderSubject is the relative subject of an order event:
// "orders.<type>.<status>" (the publisher prepends the prefix). Creation
// outcomes use it with status "not_created".
func OrderSubject(orderType, status string) string {
	return "orders." + SubjectToken(orderType) + "." + SubjectToken(status)
}

// FindingSubject is the relative subject of a finding event: "reconcile.<kind>".
func FindingSubject(kind string) string { return "reconcile." + SubjectToken(kind) }

// Order event types besides "order.<status>".
const (
	EventOrderUpdated    = "order.updated"
	EventOrderNotCreated = "order.not_created"
)

// Apply is the one write path for an order's state: it records the
// observation and decides, in one transaction with the rest of its batch,
// whether the state is new, a repeat, stale or a change (see
// Tx.ApplyObservation). It returns after the decision is durable.
func (s *Store) Apply(ctx context.Context, obs Observation) (Result, error) {
	// Validation and hashing happen here, on the caller's goroutine, so
	// the single writer spends its time on SQL only.
	in, err := prepareObservation(obs)
	if err != nil {
		return Result{}, err
	}
	var cmd Command = &observeCmd{Obs: obs, in: &in}
	if s.replog != nil && orderFromBody(obs) {
		cmd = &observeBodyCmd{observeCmd{Obs: obs, in: &in}}
	}
	res, err := ExecAs[Result](ctx, s, cmd)
	if err != nil {
		return Result{}, err
	}
	return res, nil
}

// orderFromBody reports whether obs is a webhook whose order is exactly
// what provider.DecodeOrder reads from its body, as the receiver read it:
// then the log may carry the body alone (observeBodyCmd). It decodes the
// body once more, on the caller's goroutine, and compares: the log must
// never swap the order it was given for another.
func orderFromBody(obs Observation) bool {
	if obs.Source != SourceWebhook || len(obs.Raw) == 0 || obs.Order == nil {
		return false
	}
	o, err := provider.DecodeOrder(obs.Raw)
	return err == nil && reflect.DeepEqual(o, obs.Order)
}

// observeCmd is Apply's command.
type observeCmd struct {
	Obs Observation
	// in is Obs prepared on the caller's goroutine (single-node mode);
	// nil when decoded from the log.
	in *applyInput
	// legacy: an entry of the kind written before a webhook's body moved
	// into the history row of the state it brought. It replays with the
	// layout it was written with, a deliveries row for every body, so
	// every instance derives the same rows from the same log.
	legacy bool
}

func (c *observeCmd) Kind() string {
	if c.legacy {
		return "observe"
	}
	return "observe.2"
}

func (*observeCmd) rerunnable() {}

// observeBodyCmd is a webhook's observation as log version 5 carries it:
// the body as it came and the delivery's facts, without the order's JSON,
// which every instance reads from the body with provider.DecodeOrder, the
// receiver's own decode. An entry is about half the size (510 bytes
// against 990 for a completed payin), and every NATS node stores it and
// every instance's consumer receives it. It applies as observeCmd;
// before version 5 it goes as observeCmd.
//
// The order an instance reads from the body must not depend on its
// release: a change to what DecodeOrder gives for a body it accepts needs
// a new log version (provider.TestDecodeOrder_pinnedForTheLog holds it).
type observeBodyCmd struct{ observeCmd }

func (*observeBodyCmd) Kind() string { return "observe.3" }

// LogVersion implements VersionedCommand.
func (*observeBodyCmd) LogVersion() int { return logVersionBodyOnce }

// Before implements VersionedCommand: the same observation with its order.
func (c *observeBodyCmd) Before() Command { return &c.observeCmd }

func (c *observeCmd) Apply(tx *Tx) (any, error) {
	var in applyInput
	if c.in != nil {
		in = *c.in
	} else {
		p, err := prepareObservation(c.Obs)
		if err != nil {
			return nil, err
		}
		in = p
	}
	in.bodyInHistory = !c.legacy
	return tx.apply(in)
}

// statusRank orders statuses so that a late older state is recognised:
// new before processing before the final statuses. A status the provider
// has not documented ranks as processing (in progress, not final).
func statusRank(s provider.Status) int {
	switch {
	case s == provider.StatusNew:
		return 0
	case s.IsFinal():
		return 2
	default:
		return 1
	}
}

// currentOrder is the stored row Apply decides against.
type currentOrder struct {
	id              int64
	merchantOrderID string
	orderType       provider.OrderType
	status          provider.Status
	fingerprint     string
	learnedVia      Source
}

// ApplyObservation is Apply inside a Write callback, so that other rows
// (a gateway attempt, say) commit atomically with the order's state.
//
// The rules: an unknown order is New; the current state again (by
// fingerprint, so any JSON formatting) is a Duplicate that only records the
// delivery; a state seen before, a lower status than the current one, or a
// non-final or different final status after a final one is Stale — kept in
// history and otherwise ignored, and for a conflicting final status a
// "mismatch" finding with both versions; anything else is Changed. New and
// Changed update the order, add a history row and queue one event:
// "order.<status>" when the status changed (or the order is new),
// "order.updated" otherwise. A poll that disagrees with a webhook on the
// amounts of the same status (or the reverse) also opens a "mismatch"
// finding.
func (tx *Tx) ApplyObservation(obs Observation) (Result, error) {
	in, err := prepareObservation(obs)
	if err != nil {
		return Result{}, err
	}
	in.bodyInHistory = true
	return tx.apply(in)
}

// applyInput is an observation checked and hashed, ready for the writer.
type applyInput struct {
	obs     Observation
	fp      string
	bodySum [sha256.Size]byte // webhooks only
	headers []byte            // webhooks only; nil when none kept
	// bodyInHistory: a webhook that brings a new or changed state keeps
	// its body in that state's history row (false only for legacy log
	// entries, see observeCmd).
	bodyInHistory bool
}

func prepareObservation(obs Observation) (applyInput, error) {
	o := obs.Order
	switch {
	case o == nil:
		return applyInput{}, errors.New("apply: observation has no order")
	case len(obs.Raw) == 0:
		return applyInput{}, fmt.Errorf("apply %s: observation has no raw order", o.ID)
	case o.ID == "":
		return applyInput{}, errors.New("apply: order id is empty")
	case o.MerchantOrderID == "":
		return applyInput{}, fmt.Errorf("apply %s: merchantOrderId is empty", o.ID)
	case o.Type == "":
		return applyInput{}, fmt.Errorf("apply %s: type is empty", o.ID)
	case o.Status == "":
		return applyInput{}, fmt.Errorf("apply %s: status is empty", o.ID)
	case obs.Source != SourceWebhook && obs.Source != SourcePoll && obs.Source != SourceGateway:
		return applyInput{}, fmt.Errorf("apply %s: unknown source %q", o.ID, obs.Source)
	}
	in := applyInput{obs: obs, fp: o.Fingerprint()}
	if obs.Source == SourceWebhook {
		in.bodySum = sha256.Sum256(obs.Raw)
		if obs.Delivery != nil {
			in.headers = selectHeaders(obs.Delivery.Header)
		}
	}
	return in, nil
}

func (tx *Tx) apply(in applyInput) (Result, error) {
	obs, o, fp := in.obs, in.obs.Order, in.fp
	st := tx.s.st
	at := obs.ObservedAt
	if at.IsZero() {
		at = tx.Now()
	}

	var cur currentOrder
	err := st.orderByProviderID.QueryRow(o.ID).Scan(&cur.id, &cur.merchantOrderID, &cur.orderType, &cur.status,
		&cur.fingerprint, &cur.learnedVia)
	if errors.Is(err, sql.ErrNoRows) {
		return tx.applyNew(in, at)
	}
	if err != nil {
		return Result{}, fmt.Errorf("apply %s: load order: %w", o.ID, err)
	}
	// An order's identity never changes: the provider id, merchantOrderId
	// and type belong together. A state that moves a known order to
	// another merchantOrderId (perhaps another order's) or another type
	// is refused like a known merchantOrderId under a new provider id, so
	// no event tells a platform keyed on merchantOrderId about the wrong
	// order; the caller keeps the body as evidence.
	switch {
	case o.MerchantOrderID != cur.merchantOrderID:
		return Result{}, fmt.Errorf("apply %s: %w: merchantOrderId %q, stored as %q", o.ID, ErrConflict,
			o.MerchantOrderID, cur.merchantOrderID)
	case o.Type != cur.orderType:
		return Result{}, fmt.Errorf("apply %s: %w: type %q, stored as %q", o.ID, ErrConflict, o.Type, cur.orderType)
	}
	res := Result{Previous: cur.status}

	if fp == cur.fingerprint {
		res.Outcome = OutcomeDuplicate
		if obs.Source == SourceWebhook {
			counted, err := tx.countHeldBody(cur.id, in, at)
			if err != nil {
				return Result{}, err
			}
			if !counted {
				if _, err := tx.recordDelivery(cur.id, false, in, at); err != nil {
					return Result{}, err
				}
			}
		}
		return res, nil
	}

	var seen bool
	if err := st.seenBefore.QueryRow(cur.id, fp).Scan(&seen); err != nil {
		return Result{}, fmt.Errorf("apply %s: check history: %w", o.ID, err)
	}
	finalConflict := cur.status.IsFinal() && o.Status.IsFinal() && o.Status != cur.status
	if seen || statusRank(o.Status) < statusRank(cur.status) || finalConflict {
		res.Outcome = OutcomeStale
		if seen && obs.Source == SourceWebhook {
			// The bytes of a state the order has moved on from, again:
			// counted on the row that keeps them, whose state is already
			// in the history. A replayed old webhook adds no row.
			counted, err := tx.countRepeat(cur.id, in, at)
			if err != nil {
				return Result{}, err
			}
			if counted {
				return res, nil
			}
		}
		if _, err := tx.addHistory(cur.id, in, OutcomeStale, at); err != nil {
			return Result{}, err
		}
		if finalConflict && !seen {
			if err := tx.finalConflict(cur, obs, fp); err != nil {
				return Result{}, err
			}
		}
		return res, nil
	}

	res.Outcome = OutcomeChanged
	if o.Status == cur.status {
		if err := tx.checkAmounts(cur, obs); err != nil {
			return Result{}, err
		}
		if cur.status.IsFinal() {
			if err := tx.checkFinalMoney(cur, obs); err != nil {
				return Result{}, err
			}
		}
	}
	stateID, err := tx.addHistory(cur.id, in, OutcomeChanged, at)
	if err != nil {
		return Result{}, err
	}
	var completedAt, finalVia any
	if o.Status.IsFinal() && !cur.status.IsFinal() {
		completedAt = completionTime(o, at).UnixMilli()
	}
	if o.Status.IsFinal() && o.Status != cur.status {
		finalVia = string(obs.Source) // this state brought the final status
	}
	src, srcCcy, tgt, tgtCcy := wallets(o)
	rc := reportColumnsOf(o)
	if _, err := st.updateOrder.Exec(string(o.Status), fp, string(o.Type), src, srcCcy, tgt, tgtCcy,
		stateID, string(obs.Source), providerTime(o.CreatedAt), at.UnixMilli(), completedAt,
		tx.nextCheck(o.Status, at), finalVia, rc.authAmount, rc.authCurrency, rc.walletAmount, rc.walletCurrency,
		rc.refunds, cur.id); err != nil {
		return Result{}, fmt.Errorf("apply %s: update order: %w", o.ID, err)
	}
	eventType := EventOrderUpdated
	if o.Status != cur.status {
		eventType = "order." + SubjectToken(string(o.Status))
	}
	res.EventID, err = tx.orderEvent(obs, fp, eventType, stateID, at)
	if err != nil {
		return Result{}, err
	}
	return res, nil
}

// applyNew stores an order orderd did not know.
func (tx *Tx) applyNew(in applyInput, at time.Time) (Result, error) {
	obs, o, fp, st := in.obs, in.obs.Order, in.fp, tx.s.st
	var completedAt, finalVia any
	if o.Status.IsFinal() {
		completedAt, finalVia = completionTime(o, at).UnixMilli(), string(obs.Source)
	}
	src, srcCcy, tgt, tgtCcy := wallets(o)
	// Both ids are known before either row is written, so the order
	// points at its first state from its first write.
	id, err := tx.ids.next(&tx.ids.order, st.maxOrderID)
	if err != nil {
		return Result{}, fmt.Errorf("apply %s: %w", o.ID, err)
	}
	stateID, err := tx.ids.next(&tx.ids.history, st.maxHistoryID)
	if err != nil {
		return Result{}, fmt.Errorf("apply %s: %w", o.ID, err)
	}
	rc := reportColumnsOf(o)
	res, err := st.insertOrder.Exec(id, o.ID, o.MerchantOrderID, string(o.Type), string(o.Status), fp,
		src, srcCcy, tgt, tgtCcy, stateID, string(obs.Source), providerTime(o.CreatedAt), at.UnixMilli(), at.UnixMilli(),
		completedAt, tx.nextCheck(o.Status, at), finalVia, rc.authAmount, rc.authCurrency, rc.walletAmount,
		rc.walletCurrency, rc.refunds)
	if err != nil {
		return Result{}, fmt.Errorf("apply %s: insert order: %w", o.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		if err != nil {
			return Result{}, fmt.Errorf("apply %s: insert order: %w", o.ID, err)
		}
		// The provider id was not found a moment ago in this transaction,
		// so the conflict is on merchantOrderId.
		return Result{}, fmt.Errorf("apply %s: %w: merchantOrderId %q belongs to another order", o.ID, ErrConflict, o.MerchantOrderID)
	}
	if err := tx.insertHistory(stateID, id, in, OutcomeNew, at); err != nil {
		return Result{}, err
	}
	eventID, err := tx.orderEvent(obs, fp, "order."+SubjectToken(string(o.Status)), stateID, at)
	if err != nil {
		return Result{}, err
	}
	return Result{Outcome: OutcomeNew, EventID: eventID}, nil
}

// addHistory records an observed state and returns its history id.
func (tx *Tx) addHistory(orderID int64, in applyInput, outcome Outcome, at time.Time) (int64, error) {
	id, err := tx.ids.next(&tx.ids.history, tx.s.st.maxHistoryID)
	if err != nil {
		return 0, fmt.Errorf("apply %s: %w", in.obs.Order.ID, err)
	}
	return id, tx.insertHistory(id, orderID, in, outcome, at)
}

// insertHistory writes history row id. Polls and gateway answers keep
// their raw JSON in the row. A webhook that brings a new or changed state
// keeps its body there too, with the delivery's facts: one row for the
// state and its delivery. A stale webhook's body goes to deliveries
// (recordDelivery) and the row points at it.
func (tx *Tx) insertHistory(id, orderID int64, in applyInput, outcome Outcome, at time.Time) error {
	obs := in.obs
	// The columns after observed_at, NULL unless set.
	var deliveryID, raw, sum, headers, remote, lastAt, timesSeen any
	switch {
	case obs.Source != SourceWebhook:
		raw = []byte(obs.Raw)
	case in.bodyInHistory && outcome != OutcomeStale:
		// A new or changed state's fingerprint is not in the order's
		// history, so no earlier delivery holds these bytes.
		raw, sum, lastAt, timesSeen = []byte(obs.Raw), in.bodySum[:], at.UnixMilli(), 1
		headers, remote = deliveryFacts(in)
	case outcome == OutcomeNew:
		// A legacy entry: only applyNew writes OutcomeNew, so the order
		// is this transaction's own and the body cannot be a repeat.
		did, err := tx.recordDelivery(orderID, true, in, at)
		if err != nil {
			return err
		}
		deliveryID = did
	default:
		// A stale state's body seen for the first time (a byte-identical
		// repeat never gets here: see apply), or a legacy entry's body.
		did, err := tx.recordDelivery(orderID, false, in, at)
		if err != nil {
			return err
		}
		deliveryID = did
	}
	if _, err := tx.s.st.insertHistory.Exec(id, orderID, in.fp, string(obs.Order.Status), string(obs.Source),
		string(outcome), at.UnixMilli(), deliveryID, raw, sum, headers, remote, lastAt, timesSeen); err != nil {
		return fmt.Errorf("apply %s: insert history: %w", obs.Order.ID, err)
	}
	if sum != nil {
		tx.countActivity(at.UnixMilli(), true) // the row keeps a webhook body
	}
	return nil
}

// deliveryFacts are the kept headers and the remote address of a webhook,
// as stored (NULL when none).
func deliveryFacts(in applyInput) (headers, remote any) {
	if in.headers != nil {
		headers = in.headers
	}
	if in.obs.Delivery != nil {
		remote = nullString(in.obs.Delivery.RemoteAddr)
	}
	return headers, remote
}

// countRepeat counts a byte-identical repeat of a stale state's webhook
// body on the row that keeps it, history or deliveries, and reports
// whether there was one. Legacy log entries look in history only (see
// countHeldBody) and otherwise keep their rules: a history row pointing
// at the delivery for every stale observation.
func (tx *Tx) countRepeat(orderID int64, in applyInput, at time.Time) (bool, error) {
	counted, err := tx.countHeldBody(orderID, in, at)
	if err != nil || counted || !in.bodyInHistory {
		return counted, err
	}
	return bumped(in, tx.s.st.bumpDelivery, at.UnixMilli(), orderID, in.bodySum[:])
}

// countHeldBody counts a byte-identical repeat of a webhook body kept in
// a history row on that row, and reports whether there was one. At most
// one history row of an order holds a given body: the row of the new or
// changed state it brought (a repeat's bytes have the same fingerprint,
// which is then never new again). Legacy log entries look too: after the
// first entry of the new kind, every instance applies them with this code,
// and before it no history row holds a body.
func (tx *Tx) countHeldBody(orderID int64, in applyInput, at time.Time) (bool, error) {
	return bumped(in, tx.s.st.bumpHistoryBody, at.UnixMilli(), orderID, in.fp, in.bodySum[:])
}

// bumped runs a counter's UPDATE for in's body and reports whether it
// found the row to count on.
func bumped(in applyInput, stmt *sql.Stmt, args ...any) (bool, error) {
	res, err := stmt.Exec(args...)
	if err != nil {
		return false, fmt.Errorf("apply %s: record delivery: %w", in.obs.Order.ID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("apply %s: record delivery: %w", in.obs.Order.ID, err)
	}
	return n > 0, nil
}

// recordDelivery stores a webhook body in deliveries once per order; a
// byte-identical repeat bumps its counter. It returns the delivery's id.
// newOrder says the order was inserted in this transaction, so the body
// cannot be a repeat.
func (tx *Tx) recordDelivery(orderID int64, newOrder bool, in applyInput, at time.Time) (int64, error) {
	obs := in.obs
	headers, remote := deliveryFacts(in)
	// A repeat keeps its first row's id; the one drawn here then stays
	// unused, which is harmless.
	newID, err := tx.ids.next(&tx.ids.delivery, tx.s.st.maxDeliveryID)
	if err != nil {
		return 0, fmt.Errorf("apply %s: %w", obs.Order.ID, err)
	}
	args := []any{newID, orderID, in.bodySum[:], in.fp, []byte(obs.Raw), headers, remote, at.UnixMilli(), at.UnixMilli()}
	if newOrder {
		// The order was created in this transaction: no delivery of it
		// exists yet, so this one is not a repeat.
		if _, err := tx.s.st.insertDelivery.Exec(args...); err != nil {
			return 0, fmt.Errorf("apply %s: record delivery: %w", obs.Order.ID, err)
		}
		tx.countActivity(at.UnixMilli(), true)
		return newID, nil
	}
	var id, timesSeen int64
	if err := tx.s.st.upsertDelivery.QueryRow(args...).Scan(&id, &timesSeen); err != nil {
		return 0, fmt.Errorf("apply %s: record delivery: %w", obs.Order.ID, err)
	}
	if timesSeen == 1 { // inserted, not a repeat counted on its row
		tx.countActivity(at.UnixMilli(), true)
	}
	return id, nil
}

// orderEvent queues the event of a new state.
func (tx *Tx) orderEvent(obs Observation, fp, eventType string, stateID int64, at time.Time) (string, error) {
	o := obs.Order
	id := EventID(o.ID, fp, eventType)
	subject, atMillis := OrderSubject(string(o.Type), string(o.Status)), at.UnixMilli()
	res, err := tx.s.st.insertOrderEvent.Exec(id, eventType, subject, o.ID,
		atMillis, o.MerchantOrderID, string(obs.Source), stateID, tx.Now().UnixMilli())
	if err == nil {
		// The history row's raw JSON, which the relay's read returns, is
		// this observation's (a webhook's delivery holds the same bytes).
		err = tx.queued(res, feedEvent{id: id, typ: eventType, subject: subject, eventSubject: o.ID,
			timeMillis: atMillis, merchantOrderID: o.MerchantOrderID, learnedVia: obs.Source, data: obs.Raw})
	}
	if err != nil {
		return "", fmt.Errorf("apply %s: queue event: %w", o.ID, err)
	}
	tx.events++
	return id, nil
}

func (tx *Tx) nextCheck(status provider.Status, at time.Time) any {
	if status.IsFinal() {
		return nil
	}
	return at.Add(tx.s.opts.CheckAfter).UnixMilli()
}

// mismatchVersion is one side of a mismatch finding.
type mismatchVersion struct {
	Source Source          `json:"source"`
	Status provider.Status `json:"status"`
	Order  json.RawMessage `json:"order"`
}

// mismatchDetail is the detail of a "mismatch" finding.
type mismatchDetail struct {
	Reason          string          `json:"reason"`
	OrderID         string          `json:"orderId"`
	MerchantOrderID string          `json:"merchantOrderId"`
	Stored          mismatchVersion `json:"stored"`
	Observed        mismatchVersion `json:"observed"`
}

// finalConflict opens a mismatch finding: the order has one final status
// and a source now reports another. A human decides; the stored state
// stays.
func (tx *Tx) finalConflict(cur currentOrder, obs Observation, fp string) error {
	var (
		src Source
		raw []byte
	)
	if err := tx.s.st.stateRaw.QueryRow(cur.id).Scan(&src, &raw); err != nil {
		return fmt.Errorf("apply %s: load stored state: %w", obs.Order.ID, err)
	}
	return tx.openMismatch("final status conflict", cur, mismatchVersion{Source: src, Status: cur.status, Order: jsonOrNull(raw)}, obs)
}

// checkAmounts compares a poll with the last webhook of the same status
// (or a webhook with the last poll) and opens a mismatch finding when their
// amounts or currencies differ. The newer observation is still applied:
// the provider's get-status is the newer truth when it does not regress a
// final status.
func (tx *Tx) checkAmounts(cur currentOrder, obs Observation) error {
	var other Source
	switch obs.Source {
	case SourcePoll:
		other = SourceWebhook
	case SourceWebhook:
		other = SourcePoll
	default:
		return nil
	}
	var raw []byte
	err := tx.s.st.lastBySource.QueryRow(cur.id, string(obs.Order.Status), string(other)).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("apply %s: load %s version: %w", obs.Order.ID, other, err)
	}
	prev, err := provider.DecodeOrder(raw)
	if err != nil {
		return nil // a stored version that no longer decodes cannot be compared
	}
	if !amountsDiffer(prev, obs.Order) {
		return nil
	}
	return tx.openMismatch("amounts differ", cur, mismatchVersion{Source: other, Status: prev.Status, Order: raw}, obs)
}

// amountChangeDetail is the detail of an "amount_changed" finding.
type amountChangeDetail struct {
	Reason          string          `json:"reason"`
	OrderID         string          `json:"orderId"`
	MerchantOrderID string          `json:"merchantOrderId"`
	Status          provider.Status `json:"status"`
	// Changes name each amount that changed, old → new.
	Changes  []string        `json:"changes"`
	Stored   mismatchVersion `json:"stored"`
	Observed mismatchVersion `json:"observed"`
}

// checkFinalMoney opens an "amount_changed" finding when a final order's
// money changes: its wallets, or the amounts of transactions it already
// had. A final order's amounts are what finance has booked, so a change is
// for people to see; the newer state is still applied, as the provider's
// word, and its event queued. A new refund transaction (and a refund's
// progress) is the one change a final order is expected to have.
func (tx *Tx) checkFinalMoney(cur currentOrder, obs Observation) error {
	var (
		src Source
		raw []byte
	)
	if err := tx.s.st.stateRaw.QueryRow(cur.id).Scan(&src, &raw); err != nil {
		return fmt.Errorf("apply %s: load stored state: %w", obs.Order.ID, err)
	}
	prev, err := provider.DecodeOrder(raw)
	if err != nil {
		return nil // a stored version that no longer decodes cannot be compared
	}
	changes := moneyChanges(prev, obs.Order)
	if len(changes) == 0 {
		return nil
	}
	d := amountChangeDetail{
		Reason:          "money changed in a final order: " + strings.Join(changes, "; "),
		OrderID:         obs.Order.ID,
		MerchantOrderID: cur.merchantOrderID,
		Status:          cur.status,
		Changes:         changes,
		Stored:          mismatchVersion{Source: src, Status: prev.Status, Order: jsonOrNull(raw)},
		Observed:        mismatchVersion{Source: obs.Source, Status: obs.Order.Status, Order: jsonOrNull(obs.Raw)},
	}
	if _, _, err := tx.OpenFinding(FindingAmountChanged, obs.Order.ID, d); err != nil {
		return fmt.Errorf("apply %s: %w", obs.Order.ID, err)
	}
	return nil
}

// moneyChanges lists how b's money differs from a's: a wallet changed,
// appeared or disappeared; a transaction's amounts or type changed; a
// transaction disappeared; a transaction other than a refund appeared.
func moneyChanges(a, b *provider.Order) []string {
	var changes []string
	money := func(what string, x, y *provider.Money) {
		if x == nil && y != nil || x != nil && (y == nil || !x.Equal(*y)) {
			changes = append(changes, what+": "+moneyText(x)+" → "+moneyText(y))
		}
	}
	money("merchantSourceWallet", a.MerchantSourceWallet, b.MerchantSourceWallet)
	money("merchantTargetWallet", a.MerchantTargetWallet, b.MerchantTargetWallet)
	byID := make(map[string]*provider.Transaction, len(b.Transactions))
	for i := range b.Transactions {
		byID[b.Transactions[i].ID] = &b.Transactions[i]
	}
	known := make(map[string]bool, len(a.Transactions))
	for i := range a.Transactions {
		t := &a.Transactions[i]
		known[t.ID] = true
		u, ok := byID[t.ID]
		if !ok {
			changes = append(changes, "transaction "+t.ID+" ("+t.Type+") removed")
			continue
		}
		if t.Type != u.Type {
			changes = append(changes, "transaction "+t.ID+" type: "+t.Type+" → "+u.Type)
		}
		money("transaction "+t.ID+" authorized", t.Authorized, u.Authorized)
		money("transaction "+t.ID+" merchantWallet", t.MerchantWallet, u.MerchantWallet)
		money("transaction "+t.ID+" amount", t.Amount, u.Amount)
	}
	for i := range b.Transactions {
		t := &b.Transactions[i]
		if !known[t.ID] && t.Type != "refund" {
			changes = append(changes, "transaction "+t.ID+" ("+t.Type+") added")
		}
	}
	return changes
}

// moneyText is m as the provider wrote it, or "none".
func moneyText(m *provider.Money) string {
	if m == nil {
		return "none"
	}
	return m.String()
}

func (tx *Tx) openMismatch(reason string, cur currentOrder, stored mismatchVersion, obs Observation) error {
	d := mismatchDetail{
		Reason:          reason,
		OrderID:         obs.Order.ID,
		MerchantOrderID: cur.merchantOrderID,
		Stored:          stored,
		Observed:        mismatchVersion{Source: obs.Source, Status: obs.Order.Status, Order: jsonOrNull(obs.Raw)},
	}
	if _, _, err := tx.OpenFinding(FindingMismatch, obs.Order.ID, d); err != nil {
		return fmt.Errorf("apply %s: %w", obs.Order.ID, err)
	}
	return nil
}

// amountsDiffer reports whether two versions of an order disagree on money
// they both state: the merchant wallets, and the amounts of transactions
// present in both. A transaction only one side has (a refund added later)
// is a change, not a disagreement.
func amountsDiffer(a, b *provider.Order) bool {
	if moneyDiffers(a.MerchantSourceWallet, b.MerchantSourceWallet) ||
		moneyDiffers(a.MerchantTargetWallet, b.MerchantTargetWallet) {
		return true
	}
	byID := make(map[string]*provider.Transaction, len(a.Transactions))
	for i := range a.Transactions {
		byID[a.Transactions[i].ID] = &a.Transactions[i]
	}
	for i := range b.Transactions {
		t := &b.Transactions[i]
		u, ok := byID[t.ID]
		if !ok {
			continue
		}
		if moneyDiffers(u.Authorized, t.Authorized) || moneyDiffers(u.MerchantWallet, t.MerchantWallet) ||
			moneyDiffers(u.Amount, t.Amount) {
			return true
		}
	}
	return false
}

func moneyDiffers(a, b *provider.Money) bool {
	return a != nil && b != nil && !a.Equal(*b)
}

// completionTime is when an order reached its final status: the latest
// completedAt of its own transactions (not refunds), else of any
// transaction, else when orderd learned it.
func completionTime(o *provider.Order, learned time.Time) time.Time {
	var own, anyTx time.Time
	for _, t := range o.Transactions {
		c := t.CompletedAt.Time
		if c.IsZero() {
			continue
		}
		if c.After(anyTx) {
			anyTx = c
		}
		if t.Type == string(o.Type) && c.After(own) {
			own = c
		}
	}
	switch {
	case !own.IsZero():
		return own
	case !anyTx.IsZero():
		return anyTx
	default:
		return learned
	}
}

func wallets(o *provider.Order) (src, srcCcy, tgt, tgtCcy any) {
	if m := o.MerchantSourceWallet; m != nil {
		src, srcCcy = provider.FormatAmount(m.Amount), m.Currency
	}
	if m := o.MerchantTargetWallet; m != nil {
		tgt, tgtCcy = provider.FormatAmount(m.Amount), m.Currency
	}
	return src, srcCcy, tgt, tgtCcy
}

// reportColumns are the columns of an order that keep what a report reads
// of its current state beyond the merchant wallets (see migration 0011):
// its own transaction's authorized amount and merchant wallet, and its
// completed refunds.
type reportColumns struct {
	authAmount, authCurrency, walletAmount, walletCurrency any
	refunds                                                string
}

// reportColumnsOf reads o's report columns. The own transaction is the
// first whose type is the order's, else the first that is not a refund,
// as the ledger and the report read it.
func reportColumnsOf(o *provider.Order) reportColumns {
	var rc reportColumns
	var own *provider.Transaction
	for i := range o.Transactions {
		if o.Transactions[i].Type == string(o.Type) {
			own = &o.Transactions[i]
			break
		}
	}
	if own == nil {
		for i := range o.Transactions {
			if o.Transactions[i].Type != "refund" {
				own = &o.Transactions[i]
				break
			}
		}
	}
	if own != nil {
		if m := own.Authorized; m != nil {
			rc.authAmount, rc.authCurrency = provider.FormatAmount(m.Amount), m.Currency
		}
		if m := own.MerchantWallet; m != nil {
			rc.walletAmount, rc.walletCurrency = provider.FormatAmount(m.Amount), m.Currency
		}
	}
	var refunds [][3]string
	for i := range o.Transactions {
		t := &o.Transactions[i]
		if t.Type != "refund" || t.Status != provider.StatusCompleted || t.Amount == nil {
			continue
		}
		var at string
		if !t.CompletedAt.IsZero() {
			at = t.CompletedAt.UTC().Format(time.RFC3339Nano)
		}
		refunds = append(refunds, [3]string{provider.FormatAmount(t.Amount.Amount), t.Amount.Currency, at})
	}
	if len(refunds) > 0 {
		// Strings and arrays of strings: Marshal cannot fail.
		b, _ := json.Marshal(refunds)
		rc.refunds = string(b)
	}
	return rc
}

func providerTime(t provider.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMilli()
}

func jsonOrNull(b []byte) json.RawMessage {
	if len(b) == 0 || !json.Valid(b) {
		return json.RawMessage("null")
	}
	return json.RawMessage(b)
}

// keptHeaders are the delivery headers kept as evidence, in the order
// json.Marshal writes a map's keys: sorted.
var keptHeaders = [...]string{"Content-Type", "Signature", "User-Agent", "X-Forwarded-For", "X-Real-Ip", "X-Request-Id"}

// selectHeaders encodes the delivery headers worth keeping as evidence (the
// signature that authenticated the body and what identifies the sender) as
// a JSON object, or returns nil when there are none. The bytes are those
// json.Marshal gives for a map of the kept headers to their values (keys
// sorted, strings escaped alike), written without reflection or a map.
func selectHeaders(h http.Header) []byte {
	if len(h) == 0 {
		return nil
	}
	var values [len(keptHeaders)][]string
	size := 0
	for i, k := range keptHeaders {
		if v := h.Values(k); len(v) > 0 {
			values[i] = v
			size += len(k) + 6 // "k":[],
			for _, s := range v {
				size += len(s) + 3 // "s", before any escape
			}
		}
	}
	if size == 0 {
		return nil
	}
	b := make([]byte, 0, size+2)
	b = append(b, '{')
	for i, k := range keptHeaders {
		if len(values[i]) == 0 {
			continue
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = jsonenc.AppendString(b, k)
		b = append(b, ':', '[')
		for j, s := range values[i] {
			if j > 0 {
				b = append(b, ',')
			}
			b = jsonenc.AppendString(b, s)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}
