package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"runtime/debug"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"orderd/api"
	"orderd/internal/telemetry"
	"orderd/provider"
	"orderd/reconcile"
)

// startTracing starts the OTLP exporter when telemetry.otlp_endpoint (or
// OTEL_EXPORTER_OTLP_ENDPOINT, resolved into it when the config was
// loaded) is set; otherwise it starts nothing and returns nil, which every
// part takes as tracing off.
func startTracing(ctx context.Context, cfg *Config) (*telemetry.Tracing, error) {
	if cfg.Telemetry.OTLPEndpoint == "" {
		return nil, nil
	}
	instance := cfg.Cluster.Node
	if instance == "" {
		instance, _ = os.Hostname()
	}
	info, _ := debug.ReadBuildInfo()
	t, err := telemetry.Start(ctx, telemetry.Config{
		Endpoint: cfg.Telemetry.OTLPEndpoint,
		Service:  "orderd",
		Version:  versionInfo(version, commit, info).Version,
		Instance: instance,
	})
	if err != nil {
		return nil, cfg.errorf("telemetry.otlp_endpoint", "%v", err)
	}
	return t, nil
}

// tracedProvider makes a span of each provider call that reconcile jobs
// and the gateway make, named after the endpoint, with the order's ids.
type tracedProvider struct {
	next   *provider.Client
	tracer trace.Tracer
}

var (
	_ reconcile.Client = tracedProvider{}
	_ api.Provider     = tracedProvider{}
)

// withTracing wraps c when tracing is on.
func withTracing(c *provider.Client, tp trace.TracerProvider) interface {
	reconcile.Client
	api.Provider
} {
	if tp == nil {
		return c
	}
	return tracedProvider{next: c, tracer: tp.Tracer("orderd/provider")}
}

// start starts the span of a call to endpoint. The order's ids go on the
// caller's span too (a gateway request's), which knows them only here.
func (p tracedProvider) start(ctx context.Context, endpoint string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	trace.SpanFromContext(ctx).SetAttributes(attrs...)
	return p.tracer.Start(ctx, "provider "+endpoint, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(append(attrs, attribute.String("orderd.provider.endpoint", endpoint))...))
}

func endCall(span trace.Span, o *provider.Order, err error) {
	if o != nil {
		span.SetAttributes(attribute.String("orderd.order_id", o.ID), attribute.String("orderd.status", string(o.Status)))
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

func moid(id string) attribute.KeyValue { return attribute.String("orderd.merchant_order_id", id) }

func (p tracedProvider) GetStatus(ctx context.Context, merchantOrderID string) (*provider.Order, json.RawMessage, error) {
	ctx, span := p.start(ctx, provider.EndpointGetStatus, moid(merchantOrderID))
	o, raw, err := p.next.GetStatus(ctx, merchantOrderID)
	endCall(span, o, err)
	return o, raw, err
}

func (p tracedProvider) Balances(ctx context.Context) ([]provider.Balance, error) {
	ctx, span := p.start(ctx, provider.EndpointBalances)
	bs, err := p.next.Balances(ctx)
	endCall(span, nil, err)
	return bs, err
}

func (p tracedProvider) RequisiteOrders(ctx context.Context, req provider.RequisiteOrdersRequest) ([]provider.RawOrder, error) {
	ctx, span := p.start(ctx, provider.EndpointRequisiteOrders)
	os, err := p.next.RequisiteOrders(ctx, req)
	endCall(span, nil, err)
	return os, err
}

func (p tracedProvider) CreatePayment(ctx context.Context, req provider.PaymentRequest) (*provider.Order, json.RawMessage, error) {
	ctx, span := p.start(ctx, provider.EndpointPaymentCreate, moid(req.MerchantOrderID))
	o, raw, err := p.next.CreatePayment(ctx, req)
	endCall(span, o, err)
	return o, raw, err
}

func (p tracedProvider) CreateWithdrawal(ctx context.Context, req json.RawMessage) (json.RawMessage, error) {
	var ids struct {
		MerchantOrderID string `json:"merchantOrderId"`
	}
	_ = json.Unmarshal(req, &ids) // only for the span's attribute
	ctx, span := p.start(ctx, provider.EndpointWithdrawalCreate, moid(ids.MerchantOrderID))
	raw, err := p.next.CreateWithdrawal(ctx, req)
	endCall(span, nil, err)
	return raw, err
}

func (p tracedProvider) CreateRefund(ctx context.Context, req provider.RefundRequest) (*provider.Order, json.RawMessage, error) {
	ctx, span := p.start(ctx, provider.EndpointRefundCreate, moid(req.MerchantOrderID), attribute.String("orderd.order_id", req.ID))
	o, raw, err := p.next.CreateRefund(ctx, req)
	endCall(span, o, err)
	return o, raw, err
}

func (p tracedProvider) CreateRequisite(ctx context.Context, req provider.RequisiteRequest) (*provider.Requisite, json.RawMessage, error) {
	ctx, span := p.start(ctx, provider.EndpointRequisiteCreate)
	r, raw, err := p.next.CreateRequisite(ctx, req)
	endCall(span, nil, err)
	return r, raw, err
}

func (p tracedProvider) DeactivateRequisite(ctx context.Context, id string) (json.RawMessage, error) {
	ctx, span := p.start(ctx, provider.EndpointRequisiteDeactivate, attribute.String("orderd.requisite_id", id))
	raw, err := p.next.DeactivateRequisite(ctx, id)
	endCall(span, nil, err)
	return raw, err
}

// gatewayPaths are the admin API's creations: each request is a span, the
// parent of its provider call and of the events its outcome queues.
var gatewayPaths = map[string]string{
	"/v1/payins":     "gateway payin",
	"/v1/payouts":    "gateway payout",
	"/v1/refunds":    "gateway refund",
	"/v1/requisites": "gateway requisite",
}

// traceGateway wraps the admin handler so that each gateway creation is a
// span; other requests pass untouched.
func traceGateway(next http.Handler, tp trace.TracerProvider) http.Handler {
	if tp == nil {
		return next
	}
	tracer := tp.Tracer("orderd/api")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := gatewayPaths[r.URL.Path]
		if !ok || r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		ctx := telemetry.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer))
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(sw, r.WithContext(ctx))
		span.SetAttributes(attribute.Int("http.response.status_code", sw.code))
		if sw.code >= 500 {
			span.SetStatus(codes.Error, http.StatusText(sw.code))
		}
		span.End()
	})
}

// statusWriter remembers the status a handler answered.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
