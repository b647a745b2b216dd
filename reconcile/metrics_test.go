package reconcile_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"orderd/provider"
	"orderd/provider/providertest"
	"orderd/reconcile"
	"orderd/store"
)

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t, envOptions{
		metrics: reconcile.NewMetrics(reg),
		fake:    providertest.Options{InitialBalances: map[string]string{"brl": "10.00"}},
		cfg:     reconcile.Config{DriftGrace: 1},
	})
	e.run(e.rec.RunStale)
	e.run(e.rec.RunBalances)
	if err := e.fake.AdjustBalance("brl", "1.00"); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	e.run(e.rec.RunBalances)
	if err := e.fake.InjectFault(providertest.Fault{Endpoint: providertest.PathBalances, Kind: providertest.FailBefore}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.rec.RunBalances(t.Context()); err == nil {
		t.Fatal("balances run against a failing provider succeeded")
	}
	// A stale run whose one poll fails finishes, but partially.
	e.createAtFake("polled", "5.00", provider.TypePayin)
	e.learn("polled", store.SourceGateway)
	e.clock.Advance(staleAfter + time.Second)
	if err := e.fake.InjectFault(providertest.Fault{Endpoint: providertest.PathGetStatus, Kind: providertest.FailBefore}); err != nil {
		t.Fatal(err)
	}
	if s := e.run(e.rec.RunStale); s.Result() != reconcile.ResultPartial {
		t.Fatalf("stale run with a failed poll: %s, want partial", s.Result())
	}

	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"orderd_reconcile_runs_total", map[string]string{"job": "stale", "result": "ok"}, 1},
		{"orderd_reconcile_runs_total", map[string]string{"job": "stale", "result": "partial"}, 1},
		{"orderd_reconcile_runs_total", map[string]string{"job": "balances", "result": "ok"}, 2},
		{"orderd_reconcile_runs_total", map[string]string{"job": "balances", "result": "error"}, 1},
		{"orderd_reconcile_run_seconds", map[string]string{"job": "balances"}, 3},
		{"orderd_reconcile_findings_open", map[string]string{"kind": store.FindingBalanceDrift}, 1},
		{"orderd_reconcile_findings_open", map[string]string{"kind": store.FindingStuckOrder}, 0},
		{"orderd_requisite_orders_recovered_total", nil, 0},
	}
	for _, c := range checks {
		if got := metricValue(t, reg, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}

	runs, err := e.st.ReconcileRuns(t.Context(), reconcile.JobBalances, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || !strings.Contains(runs[0].Error, "balances") {
		t.Fatalf("failed run recorded as %+v", runs)
	}
}

func TestMetrics_nilIsSafe(t *testing.T) {
	e := newEnv(t, envOptions{metrics: nil})
	e.run(e.rec.RunStale)
	// A nil registerer still gives working, unregistered collectors.
	m := reconcile.NewMetrics(nil)
	rec := reconcile.New(reconcile.Config{Now: e.clock.Now}, e.st, e.client, m)
	e.run(rec.RunDoubt)
}

func TestWriteSummaries(t *testing.T) {
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	var b bytes.Buffer
	err := reconcile.WriteSummaries(&b, []reconcile.Summary{
		{Job: "stale", StartedAt: start, FinishedAt: start.Add(1204 * time.Millisecond),
			Counts: map[string]int{"checked": 10, "changed": 3, "errors": 0}},
		{Job: "doubt", StartedAt: start, FinishedAt: start.Add(310 * time.Millisecond),
			Counts: map[string]int{"due": 4, "created": 2, "errors": 2}},
		{Job: "balances", StartedAt: start, FinishedAt: start.Add(51 * time.Millisecond),
			Counts: map[string]int{"currencies": 1}, Error: "balances: provider: AUTHENTICATION_FAILED"},
	})
	if err != nil {
		t.Fatal(err)
	}
	// A run whose items failed is not "ok", though it finished.
	want := "stale       ok        1.204s  changed=3 checked=10\n" +
		"doubt       partial   0.310s  created=2 due=4 errors=2\n" +
		"balances    failed    0.051s  currencies=1  error: balances: provider: AUTHENTICATION_FAILED\n"
	if b.String() != want {
		t.Fatalf("summary:\n%q\nwant\n%q", b.String(), want)
	}
}

func TestProgressBar(t *testing.T) {
	var b bytes.Buffer
	bar := reconcile.NewProgressBar(&b)
	ck := newClock()
	bar.Now = ck.Now
	bar.Update(reconcile.Progress{Job: "stale", Done: 0, Total: 4})
	ck.Advance(50 * time.Millisecond)
	bar.Update(reconcile.Progress{Job: "stale", Done: 1, Total: 4}) // within 100 ms: not drawn
	ck.Advance(100 * time.Millisecond)
	bar.Update(reconcile.Progress{Job: "stale", Done: 2, Total: 4})
	bar.Update(reconcile.Progress{Job: "stale", Done: 4, Total: 4}) // the end is always drawn
	bar.Update(reconcile.Progress{Job: "doubt", Done: 0})
	bar.Done()
	want := "\rstale      [------------------------] 0/4   0%" +
		"\rstale      [############------------] 2/4  50%" +
		"\rstale      [########################] 4/4 100%\n" +
		"\rdoubt      0 done\n"
	if b.String() != want {
		t.Fatalf("bar:\n%q\nwant\n%q", b.String(), want)
	}
}

func TestReconciler_Run(t *testing.T) {
	tests := []struct {
		job  string
		want []string
	}{
		{reconcile.JobAll, []string{"doubt", "stale", "requisites", "balances"}},
		{reconcile.JobStale, []string{"stale"}},
		{reconcile.JobBalances, []string{"balances"}},
	}
	for _, tt := range tests {
		t.Run(tt.job, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			sums, err := e.rec.Run(t.Context(), tt.job)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range sums {
				got = append(got, s.Job)
				if s.RunID == 0 || s.FinishedAt.Before(s.StartedAt) || s.Error != "" {
					t.Errorf("summary %+v", s)
				}
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("ran %v, want %v", got, tt.want)
			}
			runs, _ := e.st.ReconcileRuns(t.Context(), "", 10)
			if len(runs) != len(tt.want) {
				t.Fatalf("%d runs recorded, want %d", len(runs), len(tt.want))
			}
		})
	}
	e := newEnv(t, envOptions{})
	if _, err := e.rec.Run(t.Context(), "report"); err == nil || !strings.Contains(err.Error(), `unknown job "report"`) {
		t.Fatalf("Run(report) = %v", err)
	}
}
