package reconcile_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"orderd/provider"
	"orderd/provider/providertest"
	"orderd/reconcile"
	"orderd/store"
)

// maxInWindow returns the most calls that fall in any window of length w.
func maxInWindow(calls []providertest.CallRecord, w time.Duration) int {
	at := make([]time.Time, len(calls))
	for i, c := range calls {
		at[i] = c.At
	}
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	best, j := 0, 0
	for i := range at {
		for at[i].Sub(at[j]) >= w {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}

func TestReconciler_RunStale_respectsRateLimit(t *testing.T) {
	const (
		ratePerSecond = 5
		burst         = 1
		orders        = 16
	)
	e := newEnv(t, envOptions{
		limiter: reconcile.NewLimiter(ratePerSecond, burst),
		cfg:     reconcile.Config{Concurrency: 4},
	})
	for i := range orders {
		mid := fmt.Sprintf("r-%d", i)
		e.createAtFake(mid, "10.00", provider.TypePayin)
		e.learn(mid, store.SourceGateway)
	}
	e.clock.Advance(staleAfter + time.Second)

	var (
		mu       sync.Mutex
		progress []reconcile.Progress
	)
	rec := reconcile.New(reconcile.Config{
		StaleAfter: staleAfter, Concurrency: 4, Now: e.clock.Now,
		Progress: func(p reconcile.Progress) {
			mu.Lock()
			progress = append(progress, p)
			mu.Unlock()
		},
	}, e.st, e.client, nil)
	start := time.Now()
	s := e.run(rec.RunStale)
	elapsed := time.Since(start)

	calls := e.fake.Calls(providertest.PathGetStatus)
	if len(calls) != orders || s.Counts["checked"] != orders {
		t.Fatalf("%d get-status calls, counts %v; want %d", len(calls), s.Counts, orders)
	}
	if got, limit := maxInWindow(calls, time.Second), ratePerSecond+burst; got > limit {
		t.Fatalf("%d calls in one second, limit %d (rate + burst)", got, limit)
	}
	// 16 calls at 5/s with a burst of 1 need at least 3 s.
	if min := time.Duration(orders-burst) * time.Second / ratePerSecond; elapsed < min {
		t.Fatalf("run took %s, the limiter allows no less than %s", elapsed, min)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(progress) != orders+1 || progress[0].Done != 0 || progress[len(progress)-1].Done != orders ||
		progress[len(progress)-1].Total != orders || progress[0].Job != reconcile.JobStale {
		t.Fatalf("progress = %+v", progress)
	}
}
