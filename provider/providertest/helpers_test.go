package providertest_test

import (
	"bytes"
	"crypto"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"orderd/provider"
	"orderd/provider/providertest"
)

// sharedKey is generated once per test binary: RSA key generation is slow
// enough to dominate a suite that starts dozens of servers. Tests of key
// generation itself use the zero Options.
var sharedKey = sync.OnceValue(func() crypto.Signer {
	k, _, err := providertest.GenerateKey(providertest.KeyRSA)
	if err != nil {
		panic(err)
	}
	return k
})

// start runs a fake with opts (and the shared key unless opts has one) and
// closes it when the test ends.
func start(t *testing.T, opts providertest.Options) *providertest.Server {
	t.Helper()
	if opts.Key == nil && opts.KeyType == "" {
		opts.Key = sharedKey()
	}
	if opts.Seed == 0 {
		opts.Seed = 42
	}
	s, err := providertest.Start(opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// post sends body to path with the server's key and returns the raw HTTP
// answer.
func post(t *testing.T, s *providertest.Server, path, body string) (*http.Response, []byte) {
	t.Helper()
	return send(t, http.MethodPost, s.URL()+path, s.APIKey(), body)
}

func send(t *testing.T, method, url, key, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json; charset=utf-8")
	if key != "" {
		req.Header.Set("Authorization", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// call posts body to path and decodes the provider envelope, failing the
// test unless the answer is HTTP 200 with exactly the keys data and error,
// one of them null.
func call(t *testing.T, s *providertest.Server, path, body string) (json.RawMessage, *provider.Error) {
	t.Helper()
	resp, b := post(t, s, path, body)
	return envelope(t, resp, b)
}

func envelope(t *testing.T, resp *http.Response, b []byte) (json.RawMessage, *provider.Error) {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTP %d, want 200: %s", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("Content-Type %q", ct)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		t.Fatalf("answer is not a JSON object: %v: %s", err, b)
	}
	if len(keys) != 2 || keys["data"] == nil || keys["error"] == nil {
		t.Fatalf("envelope keys: %s", b)
	}
	var env provider.Envelope
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatalf("decode envelope: %v", err)
	}
	isNull := bytes.Equal(env.Data, []byte("null"))
	if env.Error != nil && !isNull {
		t.Fatalf("error envelope with data: %s", b)
	}
	if env.Error == nil && isNull {
		t.Fatalf("success envelope without data: %s", b)
	}
	return env.Data, env.Error
}

// mustOK calls and fails the test on an error envelope.
func mustOK(t *testing.T, s *providertest.Server, path, body string) json.RawMessage {
	t.Helper()
	data, perr := call(t, s, path, body)
	if perr != nil {
		t.Fatalf("%s %s: %v", path, body, perr)
	}
	return data
}

// mustCode calls and fails the test unless the answer is error code want.
func mustCode(t *testing.T, s *providertest.Server, path, body string, want provider.Code) *provider.Error {
	t.Helper()
	_, perr := call(t, s, path, body)
	if perr == nil || perr.Code != want {
		t.Fatalf("%s %s: error %v, want %s", path, body, perr, want)
	}
	return perr
}

func decodeOrder(t *testing.T, data []byte) *provider.Order {
	t.Helper()
	o, err := provider.DecodeOrder(data)
	if err != nil {
		t.Fatalf("decode order: %v: %s", err, data)
	}
	return o
}

func getStatus(t *testing.T, s *providertest.Server, moid string) (*provider.Order, []byte) {
	t.Helper()
	data := mustOK(t, s, providertest.PathGetStatus, `{"merchantOrderId":"`+moid+`"}`)
	return decodeOrder(t, data), data
}

// createPayin creates a payin of amount brl with an optional webhook URL.
func createPayin(t *testing.T, s *providertest.Server, moid, amount, webhookURL string) *provider.Order {
	t.Helper()
	body := `{"merchantOrderId":"` + moid + `","invoice":{"amount":"` + amount + `","currency":"brl"}`
	if webhookURL != "" {
		body += `,"webhookUrl":"` + webhookURL + `"`
	}
	return decodeOrder(t, mustOK(t, s, providertest.PathPaymentCreate, body+`}`))
}

func balance(t *testing.T, s *providertest.Server, ccy string) string {
	t.Helper()
	var bs []provider.Balance
	if err := json.Unmarshal(mustOK(t, s, providertest.PathBalances, `{}`), &bs); err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		if b.Currency == ccy {
			return b.Amount
		}
	}
	return ""
}

// receiver is a webhook endpoint that records every request and answers
// with the statuses of script in turn (200 once script is used up).
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	script []int
	hits   []hit
	notify chan struct{}
}

type hit struct {
	body      []byte
	signature string
	header    http.Header
	at        time.Time
}

func newReceiver(t *testing.T, script ...int) *receiver {
	t.Helper()
	r := &receiver{script: script, notify: make(chan struct{}, 1000)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.hits = append(r.hits, hit{body: b, signature: req.Header.Get("Signature"), header: req.Header.Clone(), at: time.Now()})
		status := http.StatusOK
		if len(r.script) > 0 {
			status, r.script = r.script[0], r.script[1:]
		}
		r.mu.Unlock()
		w.WriteHeader(status)
		r.notify <- struct{}{}
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) URL() string { return r.srv.URL + "/webhooks/orders" }

func (r *receiver) Hits() []hit {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hit(nil), r.hits...)
}

// waitHits waits until the receiver has seen n requests.
func (r *receiver) waitHits(t *testing.T, n int, within time.Duration) []hit {
	t.Helper()
	deadline := time.After(within)
	for {
		if h := r.Hits(); len(h) >= n {
			return h
		}
		select {
		case <-r.notify:
		case <-deadline:
			t.Fatalf("receiver saw %d requests within %v, want %d", len(r.Hits()), within, n)
		}
	}
}

// waitIdle waits for every webhook delivery of s to end.
func waitIdle(t *testing.T, s *providertest.Server) {
	t.Helper()
	if err := s.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
}
