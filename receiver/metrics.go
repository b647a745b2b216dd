package receiver

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes are the values of the outcome label of orderd_webhooks_total and
// the status word of the handler's JSON answers.
const (
	OutcomeAccepted    = "accepted"
	OutcomeDuplicate   = "duplicate"
	OutcomeStale       = "stale"
	OutcomeQuarantined = "quarantined"
	OutcomeBadSig      = "bad_signature"
	OutcomeForbidden   = "forbidden"
	OutcomeTooLarge    = "too_large"
	OutcomeOverloaded  = "overloaded"
	OutcomeUnavailable = "unavailable"
	OutcomeBadMethod   = "bad_method"
	OutcomeNotFound    = "not_found"
	OutcomeBadRequest  = "bad_request"
)

var allOutcomes = []string{
	OutcomeAccepted, OutcomeDuplicate, OutcomeStale, OutcomeQuarantined, OutcomeBadSig,
	OutcomeForbidden, OutcomeTooLarge, OutcomeOverloaded, OutcomeUnavailable, OutcomeBadMethod,
	OutcomeNotFound, OutcomeBadRequest,
}

// Metrics holds the receiver's Prometheus collectors. A nil *Metrics is
// valid and records nothing.
type Metrics struct {
	webhooks *prometheus.CounterVec
	// counters caches the child of each known outcome, sparing the label
	// lookup on every request.
	counters map[string]prometheus.Counter
	ack      prometheus.Histogram
}

// NewMetrics creates the receiver's collectors and registers them on reg:
// orderd_webhooks_total{outcome} and orderd_webhook_ack_seconds. Every
// outcome starts at zero so dashboards see the series before the first
// event. When reg already holds collectors of the same names, those are
// reused. A nil reg creates collectors that are not registered.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	webhooks := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "orderd_webhooks_total",
		Help: "Webhook deliveries by outcome.",
	}, []string{"outcome"})
	ack := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "orderd_webhook_ack_seconds",
		Help: "Time from receiving a webhook request to answering it.",
		// The provider gives up after 3 s; the interesting range is the
		// group-commit latency below that.
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2, 3, 5},
	})
	if reg != nil {
		var err error
		if webhooks, err = register(reg, webhooks); err != nil {
			return nil, err
		}
		if ack, err = register(reg, ack); err != nil {
			return nil, err
		}
	}
	counters := make(map[string]prometheus.Counter, len(allOutcomes))
	for _, o := range allOutcomes {
		counters[o] = webhooks.WithLabelValues(o)
	}
	return &Metrics{webhooks: webhooks, counters: counters, ack: ack}, nil
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, fmt.Errorf("register receiver metrics: %w", err)
}

func (m *Metrics) observe(outcome string, latency time.Duration) {
	if m == nil {
		return
	}
	c, ok := m.counters[outcome]
	if !ok {
		c = m.webhooks.WithLabelValues(outcome)
	}
	c.Inc()
	m.ack.Observe(latency.Seconds())
}
