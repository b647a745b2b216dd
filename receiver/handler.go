package receiver

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"orderd/internal/telemetry"
	"orderd/provider"
	"orderd/store"
)

// Defaults for the zero values of Config.
const (
	DefaultPath         = "/webhooks/orders"
	DefaultMaxBodyBytes = 1 << 20
	DefaultAckBudget    = 2 * time.Second
)

// Poll hints read from unverified bodies are limited to this rate, so that a
// flood of forged webhooks cannot keep the store's writer busy with them.
const (
	pollHintRate  = 10
	pollHintBurst = 50
)

// Config is the receiver's part of the configuration. Zero values take the
// defaults above.
type Config struct {
	// Path is the URL path webhooks are posted to.
	Path string
	// AllowedIPs lists the networks webhooks may come from; empty allows
	// every address.
	AllowedIPs []netip.Prefix
	// TrustedProxies lists the reverse proxies whose X-Forwarded-For is
	// believed. A request from any other peer is judged by the peer's own
	// address.
	TrustedProxies []netip.Prefix
	// MaxBodyBytes caps the body; a longer one is answered 413.
	MaxBodyBytes int64
	// AckBudget bounds the time from having read a request's body to the
	// store's commit; past it the answer is 503 so the provider retries.
	AckBudget time.Duration
	// LogRoutine logs accepted and repeated webhooks at info rather than
	// debug, for a person watching (the sandbox). Off, a deployment logs
	// only what needs a look: the store and the metrics keep the routine.
	LogRoutine bool
}

// Store is what the handler needs of the store: the one write path for
// order states, the quarantine for signed bodies that are not orders, and
// a way to ask the reconciler to poll an order.
type Store interface {
	Apply(ctx context.Context, obs store.Observation) (store.Result, error)
	Quarantine(ctx context.Context, q store.QuarantinedWebhook) error
	MarkForPoll(ctx context.Context, merchantOrderID, reason string) error
}

// Verifier checks a webhook's Signature header against its raw body.
type Verifier interface {
	Verify(body []byte, signature string) error
}

// Deps are the handler's collaborators. Store and Verifier are required;
// Logger defaults to discarding, Now to time.Now, and a nil Metrics records
// nothing. The handler adds no component tag of its own: the caller passes
// a Logger tagged as it wants (orderd: component=receiver), so no line
// carries the key twice.
type Deps struct {
	Store    Store
	Verifier Verifier
	Logger   *slog.Logger
	Now      func() time.Time
	Metrics  *Metrics
	// Tracer makes a span of each webhook, with the signature check and
	// the commit as its children; nil (tracing off) makes none.
	Tracer trace.Tracer
}

// Handler is the webhook endpoint. It is safe for concurrent use, and its
// verifier and address lists may be replaced while it serves.
type Handler struct {
	path    string
	maxBody int64
	budget  time.Duration
	store   Store
	log     *slog.Logger
	now     func() time.Time
	metrics *Metrics
	tracer  trace.Tracer
	hints   *rate.Limiter
	// routine is the level of accepted and repeated webhooks' lines.
	routine slog.Level

	verifier atomic.Pointer[verifierBox]
	allowed  atomic.Pointer[[]netip.Prefix]
	trusted  atomic.Pointer[[]netip.Prefix]
}

// verifierBox lets an interface value live behind an atomic.Pointer.
type verifierBox struct{ v Verifier }

var _ http.Handler = (*Handler)(nil)

// New returns the webhook handler. It panics when deps.Store is nil, which is
// a wiring mistake rather than a run-time condition.
func New(cfg Config, deps Deps) *Handler {
	if deps.Store == nil {
		panic("receiver: New needs a Store")
	}
	h := &Handler{
		path:    cfg.Path,
		maxBody: cfg.MaxBodyBytes,
		budget:  cfg.AckBudget,
		store:   deps.Store,
		log:     deps.Logger,
		now:     deps.Now,
		metrics: deps.Metrics,
		tracer:  deps.Tracer,
		hints:   rate.NewLimiter(pollHintRate, pollHintBurst),
		routine: slog.LevelDebug,
	}
	if cfg.LogRoutine {
		h.routine = slog.LevelInfo
	}
	if h.path == "" {
		h.path = DefaultPath
	}
	if h.maxBody <= 0 {
		h.maxBody = DefaultMaxBodyBytes
	}
	if h.budget <= 0 {
		h.budget = DefaultAckBudget
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.now == nil {
		h.now = time.Now
	}
	h.SetVerifier(deps.Verifier)
	h.SetAllowedIPs(cfg.AllowedIPs)
	h.SetTrustedProxies(cfg.TrustedProxies)
	return h
}

// SetVerifier replaces the signature verifier, for example after the
// provider's public keys were reloaded. Requests already past the signature
// check are not affected. With a nil verifier every delivery is answered
// 503, so the provider retries until keys are configured again.
func (h *Handler) SetVerifier(v Verifier) {
	if v == nil {
		h.verifier.Store(nil)
		return
	}
	h.verifier.Store(&verifierBox{v: v})
}

// SetAllowedIPs replaces the networks webhooks may come from; empty allows
// every address.
func (h *Handler) SetAllowedIPs(prefixes []netip.Prefix) {
	p := normalizePrefixes(prefixes)
	h.allowed.Store(&p)
}

// SetTrustedProxies replaces the proxies whose X-Forwarded-For is believed.
func (h *Handler) SetTrustedProxies(prefixes []netip.Prefix) {
	p := normalizePrefixes(prefixes)
	h.trusted.Store(&p)
}

// reply is the handler's decision about one request: what to answer, what
// to count and what to log.
type reply struct {
	code    int
	outcome string
	// detail is told to the sender; reason only to the log.
	detail     string
	reason     string
	retryAfter string
	level      slog.Level

	remote          string
	size            int
	orderID         string
	merchantOrderID string
	// unverified marks a merchantOrderID read from a body whose signature
	// did not verify.
	unverified bool
	change     store.Outcome
	eventID    string
}

// ServeHTTP checks, stores and answers one webhook delivery.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var span trace.Span
	if h.tracer != nil {
		// A parent named by the request (a tracing proxy in front) is
		// honoured; the provider itself sends none.
		ctx := telemetry.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span = h.tracer.Start(ctx, "webhook", trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(start))
		r = r.WithContext(ctx)
	}
	rp := h.handle(w, r)
	writeReply(w, &rp)
	latency := time.Since(start)
	h.metrics.observe(rp.outcome, latency)
	h.logDelivery(r.Context(), &rp, latency)
	if span != nil {
		endWebhookSpan(span, &rp)
	}
}

// endWebhookSpan ends a webhook's span with what it was answered.
func endWebhookSpan(span trace.Span, rp *reply) {
	attrs := make([]attribute.KeyValue, 0, 6)
	attrs = append(attrs,
		attribute.Int("http.response.status_code", rp.code),
		attribute.String("orderd.outcome", rp.outcome))
	if rp.orderID != "" {
		attrs = append(attrs, attribute.String("orderd.order_id", rp.orderID))
	}
	if rp.merchantOrderID != "" {
		attrs = append(attrs, attribute.String("orderd.merchant_order_id", rp.merchantOrderID))
	}
	if rp.eventID != "" {
		attrs = append(attrs, attribute.String("orderd.event_id", rp.eventID))
	}
	span.SetAttributes(attrs...)
	if rp.code >= 500 {
		span.SetStatus(codes.Error, rp.detail)
	}
	span.End()
}

// noSpan is what span returns with tracing off: a span that records
// nothing, so the steps of a webhook need no check of their own.
var noSpan = trace.SpanFromContext(context.Background())

// span starts a child of ctx's span named name, or returns ctx and noSpan
// when tracing is off.
func (h *Handler) span(ctx context.Context, name string) (context.Context, trace.Span) {
	if h.tracer == nil {
		return ctx, noSpan
	}
	return h.tracer.Start(ctx, name)
}

// endSpan ends a step's span, marking it failed when err is not nil.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

func (h *Handler) handle(w http.ResponseWriter, r *http.Request) reply {
	rp := reply{remote: r.RemoteAddr, level: slog.LevelWarn}
	if r.Method != http.MethodPost {
		rp.code, rp.outcome, rp.detail = http.StatusMethodNotAllowed, OutcomeBadMethod, "only POST is allowed"
		return rp
	}
	if r.URL.Path != h.path {
		rp.code, rp.outcome, rp.detail = http.StatusNotFound, OutcomeNotFound, "no webhook endpoint at this path"
		return rp
	}

	client, ok := clientAddr(r.RemoteAddr, r.Header.Values("X-Forwarded-For"), *h.trusted.Load())
	if ok {
		rp.remote = client.String()
	}
	if allowed := *h.allowed.Load(); len(allowed) > 0 && (!ok || !contains(allowed, client)) {
		rp.code, rp.outcome, rp.detail = http.StatusForbidden, OutcomeForbidden, "source address is not allowed"
		if !ok {
			rp.reason = "source address cannot be determined from the peer and X-Forwarded-For"
		}
		return rp
	}

	body, err := readBody(w, r, h.maxBody)
	rp.size = len(body)
	if err != nil {
		if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
			rp.code, rp.outcome = http.StatusRequestEntityTooLarge, OutcomeTooLarge
			rp.detail = "body is larger than " + strconv.FormatInt(mbe.Limit, 10) + " bytes"
			return rp
		}
		rp.code, rp.outcome, rp.detail = http.StatusBadRequest, OutcomeBadRequest, "body could not be read"
		rp.reason = err.Error()
		return rp
	}

	// The budget starts once the body is in: a sender's slow upload is
	// not the store's time, and a delivery that can still be stored is
	// better stored late (its retry is then a duplicate) than refused.
	ctx, cancel := context.WithTimeout(r.Context(), h.budget)
	defer cancel()

	vb := h.verifier.Load()
	if vb == nil {
		rp.code, rp.outcome, rp.retryAfter = http.StatusServiceUnavailable, OutcomeUnavailable, "5"
		rp.detail, rp.level = "no signature keys are configured", slog.LevelError
		return rp
	}
	sig := r.Header.Get("Signature")
	_, vspan := h.span(ctx, "webhook.verify")
	err = vb.v.Verify(body, sig)
	endSpan(vspan, err)
	if err != nil {
		rp.code, rp.outcome = http.StatusUnauthorized, OutcomeBadSig
		rp.detail, rp.reason = signatureProblem(err), err.Error()
		h.hintPoll(ctx, body, &rp)
		return rp
	}

	if len(body) == 0 {
		// Nothing to keep; a retry of the same nothing cannot succeed.
		rp.code, rp.outcome, rp.detail = http.StatusBadRequest, OutcomeBadRequest, "body is empty"
		return rp
	}
	if !utf8.Valid(body) {
		return h.quarantine(ctx, r, body, rp, "body is not valid UTF-8")
	}
	order, err := provider.DecodeOrder(body)
	if err != nil {
		return h.quarantine(ctx, r, body, rp, err.Error())
	}
	rp.orderID, rp.merchantOrderID = order.ID, order.MerchantOrderID

	cctx, cspan := h.span(ctx, "webhook.commit")
	if h.tracer != nil {
		cspan.SetAttributes(attribute.String("orderd.order_id", order.ID))
	}
	res, err := h.store.Apply(cctx, store.Observation{
		Source:     store.SourceWebhook,
		Order:      order,
		Raw:        body,
		Delivery:   &store.Delivery{Header: r.Header, RemoteAddr: rp.remote},
		ObservedAt: h.now(),
	})
	endSpan(cspan, err)
	if errors.Is(err, store.ErrConflict) {
		// The body contradicts an identity the store holds (say, a known
		// merchantOrderId with another provider id): signed, so kept, but
		// not applied.
		return h.quarantine(ctx, r, body, rp, err.Error())
	}
	if err != nil {
		return storeFailure(r, rp, err)
	}
	// An applied webhook is routine: the store keeps it (deliveries, order
	// history) and the metrics count it, so its line is debug (info with
	// Config.LogRoutine). A stale one (an older state arriving late) is
	// worth an info line.
	rp.code, rp.level, rp.change, rp.eventID = http.StatusOK, h.routine, res.Outcome, res.EventID
	switch res.Outcome {
	case store.OutcomeDuplicate:
		rp.outcome = OutcomeDuplicate
	case store.OutcomeStale:
		rp.outcome, rp.level = OutcomeStale, slog.LevelInfo
	default:
		rp.outcome = OutcomeAccepted
	}
	return rp
}

// quarantine keeps a signed body that is not a usable order and acknowledges
// it: retrying cannot make it parse, and people can inspect it where it is
// kept. The store marks the order it names, if any, for polling in the same
// transaction, so the order's real state is still learned.
func (h *Handler) quarantine(ctx context.Context, r *http.Request, body []byte, rp reply, reason string) reply {
	ids := peekIDs(body)
	rp.orderID, rp.merchantOrderID = ids.ID, ids.MerchantOrderID
	qctx, qspan := h.span(ctx, "webhook.quarantine")
	err := h.store.Quarantine(qctx, store.QuarantinedWebhook{
		Raw:             body,
		Header:          r.Header,
		RemoteAddr:      rp.remote,
		Reason:          reason,
		OrderID:         ids.ID,
		MerchantOrderID: ids.MerchantOrderID,
		ReceivedAt:      h.now(),
	})
	endSpan(qspan, err)
	if err != nil {
		rp.reason = "quarantine: " + reason
		return storeFailure(r, rp, err)
	}
	rp.code, rp.outcome, rp.level, rp.reason = http.StatusOK, OutcomeQuarantined, slog.LevelError, reason
	return rp
}

// hintPoll asks the store to have the reconciler poll the order an
// unverified body names. A bad signature may be the provider's key
// rotation; the poll asks the provider itself, so a forged hint is
// harmless. Nothing else of the body is used.
func (h *Handler) hintPoll(ctx context.Context, body []byte, rp *reply) {
	moid := peekIDs(body).MerchantOrderID
	if moid == "" {
		return
	}
	rp.merchantOrderID, rp.unverified = moid, true
	if !h.hints.Allow() {
		rp.reason += "; poll hint dropped by rate limit"
		return
	}
	if err := h.store.MarkForPoll(ctx, moid, store.WatchReasonUnverified); err != nil {
		rp.reason += "; mark for poll: " + err.Error()
	}
}

// storeFailure maps a failed commit to 503: the provider retries, and a
// retry of a commit that landed late is recognised as a duplicate.
func storeFailure(r *http.Request, rp reply, err error) reply {
	rp.code = http.StatusServiceUnavailable
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, store.ErrOverloaded) ||
		errors.Is(err, store.ErrUnconfirmed):
		rp.outcome, rp.retryAfter, rp.level = OutcomeOverloaded, "1", slog.LevelWarn
		rp.detail = "the delivery could not be stored in time; retry"
	case r.Context().Err() != nil:
		rp.outcome, rp.retryAfter, rp.level = OutcomeUnavailable, "1", slog.LevelWarn
		rp.detail = "the request was cancelled before the delivery was stored"
	default:
		rp.outcome, rp.retryAfter, rp.level = OutcomeUnavailable, "5", slog.LevelError
		rp.detail = "the delivery could not be stored; retry"
	}
	if rp.reason != "" {
		rp.reason += ": "
	}
	rp.reason += err.Error()
	return rp
}

// signatureProblem tells the sender what was wrong with its Signature
// header, in words that reveal nothing about the keys.
func signatureProblem(err error) string {
	switch {
	case errors.Is(err, provider.ErrNoSignature):
		return "Signature header is missing"
	case errors.Is(err, provider.ErrMalformedSignature):
		return "Signature header is not a base64 signature"
	default:
		return "Signature header does not verify against the body"
	}
}

// maxPrealloc caps the buffer readBody allocates before the body arrives.
// Content-Length is the sender's claim, made before the signature is
// checked: sized by it alone, a thousand connections that announce the
// limit and send nothing would hold a gigabyte. Webhooks are a few KiB, so
// they still fit in the first buffer.
const maxPrealloc = 64 << 10

// readBody reads the whole body, at most limit bytes. A body longer than
// limit yields *http.MaxBytesError, also when its Content-Length says so
// before anything is read. The buffer starts at the announced size, at
// most maxPrealloc, and grows as bytes arrive.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, &http.MaxBytesError{Limit: limit}
	}
	rd := http.MaxBytesReader(w, r.Body, limit)
	size := r.ContentLength
	if size < 0 {
		size = 512
	}
	// One byte more than announced, so the read that meets EOF needs no
	// reallocation.
	buf := make([]byte, 0, min(size, maxPrealloc)+1)
	for {
		if len(buf) == cap(buf) {
			buf = growBody(buf, r.ContentLength)
		}
		n, err := rd.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// growBody returns buf with twice the capacity, but no more than one byte
// over the announced length when that is larger than buf, so a body of the
// announced length ends in a buffer of its size. A body longer than
// announced (possible only with a Body that ignores Content-Length) keeps
// doubling; MaxBytesReader bounds it.
func growBody(buf []byte, announced int64) []byte {
	n := 2 * cap(buf)
	if want := announced + 1; want > int64(cap(buf)) && want < int64(n) {
		n = int(want)
	}
	grown := make([]byte, len(buf), n)
	copy(grown, buf)
	return grown
}

// orderIDs are the identifiers read from a body that is not (or not yet)
// trusted as an order.
type orderIDs struct {
	ID              string
	MerchantOrderID string
}

// peekIDs reads id and merchantOrderId from a top-level JSON object when
// they are plausible identifiers, and nothing else. Any problem yields
// empty strings.
func peekIDs(body []byte) orderIDs {
	var raw struct {
		ID              json.RawMessage `json:"id"`
		MerchantOrderID json.RawMessage `json:"merchantOrderId"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return orderIDs{}
	}
	return orderIDs{ID: plausibleID(raw.ID), MerchantOrderID: plausibleID(raw.MerchantOrderID)}
}

// plausibleID returns the JSON string in raw when it looks like an
// identifier: non-empty, at most 256 bytes, valid UTF-8 without control
// characters.
func plausibleID(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	if s == "" || len(s) > 256 || !utf8.ValidString(s) {
		return ""
	}
	for _, c := range s {
		if c < 0x20 || c == 0x7f || c == utf8.RuneError {
			return ""
		}
	}
	return s
}

// Answers without detail are the same bytes every time.
var plainBodies = func() map[string][]byte {
	m := make(map[string][]byte, len(allOutcomes))
	for _, o := range allOutcomes {
		m[o] = []byte(`{"status":"` + o + `"}` + "\n")
	}
	return m
}()

var (
	contentTypeJSON = []string{"application/json"}
	allowPost       = []string{http.MethodPost}
	noSniff         = []string{"nosniff"}
)

func writeReply(w http.ResponseWriter, rp *reply) {
	hdr := w.Header()
	hdr["Content-Type"] = contentTypeJSON
	hdr["X-Content-Type-Options"] = noSniff
	if rp.code == http.StatusMethodNotAllowed {
		hdr["Allow"] = allowPost
	}
	if rp.retryAfter != "" {
		hdr.Set("Retry-After", rp.retryAfter)
	}
	body := plainBodies[rp.outcome]
	if rp.detail != "" || body == nil {
		// Marshalling two strings cannot fail.
		body, _ = json.Marshal(struct {
			Status string `json:"status"`
			Error  string `json:"error,omitempty"`
		}{rp.outcome, rp.detail})
		body = append(body, '\n')
	}
	w.WriteHeader(rp.code)
	// A failed write means the sender is gone; its retry is answered anew.
	_, _ = w.Write(body)
}

func (h *Handler) logDelivery(ctx context.Context, rp *reply, latency time.Duration) {
	if !h.log.Enabled(ctx, rp.level) {
		return
	}
	attrs := make([]slog.Attr, 0, 12)
	attrs = append(attrs,
		slog.Int("status", rp.code),
		slog.String("outcome", rp.outcome),
		slog.String("order_id", rp.orderID),
		slog.String("merchant_order_id", rp.merchantOrderID),
		slog.Duration("latency", latency),
		slog.String("remote", rp.remote),
		slog.Int("bytes", rp.size),
	)
	if rp.unverified {
		attrs = append(attrs, slog.Bool("unverified", true))
	}
	if rp.change != "" {
		attrs = append(attrs, slog.String("change", string(rp.change)))
	}
	if rp.eventID != "" {
		attrs = append(attrs, slog.String("event_id", rp.eventID))
	}
	if rp.reason != "" {
		attrs = append(attrs, slog.String("reason", rp.reason))
	}
	h.log.LogAttrs(ctx, rp.level, "webhook", attrs...)
}
