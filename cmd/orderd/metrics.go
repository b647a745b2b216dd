package main

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// processMetrics are the daemon-level collectors that belong to no single
// package: the Go runtime and process collectors, the store's commit batch
// sizes and the provider calls. The outbox backlog is the relay's.
type processMetrics struct {
	commitBatch   prometheus.Histogram
	commitSeconds prometheus.Histogram
	providerCalls *prometheus.HistogramVec
}

func newProcessMetrics(reg *prometheus.Registry) *processMetrics {
	m := &processMetrics{
		commitBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "orderd_store_commit_batch_size",
			Help:    "Writes committed together in one transaction by the store's writer.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
		}),
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "orderd_store_commit_seconds",
			Help:    "Duration of one group-commit transaction, fsync included.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		providerCalls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "orderd_provider_call_seconds",
			Help:    "Calls to the provider by endpoint and outcome (ok, error, in_doubt).",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
		}, []string{"endpoint", "outcome"}),
	}
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.commitBatch, m.commitSeconds, m.providerCalls,
	)
	return m
}

// onCommit is the store's OnCommit hook.
func (m *processMetrics) onCommit(batch int, d time.Duration) {
	m.commitBatch.Observe(float64(batch))
	m.commitSeconds.Observe(d.Seconds())
}

// observeProvider is the provider client's Observe hook.
func (m *processMetrics) observeProvider(endpoint, outcome string, d time.Duration) {
	m.providerCalls.WithLabelValues(endpoint, outcome).Observe(d.Seconds())
}
