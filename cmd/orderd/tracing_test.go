package main

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"orderd/api"
	"orderd/provider/providertest"
	"orderd/publish"
	"orderd/test/support/eventschema"
)

// otlpReceiver is a real OTLP/HTTP endpoint: it decodes each export with
// the official protobuf types and keeps every span, with the
// service.instance.id of the resource that sent it.
type otlpReceiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []recvSpan
	bad []string // requests it could not decode
}

// recvSpan is one received span.
type recvSpan struct {
	instance         string
	name             string
	traceID          string
	spanID, parentID string
	attrs            map[string]string
	status           tracepb.Status_StatusCode
	start, end       uint64
	kind             tracepb.Span_SpanKind
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
			http.NotFound(w, req)
			return
		}
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		var ex coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(b, &ex)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if err != nil || req.Header.Get("Content-Type") != "application/x-protobuf" {
			r.bad = append(r.bad, fmt.Sprintf("%s: %v", req.Header.Get("Content-Type"), err))
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		for _, rs := range ex.ResourceSpans {
			instance := ""
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.Key == "service.instance.id" {
					instance = kv.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					attrs := map[string]string{}
					for _, kv := range sp.Attributes {
						v := kv.GetValue()
						switch {
						case v.GetStringValue() != "":
							attrs[kv.Key] = v.GetStringValue()
						default:
							attrs[kv.Key] = fmt.Sprint(v.GetIntValue())
						}
					}
					r.got = append(r.got, recvSpan{
						instance: instance, name: sp.Name,
						traceID: hex.EncodeToString(sp.TraceId), spanID: hex.EncodeToString(sp.SpanId),
						parentID: hex.EncodeToString(sp.ParentSpanId), attrs: attrs,
						status: sp.GetStatus().GetCode(), start: sp.StartTimeUnixNano, end: sp.EndTimeUnixNano,
						kind: sp.Kind,
					})
				}
			}
		}
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *otlpReceiver) spans() []recvSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recvSpan(nil), r.got...)
}

// checkDecoded fails the test when an export could not be decoded.
func (r *otlpReceiver) checkDecoded(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bad) > 0 {
		t.Fatalf("the OTLP receiver could not decode: %v", r.bad)
	}
}

// byID returns the span with id, if received.
func (r *otlpReceiver) byID(id string) (recvSpan, bool) {
	for _, s := range r.spans() {
		if s.spanID == id {
			return s, true
		}
	}
	return recvSpan{}, false
}

// children returns the spans whose parent is id.
func (r *otlpReceiver) children(id string) []recvSpan {
	var out []recvSpan
	for _, s := range r.spans() {
		if s.parentID == id {
			out = append(out, s)
		}
	}
	return out
}

func named(spans []recvSpan, name string) []recvSpan {
	var out []recvSpan
	for _, s := range spans {
		if s.name == name {
			out = append(out, s)
		}
	}
	return out
}

// tracedEvent is what the test reads of an event: its CloudEvents
// attributes and its traceparent header.
type tracedEvent struct {
	ID, Type, MerchantOrderID, Traceparent string
	header                                 string
	raw                                    []byte
}

// parseTraceparent splits a version 00 traceparent.
func parseTraceparent(t *testing.T, tp string) (traceID, spanID string) {
	t.Helper()
	parts := strings.Split(tp, "-")
	if len(parts) != 4 || parts[0] != "00" || len(parts[1]) != 32 || len(parts[2]) != 16 || len(parts[3]) != 2 {
		t.Fatalf("traceparent %q is not a version 00 traceparent", tp)
	}
	return parts[1], parts[2]
}

// checkWebhookTrace asserts one webhook's connected trace: the event's
// traceparent names the commit span of the webhook that caused it, on
// instance in; that span's parent is the webhook's span, beside its
// signature check; the event's publish span (on publisher) is a child of
// the commit span. It returns the commit span.
func checkWebhookTrace(t *testing.T, recv *otlpReceiver, ev tracedEvent, in, publisher string) recvSpan {
	t.Helper()
	if ev.Traceparent == "" {
		t.Fatalf("event %s (%s) carries no traceparent", ev.ID, ev.Type)
	}
	if ev.header != ev.Traceparent {
		t.Errorf("traceparent header %q, CloudEvents attribute %q: want the same", ev.header, ev.Traceparent)
	}
	traceID, spanID := parseTraceparent(t, ev.Traceparent)
	commit, ok := recv.byID(spanID)
	if !ok {
		t.Fatalf("no span %s (the event's traceparent) reached the OTLP receiver; got %d spans", spanID, len(recv.spans()))
	}
	if commit.name != "webhook.commit" || commit.traceID != traceID || commit.instance != in {
		t.Fatalf("the event's span is %q in trace %s on %q, want webhook.commit in trace %s on %q", commit.name, commit.traceID, commit.instance, traceID, in)
	}
	hook, ok := recv.byID(commit.parentID)
	if !ok || hook.name != "webhook" || hook.traceID != traceID || hook.parentID != "" {
		t.Fatalf("the commit's parent is %+v, want the root webhook span of the trace", hook)
	}
	if hook.kind != tracepb.Span_SPAN_KIND_SERVER || hook.attrs["http.response.status_code"] != "200" ||
		hook.attrs["orderd.merchant_order_id"] != ev.MerchantOrderID || hook.attrs["orderd.event_id"] != ev.ID {
		t.Errorf("webhook span attributes %v, kind %v", hook.attrs, hook.kind)
	}
	steps := recv.children(hook.spanID)
	verify := named(steps, "webhook.verify")
	if len(verify) != 1 || len(named(steps, "webhook.commit")) != 1 {
		t.Fatalf("the webhook span's children are %v, want one webhook.verify and one webhook.commit", names(steps))
	}
	// The webhook's span covers its steps: the check, then the commit.
	if verify[0].start < hook.start || verify[0].end > commit.start || commit.end > hook.end {
		t.Errorf("times: webhook %d-%d, verify %d-%d, commit %d-%d: want verify then commit inside the webhook",
			hook.start, hook.end, verify[0].start, verify[0].end, commit.start, commit.end)
	}
	var publish []recvSpan
	for _, s := range named(recv.children(commit.spanID), "publish") {
		if s.attrs["cloudevents.event_id"] == ev.ID {
			publish = append(publish, s)
		}
	}
	if len(publish) == 0 {
		t.Fatalf("no publish span of event %s under the commit span; its children: %v", ev.ID, names(recv.children(commit.spanID)))
	}
	p := publish[0]
	if p.traceID != traceID || p.instance != publisher || p.kind != tracepb.Span_SPAN_KIND_PRODUCER ||
		p.status == tracepb.Status_STATUS_CODE_ERROR || !strings.HasPrefix(p.attrs["messaging.destination.name"], "orderd.orders.") {
		t.Errorf("publish span %+v: want the trace's, on %q, a producer, not failed", p, publisher)
	}
	// The relay may take the event as soon as it is committed, before
	// the handler's goroutine ends the commit's span: its start is the
	// bound.
	if p.start < commit.start {
		t.Errorf("the event was published (%d) before its commit started (%d)", p.start, commit.start)
	}
	return commit
}

func names(spans []recvSpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.name)
	}
	return out
}

// eventOf waits for the first event of mid learned via via.
func eventOf(t *testing.T, js jetstream.JetStream, mid, via string) tracedEvent {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		s, err := js.Stream(t.Context(), "ORDERD")
		if err != nil {
			continue
		}
		info, err := s.Info(t.Context())
		if err != nil {
			continue
		}
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
			m, err := s.GetMsg(t.Context(), seq)
			if err != nil {
				continue
			}
			var ev struct {
				tracedEvent
				LearnedVia string
			}
			if json.Unmarshal(m.Data, &ev) != nil || ev.MerchantOrderID != mid || ev.LearnedVia != via {
				continue
			}
			ev.header, ev.raw = m.Header.Get("traceparent"), m.Data
			return ev.tracedEvent
		}
	}
	t.Fatalf("no event of %s learned via %s on the stream within 30s", mid, via)
	return tracedEvent{}
}

// checkGatewayTrace asserts a gateway creation's trace: the event its
// answer queued names the gateway request's span, whose child is the
// provider call, both with the order's merchantOrderId.
func checkGatewayTrace(t *testing.T, recv *otlpReceiver, ev tracedEvent) {
	t.Helper()
	if ev.Traceparent == "" || ev.header != ev.Traceparent {
		t.Fatalf("gateway event: traceparent %q, header %q", ev.Traceparent, ev.header)
	}
	_, spanID := parseTraceparent(t, ev.Traceparent)
	gw, ok := recv.byID(spanID)
	if !ok || gw.name != "gateway payin" || gw.attrs["orderd.merchant_order_id"] != ev.MerchantOrderID ||
		gw.attrs["http.response.status_code"] != "201" {
		t.Fatalf("the gateway event's span is %+v, want the gateway payin request of %s, answered 201", gw, ev.MerchantOrderID)
	}
	calls := named(recv.children(gw.spanID), "provider order/payment-form/create")
	if len(calls) != 1 || calls[0].attrs["orderd.merchant_order_id"] != ev.MerchantOrderID || calls[0].attrs["orderd.order_id"] == "" ||
		calls[0].kind != tracepb.Span_SPAN_KIND_CLIENT {
		t.Errorf("provider calls under the gateway span: %+v", calls)
	}
}

// completedEvent waits for the order.completed event of mid on the
// events stream and returns it with its traceparent header.
// payinCompleted has the fake provider create a payin of amount that
// webhooks the daemon at addrs, completes it, and returns its completed
// event from the stream.
func payinCompleted(t *testing.T, de *daemonEnv, addrs listenAddrs, js jetstream.JetStream, mid, amount string) tracedEvent {
	t.Helper()
	if _, err := de.fake.CreateOrder(providertest.NewOrder{
		MerchantOrderID: mid, Amount: amount, Currency: "brl", WebhookURL: "http://" + addrs.Webhooks + "/webhooks/orders",
	}); err != nil {
		t.Fatal(err)
	}
	if err := de.fake.Complete(mid); err != nil {
		t.Fatal(err)
	}
	return completedEvent(t, js, mid)
}

func completedEvent(t *testing.T, js jetstream.JetStream, mid string) tracedEvent {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		s, err := js.Stream(t.Context(), "ORDERD")
		if err != nil {
			continue
		}
		info, err := s.Info(t.Context())
		if err != nil {
			continue
		}
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
			m, err := s.GetMsg(t.Context(), seq)
			if err != nil {
				continue
			}
			var ev tracedEvent
			if json.Unmarshal(m.Data, &ev) != nil || ev.Type != "order.completed" || ev.MerchantOrderID != mid {
				continue
			}
			ev.header, ev.raw = m.Header.Get("traceparent"), m.Data
			return ev
		}
	}
	t.Fatalf("no order.completed event of %s on the stream within 30s", mid)
	return tracedEvent{}
}

// TestRun_TracingSingleNode follows one webhook through a single-node
// daemon that sends its spans to a real OTLP/HTTP endpoint: receive,
// verify, commit, publish in one trace, and the event carries that
// trace's traceparent in its CloudEvent and its NATS header.
func TestRun_TracingSingleNode(t *testing.T) {
	recv := newOTLPReceiver(t)
	de := newDaemonEnv(t, "telemetry:\n  otlp_endpoint: "+recv.srv.URL+"\n")
	cancel, done, stderr := runInProcess(t, de.cfgPath)
	addrs := waitStarted(t, stderr, done)
	waitReady(t, addrs.Admin, done)

	nc, err := nats.Connect(addrs.NATS)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ev := payinCompleted(t, de, addrs, js, "trace-1", "25.00")
	// A creation through the gateway is a span too, the parent of its
	// provider call and of the event its answer queues.
	resp, err := http.Post("http://"+addrs.Admin+"/v1/payins", "application/json", strings.NewReader(
		`{"merchantOrderId":"trace-g","invoice":{"amount":"12.00","currency":"brl"},"client":{"name":"Ana"},"returnUrl":"https://shop.example/back"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /v1/payins: %d", resp.StatusCode)
	}
	gev := eventOf(t, js, "trace-g", "gateway")

	// orderd tail's reader shows it.
	var tailed syncBuffer
	tctx, tcancel := context.WithTimeout(t.Context(), 2*time.Second)
	_ = publish.Tail(tctx, js, "ORDERD", "orderd.orders.payin.completed", &tailed, publish.TailAll())
	tcancel()
	if !strings.Contains(tailed.String(), `"traceparent":"`+ev.Traceparent+`"`) {
		t.Errorf("tail printed %q, without the event's traceparent %s", tailed.String(), ev.Traceparent)
	}

	// A stop sends the spans still waiting in the exporter's batch.
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v\n%s", err, stderr)
	}
	recv.checkDecoded(t)
	if len(recv.spans()) == 0 {
		t.Fatal("no span reached the OTLP receiver")
	}
	host := recv.spans()[0].instance
	checkWebhookTrace(t, recv, ev, host, host)
	checkGatewayTrace(t, recv, gev)
	// The traced event still meets its published contract.
	v, err := eventschema.New(api.AsyncAPI(), eventschema.Strict)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Check(ev.raw); err != nil {
		t.Errorf("the traced event does not validate against api/asyncapi.yaml: %v\n%s", err, ev.raw)
	}
	if !strings.Contains(stderr.String(), "tracing on") {
		t.Errorf("the daemon did not log that tracing is on:\n%s", stderr)
	}
}

// TestRun_TracingOffByDefault: without an endpoint nothing is exported and
// events carry no traceparent.
func TestRun_TracingOffByDefault(t *testing.T) {
	recv := newOTLPReceiver(t)
	de := newDaemonEnv(t, "")
	cancel, done, stderr := runInProcess(t, de.cfgPath)
	addrs := waitStarted(t, stderr, done)
	waitReady(t, addrs.Admin, done)
	nc, err := nats.Connect(addrs.NATS)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ev := payinCompleted(t, de, addrs, js, "off-1", "5.00")
	cancel()
	<-done
	if ev.Traceparent != "" || ev.header != "" {
		t.Errorf("tracing off, the event carries traceparent %q / header %q", ev.Traceparent, ev.header)
	}
	if n := len(recv.spans()); n != 0 || strings.Contains(stderr.String(), "tracing on") {
		t.Errorf("tracing off, %d spans were exported", n)
	}
}

// TestRun_TracingEnvEndpoint: a malformed OTEL_EXPORTER_OTLP_ENDPOINT is a
// configuration error naming the variable, and nothing starts.
func TestRun_TracingEnvEndpoint(t *testing.T) {
	de := newDaemonEnv(t, "")
	res := runOrderd(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}, nil, "run", "-config", de.cfgPath)
	if res.code != 2 || !strings.Contains(res.stderr, "$OTEL_EXPORTER_OTLP_ENDPOINT") {
		t.Errorf("exit %d, stderr %q: want 2 naming $OTEL_EXPORTER_OTLP_ENDPOINT", res.code, res.stderr)
	}
}

// TestRun_TracingReplicated follows one webhook across the log: the
// follower that receives it appends and applies it, the leader applies it
// and publishes the event, and both instances' spans form one trace.
func TestRun_TracingReplicated(t *testing.T) {
	recv := newOTLPReceiver(t)
	nc, fake := natsAndFake(t)
	ttl := 2 * time.Second
	extra := "telemetry:\n  otlp_endpoint: " + recv.srv.URL + "\n"
	a := startReplicaWith(t, fake, nc.ClientURL(), "a", ttl, extra)
	b := startReplicaWith(t, fake, nc.ClientURL(), "b", ttl, extra)
	js := jetStreamAt(t, nc.ClientURL())

	var leader, follower *replicaDaemon
	for deadline := time.Now().Add(10 * time.Second); leader == nil && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		switch {
		case clusterStatus(t, a.addrs.Admin).Leading:
			leader, follower = a, b
		case clusterStatus(t, b.addrs.Admin).Leading:
			leader, follower = b, a
		}
	}
	if leader == nil {
		t.Fatal("no leader within 10s")
	}
	if _, err := fake.CreateOrder(providertest.NewOrder{MerchantOrderID: "trace-r", Amount: "10.00", Currency: "brl",
		WebhookURL: "http://" + follower.addrs.Webhooks + "/webhooks/orders"}); err != nil {
		t.Fatal(err)
	}
	if err := fake.Complete("trace-r"); err != nil {
		t.Fatal(err)
	}
	ev := completedEvent(t, js, "trace-r")
	follower.stop(t)
	leader.stop(t)
	recv.checkDecoded(t)

	commit := checkWebhookTrace(t, recv, ev, follower.name, leader.name)
	// The commit went through the log: appended, then applied on the
	// instance that answered, both under the commit span.
	steps := recv.children(commit.spanID)
	appends, applies := named(steps, "log.append"), named(steps, "log.apply")
	if len(appends) != 1 || len(applies) != 1 {
		t.Fatalf("the commit span's children are %v, want one log.append and one log.apply", names(steps))
	}
	if appends[0].attrs["orderd.log.seq"] == "0" || appends[0].attrs["orderd.log.seq"] != applies[0].attrs["orderd.log.seq"] ||
		appends[0].instance != follower.name || appends[0].end > applies[0].start {
		t.Errorf("log.append %+v, log.apply %+v: want one entry's append then its apply, on %s", appends[0], applies[0], follower.name)
	}
	// Only an entry in the log can be applied and published by another
	// instance.
	for _, p := range named(recv.children(commit.spanID), "publish") {
		if p.start < appends[0].end {
			t.Errorf("the leader published (%d) before the entry was appended (%d)", p.start, appends[0].end)
		}
	}
}

// startReplicaWith is startReplica with extra top-level configuration.
func startReplicaWith(t *testing.T, fake *providertest.Server, natsURL, name string, ttl time.Duration, extra string) *replicaDaemon {
	t.Helper()
	dir := t.TempDir()
	cfg := daemonConfig(t, dir, fake, "  url: "+natsURL+"\n", fmt.Sprintf(`cluster:
  enabled: true
  node: %s
  lease_ttl: %s
reconcile:
  schedules: {stale: "off", doubt: "off", balances: "off", requisites: "off", report: "off"}
log:
  level: info
  format: json
%s`, name, ttl, extra))
	ctx, cancel := context.WithCancel(context.Background())
	r := &replicaDaemon{name: name, dir: dir, cancel: cancel, done: make(chan error, 1), log: &syncBuffer{}}
	go func() {
		r.done <- run(ctx, []string{"orderd", "run", "-config", cfg}, func(string) string { return "" }, nil, io.Discard, r.log)
	}()
	r.addrs = waitStarted(t, r.log, r.done)
	waitReady(t, r.addrs.Admin, r.done)
	t.Cleanup(func() { r.stop(t) })
	return r
}
