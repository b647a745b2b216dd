package api_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"orderd/api"
	"orderd/provider"
	"orderd/provider/providertest"
	"orderd/store"
	"orderd/test/support/outboxcheck"
)

// testToken is the admin token of test servers that want one.
const testToken = "s3cret-admin-token"

// testPublicURL is the receiver URL the gateway sets as webhookUrl.
const testPublicURL = "https://orderd.example/webhooks/orders"

// setup tunes an env before it starts.
type setup struct {
	token       string
	timeout     time.Duration
	fake        providertest.Options
	checks      []api.Check
	metrics     http.Handler
	noProvider  bool
	maxBodySize int64
	// readTimeout is the server's http.Server.ReadTimeout (0: none).
	readTimeout time.Duration
	// orderScan is the store's Options.OrderScan (0: its default).
	orderScan int
}

// env is an admin API served over loopback from a real store in a temp
// dir, with a real provider client talking to the fake provider.
type env struct {
	t      testing.TB
	fake   *providertest.Server
	store  *store.Store
	client *provider.Client
	url    string
	token  string
	// creates counts create calls the client handed to the transport.
	creates atomic.Int64
}

func newEnv(t testing.TB, su setup) *env {
	t.Helper()
	if su.fake.KeyType == "" && su.fake.Key == nil {
		su.fake.KeyType = "ecdsa" // much faster to generate than RSA
	}
	e := &env{t: t, token: su.token}
	e.fake = providertest.NewServer(su.fake)
	t.Cleanup(e.fake.Close)
	st, err := store.Open(context.Background(), t.TempDir()+"/orderd.db", store.Options{OrderScan: su.orderScan})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := st.Close(ctx); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	if tt, ok := t.(*testing.T); ok {
		// Runs before the store closes (cleanups run last first).
		t.Cleanup(func() { checkEvents(tt, st) })
	}
	e.store = st
	if su.timeout == 0 {
		su.timeout = 5 * time.Second
	}
	e.client, err = provider.NewClient(provider.Options{
		BaseURL: e.fake.URL(), APIKey: e.fake.APIKey(), Timeout: su.timeout,
		Observe: func(endpoint, _ string, _ time.Duration) {
			if strings.HasSuffix(endpoint, "/create") || strings.HasSuffix(endpoint, "/deactivate") {
				e.creates.Add(1)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	deps := api.Deps{Store: st, Provider: e.client, Checks: su.checks, Metrics: su.metrics}
	if su.noProvider {
		deps.Provider = nil
	}
	h := api.New(api.Config{Token: su.token, PublicURL: testPublicURL, MaxBodyBytes: su.maxBodySize,
		Logger: slog.New(slog.DiscardHandler)}, deps)
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ReadTimeout = su.readTimeout
	srv.Start()
	t.Cleanup(srv.Close)
	e.url = srv.URL
	return e
}

// openStore opens a new database in a temporary directory with opts,
// closed when the test ends.
func openStore(t testing.TB, opts store.Options) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "orderd.db"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = st.Close(ctx)
	})
	return st
}

// paidOrder makes a completed brl payin of amount at the fake provider,
// which refunds can then name.
func (e *env) paidOrder(merchantOrderID, amount string) {
	e.t.Helper()
	if _, err := e.fake.CreateOrder(providertest.NewOrder{MerchantOrderID: merchantOrderID, Amount: amount, Currency: "brl"}); err != nil {
		e.t.Fatal(err)
	}
	if err := e.fake.Complete(merchantOrderID); err != nil {
		e.t.Fatal(err)
	}
}

// response is an answer as the tests read it.
type response struct {
	status int
	header http.Header
	body   []byte
}

// json decodes the body into a generic map.
func (r response) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("answer is not a JSON object: %v\n%s", err, r.body)
	}
	return m
}

// do sends a request with the env's token (if any) and extra headers.
func (e *env) do(method, path, body string, header ...string) response {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if e.token != "" {
		req.Header.Set("Authorization", "Bearer "+e.token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] == "" {
			req.Header.Del(header[i])
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	r := response{status: resp.StatusCode, header: resp.Header, body: b}
	checkContract(e.t, method, path, r)
	return r
}

func (e *env) post(path, body string, header ...string) response {
	e.t.Helper()
	return e.do(http.MethodPost, path, body, header...)
}

func (e *env) get(path string) response {
	e.t.Helper()
	return e.do(http.MethodGet, path, "")
}

// attempts returns every stored attempt.
func (e *env) attempts() []store.Attempt {
	e.t.Helper()
	as, err := e.store.ListAttempts(context.Background(), store.AttemptQuery{Limit: 1000})
	if err != nil {
		e.t.Fatal(err)
	}
	return as
}

// payinBody is a valid payin request.
func payinBody(merchantOrderID, amount string) string {
	return `{"merchantOrderId":"` + merchantOrderID + `","invoice":{"amount":"` + amount + `","currency":"brl"},` +
		`"client":{"name":"Ana"},"returnUrl":"https://shop.example/back"}`
}

// wantStatus fails the test unless r has status.
func wantStatus(t testing.TB, r response, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
}

// field reads a dotted path from a decoded JSON object.
func field(m map[string]any, path string) any {
	var cur any = m
	for _, p := range strings.Split(path, ".") {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = obj[p]
	}
	return cur
}

var (
	// unchecked holds the tests checkEvents leaves alone: those that queue
	// events of their own making (findings with made-up details, events of
	// made-up types) to exercise the API around them, and those that close
	// their store on purpose.
	unchecked sync.Map
)

// noEventCheck says that t's outbox is not for checkEvents: its events are
// made up by the test, or its store is closed before the test ends.
func noEventCheck(t *testing.T) { unchecked.Store(t, true) }

// checkEvents encodes every event in st's outbox as the relay would publish
// it and checks it against the AsyncAPI document as published: the
// gateway's creation answers among them.
func checkEvents(t *testing.T, st *store.Store) {
	t.Helper()
	if _, ok := unchecked.Load(t); ok {
		return
	}
	outboxcheck.Check(t, st)
}
