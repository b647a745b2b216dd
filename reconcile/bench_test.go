package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"orderd/provider"
	"orderd/provider/providertest"
	"orderd/reconcile"
	"orderd/store"
)

// BenchmarkReconciler_RunStale polls 100,000 stale orders against the fake
// provider at rate_limit 2000/s (burst 1) and reports the achieved rate
// beside the limit and beside the ceiling (the same job without a limiter,
// measured right after it on the same warm store), the most calls sent in
// any one-second window, and the heap in use before, during (peak) and
// after the limited run. Run it once:
//
//	go test -run '^$' -bench BenchmarkReconciler_RunStale -benchtime 1x ./reconcile/
func BenchmarkReconciler_RunStale(b *testing.B) {
	const (
		orders      = 100_000
		rateLimit   = 2000
		concurrency = 64
	)
	var commits, commitNanos, commitWrites atomic.Int64
	ck := newClock()
	key := signingKey(b)
	fake := providertest.NewServer(providertest.Options{Key: key, Now: ck.Now, MaxRecords: 4000})
	b.Cleanup(fake.Close)
	st, err := store.Open(context.Background(), filepath.Join(b.TempDir(), "orderd.db"), store.Options{
		Now: ck.Now, CheckAfter: staleAfter,
		OnCommit: func(batch int, d time.Duration) {
			commits.Add(1)
			commitNanos.Add(int64(d))
			commitWrites.Add(int64(batch))
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = st.Close(ctx)
	})

	// The orders exist at the provider and in the store, in processing.
	const batch = 1000
	for i := 0; i < orders; i += batch {
		obs := make([]store.Observation, 0, batch)
		for j := i; j < i+batch; j++ {
			mid := fmt.Sprintf("bench-%06d", j)
			if _, err := fake.CreateOrder(providertest.NewOrder{MerchantOrderID: mid, Amount: "10.00", Currency: "brl"}); err != nil {
				b.Fatal(err)
			}
			raw, _ := fake.OrderJSON(mid)
			o, err := provider.DecodeOrder(raw)
			if err != nil {
				b.Fatal(err)
			}
			obs = append(obs, store.Observation{Source: store.SourceGateway, Order: o, Raw: raw, ObservedAt: ck.Now()})
		}
		err := st.Write(context.Background(), func(tx *store.Tx) error {
			for _, ob := range obs {
				if _, err := tx.ApplyObservation(ob); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}

	// Two clients over one connection pool: one without a limiter, whose
	// run measures the ceiling of this machine right now, and one with
	// the 2000/s bucket. Each records every call's send time.
	transport := &http.Transport{MaxIdleConnsPerHost: concurrency, MaxConnsPerHost: concurrency}
	b.Cleanup(transport.CloseIdleConnections)
	newClient := func(limiter provider.Limiter, sent *callLog) *provider.Client {
		c, err := provider.NewClient(provider.Options{
			BaseURL: fake.URL(), APIKey: fake.APIKey(), Timeout: 10 * time.Second,
			Limiter: limiter, HTTPClient: &http.Client{Transport: transport},
			Observe: func(_, _ string, d time.Duration) { sent.add(time.Now().Add(-d)) },
		})
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	var ceilingLog, limitedLog callLog
	run := func(client *provider.Client) {
		rec := reconcile.New(reconcile.Config{StaleAfter: staleAfter, Concurrency: concurrency, Now: ck.Now}, st, client, nil)
		ck.Advance(2 * time.Hour) // every order is due again
		s, err := rec.RunStale(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if s.Counts["checked"] != orders || s.Counts["errors"] != 0 {
			b.Fatalf("counts = %v", s.Counts)
		}
	}
	// A first pass without a limiter warms the caches; the ceiling is
	// measured after the limited run, on the same warm state.
	var warmLog callLog
	unlimited := newClient(nil, &warmLog)
	run(unlimited)
	grants := &grantLog{lim: reconcile.NewLimiter(rateLimit, 1)}
	limited := newClient(grants, &limitedLog)

	heapBefore := heapInuse()
	var (
		peak     atomic.Uint64
		stopPeak = make(chan struct{})
		peakDone = make(chan struct{})
	)
	go func() {
		defer close(peakDone)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stopPeak:
				return
			case <-t.C:
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				if ms.HeapInuse > peak.Load() {
					peak.Store(ms.HeapInuse)
				}
			}
		}
	}()

	commits.Store(0)
	commitNanos.Store(0)
	commitWrites.Store(0)
	b.ResetTimer()
	for b.Loop() {
		run(limited)
	}
	b.StopTimer()
	close(stopPeak)
	<-peakDone
	heapAfter := heapInuse()
	fakeMax := maxInWindow(fake.Calls(providertest.PathGetStatus), time.Second)
	run(newClient(nil, &ceilingLog))

	achieved, maxWindow, maxWindow10 := limitedLog.rate()
	ceiling, _, _ := ceilingLog.rate()
	b.ReportMetric(achieved, "calls/s")
	b.ReportMetric(rateLimit, "limit-calls/s")
	b.ReportMetric(achieved/rateLimit, "ratio")
	b.ReportMetric(ceiling, "ceiling-calls/s")
	_, maxGrants, _ := grants.log.rate()
	b.ReportMetric(float64(maxGrants), "max-grants/1s-window")
	b.ReportMetric(float64(maxWindow), "max-calls/1s-window")
	b.ReportMetric(float64(maxWindow10)/10, "max-calls/s-over-10s-window")
	b.ReportMetric(float64(fakeMax), "fake-max-calls/1s-window")
	b.ReportMetric(float64(commitWrites.Load())/float64(commits.Load()), "writes/commit")
	b.ReportMetric(float64(commitNanos.Load())/float64(commits.Load())/1e6, "ms/commit")
	b.ReportMetric(float64(heapBefore)/(1<<20), "heap-before-MB")
	b.ReportMetric(float64(peak.Load())/(1<<20), "heap-peak-MB")
	b.ReportMetric(float64(heapAfter)/(1<<20), "heap-after-MB")
}

// grantLog is the limiter with a record of when it lets each call go: the
// time its reservation is for, before any scheduling delay of the waiting
// goroutine.
type grantLog struct {
	lim *rate.Limiter
	log callLog
}

// Wait waits like rate.Limiter.Wait and records the granted time.
func (g *grantLog) Wait(ctx context.Context) error {
	now := time.Now()
	r := g.lim.ReserveN(now, 1)
	if !r.OK() {
		return errors.New("rate: burst exceeded")
	}
	delay := r.DelayFrom(now)
	g.log.add(now.Add(delay))
	if delay == 0 {
		return nil
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		r.Cancel()
		return ctx.Err()
	}
}

// callLog records call send times.
type callLog struct {
	mu    sync.Mutex
	times []int64
}

func (l *callLog) add(t time.Time) {
	l.mu.Lock()
	l.times = append(l.times, t.UnixNano())
	l.mu.Unlock()
}

// rate returns the calls per second from the first call to the last, and
// the most calls in any one-second and any ten-second window. The times
// are when each call was sent, after the limiter let it go; scheduling
// delays can bunch sends a little closer than the limiter's grants.
func (l *callLog) rate() (perSecond float64, max1s, max10s int) {
	l.mu.Lock()
	times := slices.Clone(l.times)
	l.mu.Unlock()
	if len(times) < 2 {
		return 0, len(times), len(times)
	}
	slices.Sort(times)
	span := time.Duration(times[len(times)-1] - times[0])
	return float64(len(times)-1) / span.Seconds(), maxPerWindow(times, time.Second), maxPerWindow(times, 10*time.Second)
}

func heapInuse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// maxPerWindow returns the most of the sorted unix-nano times inside any
// window of length w.
func maxPerWindow(times []int64, w time.Duration) int {
	best, j := 0, 0
	for i := range times {
		for times[i]-times[j] >= int64(w) {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}
