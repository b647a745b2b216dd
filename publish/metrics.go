package publish

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the publishing side's Prometheus collectors. A nil *Metrics is
// valid and records nothing, so every part of the package takes one
// optionally.
type Metrics struct {
	published  prometheus.Counter
	duplicates prometheus.Counter
	errors     *prometheus.CounterVec
	connected  prometheus.Gauge
	backlog    prometheus.Gauge
	oldestAge  prometheus.Gauge
	pruned     prometheus.Counter
}

// Kinds of publish errors, the "kind" label of orderd_publish_errors_total.
const (
	errKindNATS    = "nats"    // the publish call or its ack failed
	errKindTimeout = "timeout" // no ack within the publish timeout
	errKindStore   = "store"   // reading or marking the outbox failed
	errKindInvalid = "invalid" // a row that can never be published
)

// NewMetrics creates the collectors and registers them on reg. With a nil
// reg it returns nil: no metrics.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &Metrics{
		published: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "orderd_publish_events_total",
			Help: "Outbox events acknowledged by JetStream (duplicates included).",
		}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "orderd_publish_duplicates_total",
			Help: "Outbox events JetStream acknowledged as duplicates of an earlier publication.",
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "orderd_publish_errors_total",
			Help: "Publish failures by kind (nats, timeout, store, invalid).",
		}, []string{"kind"}),
		connected: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "orderd_nats_connected",
			Help: "1 while the NATS connection is up, else 0.",
		}),
		backlog: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "orderd_outbox_backlog",
			Help: "Outbox events not yet published.",
		}),
		oldestAge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "orderd_outbox_oldest_age_seconds",
			Help: "Age of the oldest unpublished outbox event; 0 when none.",
		}),
		pruned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "orderd_outbox_pruned_total",
			Help: "Published outbox rows deleted after the retention.",
		}),
	}
	for _, kind := range []string{errKindNATS, errKindTimeout, errKindStore, errKindInvalid} {
		m.errors.WithLabelValues(kind)
	}
	for _, c := range []prometheus.Collector{m.published, m.duplicates, m.errors, m.connected, m.backlog, m.oldestAge, m.pruned} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register publish metrics: %w", err)
		}
	}
	return m, nil
}

func (m *Metrics) ack(duplicate bool) {
	if m == nil {
		return
	}
	m.published.Inc()
	if duplicate {
		m.duplicates.Inc()
	}
}

func (m *Metrics) failure(kind string) {
	if m == nil {
		return
	}
	m.errors.WithLabelValues(kind).Inc()
}

func (m *Metrics) setConnected(up bool) {
	if m == nil {
		return
	}
	if up {
		m.connected.Set(1)
	} else {
		m.connected.Set(0)
	}
}

func (m *Metrics) setBacklog(n int64, oldestAge float64) {
	if m == nil {
		return
	}
	m.backlog.Set(float64(n))
	m.oldestAge.Set(oldestAge)
}

func (m *Metrics) prunedRows(n int64) {
	if m == nil {
		return
	}
	m.pruned.Add(float64(n))
}
