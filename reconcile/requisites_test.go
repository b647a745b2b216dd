package reconcile_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"orderd/provider"
	"orderd/provider/providertest"
	"orderd/reconcile"
	"orderd/store"
)

func TestReconciler_RunRequisites_recoversDepositsNoWebhookBrought(t *testing.T) {
	reg := prometheus.NewRegistry()
	metrics := reconcile.NewMetrics(reg)
	e := newEnv(t, envOptions{metrics: metrics})
	req, deposits := e.requisiteWithDeposits("100.00", "250.00", "5.00")
	if err := e.fake.Complete(deposits[0].MerchantOrderID); err != nil {
		t.Fatal(err)
	}
	// orderd heard of the second one already.
	e.learn(deposits[1].MerchantOrderID, store.SourceWebhook)
	e.clock.Advance(time.Minute)

	firstSweep := e.clock.Now()
	s := e.run(e.rec.RunRequisites)
	if s.Counts["requisites"] != 1 || s.Counts["orders"] != 3 || s.Counts["recovered"] != 2 {
		t.Fatalf("counts = %v", s.Counts)
	}
	if got := metricValue(t, reg, "orderd_requisite_orders_recovered_total", nil); got != 2 {
		t.Fatalf("orderd_requisite_orders_recovered_total = %v, want 2", got)
	}
	want := map[string]provider.Status{
		deposits[0].MerchantOrderID: provider.StatusCompleted,
		deposits[1].MerchantOrderID: provider.StatusProcessing,
		deposits[2].MerchantOrderID: provider.StatusRejected, // below minAmount
	}
	for mid, status := range want {
		if v := e.order(mid); v.Status != status {
			t.Errorf("%s stored as %s, want %s", mid, v.Status, status)
		}
	}
	if evs := e.eventsOf("order.completed", deposits[0].MerchantOrderID); len(evs) != 1 || evs[0].LearnedVia != store.SourcePoll {
		t.Errorf("recovered completion events = %+v", evs)
	}

	// The next sweep starts where this one ended (less the overlap) and
	// brings nothing new.
	events := len(e.events())
	e.clock.Advance(time.Hour)
	s = e.run(e.rec.RunRequisites)
	if s.Counts["recovered"] != 0 || len(e.events()) != events {
		t.Fatalf("second sweep: counts %v, %d new events", s.Counts, len(e.events())-events)
	}
	calls := e.fake.Calls(providertest.PathRequisiteOrders)
	last := string(calls[len(calls)-1].Body)
	wantFrom := `"createdAtFrom":"` + firstSweep.Add(-reconcile.DefaultRequisiteOverlap).Format(time.RFC3339Nano) + `"`
	if !strings.Contains(last, wantFrom) || !strings.Contains(last, `"limit":100`) {
		t.Fatalf("second sweep asked %s", last)
	}

	// A deposit after that sweep, its webhook lost, then the requisite is
	// deactivated: one last sweep still finds the deposit, and after it
	// the requisite is not swept again.
	e.clock.Advance(time.Minute)
	late, err := e.fake.Deposit(req.ID, "40.00")
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	if err := e.st.DeactivateRequisite(t.Context(), req.ID); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	n := len(e.fake.Calls(providertest.PathRequisiteOrders))
	s = e.run(e.rec.RunRequisites)
	if s.Counts["recovered"] != 1 || len(e.fake.Calls(providertest.PathRequisiteOrders)) != n+1 {
		t.Fatalf("last sweep after the deactivation: counts %v, %d calls; want the late deposit recovered in one call",
			s.Counts, len(e.fake.Calls(providertest.PathRequisiteOrders))-n)
	}
	if v := e.order(late.MerchantOrderID); v.LearnedVia != store.SourcePoll {
		t.Errorf("the late deposit learned via %s, want poll", v.LearnedVia)
	}
	e.clock.Advance(time.Hour)
	n = len(e.fake.Calls(providertest.PathRequisiteOrders))
	e.run(e.rec.RunRequisites)
	if got := len(e.fake.Calls(providertest.PathRequisiteOrders)); got != n {
		t.Fatalf("deactivated requisite swept again after its last sweep")
	}
}

func TestReconciler_RunRequisites_pages(t *testing.T) {
	e := newEnv(t, envOptions{})
	req, _, err := e.client.CreateRequisite(t.Context(), provider.RequisiteRequest{
		Client: provider.RequisiteClient{ID: "client-2"}, Currency: "mxn",
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.st.UpsertRequisite(t.Context(), store.Requisite{ID: req.ID}); err != nil {
		t.Fatal(err)
	}
	const n = 230
	for range n {
		if _, err := e.fake.Deposit(req.ID, "20.00"); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.Advance(time.Second)
	s := e.run(e.rec.RunRequisites)
	if s.Counts["orders"] != n || s.Counts["recovered"] != n || s.Counts["pages"] != 3 {
		t.Fatalf("counts = %v", s.Counts)
	}
}

// A listed deposit whose merchantOrderId orderd holds under another order
// id is refused with an identity_conflict finding; the sweep goes on with
// the others.
func TestReconciler_RunRequisites_conflictOpensFinding(t *testing.T) {
	e := newEnv(t, envOptions{})
	_, deposits := e.requisiteWithDeposits("100.00", "250.00")
	e.learnUnder(deposits[0].MerchantOrderID, "00000000-0000-4000-8000-000000000002", store.SourceWebhook)
	e.clock.Advance(time.Minute)

	s := e.run(e.rec.RunRequisites)
	if s.Counts["orders"] != 2 || s.Counts["conflicts"] != 1 || s.Counts["recovered"] != 1 {
		t.Fatalf("counts = %v, want one conflict and one recovered", s.Counts)
	}
	fs := e.findings(store.FindingIdentityConflict, "open")
	if len(fs) != 1 || fs[0].Key != deposits[0].MerchantOrderID || !strings.Contains(string(fs[0].Detail), deposits[0].ID) {
		t.Fatalf("identity_conflict findings = %+v", fs)
	}
	if v := e.order(deposits[1].MerchantOrderID); v.LearnedVia != store.SourcePoll {
		t.Fatalf("the other deposit learned via %s, want poll", v.LearnedVia)
	}
}

// A requisite the provider does not know (registered by mistake through
// the watch endpoint, say) cannot be swept: the run is partial, the others
// are still swept, and the next run tries it again. Only when no requisite
// can be swept does the run fail.
func TestReconciler_RunRequisites_unknownRequisiteLeavesRunPartial(t *testing.T) {
	e := newEnv(t, envOptions{})
	_, deposits := e.requisiteWithDeposits("100.00")
	const bogus = "00000000-0000-4000-8000-0000000000ab"
	if err := e.st.UpsertRequisite(t.Context(), store.Requisite{ID: bogus, Source: store.RequisiteFromWatch}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)

	for range 2 {
		s := e.run(e.rec.RunRequisites)
		if s.Result() != reconcile.ResultPartial || s.Counts["requisites"] != 2 || s.Counts["errors"] != 1 {
			t.Fatalf("result %s, counts %v; want partial with one error", s.Result(), s.Counts)
		}
		e.clock.Advance(time.Minute)
	}
	if v := e.order(deposits[0].MerchantOrderID); v.LearnedVia != store.SourcePoll {
		t.Fatalf("the known requisite's deposit learned via %s, want poll", v.LearnedVia)
	}
	var asked int
	for _, c := range e.fake.Calls(providertest.PathRequisiteOrders) {
		if strings.Contains(string(c.Body), bogus) {
			asked++
		}
	}
	if asked != 2 {
		t.Errorf("the unknown requisite was asked for %d times in two runs, want 2", asked)
	}

	// With the known one deactivated (and swept a last time), nothing
	// could be swept: a failure.
	list, err := e.st.Requisites(t.Context(), true)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range list {
		if r.ID != bogus {
			if err := e.st.DeactivateRequisite(t.Context(), r.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.clock.Advance(time.Minute)
	e.run(e.rec.RunRequisites)
	e.clock.Advance(time.Minute)
	s, err := e.rec.RunRequisites(t.Context())
	if err == nil || s.Result() != reconcile.ResultFailed {
		t.Fatalf("run with only the unknown requisite: result %s, err %v; want failed", s.Result(), err)
	}

	// Deactivated too, its last sweep meets the provider's
	// WALLET_NOT_FOUND: nothing to find, so the sweep ends without an
	// error and the id is not asked for again.
	if err := e.st.DeactivateRequisite(t.Context(), bogus); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	if s := e.run(e.rec.RunRequisites); s.Result() != reconcile.ResultOK {
		t.Fatalf("last sweep of the unknown requisite: result %s, counts %v; want ok", s.Result(), s.Counts)
	}
	n := len(e.fake.Calls(providertest.PathRequisiteOrders))
	e.clock.Advance(time.Minute)
	if s := e.run(e.rec.RunRequisites); s.Counts["requisites"] != 0 || len(e.fake.Calls(providertest.PathRequisiteOrders)) != n {
		t.Fatalf("after its last sweep: counts %v, %d more calls; want none", s.Counts, len(e.fake.Calls(providertest.PathRequisiteOrders))-n)
	}
}

// requisiteWithDeposits creates a deposit requisite without a webhookUrl
// (its deposits are never announced), registers it for the sweep as the
// gateway would, and makes a deposit of each amount a second apart.
func (e *env) requisiteWithDeposits(amounts ...string) (*provider.Requisite, []*provider.Order) {
	e.t.Helper()
	req, _, err := e.client.CreateRequisite(e.t.Context(), provider.RequisiteRequest{
		Client: provider.RequisiteClient{ID: "client-1"}, Currency: "mxn", MerchantOrderIDPrefix: "dep-",
	})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.st.UpsertRequisite(e.t.Context(), store.Requisite{ID: req.ID, Currency: "mxn", Source: store.RequisiteFromGateway}); err != nil {
		e.t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	var deposits []*provider.Order
	for _, amount := range amounts {
		o, err := e.fake.Deposit(req.ID, amount)
		if err != nil {
			e.t.Fatal(err)
		}
		deposits = append(deposits, o)
		e.clock.Advance(time.Second)
	}
	return req, deposits
}
