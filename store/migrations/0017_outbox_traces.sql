-- 0017: the traceparent of each traced event, beside the outbox.
--
-- With tracing on (telemetry.otlp_endpoint), an event carries the W3C
-- traceparent of the webhook, job or gateway creation that caused it. It is
-- kept here rather than in the outbox row: it is telemetry, not state, so
-- the replicas' digests (which read the outbox) do not depend on whether an
-- instance traced, and with tracing off nothing is written here at all. A
-- row goes when its event is pruned.
CREATE TABLE outbox_traces (
	seq         INTEGER PRIMARY KEY,
	traceparent TEXT NOT NULL
);
