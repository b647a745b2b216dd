package cluster_test

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"orderd/cluster"
	"orderd/publish"
	"orderd/store"
)

const logSubject = "orderd_log.orderd_log"

// startCfg is startInstance with a configuration of the test's.
func startCfg(t *testing.T, nc *publish.EmbeddedCluster, dir string, cfg cluster.Config) *instance {
	t.Helper()
	in, err := tryStart(t, nc, dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// tryStart starts an instance on the database in dir (restoring the
// newest snapshot onto an empty disk), or returns why it refused.
func tryStart(t *testing.T, nc *publish.EmbeddedCluster, dir string, cfg cluster.Config) (*instance, error) {
	t.Helper()
	ctx := t.Context()
	conn, err := nats.Connect(nc.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "orderd.db")
	if _, _, err := cluster.RestoreSnapshot(ctx, conn, cfg, path); err != nil {
		conn.Close()
		return nil, err
	}
	st, err := store.Open(ctx, path, store.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	node, err := cluster.New(ctx, conn, st, cfg)
	if err != nil {
		st.Close(context.Background())
		conn.Close()
		return nil, err
	}
	st.Replicate(node)
	in := &instance{name: cfg.Node, path: path, st: st, node: node, nc: conn}
	node.Start(nil)
	t.Cleanup(in.close)
	return in, nil
}

func logStream(t *testing.T, nc *publish.EmbeddedCluster) (jetstream.JetStream, jetstream.Stream) {
	t.Helper()
	conn, err := nats.Connect(nc.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	js, err := jetstream.New(conn)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(t.Context(), "ORDERD_LOG")
	if err != nil {
		t.Fatal(err)
	}
	return js, s
}

func streamInfo(t *testing.T, s jetstream.Stream) *jetstream.StreamInfo {
	t.Helper()
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// singleNode writes a single-node database with n findings in dir.
func singleNode(t *testing.T, dir string, n int) string {
	t.Helper()
	path := filepath.Join(dir, "orderd.db")
	st, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := st.Exec(t.Context(), openFinding(fmt.Sprintf("single-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	return path
}

// seed runs cluster.Seed on the database at path with cfg.
func seed(t *testing.T, nc *publish.EmbeddedCluster, path string, cfg cluster.Config) (cluster.SeedResult, error) {
	t.Helper()
	conn, err := nats.Connect(nc.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	st, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close(context.Background())
	return cluster.Seed(t.Context(), conn, st, cfg)
}

func findings(t *testing.T, in *instance) int {
	t.Helper()
	var n int
	if err := in.st.DB().QueryRow(`SELECT count(*) FROM findings`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSeed_allOrNothing: a seed interrupted after it marked the log, or
// after it uploaded the snapshot, leaves a log that no instance follows,
// neither the seeded database's nor one on an empty disk; running the
// seed again finishes it, removes its temporary files, and both
// instances then hold the seeded records.
func TestSeed_allOrNothing(t *testing.T) {
	for _, step := range []string{"marked", "uploaded"} {
		t.Run(step, func(t *testing.T) {
			nc := startNATS(t)
			dir := t.TempDir()
			path := singleNode(t, dir, 12)
			cfg := cluster.Config{Node: "a", LeaseTTL: 3 * time.Second}
			killed := errors.New("killed")
			_, err := seed(t, nc, path, cluster.WithSeedFault(cfg, func(s string) error {
				if s == step {
					return killed
				}
				return nil
			}))
			if !errors.Is(err, killed) {
				t.Fatalf("seed with a fault at %q: %v", step, err)
			}
			_, s := logStream(t, nc)
			if id := streamInfo(t, s).Config.Metadata["orderd_log_id"]; id != "" {
				t.Fatalf("an unfinished seed gave the log id %q", id)
			}
			// The seeded database's own instance refuses, and so does an
			// empty disk, each naming the seed command; neither writes.
			var su *cluster.SeedUnfinishedError
			for _, d := range []string{dir, t.TempDir()} {
				_, err := tryStart(t, nc, d, cfg)
				if !errors.As(err, &su) || !strings.Contains(err.Error(), "orderd cluster seed") || !strings.Contains(err.Error(), "ORDERD_LOG") {
					t.Fatalf("start in %s on an unfinished seed: %v, want a SeedUnfinishedError naming the log and orderd cluster seed", d, err)
				}
			}
			if last := streamInfo(t, s).State.LastSeq; last != 0 {
				t.Fatalf("the log holds %d entries after the refusals", last)
			}
			// A temporary file of a seed killed outright.
			stale := path + ".seed-leftover"
			if err := os.WriteFile(stale, []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
			res, err := seed(t, nc, path, cfg)
			if err != nil {
				t.Fatalf("the seed run again: %v", err)
			}
			if left, _ := filepath.Glob(path + ".seed-*"); len(left) > 0 {
				t.Errorf("temporary files left: %v", left)
			}
			info := streamInfo(t, s)
			if info.Config.Metadata["orderd_log_id"] != res.Log || info.Config.Metadata["orderd_log_seeding"] != "" || info.Config.Metadata["orderd_log_base"] == "" {
				t.Fatalf("the log's metadata after the seed: %v, want id %s and a base", info.Config.Metadata, res.Log)
			}
			a := startCfg(t, nc, dir, cfg)
			b := startCfg(t, nc, t.TempDir(), cluster.Config{Node: "b", LeaseTTL: 3 * time.Second})
			if fa, fb := findings(t, a), findings(t, b); fa != 12 || fb != 12 {
				t.Fatalf("findings after the seed: a %d, b %d; want 12 each", fa, fb)
			}
		})
	}
}

// TestRestoreSnapshot_refusesMissingBase: an empty disk on a seeded log
// whose snapshot pointer is gone refuses to start, naming the snapshot
// store, instead of applying the log onto an empty database.
func TestRestoreSnapshot_refusesMissingBase(t *testing.T) {
	nc := startNATS(t)
	dir := t.TempDir()
	path := singleNode(t, dir, 5)
	cfg := cluster.Config{Node: "a", LeaseTTL: 3 * time.Second}
	if _, err := seed(t, nc, path, cfg); err != nil {
		t.Fatal(err)
	}
	a := startCfg(t, nc, dir, cfg)
	if _, err := a.st.Exec(t.Context(), openFinding("after the seed")); err != nil {
		t.Fatal(err)
	}
	js, _ := logStream(t, nc)
	obj, err := js.ObjectStore(t.Context(), "ORDERD_SNAPSHOTS")
	if err != nil {
		t.Fatal(err)
	}
	if err := obj.Delete(t.Context(), "orderd.snapshot"); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	_, err = tryStart(t, nc, empty, cluster.Config{Node: "b", LeaseTTL: 3 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "ORDERD_SNAPSHOTS") || !strings.Contains(err.Error(), "holds no snapshot") {
		t.Fatalf("an empty disk without the base snapshot: %v, want a refusal naming ORDERD_SNAPSHOTS", err)
	}
	if _, err := os.Stat(filepath.Join(empty, "orderd.db")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused instance left a database: %v", err)
	}
}

// TestNew_refusesUnprovenLog: a log stream that lost its id is not
// claimed by a database of another deployment, which writes nothing onto
// it; an instance that applied the log proves it and gives the log its id
// back.
func TestNew_refusesUnprovenLog(t *testing.T) {
	nc := startNATS(t)
	dir := t.TempDir()
	a := startCfg(t, nc, dir, cluster.Config{Node: "a", LeaseTTL: 3 * time.Second})
	id := a.node.Status(t.Context()).Log
	for i := range 20 {
		if _, err := a.st.Exec(t.Context(), openFinding(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	a.close()

	// Another deployment's database, with entries of its own log.
	other := startNATS(t)
	odir := t.TempDir()
	o := startCfg(t, other, odir, cluster.Config{Node: "o", LeaseTTL: 3 * time.Second})
	for i := range 5 {
		if _, err := o.st.Exec(t.Context(), openFinding(fmt.Sprintf("other-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	o.close()

	js, s := logStream(t, nc)
	sc := streamInfo(t, s).Config
	sc.Metadata = nil
	if _, err := js.UpdateStream(t.Context(), sc); err != nil {
		t.Fatal(err)
	}
	before := streamInfo(t, s).State.LastSeq
	_, err := tryStart(t, nc, odir, cluster.Config{Node: "o", LeaseTTL: 3 * time.Second})
	var ue *cluster.UnprovenLogError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "ORDERD_LOG") {
		t.Fatalf("another deployment's database on a log without an id: %v, want an UnprovenLogError naming ORDERD_LOG", err)
	}
	info := streamInfo(t, s)
	if info.Config.Metadata["orderd_log_id"] != "" || info.State.LastSeq != before {
		t.Fatalf("the refused instance changed the log: id %q, last %d (was %d)", info.Config.Metadata["orderd_log_id"], info.State.LastSeq, before)
	}
	// An empty disk cannot prove anything either.
	if _, err := tryStart(t, nc, t.TempDir(), cluster.Config{Node: "e", LeaseTTL: 3 * time.Second}); !errors.As(err, &ue) {
		t.Fatalf("an empty disk on a log without an id: %v, want an UnprovenLogError", err)
	}
	again := startCfg(t, nc, dir, cluster.Config{Node: "a", LeaseTTL: 3 * time.Second})
	if got := again.node.Status(t.Context()).Log; got != id {
		t.Fatalf("the proving instance follows %q, want %q", got, id)
	}
	if got := streamInfo(t, s).Config.Metadata["orderd_log_id"]; got != id {
		t.Fatalf("the log's id is %q after the proof, want %q", got, id)
	}
}

// entries reads the log's entries 1 to last.
func entries(t *testing.T, s jetstream.Stream, last uint64) []*jetstream.RawStreamMsg {
	t.Helper()
	var out []*jetstream.RawStreamMsg
	for seq := uint64(1); seq <= last; seq++ {
		m, err := s.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// rebuild deletes the log stream and creates it again with the same
// configuration and msgs, the last one's bytes changed when alter.
func rebuild(t *testing.T, js jetstream.JetStream, s jetstream.Stream, msgs []*jetstream.RawStreamMsg, alter bool) {
	t.Helper()
	sc := streamInfo(t, s).Config
	if err := js.DeleteStream(t.Context(), sc.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(t.Context(), sc); err != nil {
		t.Fatal(err)
	}
	for i, m := range msgs {
		msg := nats.NewMsg(logSubject)
		msg.Header = m.Header
		msg.Data = m.Data
		if alter && i == len(msgs)-1 {
			b, err := store.EncodeOps([]store.Op{{At: time.Now(), Cmd: openFinding("forged")}})
			if err != nil {
				t.Fatal(err)
			}
			msg.Data = b
		}
		if _, err := js.PublishMsg(t.Context(), msg); err != nil {
			t.Fatal(err)
		}
	}
}

// waitRefused waits until in's applier stopped on a failed verification
// and checks what a person would see: not ready, not leading, the error
// in the status, the counter.
func waitRefused(t *testing.T, in *instance, reg *prometheus.Registry, want ...string) {
	t.Helper()
	waitFor(t, 20*time.Second, in.name+" refuses the log", func() bool { return in.node.Fatal() != nil })
	var ve *cluster.VerifyError
	if err := in.node.Fatal(); !errors.As(err, &ve) {
		t.Fatalf("the applier stopped with %v, want a VerifyError", err)
	}
	msg := in.node.Fatal().Error()
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("the refusal %q does not say %q", msg, w)
		}
	}
	if err := in.node.Ready(t.Context()); err == nil {
		t.Error("ready after the log failed verification")
	}
	in.node.CheckLog(t.Context()) // reports this instance as a member
	if st := in.node.Status(t.Context()); !strings.Contains(st.Error, "failed verification") || !strings.Contains(st.Error, "applied the most") {
		t.Errorf("GET /v1/cluster's error: %q, want the failure and the most advanced instance", st.Error)
	}
	waitFor(t, 10*time.Second, "the lease given up", func() bool { return !in.node.Leading() })
	if reg != nil {
		n, err := testutil.GatherAndCount(reg, "orderd_log_verify_failures_total")
		if err != nil || n != 1 {
			t.Errorf("orderd_log_verify_failures_total series %d (%v)", n, err)
		}
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == "orderd_log_verify_failures_total" && mf.GetMetric()[0].GetCounter().GetValue() != 1 {
				t.Errorf("orderd_log_verify_failures_total = %v, want 1", mf.GetMetric()[0].GetCounter().GetValue())
			}
		}
	}
	// Nothing more is applied or accepted.
	if _, err := in.st.Exec(t.Context(), openFinding("after the refusal")); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("a write after the refusal: %v, want ErrUnavailable", err)
	}
}

// TestNode_verifiesLog: at run time, a log that went back below what an
// instance applied, an entry it applied replaced in a rebuilt stream, an
// entry deleted before the applier reached it, and an entry whose link
// names another history each stop the applier, which never skips or
// applies them.
func TestNode_verifiesLog(t *testing.T) {
	start := func(t *testing.T, every time.Duration) (*publish.EmbeddedCluster, *instance, *prometheus.Registry) {
		nc := startNATS(t)
		reg := prometheus.NewRegistry()
		cfg := cluster.WithCheckEvery(cluster.Config{Node: "a", LeaseTTL: 2 * time.Second, Registerer: reg}, every)
		a := startCfg(t, nc, t.TempDir(), cfg)
		for i := range 10 {
			if _, err := a.st.Exec(t.Context(), openFinding(fmt.Sprint(i))); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, 10*time.Second, "a leads", a.node.Leading)
		return nc, a, reg
	}
	t.Run("log below applied", func(t *testing.T) {
		nc, a, reg := start(t, 200*time.Millisecond)
		js, s := logStream(t, nc)
		applied := a.node.AppliedSeq()
		rebuild(t, js, s, entries(t, s, applied)[:applied-4], false)
		waitRefused(t, a, reg, "below entry", fmt.Sprint(applied))
	})
	t.Run("entry replaced", func(t *testing.T) {
		nc, a, reg := start(t, time.Hour)
		js, s := logStream(t, nc)
		applied := a.node.AppliedSeq()
		rebuild(t, js, s, entries(t, s, applied), true)
		// Believed only once it has lasted two lease TTLs.
		checkUntilRefused(t, a)
		waitRefused(t, a, reg, "replaced", fmt.Sprintf("entry %d", applied))
	})
	t.Run("a short answer that passes is not believed", func(t *testing.T) {
		// A log read short once (as a server cut off from the quorum
		// answers) and whole again: the instance keeps applying.
		nc, a, reg := start(t, time.Hour)
		js, s := logStream(t, nc)
		applied := a.node.AppliedSeq()
		all := entries(t, s, applied)
		rebuild(t, js, s, all[:applied-4], false)
		a.node.CheckLog(t.Context())
		rebuild(t, js, s, all, false)
		time.Sleep(4500 * time.Millisecond) // past the two lease TTLs
		a.node.CheckLog(t.Context())
		a.node.CheckLog(t.Context())
		if err := a.node.Fatal(); err != nil {
			t.Fatalf("refused after the log read whole again: %v", err)
		}
		if n := metricValue(t, reg, "orderd_log_verify_failures_total"); n != 0 {
			t.Fatalf("orderd_log_verify_failures_total = %v", n)
		}
	})
	t.Run("entry deleted", func(t *testing.T) {
		nc, a, reg := start(t, 200*time.Millisecond)
		_, s := logStream(t, nc)
		// The applied entry itself vanishes.
		applied := a.node.AppliedSeq()
		if err := s.DeleteMsg(t.Context(), applied); err != nil {
			t.Fatal(err)
		}
		waitRefused(t, a, reg, "gone from the log")
	})
	t.Run("gap ahead", func(t *testing.T) {
		nc := startNATS(t)
		dir := t.TempDir()
		a := startCfg(t, nc, dir, cluster.Config{Node: "a", LeaseTTL: 2 * time.Second})
		b := startCfg(t, nc, t.TempDir(), cluster.Config{Node: "b", LeaseTTL: 2 * time.Second})
		if _, err := a.st.Exec(t.Context(), openFinding("first")); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "b applied", func() bool { return b.node.AppliedSeq() == a.node.AppliedSeq() })
		applied := a.node.AppliedSeq()
		a.close()
		for i := range 5 {
			if _, err := b.st.Exec(t.Context(), openFinding(fmt.Sprint(i))); err != nil {
				t.Fatal(err)
			}
		}
		_, s := logStream(t, nc)
		if err := s.DeleteMsg(t.Context(), applied+2); err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		again := startCfg(t, nc, dir, cluster.Config{Node: "a", LeaseTTL: 2 * time.Second, Registerer: reg})
		waitRefused(t, again, reg, fmt.Sprintf("entries %d to %d are missing", applied+2, applied+2))
		if got := again.node.AppliedSeq(); got != applied+1 {
			t.Errorf("applied %d, want %d: the entries before the gap, none after", got, applied+1)
		}
	})
	t.Run("link to another history", func(t *testing.T) {
		nc, a, reg := start(t, time.Hour)
		js, _ := logStream(t, nc)
		applied := a.node.AppliedSeq()
		b, err := store.EncodeOps([]store.Op{{At: time.Now(), Cmd: openFinding("forged")}})
		if err != nil {
			t.Fatal(err)
		}
		msg := nats.NewMsg(logSubject)
		msg.Data = b
		msg.Header.Set("Orderd-Log", a.node.Status(t.Context()).Log)
		msg.Header.Set("Orderd-Prev", fmt.Sprintf("%d %s", applied, strings.Repeat("ab", 32)))
		if _, err := js.PublishMsg(t.Context(), msg); err != nil {
			t.Fatal(err)
		}
		waitRefused(t, a, reg, fmt.Sprintf("entry %d links to entry %d", applied+1, applied))
		var n int
		if err := a.st.DB().QueryRow(`SELECT count(*) FROM findings WHERE subject_key = 'forged'`).Scan(&n); err != nil || n != 0 {
			t.Fatalf("the forged entry was applied (%d rows, %v)", n, err)
		}
	})
}

// TestNode_comparesDigests: instances digest their state at every
// checkpoint and agree; when one instance's database is changed behind
// the log's back, the next checkpoint shows the divergence in the status,
// the gauge and a replica_divergence finding naming both instances.
func TestNode_comparesDigests(t *testing.T) {
	nc := startNATS(t)
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	cfg := func(name string, reg *prometheus.Registry) cluster.Config {
		return cluster.WithCheckEvery(cluster.Config{Node: name, LeaseTTL: 2 * time.Second, DigestEvery: 10, Registerer: reg}, 200*time.Millisecond)
	}
	a := startCfg(t, nc, t.TempDir(), cfg("a", regA))
	b := startCfg(t, nc, t.TempDir(), cfg("b", regB))
	write := func(from, to int) {
		for i := from; i < to; i++ {
			if _, err := a.st.Exec(t.Context(), openFinding(fmt.Sprint(i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(0, 25)
	deadline := time.Now().Add(20 * time.Second)
	for {
		sa, sb := a.node.Status(t.Context()), b.node.Status(t.Context())
		if sa.AgreedSeq >= 20 && sb.AgreedSeq >= 20 && len(sa.Members) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no agreement at a checkpoint within 20s: a %+v; b %+v", sa, sb)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if v := metricValue(t, regA, "orderd_replica_digest_mismatch"); v != 0 {
		t.Fatalf("mismatch gauge %v while they agree", v)
	}
	// b's database changed behind the log's back.
	db, err := sql.Open("sqlite", "file:"+b.path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE findings SET detail = '{"k":2}' WHERE subject_key = '3'`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	agreed := a.node.Status(t.Context()).AgreedSeq
	write(25, 45)
	waitFor(t, 20*time.Second, "the divergence is seen", func() bool {
		return metricValue(t, regA, "orderd_replica_digest_mismatch") == 1 &&
			metricValue(t, regB, "orderd_replica_digest_mismatch") == 1
	})
	sa := a.node.Status(t.Context())
	if !strings.Contains(sa.Divergence, "b has") || sa.AgreedSeq != agreed {
		t.Fatalf("status after the divergence: divergence %q, agreed %d (was %d)", sa.Divergence, sa.AgreedSeq, agreed)
	}
	waitFor(t, 20*time.Second, "a replica_divergence finding on both", func() bool {
		for _, in := range []*instance{a, b} {
			var detail string
			err := in.st.DB().QueryRow(`SELECT detail FROM findings WHERE kind = 'replica_divergence'`).Scan(&detail)
			if err != nil || !strings.Contains(detail, `"a"`) || !strings.Contains(detail, `"b"`) {
				return false
			}
		}
		return true
	})
}

// oldServer answers NATS clients as a nats-server of version v would
// before JetStream: its INFO, and PONG to every PING.
func oldServer(t *testing.T, v string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				fmt.Fprintf(c, "INFO {\"server_id\":\"old\",\"server_name\":\"old-1\",\"version\":%q,\"proto\":1,\"headers\":true,\"max_payload\":1048576}\r\n", v)
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					if strings.HasPrefix(sc.Text(), "PING") {
						fmt.Fprint(c, "PONG\r\n")
					}
				}
			}()
		}
	}()
	return "nats://" + ln.Addr().String()
}

// TestNew_refusesOldServer: a nats-server older than the minimum (one
// without stream metadata) is refused, naming its version and the
// minimum, before anything is created or restored.
func TestNew_refusesOldServer(t *testing.T) {
	conn, err := nats.Connect(oldServer(t, "2.9.25"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "orderd.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close(context.Background())
	cfg := cluster.Config{Node: "a"}
	var ve *cluster.ServerVersionError
	for what, err := range map[string]error{
		"New":  func() error { _, err := cluster.New(t.Context(), conn, st, cfg); return err }(),
		"Seed": func() error { _, err := cluster.Seed(t.Context(), conn, st, cfg); return err }(),
		"RestoreSnapshot": func() error {
			_, _, err := cluster.RestoreSnapshot(t.Context(), conn, cfg, filepath.Join(t.TempDir(), "x.db"))
			return err
		}(),
	} {
		if !errors.As(err, &ve) || !strings.Contains(err.Error(), "2.9.25") || !strings.Contains(err.Error(), cluster.MinServerVersion) {
			t.Errorf("%s on nats-server 2.9.25: %v, want a refusal naming 2.9.25 and %s", what, err, cluster.MinServerVersion)
		}
	}
}

func TestVersionAtLeast(t *testing.T) {
	for _, c := range []struct {
		v    string
		want bool
	}{
		{"2.10.0", true}, {"2.15.2", true}, {"2.10.7-beta.1", true}, {"3.0.0", true}, {"v2.11.1", true},
		{"2.9.25", false}, {"2.2.0", false}, {"1.99.99", false}, {"", false}, {"2.10", false}, {"x.y.z", false},
	} {
		if got := cluster.VersionAtLeast(c.v, cluster.MinServerVersion); got != c.want {
			t.Errorf("versionAtLeast(%q) = %v, want %v", c.v, got, c.want)
		}
	}
}

// checkUntilRefused compares the log with what in applied, again and
// again, until it refuses (or 20 s pass).
func checkUntilRefused(t *testing.T, in *instance) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); in.node.Fatal() == nil && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		in.node.CheckLog(t.Context())
	}
}

// metricValue is the value of the one series of the gauge or counter name.
func metricValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		m := mf.GetMetric()[0]
		if c := m.GetCounter(); c != nil {
			return c.GetValue()
		}
		return m.GetGauge().GetValue()
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// TestNode_digestsIgnoreBackgroundMigrations: each instance runs a
// background migration on its own database at its own pace (here b has
// one to run after an upgrade and a has none); the columns it derives are
// not in the digest, so the instances keep agreeing, before, during and
// after it, with no replica_divergence.
func TestNode_digestsIgnoreBackgroundMigrations(t *testing.T) {
	nc := startNATS(t)
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	cfg := func(name string, reg *prometheus.Registry) cluster.Config {
		return cluster.WithCheckEvery(cluster.Config{Node: name, LeaseTTL: 2 * time.Second, DigestEvery: 10, Registerer: reg}, 200*time.Millisecond)
	}
	a := startCfg(t, nc, t.TempDir(), cfg("a", regA))
	b := startCfg(t, nc, t.TempDir(), cfg("b", regB))
	agreeBeyond := func(seq uint64) uint64 {
		t.Helper()
		addOrders(t, a.st, 10, 2)
		var sa, sb cluster.Status
		waitFor(t, 20*time.Second, fmt.Sprintf("agreement beyond log sequence %d", seq), func() bool {
			sa, sb = a.node.Status(t.Context()), b.node.Status(t.Context())
			return sa.AgreedSeq > seq && sb.AgreedSeq > seq && len(sa.Members) == 2
		})
		for _, reg := range []*prometheus.Registry{regA, regB} {
			if v := metricValue(t, reg, "orderd_replica_digest_mismatch"); v != 0 {
				t.Fatalf("mismatch gauge %v; a %+v, b %+v", v, sa, sb)
			}
		}
		return min(sa.AgreedSeq, sb.AgreedSeq)
	}
	agreed := agreeBeyond(0)

	// b's derived columns as an upgrade from a release before them
	// leaves them: unfilled, with the migration that fills them to run.
	db, err := sql.Open("sqlite", "file:"+b.path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`UPDATE orders SET authorized_amount = NULL, authorized_currency = NULL, own_wallet_amount = NULL, own_wallet_currency = NULL, refunds = NULL`,
		`INSERT INTO background_migrations (name, scheduled_at) VALUES ('report_columns', 0)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	agreed = agreeBeyond(agreed)

	// The migration runs on b, a row at a time, while the log goes on.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ran := make(chan error, 1)
	go func() {
		ran <- b.st.RunBackgroundMigrations(ctx, store.BackgroundOptions{BatchRows: 1, Pause: 100 * time.Millisecond})
	}()
	agreed = agreeBeyond(agreed)
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	agreeBeyond(agreed)
	columns := func(in *instance) string {
		var s string
		if err := in.st.DB().QueryRow(`SELECT group_concat(provider_id || quote(authorized_amount) || quote(own_wallet_amount) || quote(refunds), ';')
			FROM (SELECT * FROM orders ORDER BY provider_id)`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if ca, cb := columns(a), columns(b); ca != cb {
		t.Errorf("after the migration b's derived columns differ from a's:\n%s\n%s", cb, ca)
	}
	for _, in := range []*instance{a, b} {
		var n int
		if err := in.st.DB().QueryRow(`SELECT count(*) FROM findings WHERE kind = 'replica_divergence'`).Scan(&n); err != nil || n != 0 {
			t.Errorf("%s: %d replica_divergence findings (%v)", in.name, n, err)
		}
	}
}
