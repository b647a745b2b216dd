package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"orderd/provider"
)

// attempt.finish and attempt.settle_created entries, written before a
// created order that contradicts a stored identity opened a finding, apply
// as they did then: finish records the conflict in the attempt and opens
// no finding; settle fails.
func TestAttemptCommands_legacyKindsKeepTheirRules(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "orderd.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	raw := []byte(`{"id":"provider-m1","merchantOrderId":"m1","type":"payin","createdAt":"2026-03-01T12:00:00+00:00",` +
		`"status":"processing","rejectReason":null,"auth":{"type":"pixDynamicQrCode","code":"qr","expiresAt":"2026-03-01T13:00:00Z"}}`)
	observe := func(b []byte) *Observation {
		o, err := provider.DecodeOrder(b)
		if err != nil {
			t.Fatal(err)
		}
		return &Observation{Source: SourceGateway, Order: o, Raw: b, ObservedAt: time.Now()}
	}
	if _, err := s.Apply(ctx, *observe(bytes.Replace(raw, []byte(`"provider-m1"`), []byte(`"provider-other"`), 1))); err != nil {
		t.Fatal(err)
	}
	a, _, err := s.BeginAttempt(ctx, NewAttempt{Kind: AttemptPayin, Origin: OriginGateway, MerchantOrderID: "m1",
		IdempotencyKey: "order:m1", Request: json.RawMessage(`{"merchantOrderId":"m1"}`), RequestHash: "h", State: AttemptPending})
	if err != nil {
		t.Fatal(err)
	}
	cmd := &finishAttemptCmd{ID: a.ID, Out: AttemptOutcome{State: AttemptCreated, Response: raw, Observation: observe(raw)}, legacy: true}
	b, err := EncodeOps([]Op{{At: time.Now(), Cmd: cmd}})
	if err != nil {
		t.Fatal(err)
	}
	ops, err := DecodeOps(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := ops[0].Cmd.Kind(); got != "attempt.finish" {
		t.Fatalf("decoded as %s, want attempt.finish", got)
	}
	res, err := s.ApplyLog(ctx, 1, ops)
	if err != nil || res[0].Err != nil {
		t.Fatalf("apply: %v %v", err, res[0].Err)
	}
	if got := res[0].Value.(Attempt); got.State != AttemptCreated || !strings.Contains(got.Detail, "belongs to another order") {
		t.Fatalf("attempt = %s %q", got.State, got.Detail)
	}
	fs, err := s.FindingsPage(ctx, FindingQuery{Kind: FindingIdentityConflict, State: "open", Limit: 10})
	if err != nil || len(fs) != 0 {
		t.Fatalf("identity_conflict findings after a legacy entry: %+v %v", fs, err)
	}
	if (&finishAttemptCmd{}).Kind() != "attempt.finish.2" {
		t.Fatal("new entries must not take the legacy kind")
	}

	// attempt.settle_created, the same way: the conflict fails the entry
	// and the attempt stays as it was.
	b2, isNew, err := s.BeginAttempt(ctx, NewAttempt{Kind: AttemptPayin, Origin: OriginGateway, MerchantOrderID: "m1",
		IdempotencyKey: "order:m1:2", Request: json.RawMessage(`{"merchantOrderId":"m1","n":2}`), RequestHash: "h2",
		State: AttemptInDoubt, AnyRequest: true})
	if err != nil || !isNew || b2.State != AttemptInDoubt {
		t.Fatalf("second attempt: %+v new %v, %v", b2, isNew, err)
	}
	settle := &settleCreatedCmd{ID: b2.ID, Obs: *observe(raw), rules: 1}
	if b, err = EncodeOps([]Op{{At: time.Now(), Cmd: settle}}); err != nil {
		t.Fatal(err)
	}
	if ops, err = DecodeOps(b); err != nil || ops[0].Cmd.Kind() != "attempt.settle_created" {
		t.Fatalf("decoded %v: %v", ops, err)
	}
	if res, err = s.ApplyLog(ctx, 2, ops); err != nil || !errors.Is(res[0].Err, ErrConflict) {
		t.Fatalf("legacy settle: %v %v, want the conflict as its error", err, res[0].Err)
	}
	if got, err := s.AttemptByID(ctx, b2.ID); err != nil || got.State != b2.State {
		t.Fatalf("attempt after a failed legacy settle: %+v %v", got, err)
	}
	if (&settleCreatedCmd{}).Kind() != "attempt.settle_created.3" {
		t.Fatal("new settle entries must not take an older kind")
	}

	// attempt.settle_created.2: a found order of another type than the
	// attempt's settles it as created, as it did then; the latest rules
	// refuse it and leave the attempt in doubt.
	payout := func(key string) Attempt {
		a, isNew, err := s.BeginAttempt(ctx, NewAttempt{Kind: AttemptPayout, Origin: OriginGateway, MerchantOrderID: "m2",
			IdempotencyKey: key, Request: json.RawMessage(`{"merchantOrderId":"m2","k":"` + key + `"}`), RequestHash: key,
			State: AttemptInDoubt, AnyRequest: true})
		if err != nil || !isNew {
			t.Fatalf("payout attempt %s: new %v, %v", key, isNew, err)
		}
		return a
	}
	payin := observe(bytes.ReplaceAll(bytes.Replace(raw, []byte(`"provider-m1"`), []byte(`"provider-m2"`), 1), []byte(`"m1"`), []byte(`"m2"`)))
	seq := uint64(3)
	for _, tc := range []struct {
		rules int
		kind  string
		want  AttemptState
	}{
		{2, "attempt.settle_created.2", AttemptCreated},
		{0, "attempt.settle_created.3", AttemptInDoubt},
	} {
		a := payout("payout:m2:" + tc.kind)
		if b, err = EncodeOps([]Op{{At: time.Now(), Cmd: &settleCreatedCmd{ID: a.ID, Obs: *payin, rules: tc.rules}}}); err != nil {
			t.Fatal(err)
		}
		if ops, err = DecodeOps(b); err != nil || ops[0].Cmd.Kind() != tc.kind {
			t.Fatalf("decoded %v: %v, want %s", ops, err, tc.kind)
		}
		res, err := s.ApplyLog(ctx, seq, ops)
		seq++
		if err != nil {
			t.Fatal(err)
		}
		if tc.want == AttemptInDoubt && !errors.Is(res[0].Err, ErrConflict) {
			t.Errorf("%s: %v, want the other type as a conflict", tc.kind, res[0].Err)
		}
		if got, err := s.AttemptByID(ctx, a.ID); err != nil || got.State != tc.want {
			t.Errorf("%s: payout attempt settled by a payin is %s (%v), want %s", tc.kind, got.State, err, tc.want)
		}
	}
}

// An observe entry written before a webhook's body moved into its history
// row replays with the layout it was written with (a deliveries row the
// history row points at); an observe.2 entry keeps the body in the history
// row. Each instance that applies the same log derives the same rows.
func TestObserveCommand_legacyKindKeepsItsLayout(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "orderd.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	webhook := func(id string) Observation { return webhookObs(t, processingBody(id, "m-"+id)) }
	var seq uint64
	for _, tt := range []struct {
		id   string
		cmd  *observeCmd
		kind string
		// where the body is kept
		inDeliveries, inHistory int
	}{
		{"old", &observeCmd{Obs: webhook("old"), legacy: true}, "observe", 1, 0},
		{"new", &observeCmd{Obs: webhook("new")}, "observe.2", 0, 1},
	} {
		b, err := EncodeOps([]Op{{At: time.Now(), Cmd: tt.cmd}})
		if err != nil {
			t.Fatal(err)
		}
		ops, err := DecodeOps(b)
		if err != nil {
			t.Fatal(err)
		}
		if got := ops[0].Cmd.Kind(); got != tt.kind {
			t.Fatalf("%s: decoded as %s, want %s", tt.id, got, tt.kind)
		}
		seq++
		if res, err := s.ApplyLog(ctx, seq, ops); err != nil || res[0].Err != nil {
			t.Fatalf("%s: apply: %v %v", tt.id, err, res[0].Err)
		}
		var inDeliveries, inHistory int
		if err := s.DB().QueryRowContext(ctx, `SELECT
			(SELECT count(*) FROM deliveries d JOIN orders o ON o.id = d.order_id WHERE o.provider_id = ?1),
			(SELECT count(*) FROM order_history h JOIN orders o ON o.id = h.order_id WHERE o.provider_id = ?1 AND h.raw IS NOT NULL AND h.body_sha256 IS NOT NULL)`,
			tt.id).Scan(&inDeliveries, &inHistory); err != nil {
			t.Fatal(err)
		}
		if inDeliveries != tt.inDeliveries || inHistory != tt.inHistory {
			t.Errorf("%s (%s): body in deliveries %d, in history %d; want %d, %d", tt.id, tt.kind,
				inDeliveries, inHistory, tt.inDeliveries, tt.inHistory)
		}
	}
	if (&observeCmd{}).Kind() != "observe.2" {
		t.Fatal("new entries must not take the legacy kind")
	}
}

// During an upgrade an instance not yet upgraded may still append entries
// of the old kind after the first entry of the new one. A byte-identical
// repeat in such an entry is counted on the history row that keeps the
// body, not kept again in deliveries: as a duplicate of the current state,
// and as a replayed older state.
func TestObserveCommand_legacyEntryAfterNewOne(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "orderd.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	processing := processingBody("p1", "m1")
	completed := bytes.Replace(processing, []byte(`"processing"`), []byte(`"completed"`), 1)
	webhook := func(raw []byte) Observation { return webhookObs(t, raw) }
	var seq uint64
	for _, step := range []struct {
		cmd  *observeCmd
		want Outcome
	}{
		{&observeCmd{Obs: webhook(processing)}, OutcomeNew},
		{&observeCmd{Obs: webhook(processing), legacy: true}, OutcomeDuplicate},
		{&observeCmd{Obs: webhook(completed)}, OutcomeChanged},
		{&observeCmd{Obs: webhook(processing), legacy: true}, OutcomeStale},
	} {
		b, err := EncodeOps([]Op{{At: time.Now(), Cmd: step.cmd}})
		if err != nil {
			t.Fatal(err)
		}
		ops, err := DecodeOps(b)
		if err != nil {
			t.Fatal(err)
		}
		seq++
		res, err := s.ApplyLog(ctx, seq, ops)
		if err != nil || res[0].Err != nil {
			t.Fatalf("entry %d (%s): %v %v", seq, ops[0].Cmd.Kind(), err, res[0].Err)
		}
		if got := res[0].Value.(Result).Outcome; got != step.want {
			t.Fatalf("entry %d (%s): %s, want %s", seq, ops[0].Cmd.Kind(), got, step.want)
		}
	}
	var rows, seen, inDeliveries int
	if err := s.rdb.QueryRowContext(ctx, `SELECT count(*), max(times_seen), count(delivery_id) FROM webhook_deliveries WHERE raw = ?`,
		processing).Scan(&rows, &seen, &inDeliveries); err != nil {
		t.Fatal(err)
	}
	if rows != 1 || seen != 3 || inDeliveries != 0 {
		t.Errorf("first body: kept in %d rows (%d in deliveries), seen %d times; want 1 row in history, seen 3 times", rows, inDeliveries, seen)
	}
}
