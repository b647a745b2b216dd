package receiver_test

import (
	"bytes"
	"context"
	"crypto"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"orderd/provider/providertest"
	"orderd/receiver"
	"orderd/store"
)

// benchSenders is the number of concurrent senders, each with its own
// keep-alive connection.
const benchSenders = 64

// BenchmarkReceiver drives the real handler over HTTP on loopback with 64
// concurrent keep-alive senders: distinct signed orders with every fifth
// request a repeat of an earlier one, stored in an on-disk database with
// synchronous=FULL. In the same run it sends the same requests to the same
// handler whose store keeps nothing — the ceiling set by HTTP, signature
// verification and decoding — and reports the ratio. The two phases
// alternate in rounds, so a change in the machine's background load during
// the run touches both alike.
//
// Each iteration is one webhook in each of the two phases. Run with a fixed
// count, for example -benchtime=20000x; signing the bodies (outside the
// timer) takes a while the first time.
func BenchmarkReceiver(b *testing.B) {
	key, _ := testKeys(b)
	verifier := newVerifier(b, key)
	corpus := &signedCorpus{key: key}

	b.Run(fmt.Sprintf("senders=%d", benchSenders), func(b *testing.B) {
		plan, unique := requestPlan(b.N)
		corpus.grow(b, unique)
		b.StopTimer()

		// The store's commits are counted to show how writes group.
		var commits, writes, commitNanos atomic.Int64
		st, err := store.Open(b.Context(), filepath.Join(b.TempDir(), "bench.db"), store.Options{
			OnCommit: func(batch int, d time.Duration) {
				commits.Add(1)
				writes.Add(int64(batch))
				commitNanos.Add(int64(d))
			},
		})
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close(context.Background())
		full := startTarget(b, receiver.New(receiver.Config{}, receiver.Deps{
			Store: st, Verifier: verifier, Logger: slog.New(slog.DiscardHandler),
		}))
		// The ceiling: same server, handler, verifier and decoding; the
		// store accepts and keeps nothing.
		ceiling := startTarget(b, receiver.New(receiver.Config{}, receiver.Deps{
			Store: discardStore{}, Verifier: verifier, Logger: slog.New(slog.DiscardHandler),
		}))

		fullRes, ceilRes := newLoadResult(len(plan)), newLoadResult(len(plan))
		const rounds = 4
		b.StartTimer()
		for r := range rounds {
			lo, hi := r*len(plan)/rounds, (r+1)*len(plan)/rounds
			ceiling.send(b, corpus, plan, lo, hi, &ceilRes)
			full.send(b, corpus, plan, lo, hi, &fullRes)
		}
		b.StopTimer()

		if fullRes.non200 > 0 || ceilRes.non200 > 0 {
			b.Logf("non-200 answers: stored %d, ceiling %d", fullRes.non200, ceilRes.non200)
		}
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(fullRes.rate(), "webhooks/s")
		b.ReportMetric(fullRes.percentile(50), "p50_ms")
		b.ReportMetric(fullRes.percentile(99), "p99_ms")
		b.ReportMetric(ceilRes.rate(), "ceiling_webhooks/s")
		b.ReportMetric(ceilRes.percentile(99), "ceiling_p99_ms")
		b.ReportMetric(fullRes.rate()/ceilRes.rate(), "ratio")
		b.ReportMetric(float64(fullRes.non200), "non200")
		if n := commits.Load(); n > 0 {
			b.ReportMetric(float64(writes.Load())/float64(n), "writes/commit")
			b.ReportMetric(float64(commitNanos.Load())/float64(n)/1e6, "commit_ms")
		}
	})
}

// requestPlan lists which body each of n requests sends: every fifth is a
// repeat of a body sent shortly before, the others are distinct orders.
func requestPlan(n int) (plan []int, unique int) {
	plan = make([]int, n)
	for i := range plan {
		if i%5 == 4 && unique > 0 {
			// Repeat one of the last hundred or so distinct orders.
			plan[i] = unique - 1 - (i*7919)%min(unique, 128)
			continue
		}
		plan[i] = unique
		unique++
	}
	return plan, unique
}

// signedCorpus holds signed order bodies, grown on demand and shared by the
// benchmark's runs so each body is signed once.
type signedCorpus struct {
	key    crypto.Signer
	bodies [][]byte
	sigs   []string
}

func (c *signedCorpus) grow(b *testing.B, n int) {
	b.Helper()
	from := len(c.bodies)
	if n <= from {
		return
	}
	b.StopTimer()
	defer b.StartTimer()
	c.bodies = slices.Grow(c.bodies, n-from)[:n]
	c.sigs = slices.Grow(c.sigs, n-from)[:n]
	var wg sync.WaitGroup
	var failed atomic.Bool
	workers := runtime.GOMAXPROCS(0)
	for w := range workers {
		wg.Go(func() {
			for i := from + w; i < n; i += workers {
				body := newOrder(i, "completed").JSON()
				sig, err := providertest.Sign(c.key, body)
				if err != nil {
					failed.Store(true)
					return
				}
				c.bodies[i], c.sigs[i] = body, sig
			}
		})
	}
	wg.Wait()
	if failed.Load() {
		b.Fatal("signing the corpus failed")
	}
}

// loadResult is what one phase measured.
type loadResult struct {
	elapsed   time.Duration
	latencies []time.Duration
	non200    int
}

func newLoadResult(n int) loadResult {
	return loadResult{latencies: make([]time.Duration, n)}
}

func (r loadResult) rate() float64 {
	return float64(len(r.latencies)) / r.elapsed.Seconds()
}

// percentile returns the p-th percentile latency in milliseconds.
func (r loadResult) percentile(p float64) float64 {
	s := slices.Clone(r.latencies)
	slices.Sort(s)
	i := int(float64(len(s)-1) * p / 100)
	return float64(s[i]) / float64(time.Millisecond)
}

// target is a handler served on a real loopback server, with a client
// keeping one connection per sender alive.
type target struct {
	url    string
	client *http.Client
}

func startTarget(b *testing.B, h http.Handler) *target {
	b.Helper()
	srv := receiver.NewServer(receiver.ServerConfig{Addr: "127.0.0.1:0"}, h, nil)
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	tr := &http.Transport{
		MaxIdleConns:        benchSenders,
		MaxIdleConnsPerHost: benchSenders,
		MaxConnsPerHost:     benchSenders,
		DisableCompression:  true,
	}
	b.Cleanup(func() {
		tr.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			b.Error(err)
		}
	})
	return &target{
		url:    "http://" + srv.Addr() + receiver.DefaultPath,
		client: &http.Client{Transport: tr, Timeout: 30 * time.Second},
	}
}

// send posts plan[lo:hi] from benchSenders goroutines, timing each answer
// into res. It is bounded by the plan's length and by a deadline.
func (t *target) send(b *testing.B, c *signedCorpus, plan []int, lo, hi int, res *loadResult) {
	b.Helper()
	ctx, cancel := context.WithTimeout(b.Context(), 10*time.Minute)
	defer cancel()
	next := atomic.Int64{}
	next.Store(int64(lo))
	var non200 atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for range benchSenders {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= hi || ctx.Err() != nil {
					return
				}
				k := plan[i]
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(c.bodies[k]))
				if err != nil {
					failed.Store(err)
					return
				}
				req.Header["Signature"] = []string{c.sigs[k]}
				req.Header["Content-Type"] = []string{"application/json"}
				t0 := time.Now()
				resp, err := t.client.Do(req)
				if err != nil {
					failed.Store(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				res.latencies[i] = time.Since(t0)
				if resp.StatusCode != http.StatusOK {
					non200.Add(1)
				}
			}
		})
	}
	wg.Wait()
	res.elapsed += time.Since(start)
	if err, ok := failed.Load().(error); ok {
		b.Fatalf("send: %v", err)
	}
	res.non200 += int(non200.Load())
}

// discardStore accepts every write and keeps nothing: the handler's cost
// without the store, for the ceiling.
type discardStore struct{}

func (discardStore) Apply(context.Context, store.Observation) (store.Result, error) {
	return store.Result{Outcome: store.OutcomeNew}, nil
}

func (discardStore) Quarantine(context.Context, store.QuarantinedWebhook) error { return nil }

func (discardStore) MarkForPoll(context.Context, string, string) error { return nil }
