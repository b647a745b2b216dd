package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"orderd/cluster"
	"orderd/publish"
	"orderd/store"
)

// startNATS starts a 3-node embedded cluster for the test.
func startNATS(t testing.TB) *publish.EmbeddedCluster {
	t.Helper()
	c, err := publish.StartEmbeddedCluster(publish.EmbeddedClusterConfig{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Shutdown)
	return c
}

// instance is one replicated store with its node.
type instance struct {
	name    string
	path    string
	st      *store.Store
	node    *cluster.Node
	nc      *nats.Conn
	leading atomic.Int32 // duties running
}

func startInstance(t *testing.T, nc *publish.EmbeddedCluster, name, dir string, ttl time.Duration) *instance {
	t.Helper()
	ctx := t.Context()
	conn, err := nats.Connect(nc.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	// Snapshots only when the test takes them: a leader's own first one,
	// 10 s after it leads, would race the test's on a busy machine.
	cfg := cluster.WithoutOwnSnapshots(cluster.Config{Node: name, LeaseTTL: ttl, SnapshotEvery: time.Hour})
	path := filepath.Join(dir, "orderd.db")
	if _, _, err := cluster.RestoreSnapshot(ctx, conn, cfg, path); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, path, store.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	node, err := cluster.New(ctx, conn, st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	st.Replicate(node)
	in := &instance{name: name, path: path, st: st, node: node, nc: conn}
	node.Start(func(ctx context.Context) {
		in.leading.Add(1)
		<-ctx.Done()
		in.leading.Add(-1)
	})
	t.Cleanup(in.close)
	return in
}

// connAndStore connects a client to nc and opens an empty database, as a
// new instance would have; both are closed when the test ends, the store
// first.
func connAndStore(t *testing.T, nc *publish.EmbeddedCluster) (*nats.Conn, *store.Store) {
	t.Helper()
	conn, err := nats.Connect(nc.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "orderd.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(context.Background()) })
	return conn, st
}

func (in *instance) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	in.node.Close(ctx)
	in.st.Close(ctx)
	in.nc.Close()
}

func openFinding(key string) *store.OpenFindingCmd {
	return &store.OpenFindingCmd{FindingKind: "test", Key: key, Detail: []byte(`{"k":1}`)}
}

func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func digest(t *testing.T, in *instance) (string, uint64) {
	t.Helper()
	d, seq, err := in.st.Digest(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return d, seq
}

// TestNode_Execute: writes from both instances, concurrently, are answered
// with their own results, and both databases converge to the same digest.
func TestNode_Execute(t *testing.T) {
	nc := startNATS(t)
	a := startInstance(t, nc, "a", t.TempDir(), 3*time.Second)
	b := startInstance(t, nc, "b", t.TempDir(), 3*time.Second)
	var wg sync.WaitGroup
	var opened atomic.Int32
	for w := range 16 {
		in := []*instance{a, b}[w%2]
		wg.Go(func() {
			for i := range 20 {
				// Keys repeat across workers: only one open per key wins.
				v, err := in.st.Exec(t.Context(), openFinding(fmt.Sprint(i)))
				if err != nil {
					t.Errorf("%s: %v", in.name, err)
					return
				}
				if v.(bool) {
					opened.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if opened.Load() != 20 {
		t.Fatalf("%d findings reported opened, want 20 (one per key)", opened.Load())
	}
	// A command's own error comes back to its caller.
	if _, err := a.st.Exec(t.Context(), &store.OpenFindingCmd{Key: "no kind"}); err == nil {
		t.Fatal("a failing command answered no error")
	}
	waitFor(t, 30*time.Second, "both applied everything", func() bool {
		return a.node.AppliedSeq() == b.node.AppliedSeq() && a.node.AppliedSeq() > 0
	})
	da, sa := digest(t, a)
	db, sb := digest(t, b)
	if da != db || sa != sb {
		t.Fatalf("digests differ: a %s@%d, b %s@%d", da, sa, db, sb)
	}
	var n int
	if err := b.st.DB().QueryRow(`SELECT count(*) FROM findings WHERE kind = 'test'`).Scan(&n); err != nil || n != 20 {
		t.Fatalf("b has %d findings (%v), want 20", n, err)
	}
}

// TestNode_Lease: one instance leads; when it goes, the other takes over
// within two lease TTLs, and a leader's duties run only while it leads.
func TestNode_Lease(t *testing.T) {
	nc := startNATS(t)
	ttl := 2 * time.Second
	a := startInstance(t, nc, "a", t.TempDir(), ttl)
	b := startInstance(t, nc, "b", t.TempDir(), ttl)
	waitFor(t, 2*ttl, "a leader", func() bool { return a.node.Leading() != b.node.Leading() })
	leader, other := a, b
	if b.node.Leading() {
		leader, other = b, a
	}
	waitFor(t, time.Second, "duties on the leader only", func() bool {
		return leader.leading.Load() == 1 && other.leading.Load() == 0
	})
	st := other.node.Status(t.Context())
	if st.Leader != leader.name || st.Term == 0 {
		t.Fatalf("status on the follower: %+v", st)
	}
	// Stay leader across several renewals.
	time.Sleep(2 * ttl)
	if !leader.node.Leading() || other.node.Leading() {
		t.Fatal("the lease moved while its holder was healthy")
	}
	// The leader's NATS connection dies: it cannot renew and must step
	// down; the other takes over.
	start := time.Now()
	leader.nc.Close()
	waitFor(t, 2*ttl, "takeover", func() bool { return other.node.Leading() })
	if leader.node.Leading() {
		t.Fatal("two leaders")
	}
	t.Logf("lease moved after %s (ttl %s)", time.Since(start).Round(time.Millisecond), ttl)
	waitFor(t, ttl, "old leader's duties stopped", func() bool { return leader.leading.Load() == 0 })
	if now := other.node.Status(t.Context()); now.Leader != other.name || now.Term <= st.Term {
		t.Fatalf("status on the new leader: %+v, want it named with a term above %d", now, st.Term)
	}
}

// TestNode_Snapshot: an instance that starts on an empty disk restores the
// newest snapshot and applies the rest of the log.
func TestNode_Snapshot(t *testing.T) {
	nc := startNATS(t)
	a := startInstance(t, nc, "a", t.TempDir(), 3*time.Second)
	for i := range 30 {
		if _, err := a.st.Exec(t.Context(), openFinding(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	si, err := a.node.TakeSnapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if si.Seq != a.node.AppliedSeq() {
		t.Fatalf("snapshot at seq %d, applied %d", si.Seq, a.node.AppliedSeq())
	}
	for i := 30; i < 40; i++ {
		if _, err := a.st.Exec(t.Context(), openFinding(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	b := startInstance(t, nc, "b", dir, 3*time.Second)
	// Catching up is a snapshot's download and a consumer of the log, on
	// a machine the rest of the suite shares under -race: the bound is
	// generous, and a failure says where b stands.
	deadline := time.Now().Add(30 * time.Second)
	for b.node.AppliedSeq() != a.node.AppliedSeq() {
		if time.Now().After(deadline) {
			t.Fatalf("b did not catch up within 30s: applied %d of %d; applier: %v; status %+v",
				b.node.AppliedSeq(), a.node.AppliedSeq(), b.node.Fatal(), b.node.Status(t.Context()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	da, _ := digest(t, a)
	db, _ := digest(t, b)
	if da != db {
		t.Fatal("restored instance's digest differs")
	}
	if _, err := os.Stat(filepath.Join(dir, "orderd.db")); err != nil {
		t.Fatal(err)
	}
	// The restored database started from the snapshot, not from entry 1:
	// it never applied entries at or below the snapshot's sequence.
	if st := b.node.Status(t.Context()); st.Snapshot == nil || st.Snapshot.Seq != si.Seq {
		t.Fatalf("status snapshot %+v, want seq %d", st.Snapshot, si.Seq)
	}
}

// TestNode_NoQuorum: with two of three servers down, a write is answered
// with ErrUnavailable (a 503), never as a success.
func TestNode_NoQuorum(t *testing.T) {
	nc := startNATS(t)
	a := startInstance(t, nc, "a", t.TempDir(), 3*time.Second)
	if _, err := a.st.Exec(t.Context(), openFinding("before")); err != nil {
		t.Fatal(err)
	}
	nc.Server(1).Shutdown()
	nc.Server(2).Shutdown()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	_, err := a.st.Exec(ctx, openFinding("after"))
	t.Logf("write without quorum: %v", err)
	if !errors.Is(err, store.ErrUnavailable) && !errors.Is(err, store.ErrUnconfirmed) {
		t.Fatalf("write without quorum: %v, want ErrUnavailable", err)
	}
	if err := a.node.Ready(t.Context()); err == nil {
		t.Fatalf("ready without quorum: %+v", a.node.Status(t.Context()))
	}
	// GET /v1/cluster still answers, within its bound, with what this
	// instance knows of itself and what it could not read.
	start := time.Now()
	st := a.node.Status(t.Context())
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Status took %s without quorum, want its 1.5s bound", d.Round(time.Millisecond))
	}
	if st.Node != "a" || st.Log == "" || st.AppliedSeq == 0 || st.Error == "" {
		t.Errorf("Status without quorum = %+v, want the instance's own facts and an error naming what it could not read", st)
	}
}

// TestNew_refusesMismatch: an instance with another lease TTL than the
// bucket's, a database written in single-node mode, or a database ahead
// of the log, does not start.
func TestNew_refusesMismatch(t *testing.T) {
	nc := startNATS(t)
	startInstance(t, nc, "a", t.TempDir(), 3*time.Second)
	conn, st := connAndStore(t, nc)
	if _, err := cluster.New(t.Context(), conn, st, cluster.Config{Node: "b", LeaseTTL: 5 * time.Second}); err == nil ||
		!strings.Contains(err.Error(), "lease_ttl") {
		t.Fatalf("another lease TTL: %v, want an error naming cluster.lease_ttl", err)
	}
	// A database written in single-node mode: records, no log entry.
	single, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "orderd.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer single.Close(context.Background())
	if _, err := single.Exec(t.Context(), openFinding("single-node")); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.New(t.Context(), conn, single, cluster.Config{Node: "b", LeaseTTL: 3 * time.Second}); err == nil ||
		!strings.Contains(err.Error(), "single-node mode") {
		t.Fatalf("a single-node database: %v, want it refused", err)
	}
	// A database that has applied entries this log never had.
	ops := []store.Op{{At: time.Now(), Cmd: store.NoopCmd{}}}
	for seq := uint64(1); seq <= 50; seq++ {
		if _, err := st.ApplyLog(t.Context(), seq, ops); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cluster.New(t.Context(), conn, st, cluster.Config{Node: "b", LeaseTTL: 3 * time.Second}); err == nil ||
		!strings.Contains(err.Error(), "another log") {
		t.Fatalf("a database ahead of the log: %v, want it refused", err)
	}
}
