package cluster

import "github.com/prometheus/client_golang/prometheus"

// metrics are a node's Prometheus collectors.
type metrics struct {
	leader         prometheus.Gauge
	applied        prometheus.Gauge
	lag            prometheus.Gauge
	snapshotSeq    prometheus.Gauge
	appendSeconds  prometheus.Histogram
	appendErrors   prometheus.Counter
	applyErrors    prometheus.Counter
	snapshotErrors prometheus.Counter
	foreignEntries prometheus.Counter
	verifyFailures prometheus.Counter
	// digestMismatch is 1 while instances' digests at a checkpoint
	// differ.
	digestMismatch prometheus.Gauge
	agreedSeq      prometheus.Gauge
	// snapshotUploaded counts what snapshots wrote to the snapshot
	// store, against orderd_snapshot_seq's database: the cost of
	// snapshots as the database grows.
	snapshotUploaded prometheus.Counter
	// logVersion is the log version in force (the form every instance
	// writes).
	logVersion prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "orderd_cluster_leader",
			Help: "1 while this instance holds the leader lease (runs the relay and the jobs), else 0."}),
		applied: prometheus.NewGauge(prometheus.GaugeOpts{Name: "orderd_log_applied_seq",
			Help: "Last replicated log sequence this instance applied to its database."}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{Name: "orderd_log_lag",
			Help: "Log entries appended but not yet applied by this instance."}),
		snapshotSeq: prometheus.NewGauge(prometheus.GaugeOpts{Name: "orderd_snapshot_seq",
			Help: "Log sequence of the last snapshot this instance wrote."}),
		appendSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "orderd_log_append_seconds",
			Help:    "Time to append one entry to the replicated log (until the quorum's ack).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		appendErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "orderd_log_append_errors_total",
			Help: "Appends to the replicated log that failed (callers answered 503)."}),
		applyErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "orderd_log_apply_errors_total",
			Help: "Failed attempts to apply a log entry to the local database (retried)."}),
		snapshotErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "orderd_snapshot_errors_total",
			Help: "Snapshots the leader failed to write."}),
		foreignEntries: prometheus.NewCounter(prometheus.CounterOpts{Name: "orderd_log_foreign_entries_total",
			Help: "Log entries of another log (appended by an instance following a replaced log) skipped unapplied."}),
		verifyFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "orderd_log_verify_failures_total",
			Help: "Times the log failed verification (a gap, an entry that does not chain, an entry replaced or gone, a log below the applied sequence); the applier stops on the first."}),
		digestMismatch: prometheus.NewGauge(prometheus.GaugeOpts{Name: "orderd_replica_digest_mismatch",
			Help: "1 while the state digests of two instances at the same log sequence differ, else 0."}),
		agreedSeq: prometheus.NewGauge(prometheus.GaugeOpts{Name: "orderd_replica_agreed_seq",
			Help: "Last log sequence at which every instance's state digest matched."}),
		snapshotUploaded: prometheus.NewCounter(prometheus.CounterOpts{Name: "orderd_snapshot_uploaded_bytes_total",
			Help: "Bytes this instance's snapshots wrote to the snapshot store (changed chunks and manifests)."}),
		logVersion: prometheus.NewGauge(prometheus.GaugeOpts{Name: "orderd_log_version",
			Help: "Log version in force: the form of entry every instance writes, raised once every instance that follows the log reads a newer one."}),
	}
	if reg != nil {
		reg.MustRegister(m.leader, m.applied, m.lag, m.snapshotSeq, m.appendSeconds, m.appendErrors, m.applyErrors, m.snapshotErrors,
			m.foreignEntries, m.snapshotUploaded, m.verifyFailures, m.digestMismatch, m.agreedSeq, m.logVersion)
	}
	return m
}
