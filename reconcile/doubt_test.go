package reconcile_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"orderd/provider"
	"orderd/provider/providertest"
	"orderd/reconcile"
	"orderd/store"
)

// inDoubt records a payin creation whose outcome orderd does not know.
func (e *env) inDoubt(mid, amount string) store.Attempt {
	e.t.Helper()
	req := fmt.Sprintf(`{"merchantOrderId":%q,"invoice":{"amount":%q,"currency":"brl"}}`, mid, amount)
	a, isNew, err := e.st.BeginAttempt(e.t.Context(), store.NewAttempt{
		Kind: store.AttemptPayin, Origin: store.OriginGateway, MerchantOrderID: mid,
		IdempotencyKey: "order:" + mid, Request: json.RawMessage(req), RequestHash: "hash-" + mid,
		State: store.AttemptInDoubt, Detail: "timeout",
	})
	if err != nil || !isNew {
		e.t.Fatalf("begin attempt %s: new %v, %v", mid, isNew, err)
	}
	return a
}

func (e *env) attempt(id int64) store.Attempt {
	e.t.Helper()
	a, err := e.st.AttemptByID(e.t.Context(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return a
}

func TestReconciler_RunDoubt(t *testing.T) {
	e := newEnv(t, envOptions{})
	// The provider did create this one before the connection broke.
	made := e.createAtFake("made", "30.00", provider.TypePayin)
	created := e.inDoubt("made", "30.00")
	// This one never reached the provider.
	absent := e.inDoubt("absent", "45.00")

	// Too young: a creation still in flight is never declared absent.
	s := e.run(e.rec.RunDoubt)
	if s.Counts["due"] != 0 || len(e.fake.Calls(providertest.PathGetStatus)) != 0 {
		t.Fatalf("young attempts were checked: %v", s.Counts)
	}
	if got := e.attempt(absent.ID).State; got != store.AttemptInDoubt {
		t.Fatalf("young attempt became %s", got)
	}

	e.clock.Advance(doubtMinAge + time.Second)
	s = e.run(e.rec.RunDoubt)
	if s.Counts["created"] != 1 || s.Counts["not_created"] != 1 {
		t.Fatalf("counts = %v", s.Counts)
	}
	if got := e.attempt(created.ID).State; got != store.AttemptCreated {
		t.Errorf("attempt of the created order is %s, want created", got)
	}
	if v := e.order("made"); v.ProviderID != made.ID || v.Status != provider.StatusProcessing {
		t.Errorf("created order stored as %+v", v)
	}
	if evs := e.eventsOf("order.processing", "made"); len(evs) != 1 {
		t.Errorf("order.processing events for the created order = %d, want 1", len(evs))
	}

	if got := e.attempt(absent.ID).State; got != store.AttemptNotCreated {
		t.Errorf("attempt of the absent order is %s, want not_created", got)
	}
	evs := e.eventsOf(store.EventOrderNotCreated, "absent")
	if len(evs) != 1 {
		t.Fatalf("order.not_created events = %d, want 1", len(evs))
	}
	ev := evs[0]
	if ev.ID != store.EventID("absent", store.EventOrderNotCreated) || ev.Subject != "orders.payin.not_created" || ev.EventSubject != "absent" {
		t.Errorf("not_created event = id %s subject %s event subject %s", ev.ID, ev.Subject, ev.EventSubject)
	}
	var data struct {
		MerchantOrderID string          `json:"merchantOrderId"`
		Request         json.RawMessage `json:"request"`
	}
	if err := json.Unmarshal(ev.Data, &data); err != nil || data.MerchantOrderID != "absent" || len(data.Request) == 0 {
		t.Errorf("not_created data = %s (%v)", ev.Data, err)
	}

	// Settled attempts are not checked again.
	calls := len(e.fake.Calls(providertest.PathGetStatus))
	e.clock.Advance(time.Hour)
	e.run(e.rec.RunDoubt)
	if got := len(e.fake.Calls(providertest.PathGetStatus)); got != calls {
		t.Fatalf("settled attempts polled again")
	}
}

func TestReconciler_RunDoubt_inconclusiveBacksOffThenFinding(t *testing.T) {
	e := newEnv(t, envOptions{cfg: reconcile.Config{UnresolvedAfter: time.Hour}})
	a := e.inDoubt("murky", "12.00")
	e.clock.Advance(doubtMinAge + time.Second)

	fault := providertest.Fault{Endpoint: providertest.PathGetStatus, Kind: providertest.ErrorAnswer,
		Code: provider.CodeRejectedDueToTechnicalIssue, Count: 100}
	if err := e.fake.InjectFault(fault); err != nil {
		t.Fatal(err)
	}
	s := e.run(e.rec.RunDoubt)
	if s.Counts["postponed"] != 1 || s.Counts["unresolved_opened"] != 0 {
		t.Fatalf("counts = %v", s.Counts)
	}
	got := e.attempt(a.ID)
	if got.State != store.AttemptInDoubt || got.CheckAttempts != 1 || got.NextCheckAt.Sub(e.clock.Now()) != time.Minute {
		t.Fatalf("after an inconclusive check: state %s, checks %d, next in %s", got.State, got.CheckAttempts,
			got.NextCheckAt.Sub(e.clock.Now()))
	}

	e.clock.Advance(time.Hour)
	s = e.run(e.rec.RunDoubt)
	if s.Counts["unresolved_opened"] != 1 {
		t.Fatalf("counts = %v, want an unresolved_creation finding", s.Counts)
	}
	if next := e.attempt(a.ID).NextCheckAt.Sub(e.clock.Now()); next != 2*time.Minute {
		t.Fatalf("second backoff %s, want 2m", next)
	}
	fs := e.findings(store.FindingUnresolvedCreation, "open")
	if len(fs) != 1 || fs[0].Key != "murky" {
		t.Fatalf("unresolved findings = %+v", fs)
	}
	if evs := e.eventsOf("reconcile.unresolved_creation", ""); len(evs) != 1 {
		t.Fatalf("unresolved_creation events = %d", len(evs))
	}

	// The provider answers again: the attempt settles and the finding is
	// resolved.
	e.fake.ClearFaults()
	e.clock.Advance(time.Hour)
	e.run(e.rec.RunDoubt)
	if got := e.attempt(a.ID).State; got != store.AttemptNotCreated {
		t.Fatalf("attempt is %s, want not_created", got)
	}
	if fs := e.findings(store.FindingUnresolvedCreation, "resolved"); len(fs) != 1 {
		t.Fatalf("resolved unresolved_creation findings = %d, want 1", len(fs))
	}
}

// An in-doubt creation that the provider did make, but whose order
// contradicts one orderd holds (the merchantOrderId under another order
// id), is settled as created with an identity_conflict finding, not left
// in doubt to become an unresolved_creation.
func TestReconciler_RunDoubt_createdButConflicting(t *testing.T) {
	e := newEnv(t, envOptions{})
	made := e.createAtFake("contested", "30.00", provider.TypePayin)
	e.learnUnder("contested", "00000000-0000-4000-8000-000000000003", store.SourcePoll)
	a := e.inDoubt("contested", "30.00")

	e.clock.Advance(doubtMinAge + time.Second)
	s := e.run(e.rec.RunDoubt)
	if s.Counts["created"] != 1 || s.Counts["errors"] != 0 {
		t.Fatalf("counts = %v, want the creation settled", s.Counts)
	}
	got := e.attempt(a.ID)
	if got.State != store.AttemptCreated || !strings.Contains(got.Detail, "belongs to another order") {
		t.Fatalf("attempt = %s %q, want created with the conflict noted", got.State, got.Detail)
	}
	fs := e.findings(store.FindingIdentityConflict, "open")
	if len(fs) != 1 || fs[0].Key != "contested" || !strings.Contains(string(fs[0].Detail), made.ID) {
		t.Fatalf("identity_conflict findings = %+v", fs)
	}
	if v := e.order("contested"); v.ProviderID == made.ID {
		t.Fatal("the conflicting order replaced the stored one")
	}
	e.clock.Advance(48 * time.Hour)
	e.run(e.rec.RunDoubt)
	if fs := e.findings(store.FindingUnresolvedCreation, "open"); len(fs) != 0 {
		t.Fatalf("unresolved_creation findings = %+v", fs)
	}
}

// An in-doubt payout whose merchantOrderId get-status finds as a payin was
// not that payout: the provider keeps one order per merchantOrderId. It is
// never settled as created (the platform would take its payout as made);
// it stays in doubt and becomes an unresolved_creation finding for a human.
func TestReconciler_RunDoubt_orderOfAnotherType(t *testing.T) {
	e := newEnv(t, envOptions{cfg: reconcile.Config{UnresolvedAfter: time.Hour}})
	e.createAtFake("twin", "30.00", provider.TypePayin)
	a, isNew, err := e.st.BeginAttempt(t.Context(), store.NewAttempt{
		Kind: store.AttemptPayout, Origin: store.OriginGateway, MerchantOrderID: "twin",
		IdempotencyKey: "order:twin", Request: json.RawMessage(`{"merchantOrderId":"twin","amount":"30.00"}`),
		RequestHash: "hash-twin", State: store.AttemptInDoubt, Detail: "timeout",
	})
	if err != nil || !isNew {
		t.Fatalf("begin attempt: new %v, %v", isNew, err)
	}

	e.clock.Advance(doubtMinAge + time.Second)
	s := e.run(e.rec.RunDoubt)
	if s.Counts["created"] != 0 || s.Counts["not_created"] != 0 || s.Counts["errors"] != 1 || s.Counts["postponed"] != 1 {
		t.Fatalf("counts = %v, want the payout left in doubt", s.Counts)
	}
	if got := e.attempt(a.ID); got.State != store.AttemptInDoubt {
		t.Fatalf("payout attempt settled as %s by a payin's status", got.State)
	}
	e.clock.Advance(time.Hour)
	e.run(e.rec.RunDoubt)
	if fs := e.findings(store.FindingUnresolvedCreation, "open"); len(fs) != 1 || fs[0].Key != "twin" {
		t.Fatalf("unresolved_creation findings = %+v, want one for twin", fs)
	}
	if evs := e.eventsOf("order.not_created", ""); len(evs) != 0 {
		t.Fatalf("order.not_created events = %d, want none", len(evs))
	}
}
