package publish_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"orderd/internal/telemetry"
	"orderd/provider"
	"orderd/publish"
	"orderd/store"
)

// TestRelay_Traceparent: events queued under a traced context carry its
// traceparent as the CloudEvent's attribute and as the NATS header, in an
// atomic batch (whose messages share one header map) as one by one, and
// untraced events beside them carry neither; with a tracer provider the
// relay makes one publish span per traced event, a child of the span the
// event names.
func TestRelay_Traceparent(t *testing.T) {
	for _, n := range []int{3, 30} { // one by one; one atomic batch
		t.Run(fmt.Sprint(n, " events"), func(t *testing.T) {
			e := startNATS(t, t.TempDir(), "127.0.0.1:0")
			_, js := connectJS(t, e.ClientURL())
			st, _ := openStore(t, store.Options{})
			want := map[string]string{} // merchantOrderId -> traceparent ("" untraced)
			for i := range n {
				o := newTestOrder("trace", i)
				raw := o.raw("processing", false)
				ord, err := provider.DecodeOrder(raw)
				if err != nil {
					t.Fatal(err)
				}
				ctx := t.Context()
				if i%2 == 0 {
					sc := trace.NewSpanContext(trace.SpanContextConfig{
						TraceID: trace.TraceID{1, byte(i)}, SpanID: trace.SpanID{2, byte(i)}, TraceFlags: trace.FlagsSampled,
					})
					ctx = trace.ContextWithSpanContext(ctx, sc)
				}
				want[o.mid] = telemetry.Traceparent(ctx)
				if _, err := st.Apply(ctx, store.Observation{Source: store.SourceWebhook, Order: ord, Raw: raw, ObservedAt: time.Now(),
					Delivery: &store.Delivery{RemoteAddr: "127.0.0.1:5555", Header: http.Header{"Signature": {"c2ln"}}}}); err != nil {
					t.Fatal(err)
				}
			}
			spans := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
			defer tp.Shutdown(t.Context())
			runRelay(t, newRelay(t, publish.RelayConfig{Stream: &publish.StreamConfig{}, TracerProvider: tp}, st, js))
			waitFor(t, 20*time.Second, "the outbox to drain", func() bool { return backlog(t, st) == 0 })

			msgs := streamMsgs(t, js, "ORDERD")
			if len(msgs) != n {
				t.Fatalf("%d events on the stream, want %d", len(msgs), n)
			}
			batched := 0
			for _, m := range msgs {
				var ev struct{ ID, MerchantOrderID, Traceparent string }
				if err := json.Unmarshal(m.Data(), &ev); err != nil {
					t.Fatal(err)
				}
				if m.Headers().Get("Nats-Batch-Id") != "" {
					batched++
				}
				if ev.Traceparent != want[ev.MerchantOrderID] || m.Headers().Get("traceparent") != want[ev.MerchantOrderID] {
					t.Errorf("%s: attribute %q, header %q; want %q", ev.MerchantOrderID, ev.Traceparent, m.Headers().Get("traceparent"), want[ev.MerchantOrderID])
				}
			}
			if (n >= 16) != (batched == n) {
				t.Errorf("%d of %d events went in an atomic batch", batched, n)
			}

			parents := map[string]bool{}
			for _, tp := range want {
				if tp != "" {
					parents[tp] = true
				}
			}
			got := 0
			for _, s := range spans.GetSpans() {
				if s.Name != "publish" {
					continue
				}
				got++
				parent := telemetry.FormatTraceparent(s.Parent)
				if !parents[parent] || s.SpanContext.TraceID() != s.Parent.TraceID() {
					t.Errorf("publish span's parent %s is no traced event's", parent)
				}
				delete(parents, parent)
			}
			if got != (n+1)/2 || len(parents) != 0 {
				t.Errorf("%d publish spans, want one for each of the %d traced events", got, (n+1)/2)
			}
		})
	}
}
