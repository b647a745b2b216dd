package publish_test

import (
	"bytes"
	"context"
	"crypto"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"orderd/provider"
	"orderd/provider/providertest"
	"orderd/publish"
	"orderd/receiver"
	"orderd/store"
)

const (
	// e2eRate is the steady webhook rate of the end-to-end benchmark.
	e2eRate = 1000
	// e2eSenders bounds the concurrent webhook requests.
	e2eSenders = 64
	// e2eRounds alternates the two phases so both see the same load.
	e2eRounds = 4
)

// e2eTarget is a receiver on loopback HTTP with its own store file.
type e2eTarget struct {
	url    string
	client *http.Client
	st     *store.Store
}

func newE2ETarget(b *testing.B, verifier *provider.Verifier) *e2eTarget {
	b.Helper()
	st, _ := openStore(b, store.Options{})
	srv := httptest.NewServer(receiver.New(receiver.Config{}, receiver.Deps{Store: st, Verifier: verifier}))
	b.Cleanup(srv.Close)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		MaxIdleConns: e2eSenders, MaxIdleConnsPerHost: e2eSenders, MaxConnsPerHost: e2eSenders,
	}}
	b.Cleanup(client.CloseIdleConnections)
	return &e2eTarget{url: srv.URL + receiver.DefaultPath, client: client, st: st}
}

// send posts webhooks lo..hi-1 at e2eRate, each due at a fixed time from
// the start (open loop), and records when each was due and answered.
func (tg *e2eTarget) send(bodies [][]byte, sigs []string, lo, hi int, due, answered []time.Time) (non200 int64) {
	var bad atomic.Int64
	work := make(chan int, e2eSenders)
	var wg sync.WaitGroup
	for range e2eSenders {
		wg.Go(func() {
			for i := range work {
				req, _ := http.NewRequest(http.MethodPost, tg.url, bytes.NewReader(bodies[i]))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Signature", sigs[i])
				resp, err := tg.client.Do(req)
				if err != nil {
					bad.Add(1)
					continue
				}
				resp.Body.Close()
				answered[i] = time.Now()
				if resp.StatusCode != http.StatusOK {
					bad.Add(1)
				}
			}
		})
	}
	start := time.Now()
	interval := time.Second / e2eRate
	for i := lo; i < hi; i++ {
		due[i] = start.Add(time.Duration(i-lo) * interval)
		time.Sleep(time.Until(due[i]))
		work <- i
	}
	close(work)
	wg.Wait()
	return bad.Load()
}

// BenchmarkEndToEnd_WebhookToJetStreamAck measures how long a webhook takes
// to become an event stored in JetStream, at a steady 1,000 webhooks/s: a
// signed webhook goes over loopback HTTP into the real receiver, which
// verifies it and commits it to an on-disk store (synchronous=FULL); the
// relay, woken by the commit, publishes it to an embedded server with
// SyncAlways. The clock stops when an ordered consumer on the stream
// receives the event, which happens only after JetStream stored it — so
// the figure includes the ack and a little delivery on top. Latency counts
// from when each webhook was due to be sent (open loop), so a backlog
// anywhere shows in it.
//
// The ceiling, in alternating rounds of the same run: the same webhooks at
// the same rate into a receiver with a store of its own and no relay or
// NATS (ingest_only_http_*): what the webhook path alone costs on this
// machine, which publishing can only add to.
//
// Each iteration is one webhook with a new order in each phase; run with a
// fixed count, e.g. -benchtime=10000x (10 s of load per phase).
func BenchmarkEndToEnd_WebhookToJetStreamAck(b *testing.B) {
	n := b.N
	key, _, err := providertest.GenerateKey(providertest.KeyRSA)
	if err != nil {
		b.Fatal(err)
	}
	verifier, err := provider.NewVerifier(key.Public())
	if err != nil {
		b.Fatal(err)
	}
	bodies, sigs, index := signedOrders(b, key, n)

	full := newE2ETarget(b, verifier)
	ingest := newE2ETarget(b, verifier)

	e := startNATS(b, b.TempDir(), "127.0.0.1:0")
	nc, err := publish.Connect(context.Background(), publish.ConnConfig{URL: e.ClientURL()})
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, err := publish.NewJetStream(nc, 0)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := publish.EnsureStream(context.Background(), js, publish.StreamConfig{}); err != nil {
		b.Fatal(err)
	}
	runRelay(b, newRelay(b, publish.RelayConfig{}, full.st, js))

	// The observer: a connection of its own reading the stream.
	_, watch := connectJS(b, e.ClientURL())
	cons, err := watch.OrderedConsumer(context.Background(), "ORDERD", jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy})
	if err != nil {
		b.Fatal(err)
	}
	arrived := make([]time.Time, n)
	var seen, stray atomic.Int64
	roundDone := make(chan struct{}, 1)
	var roundEnd atomic.Int64
	cc, err := cons.Consume(func(m jetstream.Msg) {
		at := time.Now()
		var ev struct{ Subject string }
		if err := json.Unmarshal(m.Data(), &ev); err != nil {
			stray.Add(1)
			return
		}
		i, ok := index[ev.Subject]
		if !ok || !arrived[i].IsZero() {
			stray.Add(1)
			return
		}
		arrived[i] = at
		if seen.Add(1) == roundEnd.Load() {
			roundDone <- struct{}{}
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Stop()

	due, answered := make([]time.Time, n), make([]time.Time, n)
	ingestDue, ingestAnswered := make([]time.Time, n), make([]time.Time, n)
	var non200 int64
	b.ResetTimer()
	for r := range e2eRounds {
		lo, hi := r*n/e2eRounds, (r+1)*n/e2eRounds
		if lo == hi {
			continue
		}
		non200 += ingest.send(bodies, sigs, lo, hi, ingestDue, ingestAnswered)
		roundEnd.Store(int64(hi))
		non200 += full.send(bodies, sigs, lo, hi, due, answered)
		select {
		case <-roundDone:
		case <-time.After(30 * time.Second):
			b.Fatalf("%d of %d events reached the stream within 30s of the round's last webhook (%d non-200 answers)", seen.Load(), hi, non200)
		}
	}
	b.StopTimer()
	if non200 > 0 || stray.Load() > 0 {
		b.Fatalf("%d non-200 answers, %d unexpected or repeated events", non200, stray.Load())
	}

	lat, ack, after, ingestHTTP := make([]time.Duration, n), make([]time.Duration, n), make([]time.Duration, n), make([]time.Duration, n)
	for i := range n {
		lat[i] = arrived[i].Sub(due[i])
		ack[i] = answered[i].Sub(due[i])
		after[i] = arrived[i].Sub(answered[i])
		ingestHTTP[i] = ingestAnswered[i].Sub(ingestDue[i])
	}
	pct := func(d []time.Duration, p float64) float64 {
		s := slices.Sorted(slices.Values(d))
		return float64(s[int(p*float64(len(s)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(pct(lat, 0.50), "p50_ms")
	b.ReportMetric(pct(lat, 0.99), "p99_ms")
	b.ReportMetric(pct(lat, 1), "max_ms")
	// The split: the webhook's own answer (200 after the commit), and
	// from that answer to the event in the stream (negative when the
	// event was stored before the answer reached the sender).
	b.ReportMetric(pct(ack, 0.50), "http_p50_ms")
	b.ReportMetric(pct(ack, 0.99), "http_p99_ms")
	b.ReportMetric(pct(after, 0.50), "after_http_p50_ms")
	b.ReportMetric(pct(after, 0.99), "after_http_p99_ms")
	b.ReportMetric(pct(ingestHTTP, 0.50), "ingest_only_http_p50_ms")
	b.ReportMetric(pct(ingestHTTP, 0.99), "ingest_only_http_p99_ms")
}

// signedOrders makes n completed orders as signed webhook bodies, and the
// index of each order id.
func signedOrders(b *testing.B, key crypto.Signer, n int) ([][]byte, []string, map[string]int) {
	b.Helper()
	bodies, sigs := make([][]byte, n), make([]string, n)
	index := make(map[string]int, n)
	for i := range n {
		o := newTestOrder(fmt.Sprintf("e2e%d", n), i)
		bodies[i] = o.raw("completed", false)
		var err error
		if sigs[i], err = providertest.Sign(key, bodies[i]); err != nil {
			b.Fatal(err)
		}
		index[o.id] = i
	}
	return bodies, sigs, index
}
