package receiver_test

import (
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"orderd/receiver"
)

// TestNewMetrics: every outcome is exported from the start, and a second
// handler on the same registry shares the collectors instead of failing.
func TestNewMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m1, err := receiver.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := receiver.NewMetrics(reg)
	if err != nil {
		t.Fatalf("second registration: %v", err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]int{}
	for _, mf := range mfs {
		series[mf.GetName()] = len(mf.GetMetric())
	}
	if series["orderd_webhooks_total"] != 12 {
		t.Errorf("orderd_webhooks_total series = %d, want one per outcome (12)", series["orderd_webhooks_total"])
	}
	if series["orderd_webhook_ack_seconds"] != 1 {
		t.Errorf("orderd_webhook_ack_seconds missing: %v", series)
	}

	// Both handlers count into the same series.
	f := newFixture(t, receiver.Config{})
	for _, m := range []*receiver.Metrics{m1, m2} {
		h := receiver.New(receiver.Config{}, receiver.Deps{Store: f.store, Verifier: newVerifier(t, f.key), Metrics: m})
		f.handler = h
		wantReply(t, f.do(request{method: http.MethodGet}), http.StatusMethodNotAllowed, receiver.OutcomeBadMethod)
	}
	f.reg = reg
	if got := f.counter(receiver.OutcomeBadMethod); got != 2 {
		t.Errorf("bad_method = %v, want 2", got)
	}

	// A handler without metrics works.
	f.handler = receiver.New(receiver.Config{}, receiver.Deps{Store: f.store, Verifier: newVerifier(t, f.key)})
	wantReply(t, f.do(request{method: http.MethodGet}), http.StatusMethodNotAllowed, receiver.OutcomeBadMethod)
}
