//go:build e2e

package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"orderd/store"
	"orderd/test/support/testaddr"
)

// leaseTTL is cluster.lease_ttl in these tests.
const leaseTTL = 2 * time.Second

// newClusterNATS prepares node i of a three-node nats-server cluster in
// dir, routed to every cluster address in routes, JetStream with
// sync_interval: always (the setting replicated mode's guarantees assume).
func newClusterNATS(t *testing.T, dir string, i int, routes []string) *natsServer {
	t.Helper()
	dir = filepath.Join(dir, fmt.Sprintf("nats-%d", i+1))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	n := &natsServer{t: t, addr: testaddr.Loopback(t), monitor: testaddr.Loopback(t),
		confPath: filepath.Join(dir, "nats.conf"), logPath: filepath.Join(dir, "nats.log")}
	host, port, _ := net.SplitHostPort(n.addr)
	mhost, mport, _ := net.SplitHostPort(n.monitor)
	var rs []string
	for _, r := range routes {
		rs = append(rs, fmt.Sprintf("%q", "nats://"+r))
	}
	conf := fmt.Sprintf(`server_name: n%d
host: %s
port: %s
http: "%s:%s"
# A webhook of receiver.max_body_bytes (1 MiB) fits in one log entry.
max_payload: 4MB
jetstream {
  store_dir: %q
  max_memory_store: 64MB
  max_file_store: 1GB
  sync_interval: always
}
cluster {
  name: orderd-e2e
  listen: %q
  routes: [%s]
}
`, i+1, host, port, mhost, mport, filepath.Join(dir, "jetstream"), routes[i], strings.Join(rs, ", "))
	if err := os.WriteFile(n.confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	dumpLogsOnFailure(t, n.logPath)
	return n
}

// cluster is a replicated deployment: three nats-servers, instances of
// orderd, the fake provider and the test's signing key.
type cluster struct {
	t      *testing.T
	dir    string
	nats   []*natsServer
	fake   *fakeProvider
	signer *signer
	ods    []*orderd
	opts   clusterOptions
}

type clusterOptions struct {
	reconcile string
	rate      float64
	burst     int
}

func newCluster(t *testing.T, o clusterOptions) *cluster {
	t.Helper()
	dir := t.TempDir()
	c := &cluster{t: t, dir: dir, fake: startFake(t, dir), signer: newSigner(t, dir), opts: o}
	routes := []string{testaddr.Loopback(t), testaddr.Loopback(t), testaddr.Loopback(t)}
	for i := range 3 {
		c.nats = append(c.nats, newClusterNATS(t, dir, i, routes))
	}
	for _, n := range c.nats {
		n.p = startProc(t, "nats-server", n.logPath, nil, bins.nats, "-c", n.confPath)
	}
	for i := range c.nats {
		c.waitNATS(i)
	}
	return c
}

// waitNATS waits until node i runs JetStream and knows the cluster's meta
// leader.
func (c *cluster) waitNATS(i int) {
	c.t.Helper()
	n := c.nats[i]
	if !waitFor(60*time.Second, 50*time.Millisecond, func() bool {
		code, body := httpStatus("http://" + n.monitor + "/jsz")
		var jsz struct {
			Meta struct {
				Leader string `json:"leader"`
			} `json:"meta_cluster"`
		}
		return (code == http.StatusOK && json.Unmarshal([]byte(body), &jsz) == nil && jsz.Meta.Leader != "") || !n.p.running()
	}) || !n.p.running() {
		c.t.Fatalf("nats node %d: no JetStream meta leader within 60s (running %v)", i+1, n.p.running())
	}
}

func (c *cluster) startNATS(i int) {
	c.t.Helper()
	n := c.nats[i]
	n.p = startProc(c.t, "nats-server", n.logPath, nil, bins.nats, "-c", n.confPath)
	c.waitNATS(i)
}

// natsURL lists every node, as an instance's nats.url does.
func (c *cluster) natsURL() string {
	var urls []string
	for _, n := range c.nats {
		urls = append(urls, n.URL())
	}
	return strings.Join(urls, ",")
}

// addOrderd prepares instance name with its own directory (its own disk).
func (c *cluster) addOrderd(name string) *orderd {
	c.t.Helper()
	dir := filepath.Join(c.dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		c.t.Fatal(err)
	}
	od := newOrderd(c.t, dir, orderdConfig{
		providerURL: c.fake.url, apiKey: c.fake.apiKey,
		publicKeys: []string{c.fake.pubKey, c.signer.pubKey},
		natsURL:    c.natsURL(),
		reconcile:  c.opts.reconcile,
		rate:       c.opts.rate, burst: c.opts.burst,
		extra: fmt.Sprintf("cluster:\n  enabled: true\n  node: %s\n  lease_ttl: %s\n", name, leaseTTL),
	})
	c.ods = append(c.ods, od)
	return od
}

// clusterView is GET /v1/cluster.
type clusterView struct {
	Node       string `json:"node"`
	Leader     string `json:"leader"`
	Leading    bool   `json:"leading"`
	Term       uint64 `json:"term"`
	LogLastSeq uint64 `json:"logLastSeq"`
	AppliedSeq uint64 `json:"appliedSeq"`
	Snapshot   *struct {
		Seq           uint64 `json:"seq"`
		Bytes         uint64 `json:"bytes"`
		UploadedBytes uint64 `json:"uploadedBytes"`
	} `json:"snapshot"`
}

// view reads an instance's GET /v1/cluster; ok is false when it does not
// answer.
func view(od *orderd) (clusterView, bool) {
	code, body := httpStatus("http://" + od.admin + "/v1/cluster")
	var v clusterView
	if code != http.StatusOK || json.Unmarshal([]byte(body), &v) != nil {
		return v, false
	}
	return v, true
}

// leader returns the running instance that leads, waiting up to timeout
// for exactly one.
func (c *cluster) leader(timeout time.Duration) *orderd {
	c.t.Helper()
	var found *orderd
	if !waitFor(timeout, 20*time.Millisecond, func() bool {
		found = nil
		n := 0
		for _, od := range c.ods {
			if od.p == nil || !od.p.running() {
				continue
			}
			if v, ok := view(od); ok && v.Leading {
				found = od
				n++
			}
		}
		return n == 1
	}) {
		c.t.Fatalf("no single leader within %s", timeout)
	}
	return found
}

// digest is the replicated tables' digest of an instance's database.
func digest(t *testing.T, path string) (string, uint64) {
	t.Helper()
	st, err := store.Open(t.Context(), path, store.Options{ReadOnly: true})
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

// converged waits until every running instance has applied the log's end
// (GET /v1/cluster: the same last sequence, applied everywhere), and then
// checks that their databases agree (digests of the replicated tables,
// read with the test's own store code). It returns how long the
// instances took to catch up; the digests are read after that, since on
// a busy machine reading them takes a while of its own.
func (c *cluster) converged(timeout time.Duration) time.Duration {
	c.t.Helper()
	start := time.Now()
	for attempt := 0; ; attempt++ {
		var last string
		var took time.Duration
		ok := waitFor(timeout, 50*time.Millisecond, func() bool {
			var end uint64
			for _, od := range c.ods {
				if od.p == nil || !od.p.running() {
					continue
				}
				v, ok := view(od)
				if !ok || v.AppliedSeq != v.LogLastSeq || (end != 0 && v.LogLastSeq != end) {
					last = fmt.Sprintf("%s applied %d of %d", filepath.Base(od.dir), v.AppliedSeq, v.LogLastSeq)
					return false
				}
				end = v.LogLastSeq
			}
			took = time.Since(start)
			return true
		})
		if !ok {
			c.t.Fatalf("instances did not apply the whole log within %s: %s", timeout, last)
		}
		var want string
		var wantSeq uint64
		same := true
		for _, od := range c.ods {
			if od.p == nil || !od.p.running() {
				continue
			}
			d, seq := digest(c.t, od.dbPath)
			if want == "" {
				want, wantSeq = d, seq
			} else if d != want || seq != wantSeq {
				same = false
				last = fmt.Sprintf("%s has digest %.12s at %d, another %.12s at %d", filepath.Base(od.dir), d, seq, want, wantSeq)
			}
		}
		if same {
			return took
		}
		// A write slipped in between (a relay's mark, say): the
		// instances at different sequences may differ. Not twice.
		if attempt == 2 {
			c.t.Fatalf("instances at the log's end differ: %s", last)
		}
	}
}

// checkAcked checks that every state the load was answered 200 for is in
// the stream exactly once, with its states in order per order.
func checkAcked(t *testing.T, gen *loadGen, byOrder map[string][]event) (acked, missing int) {
	t.Helper()
	log, _ := gen.results()
	rank := map[string]int{"processing": 1, "completed": 2}
	for _, s := range log {
		switch s.ans.status {
		case http.StatusOK:
		case 0, http.StatusServiceUnavailable:
			continue
		default:
			t.Errorf("order %s: answer %d %q; want 200 or 503", s.moid, s.ans.status, s.ans.word)
			continue
		}
		if s.repeat {
			continue
		}
		acked++
		if !hasEvent(byOrder, s.moid, s.state) {
			missing++
			if missing <= 10 {
				t.Errorf("acked %s of order %s has no event in the stream", s.state, s.moid)
			}
		}
	}
	for moid, evs := range byOrder {
		for i := 1; i < len(evs); i++ {
			if rank[evs[i].status()] <= rank[evs[i-1].status()] {
				t.Errorf("order %s: events %v out of order", moid, eventTypes(evs))
			}
		}
	}
	return acked, missing
}

// waitPublished waits until the leader has published every event of its
// outbox and the stream holds them all.
func (c *cluster) waitPublished(timeout time.Duration) int {
	c.t.Helper()
	return waitDrained(c.t, c.leader(10*time.Second).dbPath, c.natsURL(), timeout)
}

// TestCluster_KillLeaderUnderLoad runs three orderd instances on a
// three-node NATS cluster behind a round-robin client, under a steady load
// of orders sent as two webhooks each. One NATS node is down when two of
// the instances start and comes back under load; the leader is killed with SIGKILL
// three times (and restarted on its disk); one NATS node is killed under
// load and restarted. Afterwards: every webhook answered 200 by any
// instance is on the events stream exactly once, in order per order; the
// lease moved within two TTLs of each kill; the instances converge within
// ten seconds; and a fourth instance started on an empty disk restores the
// newest snapshot, applies the rest of the log and converges too.
func TestCluster_KillLeaderUnderLoad(t *testing.T) {
	rng := seed(t)
	c := newCluster(t, clusterOptions{})
	// The first instance creates the log, the lease, the snapshot store
	// and the events stream with three replicas, which JetStream places
	// only while every node is up. Then a minority of the NATS cluster is
	// down when the other instances start.
	first := c.addOrderd("a")
	first.start()
	first.waitAdmin("/readyz", 90*time.Second)
	c.nats[2].kill()
	urls := []string{first.webhooks}
	for _, name := range []string{"b", "c"} {
		od := c.addOrderd(name)
		od.start()
		urls = append(urls, od.webhooks)
	}
	for _, od := range c.ods {
		// A restarted instance provisions and catches up through
		// JetStream's API, which pauses while a killed node's groups
		// elect new leaders; on a busy host that takes a while.
		od.waitAdmin("/readyz", 90*time.Second)
	}
	c.leader(4 * leaseTTL)

	gen := &loadGen{t: t, c: newBalancedClient(t, urls...), s: c.signer, ns: rng.Uint32(),
		rate: 100, workers: 32, max: 100 * 120, repeatEvery: 10, statuses: []string{"processing", "completed"}}
	stopLoad := gen.start()

	// The third NATS node comes back under load.
	time.Sleep(time.Second)
	c.startNATS(2)

	var moves []time.Duration
	for range 3 {
		time.Sleep(time.Second + time.Duration(rng.Int64N(int64(time.Second))))
		old := c.leader(4 * leaseTTL)
		killed := time.Now()
		old.kill()
		var next *orderd
		waitFor(2*leaseTTL+time.Second, 20*time.Millisecond, func() bool {
			for _, od := range c.ods {
				if od != old && od.p.running() {
					if v, ok := view(od); ok && v.Leading {
						next = od
						return true
					}
				}
			}
			return false
		})
		moved := time.Since(killed)
		if next == nil {
			t.Fatalf("no instance took the lease within %s of the leader's kill", moved)
		}
		if moved > 2*leaseTTL {
			t.Errorf("the lease moved %s after the leader's kill; want at most 2 × %s", moved, leaseTTL)
		}
		moves = append(moves, moved)
		old.start()
	}
	// One NATS node dies under load and comes back.
	time.Sleep(time.Second)
	n := rng.IntN(3)
	c.nats[n].kill()
	time.Sleep(2 * time.Second)
	c.startNATS(n)
	time.Sleep(time.Second)
	stopLoad()
	loadEnd := time.Now()

	for _, od := range c.ods {
		// A restarted instance provisions and catches up through
		// JetStream's API, which pauses while a killed node's groups
		// elect new leaders; on a busy host that takes a while.
		od.waitAdmin("/readyz", 90*time.Second)
	}
	took := c.converged(10 * time.Second)
	t.Logf("instances converged %s after the load ended", time.Since(loadEnd).Round(time.Millisecond))
	_ = took
	total := c.waitPublished(60 * time.Second)
	events := readStream(t, c.natsURL())
	byOrder := checkStreamUnique(t, events)
	acked, missing := checkAcked(t, gen, byOrder)
	if acked < 500 {
		t.Fatalf("only %d fresh webhooks were acked; the load did not reach the cluster", acked)
	}
	if len(events) != total {
		t.Errorf("stream has %d events, the leader's outbox %d rows", len(events), total)
	}
	log, skipped := gen.results()
	codes := map[int]int{}
	for _, s := range log {
		codes[s.ans.status]++
	}
	t.Logf("lease moves after kill -9: %v (ttl %s); webhooks %d (%d ticks skipped), answers %v; acked fresh %d; stream events %d; acked-and-lost %d; duplicates %d",
		moves, leaseTTL, len(log), skipped, codes, acked, len(events), missing, len(events)-countUnique(events))

	// A new instance on an empty disk starts from the newest snapshot.
	code, body := postAdmin(c.leader(10*time.Second), "/v1/cluster/snapshot")
	if code != http.StatusOK {
		t.Fatalf("POST /v1/cluster/snapshot on the leader: %d %s", code, body)
	}
	var snap struct {
		Bytes         uint64  `json:"bytes"`
		UploadedBytes *uint64 `json:"uploadedBytes"`
	}
	if err := json.Unmarshal([]byte(body), &snap); err != nil || snap.Bytes == 0 || snap.UploadedBytes == nil || *snap.UploadedBytes > snap.Bytes+snap.Bytes/10 {
		t.Errorf("POST /v1/cluster/snapshot answered %s (%v): want bytes and uploadedBytes", body, err)
	}
	// More writes after the snapshot, which the new instance applies from
	// the log.
	more := &loadGen{t: t, c: newBalancedClient(t, urls...), s: c.signer, ns: rng.Uint32(),
		rate: 50, workers: 4, max: 50, statuses: []string{"completed"}}
	more.run(t.Context())
	d := c.addOrderd("d")
	d.startReady()
	v, _ := view(d)
	if v.Snapshot == nil || v.Snapshot.Seq == 0 || v.Snapshot.Bytes == 0 {
		t.Errorf("the new instance sees no snapshot: %+v", v.Snapshot)
	}
	if !strings.Contains(readFile(t, d.logPath), "database restored from the newest snapshot") {
		t.Error("the new instance did not restore the snapshot")
	}
	t.Logf("empty-disk instance converged in %s", c.converged(20*time.Second).Round(time.Millisecond))
	for _, od := range c.ods {
		od.stop()
	}
}

// TestCluster_DeposedLeader pauses the leader with SIGSTOP past its lease
// while webhooks keep arriving at the other instance and the reconciler
// polls at the provider's full rate, then resumes it. The other instance
// takes over; the resumed one must stop its relay and jobs: no event is
// published twice, and the provider never sees more than rate_limit calls
// per second (plus the burst) for longer than one lease.
func TestCluster_DeposedLeader(t *testing.T) {
	rng := seed(t)
	const rate, burst = 10, 5
	c := newCluster(t, clusterOptions{rate: rate, burst: burst, reconcile: `reconcile:
  stale_after: 1s
  give_up_after: 1h
  concurrency: 4
  backoff_base: 1s
  backoff_max: 1s
  schedules: {stale: "@every 1s", doubt: "off", balances: "off", requisites: "off", report: "off"}
`})
	a, b := c.addOrderd("a"), c.addOrderd("b")
	a.start()
	b.start()
	a.waitReady()
	b.waitReady()
	leader := c.leader(4 * leaseTTL)
	other := a
	if leader == a {
		other = b
	}
	// Orders stuck in processing: the leader polls them at the full rate.
	gen := &loadGen{t: t, c: newWebhookClient(t, other.webhooks), s: c.signer, ns: rng.Uint32(),
		rate: 50, workers: 8, max: 50 * 60, statuses: []string{"processing"}}
	stopLoad := gen.start()
	time.Sleep(3 * time.Second)

	paused := time.Now()
	if err := syscall.Kill(leader.p.cmd.Process.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if !waitFor(2*leaseTTL+time.Second, 20*time.Millisecond, func() bool {
		v, ok := view(other)
		return ok && v.Leading
	}) {
		syscall.Kill(leader.p.cmd.Process.Pid, syscall.SIGCONT)
		t.Fatalf("no takeover within %s of pausing the leader", time.Since(paused))
	}
	time.Sleep(leaseTTL) // the new leader works a while
	resumed := time.Now()
	if err := syscall.Kill(leader.p.cmd.Process.Pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// The resumed instance finds its lease gone: it must not act as a
	// leader (the checks below: no event twice, no provider calls beyond
	// the rate), and the cluster has one leader again. (Which one is not
	// asserted: on a loaded machine the lease may legitimately move.)
	time.Sleep(3 * leaseTTL)
	c.leader(4 * leaseTTL)
	stopLoad()

	total := c.waitPublished(60 * time.Second)
	events := readStream(t, c.natsURL())
	byOrder := checkStreamUnique(t, events)
	acked, missing := checkAcked(t, gen, byOrder)
	if len(events) != total {
		t.Errorf("stream has %d events, the leader's outbox %d rows", len(events), total)
	}

	// The provider's calls per second, over the whole run.
	var calls []struct {
		Endpoint string    `json:"endpoint"`
		At       time.Time `json:"at"`
	}
	c.fake.control(http.MethodGet, "calls", nil, &calls)
	var at []time.Time
	for _, cl := range calls {
		at = append(at, cl.At)
	}
	sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
	worst, over := 0, time.Duration(0)
	for i, j := 0, 0; i < len(at); i++ {
		for at[i].Sub(at[j]) >= time.Second {
			j++
		}
		if n := i - j + 1; n > worst {
			worst = n
		}
		if i-j+1 > rate+burst && i > 0 {
			over += at[i].Sub(at[i-1])
		}
	}
	if len(at) < 20 {
		t.Fatalf("only %d provider calls: the reconciler did not poll", len(at))
	}
	if over > leaseTTL {
		t.Errorf("provider calls exceeded %d/s (+%d burst) for %s; want at most one lease (%s)", rate, burst, over, leaseTTL)
	}
	t.Logf("paused %s, resumed %s later; provider calls %d, worst 1s window %d (limit %d + burst %d), over the limit for %s; acked %d, events %d, acked-and-lost %d, duplicates %d",
		resumed.Sub(paused).Round(time.Millisecond), time.Since(resumed).Round(time.Millisecond), len(at), worst, rate, burst, over,
		acked, len(events), missing, len(events)-countUnique(events))
	a.stop()
	b.stop()
}

// postAdmin POSTs to an instance's admin listener.
func postAdmin(od *orderd, path string) (int, string) {
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Post("http://"+od.admin+path, "application/json", nil)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, b.String()
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
