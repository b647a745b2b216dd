package publish

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"orderd/internal/telemetry"
)

// headerTraceparent is the NATS header that carries a traced event's W3C
// traceparent, beside the CloudEvent's traceparent attribute, so that a
// consumer can continue the trace without parsing the payload.
const headerTraceparent = "traceparent"

// publishSpan starts the publish span of a traced event, a child of the
// span that caused it; nil when tracing is off or the event was not
// traced (a span of its own, in no trace, would tell nobody anything).
func (r *Relay) publishSpan(ctx context.Context, e encoded) trace.Span {
	if r.tracer == nil || e.ev.Traceparent == "" {
		return nil
	}
	pctx := telemetry.ContextWithTraceparent(ctx, e.ev.Traceparent)
	_, sp := r.tracer.Start(pctx, "publish", trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			attribute.String("messaging.system", "nats"),
			attribute.String("messaging.destination.name", e.subject),
			attribute.String("messaging.message.id", e.ev.ID),
			attribute.String("cloudevents.event_id", e.ev.ID),
			attribute.String("cloudevents.event_type", e.ev.Type),
			attribute.String("orderd.order_id", e.ev.EventSubject),
		))
	return sp
}

// endPublishSpan ends sp (when not nil) with the publication's outcome.
func endPublishSpan(sp trace.Span, ack *jetstream.PubAck, err error) {
	if sp == nil {
		return
	}
	switch {
	case err != nil:
		sp.SetStatus(codes.Error, err.Error())
	case ack != nil:
		sp.SetAttributes(attribute.Int64("orderd.stream_seq", int64(ack.Sequence)),
			attribute.Bool("orderd.duplicate", ack.Duplicate))
	}
	sp.End()
}

// endPublishSpans ends the spans of a batch that failed.
func endPublishSpans(spans []trace.Span, err error) {
	for _, sp := range spans {
		endPublishSpan(sp, nil, err)
	}
}
