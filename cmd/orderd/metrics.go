package main

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"orderd/store"
)

// processMetrics are the daemon-level collectors that belong to no single
// package: the Go runtime and process collectors, the store's commit batch
// sizes and the provider calls. The outbox backlog is the relay's.
type processMetrics struct {
	commitBatch   prometheus.Histogram
	commitSeconds prometheus.Histogram
	providerCalls *prometheus.HistogramVec
}

func newProcessMetrics(reg *prometheus.Registry, storeStats func() store.Stats) *processMetrics {
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
	// The writer's own counters, read when scraped.
	for _, c := range []struct {
		result string
		read   func(store.Stats) uint64
	}{
		{"committed", func(st store.Stats) uint64 { return st.Writes }},
		{"failed", func(st store.Stats) uint64 { return st.Failed }},
		{"refused", func(st store.Stats) uint64 { return st.Refused }},
		{"overloaded", func(st store.Stats) uint64 { return st.Overloaded }},
		{"expired", func(st store.Stats) uint64 { return st.Expired }},
	} {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "orderd_store_writes_total",
			Help:        "Writes by result: committed, failed (their own error or a failed commit), refused (an order identity or idempotency key conflict, nothing written), overloaded (turned away, queue full), expired (caller gone before the writer reached them).",
			ConstLabels: prometheus.Labels{"result": c.result},
		}, func() float64 { return float64(c.read(storeStats())) }))
	}
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "orderd_store_batch_reruns_total",
		Help: "Batches run a second time with a savepoint per write because one of their writes failed.",
	}, func() float64 { return float64(storeStats().Reruns) }))
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
