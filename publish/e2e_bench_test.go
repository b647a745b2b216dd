package publish_test

import (
	"bytes"
	"context"
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

// e2eRate is the steady webhook rate of the end-to-end benchmark.
const e2eRate = 1000

// BenchmarkEndToEnd_WebhookToJetStreamAck measures how long a webhook takes
// to become an event stored in JetStream, at a steady 1,000 webhooks/s: a
// signed webhook goes over loopback HTTP into the real receiver, which
// verifies it and commits it to an on-disk store (synchronous=FULL); the
// relay, woken by the commit, publishes it to an embedded server with
// SyncAlways and marks it. The clock stops when an ordered consumer on the
// stream receives the event, which happens only after JetStream stored it —
// so the figure includes the ack and a little delivery on top. Latency is
// counted from when each webhook was due to be sent (open loop), so a
// backlog anywhere shows up in it. Each iteration is one webhook with a new
// order; run with a fixed count, e.g. -benchtime=10000x (10 s of load).
func BenchmarkEndToEnd_WebhookToJetStreamAck(b *testing.B) {
	const senders = 64
	n := b.N
	key, _, err := providertest.GenerateKey(providertest.KeyRSA)
	if err != nil {
		b.Fatal(err)
	}
	verifier, err := provider.NewVerifier(key.Public())
	if err != nil {
		b.Fatal(err)
	}
	bodies, sigs := make([][]byte, n), make([]string, n)
	index := make(map[string]int, n)
	for i := range n {
		o := newTestOrder(fmt.Sprintf("e2e%d", n), i)
		bodies[i] = o.raw("completed", false)
		if sigs[i], err = providertest.Sign(key, bodies[i]); err != nil {
			b.Fatal(err)
		}
		index[o.id] = i
	}

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
	st, _ := openStore(b, store.Options{})
	runRelay(b, newRelay(b, publish.RelayConfig{}, st, js))
	srv := httptest.NewServer(receiver.New(receiver.Config{}, receiver.Deps{Store: st, Verifier: verifier}))
	defer srv.Close()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		MaxIdleConns: senders, MaxIdleConnsPerHost: senders, MaxConnsPerHost: senders,
	}}
	defer client.CloseIdleConnections()

	// The observer: a separate connection reading the stream.
	_, watch := connectJS(b, e.ClientURL())
	cons, err := watch.OrderedConsumer(context.Background(), "ORDERD", jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy})
	if err != nil {
		b.Fatal(err)
	}
	arrived := make([]time.Time, n)
	var seen atomic.Int64
	var stray atomic.Int64
	allIn := make(chan struct{})
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
		if seen.Add(1) == int64(n) {
			close(allIn)
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Stop()

	due := make([]time.Time, n)
	answered := make([]time.Time, n)
	var non200 atomic.Int64
	work := make(chan int, senders)
	var wg sync.WaitGroup
	for range senders {
		wg.Go(func() {
			for i := range work {
				req, _ := http.NewRequest(http.MethodPost, srv.URL+receiver.DefaultPath, bytes.NewReader(bodies[i]))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Signature", sigs[i])
				resp, err := client.Do(req)
				if err != nil {
					non200.Add(1)
					continue
				}
				resp.Body.Close()
				answered[i] = time.Now()
				if resp.StatusCode != http.StatusOK {
					non200.Add(1)
				}
			}
		})
	}

	b.ResetTimer()
	start := time.Now()
	interval := time.Second / e2eRate
	for i := range n {
		due[i] = start.Add(time.Duration(i) * interval)
		time.Sleep(time.Until(due[i]))
		work <- i
	}
	close(work)
	wg.Wait()
	select {
	case <-allIn:
	case <-time.After(30 * time.Second):
		b.Fatalf("%d of %d events reached the stream within 30s of the last webhook (%d non-200 answers)", seen.Load(), n, non200.Load())
	}
	b.StopTimer()
	sent := due[n-1].Sub(start) + interval

	if non200.Load() > 0 || stray.Load() > 0 {
		b.Fatalf("%d non-200 answers, %d unexpected or repeated events", non200.Load(), stray.Load())
	}
	lat, ack, after := make([]time.Duration, n), make([]time.Duration, n), make([]time.Duration, n)
	for i := range n {
		lat[i] = arrived[i].Sub(due[i])
		ack[i] = answered[i].Sub(due[i])
		after[i] = arrived[i].Sub(answered[i])
	}
	slices.Sort(lat)
	slices.Sort(ack)
	slices.Sort(after)
	ms := func(d []time.Duration, p float64) float64 {
		return float64(d[int(p*float64(n-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(n)/sent.Seconds(), "webhooks/s")
	b.ReportMetric(ms(lat, 0.50), "p50_ms")
	b.ReportMetric(ms(lat, 0.99), "p99_ms")
	b.ReportMetric(ms(lat, 1), "max_ms")
	// The split: the webhook's own answer (200 after the commit), and
	// the time from that answer to the event in the stream (negative
	// when the event was stored before the answer reached the sender).
	b.ReportMetric(ms(ack, 0.50), "http_p50_ms")
	b.ReportMetric(ms(ack, 0.99), "http_p99_ms")
	b.ReportMetric(ms(after, 0.50), "after_http_p50_ms")
	b.ReportMetric(ms(after, 0.99), "after_http_p99_ms")
}
