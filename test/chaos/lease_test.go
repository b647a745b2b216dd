//go:build chaos

package chaos_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"orderd/provider/providertest"
)

// The lease's bucket and key (cluster/lease.go).
const (
	leaseBucket = "ORDERD_LEASE"
	leaseKey    = "leader"
)

// leaseWrite is one revision of the lease key: who wrote it and when the
// stream stored it (the server's timestamp, on the machine's one clock).
type leaseWrite struct {
	rev  uint64
	node string // "" for a delete (a release)
	at   time.Time
}

// leaseLog is the lease's history as the suite saw it: one watcher per
// NATS node, each connected to that node alone, so a write that a quorum
// stored is seen even while one node is cut off or paused. The bucket
// keeps one revision for lease_ttl only, so the history exists only if
// watched as it happens.
type leaseLog struct {
	mu     sync.Mutex
	writes map[uint64]leaseWrite
	since  time.Time
	wg     sync.WaitGroup
	cancel context.CancelFunc
}

// watchLease starts the watchers; stop ends them.
func watchLease(w *world) *leaseLog {
	ctx, cancel := context.WithCancel(context.Background())
	ll := &leaseLog{writes: map[uint64]leaseWrite{}, since: time.Now(), cancel: cancel}
	for _, n := range w.nats {
		ll.wg.Go(func() { ll.watch(ctx, n.url()) })
	}
	return ll
}

func (ll *leaseLog) stop() {
	ll.cancel()
	ll.wg.Wait()
}

// watch follows the lease through one node until ctx ends, starting a new
// watch whenever one ends (the node was killed, say).
func (ll *leaseLog) watch(ctx context.Context, url string) {
	nc, err := nats.Connect(url, nats.DontRandomize(), nats.IgnoreDiscoveredServers(),
		nats.MaxReconnects(-1), nats.ReconnectWait(200*time.Millisecond), nats.Timeout(time.Second))
	for err != nil {
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
		nc, err = nats.Connect(url, nats.DontRandomize(), nats.IgnoreDiscoveredServers(),
			nats.MaxReconnects(-1), nats.ReconnectWait(200*time.Millisecond), nats.Timeout(time.Second))
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return
	}
	for ctx.Err() == nil {
		ll.watchOnce(ctx, js)
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
}

func (ll *leaseLog) watchOnce(ctx context.Context, js jetstream.JetStream) {
	actx, cancel := context.WithTimeout(ctx, 2*time.Second)
	kv, err := js.KeyValue(actx, leaseBucket)
	cancel()
	if err != nil {
		return
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wt, err := kv.Watch(wctx, leaseKey, jetstream.IncludeHistory())
	if err != nil {
		return
	}
	defer wt.Stop()
	// A watch that has delivered nothing for a while on a node that
	// came back may be stuck on a consumer the node lost: start again.
	idle := time.NewTimer(4 * leaseTTL)
	defer idle.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-idle.C:
			return
		case e, ok := <-wt.Updates():
			if !ok {
				return
			}
			idle.Reset(4 * leaseTTL)
			if e == nil {
				continue
			}
			lw := leaseWrite{rev: e.Revision(), at: e.Created()}
			if e.Operation() == jetstream.KeyValuePut {
				var v struct {
					Node string `json:"node"`
				}
				_ = json.Unmarshal(e.Value(), &v)
				lw.node = v.Node
			}
			ll.mu.Lock()
			ll.writes[lw.rev] = lw
			ll.mu.Unlock()
		}
	}
}

// history returns the writes seen, by revision.
func (ll *leaseLog) history() []leaseWrite {
	ll.mu.Lock()
	defer ll.mu.Unlock()
	out := make([]leaseWrite, 0, len(ll.writes))
	for _, w := range ll.writes {
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].rev < out[j].rev })
	return out
}

// providerCall is one call the fake provider recorded.
type providerCall struct {
	Endpoint string    `json:"endpoint"`
	At       time.Time `json:"at"`
	Remote   string    `json:"remote"`
}

// leaderOnly reports whether a call to endpoint is made by the leader's
// jobs alone (polls, balances, requisite lists); the gateway's creations
// are made by any instance.
func leaderOnly(endpoint string) bool {
	switch endpoint {
	case providertest.PathGetStatus, providertest.PathBalances, providertest.PathRequisiteOrders:
		return true
	}
	return false
}

// leaseVerdict is what the checker concluded about the leader-only calls.
type leaseVerdict struct {
	calls        int            // leader-only calls checked
	byNode       map[string]int // of them, per instance
	unleased     int
	unverifiable int // the watchers missed a revision that might cover the call
	examples     []string
	moves        int // how often the lease changed hands
}

// checkLease counts leader-only calls made by an instance whose last lease
// write before the call is older than 9/10 of lease_ttl (or that wrote
// none): the bound within which a leader must stop acting
// (docs/replicated-mode.md). Calls in the first second of watching are
// not judged: the watchers may not have caught up yet.
func checkLease(w *world, ll *leaseLog, calls []providerCall) leaseVerdict {
	v := leaseVerdict{byNode: map[string]int{}}
	hist := ll.history()
	if len(hist) == 0 {
		return v
	}
	seen := map[uint64]bool{}
	prev := ""
	for _, h := range hist {
		seen[h.rev] = true
		if h.node != "" && h.node != prev {
			if prev != "" {
				v.moves++
			}
			prev = h.node
		}
	}
	minRev, maxRev := hist[0].rev, hist[len(hist)-1].rev
	bound := leaseTTL - leaseTTL/10
	for _, c := range calls {
		if !leaderOnly(c.Endpoint) || c.At.Before(ll.since.Add(time.Second)) {
			continue
		}
		host, _, _ := net.SplitHostPort(c.Remote)
		od := w.byIP(host)
		if od == nil {
			continue
		}
		v.calls++
		v.byNode[od.name]++
		var last *leaseWrite
		for i := range hist {
			if hist[i].at.After(c.At) {
				break
			}
			if hist[i].node == od.name {
				last = &hist[i]
			}
		}
		if last != nil && c.At.Sub(last.at) <= bound {
			continue
		}
		// A revision the watchers missed, between this instance's last
		// seen write and the first write after the call, may have been
		// a renewal by this instance: the call cannot be judged.
		from, to := minRev, maxRev+1
		if last != nil {
			from = last.rev
		}
		for _, h := range hist {
			if h.at.After(c.At) {
				to = h.rev
				break
			}
		}
		missed := false
		for r := from; r < to; r++ {
			if !seen[r] {
				missed = true
				break
			}
		}
		if missed {
			v.unverifiable++
			continue
		}
		v.unleased++
		if len(v.examples) < 3 {
			since := "never held the lease"
			if last != nil {
				since = fmt.Sprintf("last lease write %s earlier (rev %d)", c.At.Sub(last.at).Round(time.Millisecond), last.rev)
			}
			v.examples = append(v.examples, fmt.Sprintf("%s %s at %s: %s", od.name, c.Endpoint, c.At.Format("15:04:05.000"), since))
		}
	}
	return v
}
