package reconcile_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"orderd/provider"
	"orderd/provider/providertest"
	"orderd/reconcile"
	"orderd/store"
)

func balancesEnv(t *testing.T, cfg reconcile.Config) *env {
	return newEnv(t, envOptions{
		cfg:  cfg,
		fake: providertest.Options{InitialBalances: map[string]string{"brl": "1000.00", "usd": "50.00"}},
	})
}

func TestReconciler_RunBalances_firstRunOnlySnapshots(t *testing.T) {
	e := balancesEnv(t, reconcile.Config{})
	s := e.run(e.rec.RunBalances)
	if s.Counts["currencies"] != 2 || s.Counts["compared"] != 0 {
		t.Fatalf("counts = %v", s.Counts)
	}
	snaps, err := e.st.BalanceSnapshots(t.Context(), "", time.Time{}, e.clock.Now().Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(snaps) != 2 || snaps[0].Currency != "brl" || !snaps[0].Amount.Equal(dec("1000")) ||
		snaps[1].Currency != "usd" || !snaps[1].Amount.Equal(dec("50")) {
		t.Fatalf("snapshots = %+v", snaps)
	}
}

func TestReconciler_RunBalances_unexplainedDrift(t *testing.T) {
	e := balancesEnv(t, reconcile.Config{})
	e.run(e.rec.RunBalances)

	// The provider takes 12.34 with no order behind it.
	if err := e.fake.AdjustBalance("brl", "-12.34"); err != nil {
		t.Fatal(err)
	}
	// The first check that does not add up waits (reconcile.drift_grace
	// is 2 by default): no finding, no event yet.
	e.clock.Advance(15 * time.Minute)
	s := e.run(e.rec.RunBalances)
	if s.Counts["compared"] != 2 || s.Counts["drifting"] != 1 || s.Counts["findings_opened"] != 0 {
		t.Fatalf("first check: counts = %v", s.Counts)
	}
	if fs := e.findings(store.FindingBalanceDrift, ""); len(fs) != 0 {
		t.Fatalf("first check opened %+v", fs)
	}
	// The second still cannot explain it: a finding of exactly its amount.
	e.clock.Advance(15 * time.Minute)
	s = e.run(e.rec.RunBalances)
	if s.Counts["compared"] != 2 || s.Counts["drifting"] != 1 || s.Counts["findings_opened"] != 1 {
		t.Fatalf("second check: counts = %v", s.Counts)
	}
	d := e.latestDrift("brl")
	if !d.Drift.Equal(dec("-12.34")) || !d.Unexplained.Equal(dec("-12.34")) || !d.Explained.IsZero() ||
		!d.Expected.IsZero() || d.WithinTolerance {
		t.Fatalf("drift = %s expected %s explained %s unexplained %s within %v",
			d.Drift, d.Expected, d.Explained, d.Unexplained, d.WithinTolerance)
	}
	if u := e.latestDrift("usd"); !u.Drift.IsZero() || !u.WithinTolerance {
		t.Fatalf("usd drift = %s", u.Drift)
	}

	fs := e.findings(store.FindingBalanceDrift, "open")
	if len(fs) != 1 || fs[0].Key != "brl" {
		t.Fatalf("balance_drift findings = %+v", fs)
	}
	det := driftDetail(t, fs[0].Detail)
	if det.Unexplained != "-12.34" || det.Drift != "-12.34" || det.Actual != "-12.34" || det.Expected != "0.00" ||
		det.Opening.Amount != "1000.00" || det.Closing.Amount != "987.66" || len(det.Parts) != 0 {
		t.Fatalf("finding detail = %+v", det)
	}
	evs := e.eventsOf("reconcile.balance_drift", "")
	if len(evs) != 1 || evs[0].Subject != "reconcile.balance_drift" || evs[0].EventSubject != "brl" {
		t.Fatalf("balance_drift events = %+v", evs)
	}
	var f store.Finding
	if err := json.Unmarshal(evs[0].Data, &f); err != nil || f.Kind != store.FindingBalanceDrift || f.State != "open" {
		t.Fatalf("event data = %s (%v)", evs[0].Data, err)
	}

	// Nothing explains it later: the finding stays open (no second event),
	// and the comparison keeps opening where the books last balanced.
	e.clock.Advance(15 * time.Minute)
	e.run(e.rec.RunBalances)
	d = e.latestDrift("brl")
	if !d.Unexplained.Equal(dec("-12.34")) || d.Opening.Amount.String() != "1000" {
		t.Fatalf("later comparison: unexplained %s from opening %s", d.Unexplained, d.Opening.Amount)
	}
	if n := len(e.eventsOf("reconcile.balance_drift", "")); n != 1 {
		t.Fatalf("balance_drift events = %d, want 1", n)
	}
}

func TestReconciler_RunBalances_toleranceAbsorbsSmallDrift(t *testing.T) {
	e := balancesEnv(t, reconcile.Config{DriftTolerance: map[string]decimal.Decimal{"BRL": dec("0.05")}})
	e.run(e.rec.RunBalances)
	if err := e.fake.AdjustBalance("brl", "0.05"); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	e.run(e.rec.RunBalances)
	if d := e.latestDrift("brl"); !d.Unexplained.Equal(dec("0.05")) || !d.WithinTolerance {
		t.Fatalf("drift %s within %v", d.Unexplained, d.WithinTolerance)
	}
	if fs := e.findings(store.FindingBalanceDrift, ""); len(fs) != 0 {
		t.Fatalf("findings = %+v", fs)
	}
}

func TestReconciler_RunBalances_completedOrdersAreExpected(t *testing.T) {
	e := balancesEnv(t, reconcile.Config{})
	e.run(e.rec.RunBalances)
	e.clock.Advance(time.Minute)

	// A payin and a payout complete, and a refund of the payin; orderd
	// hears of each.
	e.createAtFake("in", "200.00", provider.TypePayin)
	e.createAtFake("out", "80.00", provider.TypePayout)
	e.learn("in", store.SourceGateway)
	e.learn("out", store.SourceGateway)
	e.clock.Advance(time.Minute)
	for _, mid := range []string{"in", "out"} {
		if err := e.fake.Complete(mid); err != nil {
			t.Fatal(err)
		}
		e.learn(mid, store.SourceWebhook)
	}
	refund, _, err := e.client.CreateRefund(t.Context(), provider.RefundRequest{Amount: dec("50.00"), MerchantOrderID: "in"})
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	if err := e.fake.CompleteRefund("in", refund.RefundTransaction.ID, true); err != nil {
		t.Fatal(err)
	}
	e.learn("in", store.SourcePoll)
	e.clock.Advance(time.Minute)

	e.run(e.rec.RunBalances)
	d := e.latestDrift("brl")
	// payin 200 less 2% fee = +196.00, payout -80.00, refund -50.00.
	if !d.Expected.Equal(dec("66")) || !d.Actual.Equal(dec("66")) || !d.Drift.IsZero() || !d.WithinTolerance {
		t.Fatalf("expected %s actual %s drift %s", d.Expected, d.Actual, d.Drift)
	}
	if det := driftDetail(t, d.Detail); det.ExpectedMovements != 3 {
		t.Fatalf("expected movements = %d, want 3", det.ExpectedMovements)
	}
}

// TestReconciler_RunBalances_processingOrderIsEvidence: with no polls, a
// payin the provider completed while orderd still sees it processing
// accounts for the drift exactly. That is evidence, named in the
// comparison as not settled, and the books do not agree until the order
// settles: then they do, and no finding ever opened (drift_grace 2).
func TestReconciler_RunBalances_processingOrderIsEvidence(t *testing.T) {
	e := balancesEnv(t, reconcile.Config{DriftPolls: -1})
	e.run(e.rec.RunBalances)
	o := e.createAtFake("credited", "150.00", provider.TypePayin)
	e.learn("credited", store.SourceGateway)
	e.createAtFake("other", "999.00", provider.TypePayin)
	e.learn("other", store.SourceGateway)
	e.clock.Advance(time.Minute)
	// The provider completes (and credits) the payin; orderd still sees
	// it processing when the balances run.
	if err := e.fake.Complete("credited"); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	s := e.run(e.rec.RunBalances)

	d := e.latestDrift("brl")
	if !d.Drift.Equal(dec("147")) || !d.Unexplained.Equal(dec("147")) || d.WithinTolerance {
		t.Fatalf("drift %s unexplained %s within %v, want 147 unexplained and not agreeing", d.Drift, d.Unexplained, d.WithinTolerance)
	}
	det := driftDetail(t, d.Detail)
	if det.Method != reconcile.MethodExact || det.Attributed != "147.00" || len(det.Parts) != 1 ||
		det.Parts[0].Kind != reconcile.PartProcessing || len(det.Parts[0].Orders) != 1 ||
		det.Parts[0].Orders[0].OrderID != o.ID || det.Parts[0].Orders[0].MerchantOrderID != "credited" {
		t.Fatalf("attribution = %+v", det)
	}
	if len(det.Named) != 1 || det.Named[0].MerchantOrderID != "credited" || det.Named[0].Settled ||
		det.Named[0].Status != "processing" || det.Evidence != reconcile.EvidenceUnsettled {
		t.Fatalf("named = %+v evidence %s, want credited, processing, not settled", det.Named, det.Evidence)
	}
	if s.Counts["findings_opened"] != 0 || len(e.findings(store.FindingBalanceDrift, "")) != 0 {
		t.Fatalf("a finding at the first check")
	}

	// The order settles; its movement is counted and the books agree.
	e.learn("credited", store.SourceWebhook)
	e.clock.Advance(time.Minute)
	e.run(e.rec.RunBalances)
	if d := e.latestDrift("brl"); !d.Drift.IsZero() || !d.WithinTolerance {
		t.Fatalf("after the order settled: drift %s", d.Drift)
	}
	if fs := e.findings(store.FindingBalanceDrift, ""); len(fs) != 0 {
		t.Fatalf("findings = %+v, want none", fs)
	}
}

func TestReconciler_RunBalances_laterExplanationResolvesFinding(t *testing.T) {
	// No grace and no polls: the finding opens at the first check, from
	// what orderd knew.
	e := balancesEnv(t, reconcile.Config{DriftGrace: 1, DriftPolls: -1})
	e.run(e.rec.RunBalances)
	// An order orderd has never heard of completes at the provider.
	e.createAtFake("unknown", "100.00", provider.TypePayin)
	e.clock.Advance(time.Minute)
	if err := e.fake.Complete("unknown"); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	e.run(e.rec.RunBalances)
	if fs := e.findings(store.FindingBalanceDrift, "open"); len(fs) != 1 {
		t.Fatalf("open findings = %d, want 1", len(fs))
	}
	if d := e.latestDrift("brl"); !d.Unexplained.Equal(dec("98")) {
		t.Fatalf("unexplained = %s, want 98", d.Unexplained)
	}

	// Its webhook arrives late. The next comparison, from where the books
	// last balanced, places the completion by the provider's completedAt
	// and balances.
	e.clock.Advance(time.Minute)
	e.learn("unknown", store.SourceWebhook)
	e.clock.Advance(time.Minute)
	s := e.run(e.rec.RunBalances)
	if s.Counts["findings_resolved"] != 1 {
		t.Fatalf("counts = %v", s.Counts)
	}
	d := e.latestDrift("brl")
	if !d.Unexplained.IsZero() || !d.Expected.Equal(dec("98")) || !d.WithinTolerance {
		t.Fatalf("drift after the webhook: expected %s unexplained %s", d.Expected, d.Unexplained)
	}
	if fs := e.findings(store.FindingBalanceDrift, "resolved"); len(fs) != 1 {
		t.Fatalf("resolved findings = %d", len(fs))
	}
	evs := e.eventsOf("reconcile.balance_drift", "")
	if len(evs) != 2 || evs[0].ID == evs[1].ID {
		t.Fatalf("balance_drift events = %+v, want open and resolved", evs)
	}

	// The next comparison opens from the balanced snapshot.
	e.clock.Advance(time.Minute)
	e.run(e.rec.RunBalances)
	if d2 := e.latestDrift("brl"); d2.Opening.ID != d.Closing.ID || !d2.Drift.IsZero() {
		t.Fatalf("next comparison opens at snapshot %d, want %d", d2.Opening.ID, d.Closing.ID)
	}
}

// TestReconciler_RunBalances_boundaryCompletion: the provider's clock
// runs 3 s behind orderd's, so a completion right after a snapshot at
// which the books agreed carries a completedAt just before it. The books
// agreed there without it, so the provider's balance did not hold it: the
// next comparison counts it (carried) and agrees.
func TestReconciler_RunBalances_boundaryCompletion(t *testing.T) {
	ck := newClock()
	e := newEnv(t, envOptions{
		clock:   ck,
		fake:    providertest.Options{InitialBalances: map[string]string{"brl": "1000.00"}},
		fakeNow: func() time.Time { return ck.Now().Add(-3 * time.Second) },
	})
	e.run(e.rec.RunBalances) // the first snapshot
	e.createAtFake("edge", "50.00", provider.TypePayin)
	e.learn("edge", store.SourceGateway)
	e.clock.Advance(time.Minute)
	e.run(e.rec.RunBalances) // the books agree here
	e.clock.Advance(time.Second)
	if err := e.fake.Complete("edge"); err != nil {
		t.Fatal(err)
	}
	e.learn("edge", store.SourceWebhook)
	e.clock.Advance(time.Minute)
	e.run(e.rec.RunBalances)

	d := e.latestDrift("brl")
	det := driftDetail(t, d.Detail)
	if !d.Drift.IsZero() || !d.WithinTolerance || !d.Expected.Equal(dec("49")) ||
		len(det.Carried) != 1 || det.Carried[0].MerchantOrderID != "edge" {
		t.Fatalf("drift %s expected %s carried %+v", d.Drift, d.Expected, det.Carried)
	}
	// The next comparison opens at the agreeing snapshot and does not
	// count it again.
	e.clock.Advance(time.Minute)
	e.run(e.rec.RunBalances)
	if d := e.latestDrift("brl"); !d.Drift.IsZero() || !d.Expected.IsZero() {
		t.Fatalf("next comparison: drift %s expected %s", d.Drift, d.Expected)
	}
}

// TestReconciler_RunBalances_namesInFlightMoney: with no polls, money in
// flight that could account for a drift is named as evidence; the books
// agree only once orderd learns the movement.
func TestReconciler_RunBalances_namesInFlightMoney(t *testing.T) {
	t.Run("in-doubt payout", func(t *testing.T) {
		e := balancesEnv(t, reconcile.Config{DriftPolls: -1})
		e.run(e.rec.RunBalances)
		e.clock.Advance(time.Minute)
		// The payout request timed out at orderd, but the provider made
		// it and has paid it out already.
		req := `{"merchantOrderId":"po-1","amount":{"amount":"80.00","currency":"brl"}}`
		a, _, err := e.st.BeginAttempt(t.Context(), store.NewAttempt{Kind: store.AttemptPayout, MerchantOrderID: "po-1",
			IdempotencyKey: "order:po-1", Request: json.RawMessage(req), RequestHash: "h-po-1", State: store.AttemptInDoubt})
		if err != nil {
			t.Fatal(err)
		}
		e.createAtFake("po-1", "80.00", provider.TypePayout)
		if err := e.fake.Complete("po-1"); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(time.Minute)
		e.run(e.rec.RunBalances)
		d := e.latestDrift("brl")
		det := driftDetail(t, d.Detail)
		if !d.Drift.Equal(dec("-80")) || d.WithinTolerance || len(det.Parts) != 1 ||
			det.Parts[0].Kind != reconcile.PartInDoubt || det.Parts[0].Orders[0].AttemptID != a.ID ||
			det.Parts[0].Orders[0].MerchantOrderID != "po-1" || det.Parts[0].Amount != "-80.00" {
			t.Fatalf("drift %s within %v parts %+v", d.Drift, d.WithinTolerance, det.Parts)
		}
		if len(det.Named) != 1 || det.Named[0].Settled || det.Named[0].Status != "creation in_doubt" {
			t.Fatalf("named = %+v", det.Named)
		}
		// The doubt job (here: the order's state) brings the payout in.
		e.learn("po-1", store.SourcePoll)
		e.clock.Advance(time.Minute)
		e.run(e.rec.RunBalances)
		if d := e.latestDrift("brl"); !d.Drift.IsZero() || !d.WithinTolerance {
			t.Fatalf("after learning the payout: drift %s", d.Drift)
		}
	})
	t.Run("refund in flight", func(t *testing.T) {
		e := balancesEnv(t, reconcile.Config{DriftPolls: -1})
		o := e.createAtFake("paid", "100.00", provider.TypePayin)
		if err := e.fake.Complete("paid"); err != nil {
			t.Fatal(err)
		}
		e.learn("paid", store.SourceWebhook)
		refund, _, err := e.client.CreateRefund(t.Context(), provider.RefundRequest{Amount: dec("30.00"), MerchantOrderID: "paid"})
		if err != nil {
			t.Fatal(err)
		}
		e.learn("paid", store.SourcePoll) // orderd sees the refund in new
		e.clock.Advance(time.Minute)
		e.run(e.rec.RunBalances)
		e.clock.Advance(time.Minute)
		// The provider completes the refund; orderd has not heard yet.
		if err := e.fake.CompleteRefund("paid", refund.RefundTransaction.ID, true); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(time.Minute)
		e.run(e.rec.RunBalances)
		d := e.latestDrift("brl")
		det := driftDetail(t, d.Detail)
		if !d.Drift.Equal(dec("-30")) || d.WithinTolerance || len(det.Parts) != 1 ||
			det.Parts[0].Kind != reconcile.PartRefundInFlight || det.Parts[0].Orders[0].OrderID != o.ID {
			t.Fatalf("drift %s parts %+v", d.Drift, det.Parts)
		}
		if len(det.Named) != 1 || det.Named[0].Settled || det.Evidence != reconcile.EvidenceUnsettled {
			t.Fatalf("named = %+v evidence %s", det.Named, det.Evidence)
		}
	})
}
