package reconcile_test

import (
	"fmt"
	"testing"
	"time"

	"orderd/provider"
	"orderd/provider/providertest"
	"orderd/reconcile"
	"orderd/store"
)

// TestReconciler_RunBalances_noFindingForTiming: the provider completes
// six payins whose webhooks are held back. orderd knows five of them as
// processing (from the gateway's answers) and has not heard of the sixth.
// The first check asks the provider about the five and learns their
// completions; the sixth is still unexplained, so it waits for the grace.
// The sixth's webhook arrives; the second check, from where the books
// last agreed, adds up. No balance_drift finding ever opens.
func TestReconciler_RunBalances_noFindingForTiming(t *testing.T) {
	e := balancesEnv(t, reconcile.Config{})
	e.run(e.rec.RunBalances)
	e.clock.Advance(time.Minute)
	for i := range 6 {
		mid := fmt.Sprintf("held-%d", i)
		e.createAtFake(mid, fmt.Sprintf("%d.%02d", 100+i*37, i*13), provider.TypePayin)
		if i < 5 {
			e.learn(mid, store.SourceGateway)
		}
		if err := e.fake.Complete(mid); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.Advance(time.Minute)

	s := e.run(e.rec.RunBalances)
	if s.Counts["polled"] != 5 || s.Counts["learned"] != 5 || s.Counts["findings_opened"] != 0 {
		t.Fatalf("first check: counts = %v", s.Counts)
	}
	for i := range 5 {
		if o := e.order(fmt.Sprintf("held-%d", i)); o.Status != provider.StatusCompleted || o.LearnedVia != store.SourcePoll {
			t.Fatalf("held-%d after the check: %s via %s, want completed via poll", i, o.Status, o.LearnedVia)
		}
	}
	hidden, _ := e.fake.Order("held-5")
	net := hidden.MerchantTargetWallet.Amount
	if d := e.latestDrift("brl"); !d.Unexplained.Equal(net) || d.WithinTolerance {
		t.Fatalf("first check: unexplained %s, want the unknown payin's %s", d.Unexplained, net)
	}

	// The held webhook arrives.
	e.clock.Advance(time.Minute)
	e.learn("held-5", store.SourceWebhook)
	e.clock.Advance(time.Minute)
	e.run(e.rec.RunBalances)
	if d := e.latestDrift("brl"); !d.Unexplained.IsZero() || !d.WithinTolerance {
		t.Fatalf("second check: unexplained %s", d.Unexplained)
	}
	if fs := e.findings(store.FindingBalanceDrift, ""); len(fs) != 0 {
		t.Fatalf("balance_drift findings = %+v, want none", fs)
	}
	if evs := e.eventsOf("reconcile.balance_drift", ""); len(evs) != 0 {
		t.Fatalf("balance_drift events = %d, want none", len(evs))
	}
}

// TestReconciler_RunBalances_realGapAfterGrace: beside a completion whose
// webhook is held back, the provider takes 7.77 with no order behind it.
// The completion is learned by the check's poll; the 7.77 stays, and at
// the second check (drift_grace 2) it is a finding of exactly that amount.
func TestReconciler_RunBalances_realGapAfterGrace(t *testing.T) {
	e := balancesEnv(t, reconcile.Config{})
	e.run(e.rec.RunBalances)
	e.clock.Advance(time.Minute)
	e.createAtFake("paid", "250.00", provider.TypePayin)
	e.learn("paid", store.SourceGateway)
	if err := e.fake.Complete("paid"); err != nil {
		t.Fatal(err)
	}
	if err := e.fake.AdjustBalance("brl", "-7.77"); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	if s := e.run(e.rec.RunBalances); s.Counts["learned"] != 1 || s.Counts["findings_opened"] != 0 {
		t.Fatalf("first check: counts = %v", s.Counts)
	}
	if fs := e.findings(store.FindingBalanceDrift, ""); len(fs) != 0 {
		t.Fatalf("a finding before the grace: %+v", fs)
	}
	e.clock.Advance(15 * time.Minute)
	if s := e.run(e.rec.RunBalances); s.Counts["findings_opened"] != 1 {
		t.Fatalf("second check: counts = %v", s.Counts)
	}
	fs := e.findings(store.FindingBalanceDrift, "open")
	if len(fs) != 1 || fs[0].Key != "brl" || fs[0].Status != store.StatusOpen {
		t.Fatalf("open balance_drift findings = %+v", fs)
	}
	if det := driftDetail(t, fs[0].Detail); det.Unexplained != "-7.77" || det.Expected == "0.00" {
		t.Fatalf("finding: unexplained %s (expected %s), want -7.77 beside the learned payin", det.Unexplained, det.Expected)
	}
	if evs := e.eventsOf("reconcile.balance_drift", ""); len(evs) != 1 {
		t.Fatalf("balance_drift events = %d, want 1", len(evs))
	}
}

// TestReconciler_RunBalances_pollsAreBounded: at most DriftPolls
// get-status calls per currency per check, however many orders are open.
func TestReconciler_RunBalances_pollsAreBounded(t *testing.T) {
	e := balancesEnv(t, reconcile.Config{DriftPolls: 3})
	e.run(e.rec.RunBalances)
	for i := range 8 {
		mid := fmt.Sprintf("open-%d", i)
		e.createAtFake(mid, "10.00", provider.TypePayin)
		e.learn(mid, store.SourceGateway)
	}
	if err := e.fake.AdjustBalance("brl", "1.00"); err != nil {
		t.Fatal(err)
	}
	before := len(e.fake.Calls(providertest.PathGetStatus))
	e.clock.Advance(time.Minute)
	s := e.run(e.rec.RunBalances)
	if got := len(e.fake.Calls(providertest.PathGetStatus)) - before; s.Counts["polled"] != 3 || got != 3 {
		t.Fatalf("polled %d (provider saw %d get-status calls), want 3", s.Counts["polled"], got)
	}
}

// TestReconciler_RunBalances_personResolvedStaysResolved: a person
// acknowledges and resolves a balance_drift finding. Resolved as fixed,
// a later check that finds the same amount unexplained from the same
// snapshot does not reopen it. Written off, the next check measures from
// the accepted snapshot: a new gap is a new finding of exactly the new
// amount, and the old finding keeps its trail.
func TestReconciler_RunBalances_personResolvedStaysResolved(t *testing.T) {
	e := balancesEnv(t, reconcile.Config{DriftGrace: 1})
	e.run(e.rec.RunBalances)
	if err := e.fake.AdjustBalance("brl", "-12.34"); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	e.run(e.rec.RunBalances)
	fs := e.findings(store.FindingBalanceDrift, "open")
	if len(fs) != 1 {
		t.Fatalf("open findings = %+v", fs)
	}
	id := fs[0].ID
	act := func(action, resolution string) store.Finding {
		t.Helper()
		f, err := e.st.ActOnFinding(t.Context(), store.FindingActionCmd{ID: id, Action: action, By: "ana",
			Note: action + " by finance", Resolution: resolution})
		if err != nil {
			t.Fatalf("%s: %v", action, err)
		}
		return f
	}
	act(store.ActionAcknowledge, "")
	if f := act(store.ActionResolve, store.ResolutionFixed); f.Status != store.StatusResolved || f.ResolvedBy != "ana" {
		t.Fatalf("after resolve: %+v", f)
	}

	// The same state: nothing reopens.
	e.clock.Advance(time.Minute)
	if s := e.run(e.rec.RunBalances); s.Counts["findings_opened"] != 0 {
		t.Fatalf("a check of the same state opened a finding: %v", s.Counts)
	}
	if fs := e.findings(store.FindingBalanceDrift, "open"); len(fs) != 0 {
		t.Fatalf("open findings after a check of the same state = %+v", fs)
	}

	// Reopened and written off: the gap is accepted.
	act(store.ActionReopen, "")
	e.clock.Advance(time.Minute)
	e.run(e.rec.RunBalances) // refreshes the reopened finding's detail
	act(store.ActionResolve, store.ResolutionWrittenOff)
	e.clock.Advance(time.Minute)
	if s := e.run(e.rec.RunBalances); s.Counts["findings_opened"] != 0 {
		t.Fatalf("a check after the write-off opened a finding: %v", s.Counts)
	}
	if d := e.latestDrift("brl"); !d.Drift.IsZero() || !d.WithinTolerance {
		t.Fatalf("after the write-off: drift %s from opening %d", d.Drift, d.Opening.ID)
	}

	// A new problem is a new finding of exactly its amount.
	if err := e.fake.AdjustBalance("brl", "-1.01"); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	e.run(e.rec.RunBalances)
	open := e.findings(store.FindingBalanceDrift, "open")
	if len(open) != 1 || open[0].ID == id || driftDetail(t, open[0].Detail).Unexplained != "-1.01" {
		t.Fatalf("new problem: open findings %+v", open)
	}
	old, err := e.st.FindingByID(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if old.Status != store.StatusResolved || old.Resolution != store.ResolutionWrittenOff || len(old.Trail) != 4 {
		t.Fatalf("old finding: status %s resolution %s trail %+v", old.Status, old.Resolution, old.Trail)
	}
}

// TestReconciler_RunBalances_reopenedStaysOpen: a person writes off a
// balance_drift finding, a check then agrees from the accepted snapshot,
// and the person reopens the finding. Later checks that agree leave it
// open, with its trail, for a person to resolve: the agreement is measured
// past the gap the person reopened, so it says nothing about it.
func TestReconciler_RunBalances_reopenedStaysOpen(t *testing.T) {
	e := balancesEnv(t, reconcile.Config{DriftGrace: 1})
	e.run(e.rec.RunBalances)
	if err := e.fake.AdjustBalance("brl", "-12.34"); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	e.run(e.rec.RunBalances)
	fs := e.findings(store.FindingBalanceDrift, "open")
	if len(fs) != 1 {
		t.Fatalf("open findings = %+v", fs)
	}
	id := fs[0].ID
	act := func(action, resolution string) {
		t.Helper()
		if _, err := e.st.ActOnFinding(t.Context(), store.FindingActionCmd{ID: id, Action: action, By: "ana",
			Note: action + " by finance", Resolution: resolution}); err != nil {
			t.Fatalf("%s: %v", action, err)
		}
	}
	act(store.ActionResolve, store.ResolutionWrittenOff)
	e.clock.Advance(time.Minute)
	e.run(e.rec.RunBalances) // agrees from the accepted snapshot
	act(store.ActionReopen, "")
	for i := range 2 {
		e.clock.Advance(time.Minute)
		if s := e.run(e.rec.RunBalances); s.Counts["findings_resolved"] != 0 {
			t.Fatalf("check %d resolved the reopened finding: %v", i+1, s.Counts)
		}
		if d := e.latestDrift("brl"); !d.WithinTolerance {
			t.Fatalf("check %d: the books do not agree (drift %s); the test means them to", i+1, d.Drift)
		}
	}
	f, err := e.st.FindingByID(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if f.Status != store.StatusOpen || f.ResolvedAt != nil || len(f.Trail) != 2 || f.Trail[1].Action != store.ActionReopen {
		t.Fatalf("reopened finding after agreeing checks: status %s trail %+v", f.Status, f.Trail)
	}
	// A person resolves it; the next agreeing check leaves it resolved.
	act(store.ActionResolve, store.ResolutionFixed)
	e.clock.Advance(time.Minute)
	e.run(e.rec.RunBalances)
	if open := e.findings(store.FindingBalanceDrift, "open"); len(open) != 0 {
		t.Fatalf("open findings after a person resolved it = %+v", open)
	}
}
