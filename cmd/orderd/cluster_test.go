package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"orderd/provider/providertest"
	"orderd/store"
)

// replicaDaemon is one in-process orderd of a replicated deployment.
type replicaDaemon struct {
	name   string
	dir    string
	addrs  listenAddrs
	cancel context.CancelFunc
	done   chan error
	log    *syncBuffer
}

func startReplica(t *testing.T, fake *providertest.Server, natsURL, name string, ttl time.Duration) *replicaDaemon {
	t.Helper()
	dir := t.TempDir()
	cfg := daemonConfig(t, dir, fake, "  url: "+natsURL+"\n", fmt.Sprintf(`cluster:
  enabled: true
  node: %s
  lease_ttl: %s
reconcile:
  schedules: {stale: "@every 1s", doubt: "off", balances: "off", requisites: "off", report: "off"}
log:
  level: info
  format: json
`, name, ttl))
	ctx, cancel := context.WithCancel(context.Background())
	r := &replicaDaemon{name: name, dir: dir, cancel: cancel, done: make(chan error, 1), log: &syncBuffer{}}
	go func() {
		r.done <- run(ctx, []string{"orderd", "run", "-config", cfg}, func(string) string { return "" }, nil, io.Discard, r.log)
	}()
	r.addrs = waitStarted(t, r.log, r.done)
	waitReady(t, r.addrs.Admin, r.done)
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *replicaDaemon) stop(t testing.TB) {
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("%s: run returned %v", r.name, err)
		}
		r.done <- nil // a second stop returns at once
	case <-time.After(30 * time.Second):
		t.Errorf("%s did not stop within 30s", r.name)
	}
}

// clusterStatus reads GET /v1/cluster.
func clusterStatus(t testing.TB, admin string) (st struct {
	Node, Leader     string
	Leading          bool
	Term, AppliedSeq uint64
	LogLastSeq, Lag  uint64
	Error            string
}) {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/v1/cluster")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/cluster: %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// digestOf reads the replicated tables' digest of a daemon's database.
func digestOf(t testing.TB, dir string) (string, uint64) {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(dir, "orderd.db"), store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close(context.Background())
	d, seq, err := st.Digest(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return d, seq
}

// TestRun_Replicated runs two daemons on a three-node NATS cluster:
// webhooks to either instance reach the events stream once each, through
// the leader's relay; both databases converge; when the leader stops,
// the other takes the lease and publishes what comes next.
func TestRun_Replicated(t *testing.T) {
	nc, fake := natsAndFake(t)
	ttl := 2 * time.Second
	a := startReplica(t, fake, nc.ClientURL(), "a", ttl)
	b := startReplica(t, fake, nc.ClientURL(), "b", ttl)

	js := jetStreamAt(t, nc.ClientURL())

	send := func(to *replicaDaemon, from, n int) {
		t.Helper()
		for i := from; i < from+n; i++ {
			mid := fmt.Sprintf("r-%d", i)
			if _, err := fake.CreateOrder(providertest.NewOrder{MerchantOrderID: mid, Amount: "10.00", Currency: "brl",
				WebhookURL: "http://" + to.addrs.Webhooks + "/webhooks/orders"}); err != nil {
				t.Fatal(err)
			}
			if err := fake.Complete(mid); err != nil {
				t.Fatal(err)
			}
		}
	}
	// completed events on the stream, by merchantOrderId.
	completed := func() map[string]int {
		seen := map[string]int{}
		s, err := js.Stream(t.Context(), "ORDERD")
		if err != nil {
			return seen
		}
		info, err := s.Info(t.Context())
		if err != nil || info.Config.Replicas != 3 {
			t.Fatalf("events stream: %v, replicas %d; want 3", err, info.Config.Replicas)
		}
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
			m, err := s.GetMsg(t.Context(), seq)
			if err != nil {
				continue
			}
			var ev struct{ Type, MerchantOrderID string }
			json.Unmarshal(m.Data, &ev)
			if ev.Type == "order.completed" {
				seen[ev.MerchantOrderID]++
			}
		}
		return seen
	}
	waitCompleted := func(n int) map[string]int {
		t.Helper()
		var seen map[string]int
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if seen = completed(); len(seen) >= n {
				break
			}
		}
		if len(seen) != n {
			t.Fatalf("%d orders completed on the stream, want %d", len(seen), n)
		}
		for mid, c := range seen {
			if c != 1 {
				t.Errorf("%s: %d order.completed events, want 1", mid, c)
			}
		}
		return seen
	}

	send(a, 0, 10)
	send(b, 10, 10)
	waitCompleted(20)

	sa, sb := clusterStatus(t, a.addrs.Admin), clusterStatus(t, b.addrs.Admin)
	if sa.Leader == "" || sa.Leader != sb.Leader || sa.Leading == sb.Leading {
		t.Fatalf("status a %+v, b %+v: want one agreed leader", sa, sb)
	}
	leader, follower := a, b
	if sb.Leading {
		leader, follower = b, a
	}
	// Both databases converge on the same replicated tables.
	var da, db string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if clusterStatus(t, a.addrs.Admin).AppliedSeq == clusterStatus(t, b.addrs.Admin).AppliedSeq {
			da, _ = digestOf(t, a.dir)
			db, _ = digestOf(t, b.dir)
			if da == db {
				break
			}
		}
	}
	if da != db {
		t.Fatal("the instances' databases differ")
	}

	// The leader stops; the follower takes over within two lease TTLs and
	// publishes the webhooks sent to it afterwards.
	start := time.Now()
	leader.stop(t)
	for !clusterStatus(t, follower.addrs.Admin).Leading {
		if time.Since(start) > 2*ttl+time.Second {
			t.Fatalf("no takeover within %s", time.Since(start))
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("takeover after %s", time.Since(start).Round(time.Millisecond))
	send(follower, 20, 5)
	waitCompleted(25)
}

// countingLimiter counts the calls it lets through.
type countingLimiter struct{ n int }

func (c *countingLimiter) Wait(context.Context) error { c.n++; return nil }

// TestLeaderLimiter: the jobs' provider calls go out only while this
// instance leads.
func TestLeaderLimiter(t *testing.T) {
	inner := &countingLimiter{}
	leading := false
	l := leaderLimiter{inner: inner, leading: func() bool { return leading }}
	if err := l.Wait(t.Context()); err == nil {
		t.Fatal("a follower's job call was let through")
	}
	leading = true
	if err := l.Wait(t.Context()); err != nil || inner.n != 1 {
		t.Fatalf("a leader's call: %v, %d waits on the shared limiter", err, inner.n)
	}
}
