// Package telemetry owns orderd's OpenTelemetry traces: it starts the OTLP
// exporter when an endpoint is configured, and it carries a span's context
// to and from the W3C traceparent text that the outbox and the replicated
// log keep with each event. With no endpoint nothing is started: the
// packages that trace take a nil trace.TracerProvider as "off" and make no
// span at all.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// EnvEndpoint is the standard variable naming an OTLP endpoint; orderd reads
// it when telemetry.otlp_endpoint is not set.
const EnvEndpoint = "OTEL_EXPORTER_OTLP_ENDPOINT"

// TracesPath is what an OTLP/HTTP endpoint's base URL is extended by to
// reach its traces, as the OpenTelemetry specification says of
// OTEL_EXPORTER_OTLP_ENDPOINT.
const TracesPath = "/v1/traces"

// TracesURL checks an OTLP/HTTP endpoint (a base URL such as
// http://collector:4318) and returns the URL spans are posted to: the base
// with TracesPath appended.
func TracesURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	switch {
	case err != nil:
		return "", fmt.Errorf("%q is not a URL: %v", endpoint, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("%q is not an http(s) URL (OTLP/HTTP, e.g. http://collector:4318)", endpoint)
	case u.Host == "":
		return "", fmt.Errorf("%q has no host", endpoint)
	case u.RawQuery != "" || u.Fragment != "":
		return "", fmt.Errorf("%q has a query or fragment; give the collector's base URL", endpoint)
	case u.User != nil:
		return "", fmt.Errorf("%q carries credentials in the URL; they would be logged", endpoint)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + TracesPath
	u.RawPath = ""
	return u.String(), nil
}

// Config says where spans go and who sends them.
type Config struct {
	// Endpoint is the OTLP/HTTP base URL; empty turns tracing off.
	Endpoint string
	// Service, Version and Instance become the resource's service.name,
	// service.version and service.instance.id.
	Service, Version, Instance string
	// BatchTimeout is how long spans wait to be sent together; zero is
	// the SDK's default (5s).
	BatchTimeout time.Duration
}

// Tracing is a running exporter. The nil *Tracing is tracing off: its
// Provider is nil and its Shutdown does nothing.
type Tracing struct {
	tp *sdktrace.TracerProvider
}

// Start starts the exporter for cfg, or returns nil (off) when
// cfg.Endpoint is empty. The exporter connects lazily: a collector that is
// down costs dropped spans, never a failed start.
func Start(ctx context.Context, cfg Config) (*Tracing, error) {
	if cfg.Endpoint == "" {
		return nil, nil
	}
	target, err := TracesURL(cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(target))
	if err != nil {
		return nil, fmt.Errorf("otlp exporter: %w", err)
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", cfg.Service)}
	if cfg.Version != "" {
		attrs = append(attrs, attribute.String("service.version", cfg.Version))
	}
	if cfg.Instance != "" {
		attrs = append(attrs, attribute.String("service.instance.id", cfg.Instance))
	}
	var bopts []sdktrace.BatchSpanProcessorOption
	if cfg.BatchTimeout > 0 {
		bopts = append(bopts, sdktrace.WithBatchTimeout(cfg.BatchTimeout))
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, bopts...),
		sdktrace.WithResource(resource.NewSchemaless(attrs...)),
	)
	return &Tracing{tp: tp}, nil
}

// Provider returns the tracer provider, nil when tracing is off.
func (t *Tracing) Provider() trace.TracerProvider {
	if t == nil {
		return nil
	}
	return t.tp
}

// Shutdown sends the spans still waiting and stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.tp.Shutdown(ctx)
}

// Tracer returns tp's tracer for a package, or nil when tp is nil (off).
func Tracer(tp trace.TracerProvider, name string) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(name)
}

// Traceparent returns the W3C traceparent of the span in ctx, or "" when
// ctx holds no valid span context (tracing off, or no span started).
func Traceparent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	return FormatTraceparent(sc)
}

// FormatTraceparent writes sc as a version 00 traceparent.
func FormatTraceparent(sc trace.SpanContext) string {
	var b [55]byte
	n := copy(b[:], "00-")
	tid, sid := sc.TraceID(), sc.SpanID()
	n += hexTo(b[n:], tid[:])
	b[n] = '-'
	n++
	n += hexTo(b[n:], sid[:])
	b[n] = '-'
	n++
	n += hexTo(b[n:], []byte{byte(sc.TraceFlags())})
	return string(b[:n])
}

func hexTo(dst, src []byte) int {
	const digits = "0123456789abcdef"
	for i, c := range src {
		dst[2*i], dst[2*i+1] = digits[c>>4], digits[c&0x0f]
	}
	return 2 * len(src)
}

// ValidTraceparent reports whether s has the form of a version 00
// traceparent: "00-", 32 lowercase hex digits, "-", 16, "-", 2.
func ValidTraceparent(s string) bool {
	if len(s) != 55 || s[:3] != "00-" || s[35] != '-' || s[52] != '-' {
		return false
	}
	for i := 3; i < len(s); i++ {
		if i == 35 || i == 52 {
			continue
		}
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ErrTraceparent is returned for text that is not a W3C traceparent.
var ErrTraceparent = errors.New("not a W3C traceparent")

// ParseTraceparent reads a traceparent into a remote span context.
func ParseTraceparent(s string) (trace.SpanContext, error) {
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": s})
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return trace.SpanContext{}, fmt.Errorf("%w: %q", ErrTraceparent, s)
	}
	return sc, nil
}

// ContextWithTraceparent returns ctx with the span context tp names as its
// remote parent; ctx unchanged when tp is empty or malformed (a bad value
// loses a link, never an event).
func ContextWithTraceparent(ctx context.Context, tp string) context.Context {
	if tp == "" {
		return ctx
	}
	sc, err := ParseTraceparent(tp)
	if err != nil {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// Extract returns ctx with the parent an incoming carrier (HTTP headers)
// names in traceparent/tracestate, when it names one.
func Extract(ctx context.Context, carrier propagation.TextMapCarrier) context.Context {
	return propagation.TraceContext{}.Extract(ctx, carrier)
}
