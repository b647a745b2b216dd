//go:build e2e

package e2e_test

import (
	"bytes"
	"context"
	"crypto"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	_ "modernc.org/sqlite"

	"orderd/api"
	"orderd/provider/providertest"
	"orderd/test/support/eventschema"
)

// streamName is the JetStream stream orderd publishes to (its default).
const streamName = "ORDERD"

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// decodeData decodes the "data" member of a {"data": …} answer.
func decodeData(b []byte, out any) error {
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return err
	}
	return json.Unmarshal(env.Data, out)
}

// seed returns the seed of a test's random choices: ORDERD_E2E_SEED when
// set, else a fresh one; it is logged so a run can be repeated.
func seed(t *testing.T) *rand.Rand {
	t.Helper()
	s := uint64(time.Now().UnixNano())
	if v := os.Getenv("ORDERD_E2E_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("ORDERD_E2E_SEED: %v", err)
		}
		s = n
	}
	t.Logf("seed %d (set ORDERD_E2E_SEED to repeat)", s)
	return rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15))
}

// signer signs webhooks with a key of the test's own, whose public PEM is
// one of orderd's provider.public_keys.
type signer struct {
	key    crypto.Signer
	pubKey string // PEM file
}

func newSigner(t *testing.T, dir string) *signer {
	t.Helper()
	key, pub, err := providertest.GenerateKey(providertest.KeyECDSA)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "test-signer.pem")
	if err := os.WriteFile(p, pub, 0o644); err != nil {
		t.Fatal(err)
	}
	return &signer{key: key, pubKey: p}
}

func (s *signer) sign(t testing.TB, body []byte) string {
	sig, err := providertest.Sign(s.key, body)
	if err != nil {
		t.Error(err)
	}
	return sig
}

// uuidN makes a deterministic UUID-shaped id from a namespace and n.
func uuidN(ns uint32, n int) string {
	return fmt.Sprintf("%08x-0000-4000-8000-%012x", ns, n)
}

// orderBody is a payin webhook body in the provider's get-status shape
// (the fake's own rendering) for the given status.
func orderBody(id, moid, status, amount string) []byte {
	target := "null"
	completedAt := "null"
	reject := "null"
	switch status {
	case "completed":
		target = `{"amount":"` + amount + `","currency":"brl"}`
		completedAt = `"2026-11-20T10:00:05.000000Z"`
	case "rejected":
		reject = `"declined"`
	}
	return []byte(`{"id":"` + id + `","merchantOrderId":"` + moid + `","type":"payin",` +
		`"createdAt":"2026-11-20T10:00:00.000000+00:00","status":"` + status + `","rejectReason":` + reject + `,` +
		`"merchantSourceWallet":null,"merchantTargetWallet":` + target + `,` +
		`"transactions":[{"id":"` + id[:9] + "1111" + id[13:] + `","type":"payin","status":"` + status + `",` +
		`"authorized":{"amount":"` + amount + `","currency":"brl"},"merchantWallet":{"amount":"` + amount + `","currency":"brl"},` +
		`"counterpartyInfo":null,"paymentInfo":null,"createdAt":"2026-11-20T10:00:00.000000Z",` +
		`"completedAt":` + completedAt + `,"rejectReason":` + reject + `}]}`)
}

// webhookClient posts signed webhooks.
type webhookClient struct {
	url string
	hc  *http.Client
	// urls, when set, are several instances behind one address, as a
	// load balancer would spread them: posts go round-robin, and a post
	// that gets no answer is tried once on the next instance.
	urls []string
	next atomic.Uint32
}

// newBalancedClient posts to several instances round-robin.
func newBalancedClient(t *testing.T, urls ...string) *webhookClient {
	c := newWebhookClient(t, urls[0])
	c.urls = urls
	return c
}

func newWebhookClient(t *testing.T, url string) *webhookClient {
	c := &webhookClient{url: url, hc: &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 64},
	}}
	t.Cleanup(c.hc.CloseIdleConnections)
	return c
}

// answer is the receiver's answer to one post; status 0 means no answer.
type answer struct {
	status int
	word   string // the "status" member of the JSON answer
	err    error
}

func (c *webhookClient) post(ctx context.Context, body []byte, sig string) answer {
	if len(c.urls) == 0 {
		return c.postTo(ctx, c.url, body, sig)
	}
	i := int(c.next.Add(1))
	a := c.postTo(ctx, c.urls[i%len(c.urls)], body, sig)
	if a.status == 0 {
		a = c.postTo(ctx, c.urls[(i+1)%len(c.urls)], body, sig)
	}
	return a
}

func (c *webhookClient) postTo(ctx context.Context, url string, body []byte, sig string) answer {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Signature", sig)
	resp, err := c.hc.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var v struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(b, &v)
	return answer{status: resp.StatusCode, word: v.Status}
}

// sent records one delivery the load generator made.
type sent struct {
	id, moid string
	state    string // the order status the body carries
	body     []byte
	sig      string
	repeat   bool // a repeat of an earlier acked body
	ans      answer
}

// loadGen posts uniquely signed webhooks at a steady rate: each tick takes
// a fresh order (or, every repeatEvery ticks, repeats an acked body).
// Ticks that find every worker busy are counted as skipped, so the rate
// never bunches up after an outage.
type loadGen struct {
	t           *testing.T
	c           *webhookClient
	s           *signer
	ns          uint32
	rate        float64 // orders per second
	workers     int
	max         int // bound on ticks
	repeatEvery int // 0: no repeats
	// statuses are the states each order is sent in, one webhook each,
	// in this order.
	statuses []string

	mu      sync.Mutex
	log     []sent
	skipped int
}

// start runs the generator in the background until the stop it returns is
// called or the test ends; stop waits for the generator to return, and a
// second call returns at once.
func (g *loadGen) start() (stop func()) {
	ctx, cancel := context.WithCancel(g.t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.run(ctx)
	}()
	stop = func() { cancel(); <-done }
	g.t.Cleanup(stop)
	return stop
}

// run generates load until ctx ends or max ticks were taken.
func (g *loadGen) run(ctx context.Context) {
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range g.workers {
		wg.Go(func() {
			for n := range jobs {
				g.one(ctx, n)
			}
		})
	}
	tick := time.NewTicker(time.Duration(float64(time.Second) / g.rate))
	defer tick.Stop()
loop:
	for n := 0; n < g.max; n++ {
		select {
		case <-ctx.Done():
			break loop
		case <-tick.C:
		}
		select {
		case jobs <- n:
		default:
			g.mu.Lock()
			g.skipped++
			g.mu.Unlock()
		}
	}
	close(jobs)
	wg.Wait()
}

func (g *loadGen) one(ctx context.Context, n int) {
	// Posts started are finished even when ctx ends, so no answer is
	// left unknown.
	pctx := context.WithoutCancel(ctx)
	if g.repeatEvery > 0 && n%g.repeatEvery == g.repeatEvery-1 {
		g.mu.Lock()
		var prev *sent
		for i := len(g.log) - 1; i >= 0 && i >= len(g.log)-50; i-- {
			if e := g.log[i]; !e.repeat && e.ans.status == http.StatusOK {
				prev = &e
				break
			}
		}
		g.mu.Unlock()
		if prev != nil {
			r := sent{id: prev.id, moid: prev.moid, state: prev.state, body: prev.body, sig: prev.sig, repeat: true}
			r.ans = g.c.post(pctx, r.body, r.sig)
			g.record(r)
			return
		}
	}
	id := uuidN(g.ns, n)
	moid := fmt.Sprintf("%08x-%d", g.ns, n)
	amount := fmt.Sprintf("%d.%02d", 1+n%997, n%100)
	for _, st := range g.statuses {
		body := orderBody(id, moid, st, amount)
		r := sent{id: id, moid: moid, state: st, body: body, sig: g.s.sign(g.t, body)}
		r.ans = g.c.post(pctx, r.body, r.sig)
		g.record(r)
	}
}

func (g *loadGen) record(r sent) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.log = append(g.log, r)
}

// results returns a copy of every delivery so far and the skipped ticks.
func (g *loadGen) results() ([]sent, int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]sent(nil), g.log...), g.skipped
}

// acked counts deliveries answered 200 so far.
func (g *loadGen) acked() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, e := range g.log {
		if e.ans.status == http.StatusOK {
			n++
		}
	}
	return n
}

// event is one message of the stream, decoded.
type event struct {
	Seq     uint64 `json:"-"`
	Subject string `json:"-"` // NATS subject
	MsgID   string `json:"-"` // Nats-Msg-Id header

	SpecVersion     string          `json:"specversion"`
	ID              string          `json:"id"`
	Type            string          `json:"type"`
	CESubject       string          `json:"subject"`
	MerchantOrderID string          `json:"merchantorderid"`
	LearnedVia      string          `json:"learnedvia"`
	Data            json.RawMessage `json:"data"`
}

// status is the order status in the event's data ("" if none).
func (e event) status() string {
	var v struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(e.Data, &v)
	return v.Status
}

// streamCount returns the number of messages in the stream (0 when it does
// not exist yet).
func streamCount(ctx context.Context, url string) (uint64, error) {
	nc, err := nats.Connect(url, nats.Timeout(2*time.Second))
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, streamName)
	if err != nil {
		return 0, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.Msgs, nil
}

// readStream reads the whole stream from its first message with an
// ordered consumer.
func readStream(t *testing.T, url string) []event {
	t.Helper()
	nc, err := nats.Connect(url, nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, streamName)
	if err != nil {
		t.Fatalf("stream %s: %v", streamName, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := int(info.State.Msgs)
	// Every event of the suite matches the published contract.
	schemas, err := eventschema.New(api.AsyncAPI(), eventschema.Published)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		t.Fatal(err)
	}
	events := make([]event, 0, want)
	for len(events) < want && ctx.Err() == nil {
		batch, err := cons.Fetch(min(want-len(events), 500), jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			md, err := m.Metadata()
			if err != nil {
				t.Fatal(err)
			}
			var e event
			if err := json.Unmarshal(m.Data(), &e); err != nil {
				t.Fatalf("stream message %d is not a JSON event: %v: %s", md.Sequence.Stream, err, m.Data())
			}
			if _, err := schemas.Check(m.Data()); err != nil {
				t.Errorf("stream message %d does not match api/asyncapi.yaml: %v", md.Sequence.Stream, err)
			}
			e.Seq, e.Subject, e.MsgID = md.Sequence.Stream, m.Subject(), m.Headers().Get("Nats-Msg-Id")
			events = append(events, e)
		}
		if err := batch.Error(); err != nil && ctx.Err() == nil {
			t.Logf("fetch: %v", err)
		}
	}
	if len(events) != want {
		t.Fatalf("read %d of the stream's %d messages", len(events), want)
	}
	return events
}

// openDB opens the store's SQLite file read-only.
func openDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// queryInt runs a query that returns one integer.
func queryInt(t *testing.T, db *sql.DB, q string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(t.Context(), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// integrityCheck runs PRAGMA integrity_check on the file.
func integrityCheck(t *testing.T, path string) {
	t.Helper()
	db := openDB(t, path)
	rows, err := db.QueryContext(t.Context(), "PRAGMA integrity_check")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if len(out) != 1 || out[0] != "ok" {
		t.Fatalf("PRAGMA integrity_check: %q", out)
	}
}

// storedOrders maps provider order id to status for every stored order.
func storedOrders(t *testing.T, db *sql.DB) map[string]string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), "SELECT provider_id, status FROM orders")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	m := map[string]string{}
	for rows.Next() {
		var id, st string
		if err := rows.Scan(&id, &st); err != nil {
			t.Fatal(err)
		}
		m[id] = st
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}

// waitDrained waits until the outbox holds no unpublished row and the
// stream holds as many messages as the outbox has rows, and returns that
// number.
func waitDrained(t *testing.T, dbPath, natsURL string, timeout time.Duration) int {
	t.Helper()
	db := openDB(t, dbPath)
	var pending, total int
	var inStream uint64
	var err error
	ok := waitFor(timeout, 100*time.Millisecond, func() bool {
		pending = queryInt(t, db, "SELECT count(*) FROM outbox WHERE seq > (SELECT seq FROM outbox_cursor) AND published_at IS NULL")
		total = queryInt(t, db, "SELECT count(*) FROM outbox")
		inStream, err = streamCount(t.Context(), natsURL)
		return pending == 0 && err == nil && inStream >= uint64(total)
	})
	if !ok {
		t.Fatalf("outbox not drained within %s: %d of %d rows unpublished, stream has %d (%v)",
			timeout, pending, total, inStream, err)
	}
	return total
}

// hasEvent reports whether byOrder (checkStreamUnique's result) holds an
// event of the order moid for the given state.
func hasEvent(byOrder map[string][]event, moid, state string) bool {
	for _, ev := range byOrder[moid] {
		if ev.Type == "order."+state {
			return true
		}
	}
	return false
}

// checkStreamUnique fails the test for any event id that appears twice, a
// Nats-Msg-Id that differs from the event id, or a non-CloudEvents
// message; it returns the events grouped by merchantorderid, in stream
// order.
func checkStreamUnique(t *testing.T, events []event) map[string][]event {
	t.Helper()
	seen := map[string]uint64{}
	byOrder := map[string][]event{}
	dups := 0
	for _, e := range events {
		if e.SpecVersion != "1.0" || e.ID == "" || e.Type == "" {
			t.Errorf("stream message %d is not a CloudEvent: %+v", e.Seq, e)
		}
		if e.MsgID != e.ID {
			t.Errorf("stream message %d: Nats-Msg-Id %q, event id %q", e.Seq, e.MsgID, e.ID)
		}
		if first, ok := seen[e.ID]; ok {
			dups++
			if dups <= 10 {
				t.Errorf("event %s (%s of %s) is in the stream twice: messages %d and %d", e.ID, e.Type, e.MerchantOrderID, first, e.Seq)
			}
			continue
		}
		seen[e.ID] = e.Seq
		byOrder[e.MerchantOrderID] = append(byOrder[e.MerchantOrderID], e)
	}
	if dups > 0 {
		t.Errorf("duplicates in the stream: %d", dups)
	}
	return byOrder
}

// eventTypes lists the types of events, for messages.
func eventTypes(evs []event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// countUnique counts distinct event ids.
func countUnique(evs []event) int {
	seen := map[string]bool{}
	for _, e := range evs {
		seen[e.ID] = true
	}
	return len(seen)
}
