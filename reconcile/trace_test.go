package reconcile_test

import (
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"orderd/internal/telemetry"
	"orderd/provider"
	"orderd/reconcile"
	"orderd/store"
)

// TestReconciler_Tracing: with a tracer provider each run is a span
// (reconcile.<job>), and the events a run queues carry its traceparent.
func TestReconciler_Tracing(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() { tp.Shutdown(t.Context()) })
	e := newEnv(t, envOptions{cfg: reconcile.Config{TracerProvider: tp}})
	e.createAtFake("traced", "10.00", provider.TypePayin)
	e.learn("traced", store.SourceGateway)
	if err := e.fake.Complete("traced"); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(staleAfter + time.Second)
	e.run(e.rec.RunStale)

	var run sdktrace.ReadOnlySpan
	for _, s := range spans.GetSpans().Snapshots() {
		if s.Name() == "reconcile.stale" {
			run = s
		}
	}
	if run == nil {
		t.Fatal("no reconcile.stale span")
	}
	evs := e.eventsOf("order.completed", "traced")
	if len(evs) != 1 {
		t.Fatalf("%d order.completed events, want 1", len(evs))
	}
	if want := telemetry.FormatTraceparent(run.SpanContext()); evs[0].Traceparent != want {
		t.Errorf("the polled event's traceparent %q, want the run's %q", evs[0].Traceparent, want)
	}
}
