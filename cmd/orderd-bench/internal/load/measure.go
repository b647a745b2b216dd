package load

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// loadConfig is what one measured phase does.
type loadConfig struct {
	// rate is requests per second; zero sends as fast as answers come.
	rate float64
	// conc senders each keep one connection alive.
	conc int
	// requests and duration bound the phase; both are required.
	requests int
	duration time.Duration
	// repeat is the fraction of requests that resend an acknowledged body.
	repeat  float64
	timeout time.Duration
}

// result is what one phase measured. Latencies are of answered requests
// only, from just before the request is written to the end of its answer.
type result struct {
	sent        int // requests attempted
	ok          int // answered 200
	unavailable int // answered 503
	other       int // answered with any other status
	errs        int // no answer: transport error or timeout
	repeats     int // requests that resent an acknowledged body
	duplicates  int // answers whose status word was "duplicate"
	latencies   []time.Duration
	elapsed     time.Duration
	// maxLag is the most a request started after its slot in -rate mode:
	// a large lag means the senders could not keep the rate.
	maxLag   time.Duration
	firstErr error
}

// target is one endpoint under measurement. Its fresh-body counter, its
// acknowledged bodies and its result carry over from round to round.
type target struct {
	url    string
	corpus *corpus
	cfg    loadConfig
	tr     *http.Transport
	client *http.Client
	fresh  atomic.Int64
	acked  *ackRing
	res    result
	rounds int
}

func newTarget(url string, c *corpus, cfg loadConfig) *target {
	tr := &http.Transport{
		MaxIdleConns:        cfg.conc,
		MaxIdleConnsPerHost: cfg.conc,
		MaxConnsPerHost:     cfg.conc,
		DisableCompression:  true,
		IdleConnTimeout:     30 * time.Second,
	}
	return &target{
		url: url, corpus: c, cfg: cfg, tr: tr,
		client: &http.Client{Transport: tr, Timeout: cfg.timeout},
		acked:  &ackRing{ids: make([]int, 0, 4096)},
	}
}

// close drops the target's idle connections.
func (tg *target) close() { tg.tr.CloseIdleConnections() }

// result returns what every round measured together, latencies sorted.
func (tg *target) result() *result {
	slices.Sort(tg.res.latencies)
	return &tg.res
}

// round sends at most requests requests within duration to the target
// and adds the answers to its result. Requests in flight when the
// duration ends are waited for (each within the timeout); no new one
// starts after it.
func (tg *target) round(ctx context.Context, requests int, duration time.Duration) error {
	cfg := tg.cfg
	start := time.Now()
	deadline := start.Add(duration)
	stop, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()

	var (
		next  atomic.Int64
		parts = make([]result, cfg.conc)
		wg    sync.WaitGroup
	)
	for w := range cfg.conc {
		wg.Go(func() {
			s := sender{
				url: tg.url, client: tg.client, corpus: tg.corpus, cfg: cfg, acked: tg.acked,
				rng: rand.New(rand.NewPCG(uint64(tg.rounds*cfg.conc+w), uint64(start.UnixNano()))),
				res: &parts[w],
			}
			s.res.latencies = make([]time.Duration, 0, requests/cfg.conc+1)
			for {
				i := int(next.Add(1) - 1)
				if i >= requests {
					return
				}
				if cfg.rate > 0 {
					due := start.Add(time.Duration(float64(i) * float64(time.Second) / cfg.rate))
					if due.After(deadline) || !sleepUntil(stop, due) {
						return
					}
					s.res.maxLag = max(s.res.maxLag, time.Since(due))
				}
				if stop.Err() != nil {
					return
				}
				if !s.send(ctx, i, &tg.fresh) {
					return
				}
			}
		})
	}
	wg.Wait()
	tg.rounds++

	res := &tg.res
	res.elapsed += time.Since(start)
	for i := range parts {
		p := &parts[i]
		res.sent += p.sent
		res.ok += p.ok
		res.unavailable += p.unavailable
		res.other += p.other
		res.errs += p.errs
		res.repeats += p.repeats
		res.duplicates += p.duplicates
		res.maxLag = max(res.maxLag, p.maxLag)
		res.latencies = append(res.latencies, p.latencies...)
		if res.firstErr == nil {
			res.firstErr = p.firstErr
		}
	}
	return ctx.Err()
}

// sleepUntil waits for t; false when ctx ends first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// sender is one goroutine's state.
type sender struct {
	url    string
	client *http.Client
	corpus *corpus
	cfg    loadConfig
	acked  *ackRing
	rng    *rand.Rand
	res    *result
}

var duplicateWord = []byte(`"status":"duplicate"`)

// send posts request i: a repeat of an acknowledged body when i falls on
// the repeat fraction and one exists, else the next fresh body. It returns
// false when there is nothing left to send.
func (s *sender) send(ctx context.Context, i int, fresh *atomic.Int64) bool {
	k, repeat := -1, false
	if repeatSlot(i, s.cfg.repeat) {
		k, repeat = s.acked.pick(s.rng)
	}
	if k < 0 {
		if f := int(fresh.Add(1) - 1); f < len(s.corpus.bodies) {
			k = f
		} else if k, repeat = s.acked.pick(s.rng); k < 0 {
			return false
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(s.corpus.bodies[k]))
	if err != nil {
		s.fail(err)
		return true
	}
	req.Header["Signature"] = []string{s.corpus.sigs[k]}
	req.Header["Content-Type"] = []string{"application/json"}
	s.res.sent++
	if repeat {
		s.res.repeats++
	}
	t0 := time.Now()
	resp, err := s.client.Do(req)
	if err != nil {
		s.fail(err)
		return true
	}
	var answer [256]byte
	n, _ := io.ReadFull(resp.Body, answer[:])
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	s.res.latencies = append(s.res.latencies, time.Since(t0))
	switch resp.StatusCode {
	case http.StatusOK:
		s.res.ok++
		if !repeat {
			s.acked.add(k)
		}
	case http.StatusServiceUnavailable:
		s.res.unavailable++
	default:
		s.res.other++
		if s.res.firstErr == nil {
			s.res.firstErr = fmt.Errorf("answer %d: %s", resp.StatusCode, bytes.TrimSpace(answer[:n]))
		}
	}
	if bytes.Contains(answer[:n], duplicateWord) {
		s.res.duplicates++
	}
	return true
}

func (s *sender) fail(err error) {
	s.res.errs++
	if s.res.firstErr == nil {
		s.res.firstErr = err
	}
}

// repeatSlot spreads the repeats evenly: request i is one when the running
// count of repeats owed, i×fraction, steps up at i.
func repeatSlot(i int, fraction float64) bool {
	return fraction > 0 && math.Floor(float64(i+1)*fraction) > math.Floor(float64(i)*fraction)
}

// ackRing holds the most recently acknowledged fresh bodies, from which
// repeats are drawn.
type ackRing struct {
	mu   sync.Mutex
	ids  []int
	next int
}

func (r *ackRing) add(k int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.ids) < cap(r.ids) {
		r.ids = append(r.ids, k)
		return
	}
	r.ids[r.next] = k
	r.next = (r.next + 1) % len(r.ids)
}

// pick returns an acknowledged body and true, or -1 and false when none is.
func (r *ackRing) pick(rng *rand.Rand) (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.ids) == 0 {
		return -1, false
	}
	return r.ids[rng.IntN(len(r.ids))], true
}

// rate is acknowledged (200) webhooks per second.
func (r *result) rate() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.ok) / r.elapsed.Seconds()
}

// percentile is the nearest-rank p-th percentile of the latencies.
func (r *result) percentile(p float64) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(r.latencies)))) - 1
	return r.latencies[min(max(i, 0), len(r.latencies)-1)]
}

// summary is the one-line report of a phase.
func (r *result) summary(target string, cfg loadConfig) string {
	var b strings.Builder
	mode := "flat"
	if cfg.rate > 0 {
		mode = fmt.Sprintf("%g/s", cfg.rate)
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }
	fmt.Fprintf(&b, "target=%s mode=%s c=%d sent=%d ok=%d 503=%d other=%d err=%d repeats=%d duplicate=%d rate=%.1f/s p50=%s p90=%s p99=%s max=%s elapsed=%s",
		target, mode, cfg.conc, r.sent, r.ok, r.unavailable, r.other, r.errs, r.repeats, r.duplicates,
		r.rate(), ms(r.percentile(50)), ms(r.percentile(90)), ms(r.percentile(99)), ms(r.percentile(100)),
		r.elapsed.Round(time.Millisecond))
	if cfg.rate > 0 {
		fmt.Fprintf(&b, " lag_max=%s", ms(r.maxLag))
	}
	return b.String()
}
