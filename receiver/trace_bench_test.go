package receiver_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"orderd/internal/telemetry"
	"orderd/receiver"
	"orderd/store"
)

// BenchmarkReceiverTracing is BenchmarkReceiver's stored phase twice, in
// alternating rounds: with tracing off (no tracer, as orderd runs without
// telemetry.otlp_endpoint) and with tracing on (the OpenTelemetry SDK
// exporting every span over OTLP/HTTP to an endpoint on loopback that
// reads and drops them). Each phase has its own database. It reports both
// rates and on/off; the cost of tracing off against a build without
// tracing is measured by running BenchmarkReceiver of both builds
// interleaved (BENCHMARKS.md).
func BenchmarkReceiverTracing(b *testing.B) {
	key, _ := testKeys(b)
	verifier := newVerifier(b, key)
	corpus := &signedCorpus{key: key}

	b.Run(fmt.Sprintf("senders=%d", benchSenders), func(b *testing.B) {
		plan, unique := requestPlan(b.N)
		corpus.grow(b, unique)
		b.StopTimer()

		var exported atomic.Int64
		collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n, _ := io.Copy(io.Discard, r.Body)
			exported.Add(n)
			w.Header().Set("Content-Type", "application/x-protobuf")
		}))
		defer collector.Close()
		tr, err := telemetry.Start(b.Context(), telemetry.Config{Endpoint: collector.URL, Service: "orderd-bench"})
		if err != nil {
			b.Fatal(err)
		}
		defer tr.Shutdown(context.Background())

		open := func(name string) *store.Store {
			st, err := store.Open(b.Context(), filepath.Join(b.TempDir(), name), store.Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { st.Close(context.Background()) })
			return st
		}
		off := startTarget(b, receiver.New(receiver.Config{}, receiver.Deps{
			Store: open("off.db"), Verifier: verifier, Logger: slog.New(slog.DiscardHandler),
		}))
		on := startTarget(b, receiver.New(receiver.Config{}, receiver.Deps{
			Store: open("on.db"), Verifier: verifier, Logger: slog.New(slog.DiscardHandler),
			Tracer: telemetry.Tracer(tr.Provider(), "orderd/receiver"),
		}))

		offRes, onRes := newLoadResult(len(plan)), newLoadResult(len(plan))
		const rounds = 4
		b.StartTimer()
		for r := range rounds {
			lo, hi := r*len(plan)/rounds, (r+1)*len(plan)/rounds
			off.send(b, corpus, plan, lo, hi, &offRes)
			on.send(b, corpus, plan, lo, hi, &onRes)
		}
		b.StopTimer()
		if err := tr.Shutdown(context.Background()); err != nil {
			b.Fatal(err)
		}
		if offRes.non200 > 0 || onRes.non200 > 0 {
			b.Logf("non-200 answers: off %d, on %d", offRes.non200, onRes.non200)
		}
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(offRes.rate(), "off_webhooks/s")
		b.ReportMetric(offRes.percentile(99), "off_p99_ms")
		b.ReportMetric(onRes.rate(), "on_webhooks/s")
		b.ReportMetric(onRes.percentile(99), "on_p99_ms")
		b.ReportMetric(onRes.rate()/offRes.rate(), "on/off")
		b.ReportMetric(float64(exported.Load())/float64(len(plan)), "otlp_bytes/webhook")
	})
}

// BenchmarkHandler_ServeHTTPTraced is BenchmarkHandler_ServeHTTP with
// tracing on: the OpenTelemetry SDK makes the webhook's three spans and
// hands them to a batch processor whose exporter drops them, so the
// figure is the spans' cost in the handler, not the export's.
func BenchmarkHandler_ServeHTTPTraced(b *testing.B) {
	key, _ := testKeys(b)
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	defer tp.Shutdown(context.Background())
	h := receiver.New(receiver.Config{}, receiver.Deps{
		Store: discardStore{}, Verifier: newVerifier(b, key), Logger: slog.New(slog.DiscardHandler),
		Tracer: tp.Tracer("orderd/receiver"),
	})
	body := newOrder(1, "completed").JSON()
	sig := sign(b, key, body)
	rd := bytes.NewReader(body)
	req, err := http.NewRequestWithContext(b.Context(), http.MethodPost, receiver.DefaultPath, io.NopCloser(rd))
	if err != nil {
		b.Fatal(err)
	}
	req.RemoteAddr = "203.0.113.7:40312"
	req.ContentLength = int64(len(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Signature", sig)
	w := &discardWriter{header: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(body)
		clear(w.header)
		h.ServeHTTP(w, req)
		if w.code != http.StatusOK {
			b.Fatalf("status %d", w.code)
		}
	}
}
