package reconcile_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"orderd/provider"
	"orderd/provider/providertest"
	"orderd/reconcile"
	"orderd/store"
)

func TestReconciler_RunStale_completesOrdersWebhooksMissed(t *testing.T) {
	e := newEnv(t, envOptions{})
	const n = 5
	for i := range n {
		mid := fmt.Sprintf("pay-%d", i)
		e.createAtFake(mid, "100.00", provider.TypePayin)
		e.learn(mid, store.SourceGateway)
		// The provider completes the order; no webhook reaches orderd.
		if err := e.fake.Complete(mid); err != nil {
			t.Fatal(err)
		}
	}
	e.createAtFake("still", "10.00", provider.TypePayin)
	e.learn("still", store.SourceGateway)

	// Not stale yet: nothing is polled.
	s := e.run(e.rec.RunStale)
	if got := len(e.fake.Calls(providertest.PathGetStatus)); got != 0 || s.Counts["checked"] != 0 {
		t.Fatalf("fresh orders were polled: %d calls, counts %v", got, s.Counts)
	}

	e.clock.Advance(staleAfter + time.Second)
	s = e.run(e.rec.RunStale)
	if s.Counts["checked"] != n+1 || s.Counts["changed"] != n || s.Counts["unchanged"] != 1 {
		t.Fatalf("counts = %v, want checked %d, changed %d, unchanged 1", s.Counts, n+1, n)
	}
	for i := range n {
		mid := fmt.Sprintf("pay-%d", i)
		v := e.order(mid)
		if v.Status != provider.StatusCompleted || v.LearnedVia != store.SourcePoll {
			t.Errorf("%s: status %s learned via %s, want completed via poll", mid, v.Status, v.LearnedVia)
		}
		evs := e.eventsOf("order.completed", mid)
		if len(evs) != 1 {
			t.Fatalf("%s: %d order.completed events, want 1", mid, len(evs))
		}
		if evs[0].LearnedVia != store.SourcePoll || evs[0].Subject != "orders.payin.completed" {
			t.Errorf("%s: event learned via %s on %s", mid, evs[0].LearnedVia, evs[0].Subject)
		}
		var data provider.Order
		if err := json.Unmarshal(evs[0].Data, &data); err != nil || data.Status != provider.StatusCompleted {
			t.Errorf("%s: event data is not the completed order: %v %s", mid, err, evs[0].Data)
		}
	}

	// A second run finds nothing new to publish, whenever it runs.
	before := len(e.events())
	e.clock.Advance(2 * time.Hour)
	e.run(e.rec.RunStale)
	if after := len(e.events()); after != before {
		t.Fatalf("second run queued %d more events", after-before)
	}

	runs, err := e.st.ReconcileRuns(t.Context(), reconcile.JobStale, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 3 || runs[1].Counts["changed"] != n || runs[1].FinishedAt.IsZero() || runs[1].Error != "" {
		t.Fatalf("recorded runs = %+v", runs)
	}
}

func TestReconciler_RunStale_backsOffUnchangedOrders(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.createAtFake("slow", "10.00", provider.TypePayin)
	e.learn("slow", store.SourceGateway)

	e.clock.Advance(staleAfter + time.Second)
	var waits []time.Duration
	for i := range 4 {
		e.run(e.rec.RunStale)
		v := e.order("slow")
		if v.CheckAttempts != i+1 {
			t.Fatalf("after run %d: check_attempts %d", i+1, v.CheckAttempts)
		}
		waits = append(waits, v.NextCheckAt.Sub(e.clock.Now()))

		// Not due yet: a run now does not poll it.
		calls := len(e.fake.Calls(providertest.PathGetStatus))
		e.run(e.rec.RunStale)
		if got := len(e.fake.Calls(providertest.PathGetStatus)); got != calls {
			t.Fatalf("order polled again before its next check")
		}
		e.clock.Advance(v.NextCheckAt.Sub(e.clock.Now()))
	}
	want := []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute}
	for i := range want {
		if waits[i] != want[i] {
			t.Fatalf("waits = %v, want %v", waits, want)
		}
	}

	// A change resets the backoff.
	if err := e.fake.Complete("slow"); err != nil {
		t.Fatal(err)
	}
	e.run(e.rec.RunStale)
	if v := e.order("slow"); v.Status != provider.StatusCompleted || v.CheckAttempts != 0 {
		t.Fatalf("after the change: status %s, check_attempts %d", v.Status, v.CheckAttempts)
	}
}

func TestReconciler_RunStale_backoffIsCapped(t *testing.T) {
	e := newEnv(t, envOptions{cfg: reconcile.Config{BackoffBase: time.Minute, BackoffMax: 10 * time.Minute}})
	e.createAtFake("capped", "10.00", provider.TypePayin)
	e.learn("capped", store.SourceGateway)
	e.clock.Advance(staleAfter + time.Second)
	for range 8 {
		e.run(e.rec.RunStale)
		e.clock.Advance(e.order("capped").NextCheckAt.Sub(e.clock.Now()))
	}
	e.run(e.rec.RunStale)
	if wait := e.order("capped").NextCheckAt.Sub(e.clock.Now()); wait != 10*time.Minute {
		t.Fatalf("wait after 9 checks = %s, want the 10m cap", wait)
	}
}

func TestReconciler_RunStale_errorsBackOff(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.createAtFake("flaky", "10.00", provider.TypePayin)
	e.learn("flaky", store.SourceGateway)
	e.clock.Advance(staleAfter + time.Second)
	if err := e.fake.InjectFault(providertest.Fault{Endpoint: providertest.PathGetStatus, Kind: providertest.FailBefore}); err != nil {
		t.Fatal(err)
	}
	s := e.run(e.rec.RunStale)
	if s.Counts["errors"] != 1 {
		t.Fatalf("counts = %v, want one error", s.Counts)
	}
	if v := e.order("flaky"); v.CheckAttempts != 1 || !v.NextCheckAt.After(e.clock.Now()) {
		t.Fatalf("failed poll did not postpone: attempts %d, next %s", v.CheckAttempts, v.NextCheckAt)
	}
}

func TestReconciler_RunStale_stuckOrder(t *testing.T) {
	e := newEnv(t, envOptions{})
	o := e.createAtFake("stuck", "10.00", provider.TypePayin)
	e.learn("stuck", store.SourceGateway)

	e.clock.Advance(staleAfter + time.Second)
	e.run(e.rec.RunStale)
	if fs := e.findings(store.FindingStuckOrder, ""); len(fs) != 0 {
		t.Fatalf("stuck_order before give_up_after: %+v", fs)
	}

	e.clock.Advance(giveUpAfter)
	s := e.run(e.rec.RunStale)
	if s.Counts["stuck_opened"] != 1 {
		t.Fatalf("counts = %v, want stuck_opened 1", s.Counts)
	}
	fs := e.findings(store.FindingStuckOrder, "open")
	if len(fs) != 1 || fs[0].Key != o.ID {
		t.Fatalf("open stuck findings = %+v, want one for %s", fs, o.ID)
	}
	if evs := e.eventsOf("reconcile.stuck_order", ""); len(evs) != 1 || evs[0].Subject != "reconcile.stuck_order" || evs[0].EventSubject != o.ID {
		t.Fatalf("stuck_order events = %+v", evs)
	}

	// Still stuck on later checks: the finding stays one, with one event.
	for range 3 {
		e.clock.Advance(e.order("stuck").NextCheckAt.Sub(e.clock.Now()))
		e.run(e.rec.RunStale)
	}
	if fs := e.findings(store.FindingStuckOrder, ""); len(fs) != 1 {
		t.Fatalf("findings = %d, want still 1", len(fs))
	}
	if evs := e.eventsOf("reconcile.stuck_order", ""); len(evs) != 1 {
		t.Fatalf("stuck_order events = %d, want 1", len(evs))
	}

	// The order finally completes: the finding is resolved.
	if err := e.fake.Complete("stuck"); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(e.order("stuck").NextCheckAt.Sub(e.clock.Now()))
	s = e.run(e.rec.RunStale)
	if s.Counts["stuck_resolved"] != 1 {
		t.Fatalf("counts = %v, want stuck_resolved 1", s.Counts)
	}
	if fs := e.findings(store.FindingStuckOrder, "resolved"); len(fs) != 1 {
		t.Fatalf("resolved stuck findings = %d, want 1", len(fs))
	}
	if evs := e.eventsOf("reconcile.stuck_order", ""); len(evs) != 2 {
		t.Fatalf("stuck_order events = %d, want open and resolved", len(evs))
	}
}

func TestReconciler_RunStale_watches(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.createAtFake("quarantined-order", "25.00", provider.TypePayin)
	if err := e.fake.Complete("quarantined-order"); err != nil {
		t.Fatal(err)
	}
	for _, mid := range []string{"quarantined-order", "never-created"} {
		if err := e.st.MarkForPoll(t.Context(), mid, "quarantined webhook"); err != nil {
			t.Fatal(err)
		}
	}

	s := e.run(e.rec.RunStale)
	if s.Counts["watches_found"] != 1 || s.Counts["watches_missing"] != 1 {
		t.Fatalf("counts = %v", s.Counts)
	}
	if v := e.order("quarantined-order"); v.Status != provider.StatusCompleted || v.LearnedVia != store.SourcePoll {
		t.Fatalf("watched order stored as %s via %s", v.Status, v.LearnedVia)
	}
	if evs := e.eventsOf("order.completed", "quarantined-order"); len(evs) != 1 {
		t.Fatalf("events = %d, want 1", len(evs))
	}

	// The found watch is resolved; the missing one is polled again only
	// when due, and after give_up_after becomes a finding.
	calls := len(e.fake.Calls(providertest.PathGetStatus))
	e.run(e.rec.RunStale)
	if got := len(e.fake.Calls(providertest.PathGetStatus)); got != calls {
		t.Fatalf("%d polls in a run with nothing due", got-calls)
	}
	e.clock.Advance(giveUpAfter)
	s = e.run(e.rec.RunStale)
	if s.Counts["watches"] != 1 || s.Counts["watches_missing"] != 1 {
		t.Fatalf("counts = %v, want the missing watch polled", s.Counts)
	}
	fs := e.findings(reconcile.FindingWatchNotFound, "open")
	if len(fs) != 1 || fs[0].Key != "never-created" {
		t.Fatalf("watch_not_found findings = %+v", fs)
	}
}

// A forged webhook's merchantOrderId is polled a few times, then dropped
// without a finding; a watch for another reason keeps going.
func TestReconciler_RunStale_unverifiedWatchesExpire(t *testing.T) {
	e := newEnv(t, envOptions{})
	if err := e.st.MarkForPoll(t.Context(), "forged-1", store.WatchReasonUnverified); err != nil {
		t.Fatal(err)
	}
	if err := e.st.MarkForPoll(t.Context(), "handed-over", "watch requested"); err != nil {
		t.Fatal(err)
	}
	polled := func(mid string) int {
		n := 0
		for _, c := range e.fake.Calls(providertest.PathGetStatus) {
			if strings.Contains(string(c.Body), mid) {
				n++
			}
		}
		return n
	}
	for range 8 {
		e.run(e.rec.RunStale)
		e.clock.Advance(2 * time.Hour) // past any backoff
	}
	if got := polled("forged-1"); got != 5 {
		t.Errorf("forged watch polled %d times, want 5 then dropped", got)
	}
	if got := polled("handed-over"); got != 8 {
		t.Errorf("requested watch polled %d times, want 8 (every run)", got)
	}
	for _, f := range e.findings(reconcile.FindingWatchNotFound, "open") {
		if f.Key == "forged-1" {
			t.Errorf("forged watch opened a finding: %+v", f)
		}
	}
}

func TestReconciler_RunStale_pollOlderThanWebhookIsMismatch(t *testing.T) {
	e := newEnv(t, envOptions{})
	o := e.createAtFake("disputed", "40.00", provider.TypePayin)
	// A webhook claims the order completed, while the provider's
	// get-status still shows it processing.
	e.apply(withStatus(t, e, "disputed", provider.StatusCompleted), store.SourceWebhook)
	if err := e.st.MarkForPoll(t.Context(), "disputed", "check"); err != nil {
		t.Fatal(err)
	}
	// The poll is asked after the webhook's state was stored: the
	// provider's answer cannot predate it.
	e.clock.Advance(time.Second)

	e.run(e.rec.RunStale)
	if v := e.order("disputed"); v.Status != provider.StatusCompleted {
		t.Fatalf("final status overwritten: %s", v.Status)
	}
	fs := e.findings(store.FindingMismatch, "open")
	if len(fs) != 1 || fs[0].Key != o.ID {
		t.Fatalf("mismatch findings = %+v", fs)
	}
	for _, want := range []string{`"source":"webhook"`, `"source":"poll"`, `"status":"processing"`, `"status":"completed"`} {
		if !strings.Contains(string(fs[0].Detail), want) {
			t.Errorf("detail lacks %s: %s", want, fs[0].Detail)
		}
	}
}

// racingClient answers get-status as the provider did when asked, and
// before the answer is back runs arrive once: a webhook that overtakes the
// answer on its way.
type racingClient struct {
	reconcile.Client
	once   sync.Once
	arrive func()
}

func (c *racingClient) GetStatus(ctx context.Context, mid string) (*provider.Order, json.RawMessage, error) {
	o, raw, err := c.Client.GetStatus(ctx, mid)
	c.once.Do(c.arrive)
	return o, raw, err
}

// A poll asked while the order was processing, whose answer is recorded
// after a webhook completed the order, is late news, not a disagreement:
// the order stays completed and no mismatch finding opens. A poll asked
// after the webhook that still says processing is one.
func TestReconciler_RunStale_pollAskedBeforeWebhookIsNoMismatch(t *testing.T) {
	e := newEnv(t, envOptions{})
	o := e.createAtFake("raced", "40.00", provider.TypePayin)
	e.learn("raced", store.SourceGateway)
	e.clock.Advance(staleAfter + time.Second)
	client := &racingClient{Client: e.client, arrive: func() {
		if err := e.fake.Complete("raced"); err != nil {
			t.Error(err)
		}
		e.clock.Advance(time.Second)
		e.learn("raced", store.SourceWebhook)
		e.clock.Advance(time.Second)
	}}
	rec := reconcile.New(e.cfg, e.st, client, nil)

	s := e.run(rec.RunStale)
	if v := e.order("raced"); v.Status != provider.StatusCompleted {
		t.Fatalf("order is %s, want completed", v.Status)
	}
	if fs := e.findings(store.FindingMismatch, ""); len(fs) != 0 {
		t.Fatalf("a poll asked before the webhook opened %d mismatch findings: %s", len(fs), fs[0].Detail)
	}
	if s.Counts["mismatches"] != 0 {
		t.Errorf("counts = %v, want no mismatch", s.Counts)
	}
	// The late answer is kept in the order's history, as stale.
	v := e.order("raced")
	var stale int
	for _, h := range v.History {
		if h.Source == store.SourcePoll && h.Outcome == store.OutcomeStale && h.Status == provider.StatusProcessing {
			stale++
		}
	}
	if stale != 1 {
		t.Errorf("history has %d stale processing polls, want 1: %+v", stale, v.History)
	}

	// Asked after the webhook, processing is the provider contradicting
	// its own webhook.
	if err := e.st.MarkForPoll(t.Context(), "raced", "check"); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Second)
	later := &fixedAnswer{Client: e.client, raw: withStatus(t, e, "raced", provider.StatusProcessing)}
	e.run(reconcile.New(e.cfg, e.st, later, nil).RunStale)
	if fs := e.findings(store.FindingMismatch, "open"); len(fs) != 1 || fs[0].Key != o.ID {
		t.Fatalf("mismatch findings after a poll asked later = %+v, want one about %s", fs, o.ID)
	}
}

// fixedAnswer answers every get-status with raw.
type fixedAnswer struct {
	reconcile.Client
	raw []byte
}

func (c *fixedAnswer) GetStatus(context.Context, string) (*provider.Order, json.RawMessage, error) {
	o, err := provider.DecodeOrder(c.raw)
	return o, c.raw, err
}

func TestReconciler_RunStale_oneBadAnswerDoesNotSinkOthers(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, mid := range []string{"good-1", "good-2", "twisted"} {
		e.createAtFake(mid, "10.00", provider.TypePayin)
	}
	e.learn("good-1", store.SourceGateway)
	e.learn("good-2", store.SourceGateway)
	// orderd stored "twisted" under another provider id than the one the
	// provider answers with: its answer cannot be recorded.
	raw, _ := e.fake.OrderJSON("twisted")
	var o provider.Order
	if err := json.Unmarshal(raw, &o); err != nil {
		t.Fatal(err)
	}
	o.ID = "00000000-0000-4000-8000-000000000000"
	twisted, _ := json.Marshal(o)
	e.apply(twisted, store.SourceGateway)
	if err := e.fake.Complete("good-1"); err != nil {
		t.Fatal(err)
	}

	e.clock.Advance(staleAfter + time.Second)
	s := e.run(e.rec.RunStale)
	if s.Counts["checked"] != 3 || s.Counts["errors"] != 1 || s.Counts["changed"] != 1 || s.Counts["unchanged"] != 1 {
		t.Fatalf("counts = %v", s.Counts)
	}
	if v := e.order("good-1"); v.Status != provider.StatusCompleted {
		t.Fatalf("good-1 is %s", v.Status)
	}
	for _, mid := range []string{"good-2", "twisted"} {
		if v := e.order(mid); v.CheckAttempts != 1 {
			t.Errorf("%s: check_attempts %d, want postponed once", mid, v.CheckAttempts)
		}
	}
}

// twistingClient is a provider client whose get-status answers carry
// another order id than the provider's, while twist is set: a provider
// answering for a merchantOrderId with the wrong order.
func twistingClient(t *testing.T, e *env, realID, otherID string, twist *atomic.Bool) *provider.Client {
	t.Helper()
	target, err := url.Parse(e.fake.URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(r *http.Response) error {
		if !twist.Load() || !strings.HasSuffix(r.Request.URL.Path, "get-status") {
			return nil
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return err
		}
		body = bytes.ReplaceAll(body, []byte(realID), []byte(otherID))
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		r.Header.Set("Content-Length", strconv.Itoa(len(body)))
		return nil
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	client, err := provider.NewClient(provider.Options{BaseURL: srv.URL, APIKey: e.fake.APIKey(), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// A poll answered with another order than the one stored for the
// merchantOrderId changes nothing, opens an identity_conflict finding with
// the provider's answer, and backs off; a later poll that applies cleanly
// resolves it.
func TestReconciler_RunStale_identityConflict(t *testing.T) {
	e := newEnv(t, envOptions{})
	real := e.createAtFake("contested", "30.00", provider.TypePayin)
	e.learn("contested", store.SourceGateway)
	const otherID = "00000000-0000-4000-8000-000000000000"
	var twist atomic.Bool
	twist.Store(true)
	rec := reconcile.New(e.cfg, e.st, twistingClient(t, e, real.ID, otherID, &twist), nil)
	if err := e.fake.Complete("contested"); err != nil {
		t.Fatal(err)
	}

	e.clock.Advance(staleAfter + time.Second)
	s := e.run(rec.RunStale)
	if s.Counts["conflicts"] != 1 || s.Counts["errors"] != 1 || s.Counts["changed"] != 0 {
		t.Fatalf("counts = %v, want one conflict", s.Counts)
	}
	if v := e.order("contested"); v.Status != provider.StatusProcessing || v.ProviderID != real.ID || v.CheckAttempts != 1 {
		t.Fatalf("stored order = %s %s, %d checks; want it unchanged and postponed once", v.ProviderID, v.Status, v.CheckAttempts)
	}
	fs := e.findings(store.FindingIdentityConflict, "open")
	if len(fs) != 1 || fs[0].Key != "contested" {
		t.Fatalf("identity_conflict findings = %+v, want one about contested", fs)
	}
	var d store.IdentityConflict
	if err := json.Unmarshal(fs[0].Detail, &d); err != nil {
		t.Fatal(err)
	}
	if d.OrderID != otherID || d.Source != store.SourcePoll || d.Status != provider.StatusCompleted ||
		!strings.Contains(d.Reason, real.ID) || !strings.Contains(string(d.Order), otherID) {
		t.Errorf("finding detail = %+v", d)
	}
	if evs := e.eventsOf("reconcile.identity_conflict", ""); len(evs) != 1 {
		t.Errorf("%d reconcile.identity_conflict events, want 1", len(evs))
	}
	if evs := e.eventsOf("order.completed", "contested"); len(evs) != 0 {
		t.Errorf("the refused answer queued %d order.completed events", len(evs))
	}

	// The provider answers with the right order again.
	twist.Store(false)
	e.clock.Advance(time.Hour)
	s = e.run(rec.RunStale)
	if s.Counts["changed"] != 1 || s.Counts["conflicts"] != 0 {
		t.Fatalf("counts = %v, want the order changed", s.Counts)
	}
	if v := e.order("contested"); v.Status != provider.StatusCompleted {
		t.Fatalf("stored status %s, want completed", v.Status)
	}
	if open := e.findings(store.FindingIdentityConflict, "open"); len(open) != 0 {
		t.Fatalf("identity_conflict still open: %+v", open)
	}
	if res := e.findings(store.FindingIdentityConflict, "resolved"); len(res) != 1 {
		t.Fatalf("resolved identity_conflict findings = %+v, want 1", res)
	}
}

// A watched order whose merchantOrderId orderd holds under another order
// id is refused: an identity_conflict finding opens and the watch stays,
// postponed, instead of being resolved.
func TestReconciler_RunStale_watchedOrderConflicts(t *testing.T) {
	e := newEnv(t, envOptions{})
	real := e.createAtFake("doubled", "12.00", provider.TypePayin)
	e.learnUnder("doubled", "00000000-0000-4000-8000-000000000001", store.SourceGateway)
	if err := e.st.MarkForPoll(t.Context(), "doubled", "check"); err != nil {
		t.Fatal(err)
	}

	s := e.run(e.rec.RunStale)
	if s.Counts["watches"] != 1 || s.Counts["conflicts"] != 1 || s.Counts["watches_found"] != 0 {
		t.Fatalf("counts = %v, want the watch's answer refused", s.Counts)
	}
	fs := e.findings(store.FindingIdentityConflict, "open")
	if len(fs) != 1 || fs[0].Key != "doubled" || !strings.Contains(string(fs[0].Detail), real.ID) {
		t.Fatalf("identity_conflict findings = %+v", fs)
	}
	watches, err := e.st.DueWatches(t.Context(), e.clock.Now().Add(24*time.Hour), store.DueCursor{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(watches) != 1 || watches[0].MerchantOrderID != "doubled" || watches[0].Attempts != 1 {
		t.Fatalf("watches = %+v, want doubled still watched, postponed once", watches)
	}
}

// refundStatus returns the status of refund id in mid's stored state.
func (e *env) refundStatus(mid, id string) provider.Status {
	e.t.Helper()
	var o provider.Order
	if err := json.Unmarshal(e.order(mid).Order, &o); err != nil {
		e.t.Fatal(err)
	}
	for _, tr := range o.Transactions {
		if tr.ID == id {
			return tr.Status
		}
	}
	e.t.Fatalf("%s has no transaction %s", mid, id)
	return ""
}

// TestReconciler_RunStale_pollsRefundsInFlight: a completed payin's
// refund ends at the provider and no webhook says so. Once orderd has
// known it in flight for StaleAfter, the stale job polls the order and
// learns the refund's end; an order without a refund in flight is not
// polled, and the order is not polled again once the refund is final. A
// refund still in flight at the provider is polled with backoff, and its
// order is never called stuck.
func TestReconciler_RunStale_pollsRefundsInFlight(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, mid := range []string{"refunded", "quiet", "slow"} {
		e.createAtFake(mid, "100.00", provider.TypePayin)
		if err := e.fake.Complete(mid); err != nil {
			t.Fatal(err)
		}
		e.learn(mid, store.SourceWebhook)
	}
	refund, _, err := e.client.CreateRefund(t.Context(), provider.RefundRequest{Amount: dec("40.00"), MerchantOrderID: "refunded"})
	if err != nil {
		t.Fatal(err)
	}
	id := refund.RefundTransaction.ID
	e.learn("refunded", store.SourcePoll) // orderd knows the refund in flight
	if _, _, err := e.client.CreateRefund(t.Context(), provider.RefundRequest{Amount: dec("10.00"), MerchantOrderID: "slow"}); err != nil {
		t.Fatal(err)
	}
	e.learn("slow", store.SourcePoll)
	if got := e.refundStatus("refunded", id); got.IsFinal() {
		t.Fatalf("refund stored as %s before the provider ended it", got)
	}
	if err := e.fake.CompleteRefund("refunded", id, true); err != nil {
		t.Fatal(err)
	}

	// In flight for less than StaleAfter: not polled yet.
	before := len(e.fake.Calls(providertest.PathGetStatus))
	if s := e.run(e.rec.RunStale); s.Counts["refunds_due"] != 0 || len(e.fake.Calls(providertest.PathGetStatus)) != before {
		t.Fatalf("a fresh refund was polled: counts %v", s.Counts)
	}

	e.clock.Advance(staleAfter + time.Second)
	s := e.run(e.rec.RunStale)
	calls := e.fake.Calls(providertest.PathGetStatus)[before:]
	if s.Counts["refunds_due"] != 2 || s.Counts["changed"] != 1 || s.Counts["unchanged"] != 1 || len(calls) != 2 {
		t.Fatalf("counts %v, %d get-status calls; want the two refunding orders polled, one changed", s.Counts, len(calls))
	}
	if got := e.refundStatus("refunded", id); got != provider.StatusCompleted {
		t.Fatalf("refund stored as %s after the poll, want completed", got)
	}
	if fs := e.findings(store.FindingStuckOrder, "open"); len(fs) != 0 {
		t.Fatalf("stuck_order findings for a final order: %+v", fs)
	}

	// Right after: the refund still in flight waits for its backoff.
	if s := e.run(e.rec.RunStale); s.Counts["due"] != 0 {
		t.Fatalf("polled again before the backoff: %v", s.Counts)
	}
	// Later: the ended refund's order is not polled again; the slow one
	// is, and is still not stuck after GiveUpAfter.
	e.clock.Advance(giveUpAfter + time.Hour)
	s = e.run(e.rec.RunStale)
	if s.Counts["refunds_due"] != 1 || s.Counts["unchanged"] != 1 {
		t.Fatalf("after the backoff: %v, want only the order with a refund still in flight", s.Counts)
	}
	if s.Counts["stuck_opened"] != 0 || len(e.findings(store.FindingStuckOrder, "")) != 0 {
		t.Fatalf("a stuck_order finding for a final order: %v", s.Counts)
	}
}
