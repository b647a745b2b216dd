package receiver_test

import (
	"log/slog"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"orderd/internal/telemetry"
	"orderd/receiver"
)

// TestHandler_Tracing: with a tracer, a webhook is a span whose children
// are its signature check and its commit, and the event it queues keeps
// the commit span's traceparent; a webhook whose signature does not verify
// is a span with a failed check, no commit, and nothing stored.
func TestHandler_Tracing(t *testing.T) {
	f := newFixture(t, receiver.Config{})
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	t.Cleanup(func() { tp.Shutdown(t.Context()) })
	f.handler = receiver.New(receiver.Config{}, receiver.Deps{
		Store: f.store, Verifier: newVerifier(t, f.key), Logger: slog.New(slog.DiscardHandler),
		Tracer: tp.Tracer("orderd/receiver"),
	})
	byName := func() map[string]sdktrace.ReadOnlySpan {
		m := map[string]sdktrace.ReadOnlySpan{}
		for _, s := range spans.GetSpans().Snapshots() {
			m[s.Name()] = s
		}
		return m
	}

	t.Run("accepted", func(t *testing.T) {
		spans.Reset()
		o := newOrder(1, "processing")
		wantReply(t, f.post(o.JSON()), http.StatusOK, receiver.OutcomeAccepted)
		got := byName()
		hook, verify, commit := got["webhook"], got["webhook.verify"], got["webhook.commit"]
		if hook == nil || verify == nil || commit == nil || len(got) != 3 {
			t.Fatalf("spans %v, want webhook, webhook.verify, webhook.commit", got)
		}
		if hook.Parent().IsValid() || verify.Parent().SpanID() != hook.SpanContext().SpanID() ||
			commit.Parent().SpanID() != hook.SpanContext().SpanID() {
			t.Error("verify and commit are not the children of the webhook's root span")
		}
		evs, err := f.store.PendingEvents(t.Context(), 0, 10)
		if err != nil || len(evs) != 1 {
			t.Fatalf("events %v, %v", evs, err)
		}
		if want := telemetry.FormatTraceparent(commit.SpanContext()); evs[0].Traceparent != want {
			t.Errorf("event traceparent %q, want the commit span's %q", evs[0].Traceparent, want)
		}
	})

	t.Run("bad signature", func(t *testing.T) {
		spans.Reset()
		before := f.count("deliveries", "1")
		o := newOrder(2, "processing")
		rec := f.do(request{body: o.JSON(), sig: sign(t, f.key, []byte("another body"))})
		wantReply(t, rec, http.StatusUnauthorized, receiver.OutcomeBadSig)
		got := byName()
		if got["webhook.commit"] != nil || got["webhook.verify"] == nil || got["webhook.verify"].Status().Code != codes.Error {
			t.Errorf("spans %v: want a failed webhook.verify and no commit", got)
		}
		if after := f.count("deliveries", "1"); after != before {
			t.Errorf("deliveries %d -> %d: a bad signature stored something", before, after)
		}
	})
}
