package reconcile

import (
	"github.com/prometheus/client_golang/prometheus"

	"orderd/store"
)

// Metrics are the reconciler's Prometheus collectors. A nil *Metrics is
// valid and records nothing.
type Metrics struct {
	runs         *prometheus.CounterVec
	runSeconds   *prometheus.HistogramVec
	findingsOpen *prometheus.GaugeVec
	recovered    prometheus.Counter
}

// findingKinds are set to zero on every refresh, so a resolved kind's gauge
// drops to zero instead of keeping its last value.
var findingKinds = []string{
	store.FindingStuckOrder, store.FindingUnresolvedCreation, store.FindingMismatch,
	store.FindingBalanceDrift, store.FindingQuarantinedWebhook, FindingWatchNotFound,
	store.FindingAmountChanged, store.FindingEventNotPublished, store.FindingIdentityConflict,
}

// NewMetrics creates the collectors and registers them on reg (when not
// nil):
//
//	orderd_reconcile_runs_total{job,result}    runs by job and result (ok, partial, error)
//	orderd_reconcile_run_seconds{job}          run durations
//	orderd_reconcile_findings_open{kind}       open findings, refreshed after each run
//	orderd_requisite_orders_recovered_total    orders the requisite sweep found that no webhook brought
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orderd_reconcile_runs_total",
			Help: "Reconcile job runs by job and result (ok, error).",
		}, []string{"job", "result"}),
		runSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "orderd_reconcile_run_seconds",
			Help:    "Duration of reconcile job runs.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900},
		}, []string{"job"}),
		findingsOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "orderd_reconcile_findings_open",
			Help: "Open reconcile findings by kind, refreshed after each run.",
		}, []string{"kind"}),
		recovered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "orderd_requisite_orders_recovered_total",
			Help: "Orders the requisite sweep found that no webhook had brought.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.runs, m.runSeconds, m.findingsOpen, m.recovered)
	}
	return m
}

// observeRun counts a finished run by its result: ok, partial (it
// finished, but some items failed and wait for their backoff) or error.
func (m *Metrics) observeRun(s Summary) {
	if m == nil {
		return
	}
	result := s.Result()
	if result == ResultFailed {
		result = "error"
	}
	m.runs.WithLabelValues(s.Job, result).Inc()
	m.runSeconds.WithLabelValues(s.Job).Observe(s.Duration().Seconds())
}

func (m *Metrics) setFindings(open map[string]int) {
	if m == nil {
		return
	}
	for _, k := range findingKinds {
		m.findingsOpen.WithLabelValues(k).Set(float64(open[k]))
	}
	for k, n := range open {
		m.findingsOpen.WithLabelValues(k).Set(float64(n))
	}
}

func (m *Metrics) recoveredOrder() {
	if m == nil {
		return
	}
	m.recovered.Inc()
}
