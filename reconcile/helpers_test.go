package reconcile_test

import (
	"bytes"
	"context"
	"crypto"
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shopspring/decimal"

	"orderd/provider"
	"orderd/provider/providertest"
	"orderd/reconcile"
	"orderd/store"
	"orderd/test/support/outboxcheck"
)

// clock is the injected clock every part of a test shares: the store, the
// fake provider and the reconciler.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock {
	return &clock{t: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Test settings: the reconcile config the tests run with unless a test
// changes it.
const (
	staleAfter  = 5 * time.Minute
	giveUpAfter = 24 * time.Hour
	doubtMinAge = time.Minute
)

// env is one test's orderd: a real store in a temporary directory, the
// fake provider, a real provider client and a reconciler.
type env struct {
	t      *testing.T
	clock  *clock
	st     *store.Store
	fake   *providertest.Server
	client *provider.Client
	rec    *reconcile.Reconciler
	cfg    reconcile.Config
}

type envOptions struct {
	fake    providertest.Options
	cfg     reconcile.Config
	limiter provider.Limiter
	metrics *reconcile.Metrics
	// clock, when set, is the shared clock (default: a new one).
	clock *clock
	// fakeNow, when set, is the fake provider's clock instead of the
	// shared one (to model provider clock skew).
	fakeNow func() time.Time
}

var (
	keyOnce sync.Once
	testKey crypto.Signer
)

// signingKey generates one webhook key for the whole test binary.
func signingKey(t testing.TB) crypto.Signer {
	keyOnce.Do(func() {
		k, _, err := providertest.GenerateKey("ecdsa")
		if err != nil {
			t.Fatalf("generate key: %v", err)
		}
		testKey = k
	})
	return testKey
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	ck := o.clock
	if ck == nil {
		ck = newClock()
	}
	fo := o.fake
	fo.Now = ck.Now
	if o.fakeNow != nil {
		fo.Now = o.fakeNow
	}
	fo.Key = signingKey(t)
	fake := providertest.NewServer(fo)
	t.Cleanup(fake.Close)

	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "orderd.db"), store.Options{
		Now: ck.Now, CheckAfter: staleAfter,
	})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := st.Close(ctx); err != nil {
			t.Errorf("close store: %v", err)
		}
	})

	// Runs before the store closes (cleanups run last first): every event
	// the test queued matches the AsyncAPI document.
	t.Cleanup(func() { outboxcheck.Check(t, st) })

	client, err := provider.NewClient(provider.Options{
		BaseURL: fake.URL(), APIKey: fake.APIKey(), Timeout: 5 * time.Second, Limiter: o.limiter,
	})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	cfg := o.cfg
	if cfg.StaleAfter == 0 {
		cfg.StaleAfter = staleAfter
	}
	if cfg.GiveUpAfter == 0 {
		cfg.GiveUpAfter = giveUpAfter
	}
	if cfg.DoubtMinAge == 0 {
		cfg.DoubtMinAge = doubtMinAge
	}
	cfg.Now = ck.Now
	e := &env{t: t, clock: ck, st: st, fake: fake, client: client, cfg: cfg}
	e.rec = reconcile.New(cfg, st, client, o.metrics)
	return e
}

// createAtFake creates a payin (or payout) in processing at the fake, with
// no webhook URL, so no webhook will ever tell orderd about it.
func (e *env) createAtFake(mid, amount string, typ provider.OrderType) provider.Order {
	e.t.Helper()
	o, err := e.fake.CreateOrder(providertest.NewOrder{MerchantOrderID: mid, Type: typ, Amount: amount, Currency: "brl"})
	if err != nil {
		e.t.Fatalf("create %s at the fake: %v", mid, err)
	}
	return o
}

// learn applies the fake's current state of mid to the store as if source
// had brought it (the gateway's create answer, a webhook).
func (e *env) learn(mid string, source store.Source) store.Result {
	e.t.Helper()
	raw, ok := e.fake.OrderJSON(mid)
	if !ok {
		e.t.Fatalf("fake has no order %s", mid)
	}
	return e.apply(raw, source)
}

// learnUnder applies the fake's current state of mid as if source had
// brought it under another provider order id: orderd then holds mid for
// an order the provider does not have, and the provider's own answers
// about mid contradict it.
func (e *env) learnUnder(mid, otherID string, source store.Source) store.Result {
	e.t.Helper()
	o, ok := e.fake.Order(mid)
	if !ok {
		e.t.Fatalf("fake has no order %s", mid)
	}
	raw, _ := e.fake.OrderJSON(mid)
	return e.apply(bytes.ReplaceAll(raw, []byte(o.ID), []byte(otherID)), source)
}

func (e *env) apply(raw []byte, source store.Source) store.Result {
	e.t.Helper()
	o, err := provider.DecodeOrder(raw)
	if err != nil {
		e.t.Fatalf("decode: %v", err)
	}
	res, err := e.st.Apply(e.t.Context(), store.Observation{Source: source, Order: o, Raw: raw, ObservedAt: e.clock.Now()})
	if err != nil {
		e.t.Fatalf("apply %s: %v", o.MerchantOrderID, err)
	}
	return res
}

// order returns the stored view of mid.
func (e *env) order(mid string) *store.OrderView {
	e.t.Helper()
	v, err := e.st.OrderByMerchantID(e.t.Context(), mid)
	if err != nil {
		e.t.Fatalf("stored order %s: %v", mid, err)
	}
	return v
}

// events returns every queued outbox event.
func (e *env) events() []store.OutboxEvent {
	e.t.Helper()
	evs, err := e.st.PendingEvents(e.t.Context(), 0, 100000)
	if err != nil {
		e.t.Fatalf("pending events: %v", err)
	}
	return evs
}

// eventsOf returns the queued events of type typ about merchant order mid
// (any order when mid is empty).
func (e *env) eventsOf(typ, mid string) []store.OutboxEvent {
	e.t.Helper()
	var out []store.OutboxEvent
	for _, ev := range e.events() {
		if ev.Type == typ && (mid == "" || ev.MerchantOrderID == mid) {
			out = append(out, ev)
		}
	}
	return out
}

// findings returns the findings of kind in state ("open", "resolved" or
// "" for both).
func (e *env) findings(kind, state string) []store.Finding {
	e.t.Helper()
	fs, err := e.st.FindingsPage(e.t.Context(), store.FindingQuery{Kind: kind, State: state, Limit: 1000})
	if err != nil {
		e.t.Fatalf("findings: %v", err)
	}
	return fs
}

// run runs fn and fails the test on error.
func (e *env) run(fn func(context.Context) (reconcile.Summary, error)) reconcile.Summary {
	e.t.Helper()
	s, err := fn(e.t.Context())
	if err != nil {
		e.t.Fatalf("run %s: %v", s.Job, err)
	}
	return s
}

// openBrlDrift takes a first balance snapshot, moves the provider's brl
// balance by -12.34 unexplained and runs the next check, which must open
// exactly one balance_drift finding; it returns that finding's ID.
func (e *env) openBrlDrift() int64 {
	e.t.Helper()
	e.run(e.rec.RunBalances)
	if err := e.fake.AdjustBalance("brl", "-12.34"); err != nil {
		e.t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	e.run(e.rec.RunBalances)
	fs := e.findings(store.FindingBalanceDrift, "open")
	if len(fs) != 1 {
		e.t.Fatalf("open findings = %+v", fs)
	}
	return fs[0].ID
}

// actOn takes action on finding id as the person "ana" would, with
// resolution where the action resolves it, and fails the test on error.
func (e *env) actOn(id int64, action, resolution string) store.Finding {
	e.t.Helper()
	f, err := e.st.ActOnFinding(e.t.Context(), store.FindingActionCmd{ID: id, Action: action, By: "ana",
		Note: action + " by finance", Resolution: resolution})
	if err != nil {
		e.t.Fatalf("%s: %v", action, err)
	}
	return f
}

// latestDrift returns the newest stored comparison of currency.
func (e *env) latestDrift(ccy string) store.BalanceDrift {
	e.t.Helper()
	ds, err := e.st.BalanceDrifts(e.t.Context(), ccy, time.Time{}, e.clock.Now().Add(time.Hour))
	if err != nil {
		e.t.Fatalf("balance drifts: %v", err)
	}
	if len(ds) == 0 {
		e.t.Fatalf("no balance comparison of %s stored", ccy)
	}
	return ds[len(ds)-1]
}

// metricValue returns the value of the sample of name whose labels include
// labels, or -1 when there is none.
func metricValue(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue metrics
				}
			}
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			case m.Gauge != nil:
				return m.GetGauge().GetValue()
			case m.Histogram != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return -1
}

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

func driftDetail(t *testing.T, raw json.RawMessage) reconcile.DriftDetail {
	t.Helper()
	var d reconcile.DriftDetail
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("drift detail %s: %v", raw, err)
	}
	return d
}

// withStatus is the fake's order mid as a webhook claiming status instead
// of the fake's own.
func withStatus(t *testing.T, e *env, mid string, status provider.Status) []byte {
	t.Helper()
	raw, _ := e.fake.OrderJSON(mid)
	var o provider.Order
	if err := json.Unmarshal(raw, &o); err != nil {
		t.Fatal(err)
	}
	o.Status = status
	if status == provider.StatusCompleted {
		o.Transactions[0].Status = provider.StatusCompleted
		o.Transactions[0].CompletedAt = provider.Time{Time: e.clock.Now()}
		o.MerchantTargetWallet = o.Transactions[0].MerchantWallet
	}
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
