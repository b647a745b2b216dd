package main

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// processMetrics are the daemon-level collectors that belong to no single
// package: the Go runtime and process collectors, the store's commit batch
// sizes, the outbox backlog, and the provider calls.
type processMetrics struct {
	commitBatch   prometheus.Histogram
	commitSeconds prometheus.Histogram
	providerCalls *prometheus.HistogramVec
}

// outboxStatser is what the backlog gauges read on each scrape.
type outboxStatser interface {
	OutboxStats(ctx context.Context) (backlog int64, oldest time.Time, err error)
}

func newProcessMetrics(reg *prometheus.Registry, outbox outboxStatser, now func() time.Time) *processMetrics {
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
	// Scraping must not hang on a busy database: each read gets a short bound.
	stats := func() (int64, time.Time) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		n, oldest, err := outbox.OutboxStats(ctx)
		if err != nil {
			return -1, time.Time{}
		}
		return n, oldest
	}
	backlog := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "orderd_outbox_backlog",
		Help: "Events committed but not yet acknowledged by NATS (-1 when the store cannot be read).",
	}, func() float64 { n, _ := stats(); return float64(n) })
	oldest := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "orderd_outbox_oldest_unpublished_seconds",
		Help: "Age of the oldest event not yet acknowledged by NATS; 0 when none waits.",
	}, func() float64 {
		_, t := stats()
		if t.IsZero() {
			return 0
		}
		return now().Sub(t).Seconds()
	})
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.commitBatch, m.commitSeconds, m.providerCalls, backlog, oldest,
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
