package receiver_test

import (
	"bytes"
	"context"
	"crypto"
	"database/sql"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	_ "modernc.org/sqlite"

	"orderd/provider"
	"orderd/provider/providertest"
	"orderd/receiver"
	"orderd/store"
	"orderd/test/support/syncbuf"
)

// keys are generated once per test binary: RSA generation takes a
// noticeable fraction of a second.
var (
	keysOnce         sync.Once
	signKey, otherKy crypto.Signer
)

func testKeys(t testing.TB) (signer, other crypto.Signer) {
	t.Helper()
	keysOnce.Do(func() {
		var err error
		if signKey, _, err = providertest.GenerateKey("rsa"); err != nil {
			panic(err)
		}
		if otherKy, _, err = providertest.GenerateKey("rsa"); err != nil {
			panic(err)
		}
	})
	return signKey, otherKy
}

func sign(t testing.TB, key crypto.Signer, body []byte) string {
	t.Helper()
	s, err := providertest.Sign(key, body)
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	return s
}

func newVerifier(t testing.TB, key crypto.Signer) *provider.Verifier {
	t.Helper()
	v, err := provider.NewVerifier(key.Public())
	if err != nil {
		t.Fatalf("new verifier: %v", err)
	}
	return v
}

// fixture is a handler wired to a real store in a temporary directory and a
// real verifier for key.
type fixture struct {
	t       *testing.T
	key     crypto.Signer
	dbPath  string
	store   *store.Store
	handler *receiver.Handler
	reg     *prometheus.Registry
	logs    *syncbuf.Buffer
}

func newFixture(t *testing.T, cfg receiver.Config) *fixture {
	t.Helper()
	key, _ := testKeys(t)
	f := &fixture{t: t, key: key, dbPath: filepath.Join(t.TempDir(), "orderd.db"), reg: prometheus.NewRegistry(), logs: &syncbuf.Buffer{}}
	f.store = openStore(t, f.dbPath)
	m, err := receiver.NewMetrics(f.reg)
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	f.handler = receiver.New(cfg, receiver.Deps{
		Store:    f.store,
		Verifier: newVerifier(t, key),
		Logger:   slog.New(slog.NewJSONHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})).With("component", "receiver"),
		Metrics:  m,
	})
	return f
}

// post sends body signed with the fixture's key from remote.
func (f *fixture) post(body []byte) *httptest.ResponseRecorder {
	f.t.Helper()
	return f.do(request{body: body, sig: sign(f.t, f.key, body)})
}

type request struct {
	method string
	path   string
	remote string
	xff    []string
	body   []byte
	sig    string
}

func (f *fixture) do(r request) *httptest.ResponseRecorder {
	f.t.Helper()
	if r.method == "" {
		r.method = http.MethodPost
	}
	if r.path == "" {
		r.path = receiver.DefaultPath
	}
	req := httptest.NewRequestWithContext(f.t.Context(), r.method, r.path, bytes.NewReader(r.body))
	if r.remote != "" {
		req.RemoteAddr = r.remote
	}
	for _, x := range r.xff {
		req.Header.Add("X-Forwarded-For", x)
	}
	req.Header.Set("Content-Type", "application/json")
	if r.sig != "" {
		req.Header.Set("Signature", r.sig)
	}
	rec := httptest.NewRecorder()
	f.handler.ServeHTTP(rec, req)
	return rec
}

// db opens the store's file for reading, as an operator with sqlite3 would.
func (f *fixture) db() *sql.DB {
	f.t.Helper()
	db, err := sql.Open("sqlite", "file:"+f.dbPath+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		f.t.Fatalf("open db: %v", err)
	}
	f.t.Cleanup(func() { db.Close() })
	return db
}

func (f *fixture) count(table, where string, args ...any) int {
	f.t.Helper()
	q := "SELECT count(*) FROM " + table
	if where != "" {
		q += " WHERE " + where
	}
	var n int
	if err := f.db().QueryRowContext(f.t.Context(), q, args...).Scan(&n); err != nil {
		f.t.Fatalf("%s: %v", q, err)
	}
	return n
}

// orderData counts the rows that carry order data or events.
func (f *fixture) orderData() string {
	f.t.Helper()
	return fmt.Sprintf("orders=%d deliveries=%d history=%d outbox=%d quarantine=%d",
		f.count("orders", ""), f.count("webhook_deliveries", ""), f.count("order_history", ""),
		f.count("outbox", ""), f.count("quarantine", ""))
}

const noOrderData = "orders=0 deliveries=0 history=0 outbox=0 quarantine=0"

// counter returns the value of orderd_webhooks_total{outcome}.
func (f *fixture) counter(outcome string) float64 {
	f.t.Helper()
	mfs, err := f.reg.Gather()
	if err != nil {
		f.t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "orderd_webhooks_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	f.t.Fatalf("no orderd_webhooks_total{outcome=%q}", outcome)
	return 0
}

// wantReply checks the status code and the JSON status word.
func wantReply(t *testing.T, rec *httptest.ResponseRecorder, code int, status string) {
	t.Helper()
	body := rec.Body.String()
	if rec.Code != code {
		t.Fatalf("code = %d, want %d (body %s)", rec.Code, code, body)
	}
	if want := `"status":"` + status + `"`; !strings.Contains(body, want) {
		t.Fatalf("body = %s, want %s", body, want)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type = %q", ct)
	}
}

func prefixes(t testing.TB, ss ...string) []netip.Prefix {
	t.Helper()
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

// order describes a test order; orderJSON writes it the way the provider
// does.
type order struct {
	id, moid, status string
	authorized       string // amount authorized from the customer
	net              string // amount the merchant receives
	refunds          []refund
}

type refund struct {
	id, status, amount string
}

func newOrder(n int, status string) order {
	return order{
		id:         fmt.Sprintf("8d1f0c6e-0000-4000-8000-%012d", n),
		moid:       fmt.Sprintf("m-%d", n),
		status:     status,
		authorized: "100.00",
		net:        "98.00",
	}
}

func (o order) JSON() []byte {
	var target, completedAt, txStatus string
	switch o.status {
	case "completed":
		target = fmt.Sprintf(`{"amount":%q,"currency":"brl"}`, o.net)
		completedAt = `"2024-05-01T10:02:00+00:00"`
		txStatus = "completed"
	case "rejected":
		target, completedAt, txStatus = "null", "null", "rejected"
	default:
		target, completedAt, txStatus = "null", "null", "processing"
	}
	txs := []string{fmt.Sprintf(`{"id":"%s-tx","type":"payin","status":%q,`+
		`"authorized":{"amount":%q,"currency":"brl"},"merchantWallet":{"amount":%q,"currency":"brl"},`+
		`"counterpartyInfo":null,"paymentInfo":null,"createdAt":"2024-05-01T10:00:01Z","completedAt":%s,"rejectReason":null}`,
		o.id, txStatus, o.authorized, o.net, completedAt)}
	for _, r := range o.refunds {
		txs = append(txs, fmt.Sprintf(`{"id":%q,"type":"refund","status":%q,"amount":{"amount":%q,"currency":"brl"},`+
			`"createdAt":"2024-05-02T09:00:00Z","completedAt":null,"rejectReason":null}`, r.id, r.status, r.amount))
	}
	return fmt.Appendf(nil, `{"id":%q,"merchantOrderId":%q,"type":"payin","createdAt":"2024-05-01T10:00:00Z",`+
		`"status":%q,"rejectReason":null,"merchantSourceWallet":null,"merchantTargetWallet":%s,"transactions":[%s]}`,
		o.id, o.moid, o.status, target, strings.Join(txs, ","))
}

// writeLock is a write transaction held open on the store's file by a
// connection of its own.
type writeLock struct {
	db   *sql.DB
	conn *sql.Conn
}

// holdWriteLock takes the database's write lock (BEGIN IMMEDIATE) from a
// second connection until release, so the store cannot commit.
func holdWriteLock(t *testing.T, path string) *writeLock {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatalf("begin immediate: %v", err)
	}
	l := &writeLock{db: db, conn: conn}
	t.Cleanup(l.release)
	return l
}

func (l *writeLock) release() {
	if l.conn == nil {
		return
	}
	_, _ = l.conn.ExecContext(context.Background(), "ROLLBACK")
	l.conn.Close()
	l.db.Close()
	l.conn = nil
}

// openStore opens (and migrates) a real store at path, closed when the test
// ends.
func openStore(t testing.TB, path string) *store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), path, store.Options{})
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
	return st
}
