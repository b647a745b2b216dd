package cluster_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"orderd/cluster"
	"orderd/store"
)

// lastEntryVersion is the version byte of the log's last entry.
func lastEntryVersion(t *testing.T, s jetstream.Stream) byte {
	t.Helper()
	info := streamInfo(t, s)
	m, err := s.GetMsg(t.Context(), info.State.LastSeq)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Data) == 0 {
		t.Fatalf("entry %d is empty", info.State.LastSeq)
	}
	return m.Data[0]
}

// TestNode_logVersion: a log made before log versions is written in the
// oldest form while a reader that does not say what it reads follows it;
// the lease holder raises the version once every recent reader reads the
// newest, and never lowers it again.
func TestNode_logVersion(t *testing.T) {
	nc := startNATS(t)
	reg := prometheus.NewRegistry()
	cfg := func(name, release string, reg prometheus.Registerer) cluster.Config {
		return cluster.WithCheckEvery(cluster.Config{Node: name, Release: release, LeaseTTL: 2 * time.Second, Registerer: reg}, time.Hour)
	}
	a := startCfg(t, nc, t.TempDir(), cfg("a", "v-new", reg))
	waitFor(t, 10*time.Second, "a leads", a.node.Leading)
	js, s := logStream(t, nc)
	ctx := t.Context()

	// A log this release starts is at the newest version at once.
	if st := a.node.Status(ctx).LogVersion; st.InForce != store.NewestLogVersion || st.RaisedBy != "v-new" || st.Next != 0 {
		t.Fatalf("a new log's version: %+v, want %d in force, raised by v-new", st, store.NewestLogVersion)
	}
	if _, err := a.st.Exec(ctx, openFinding("1")); err != nil {
		t.Fatal(err)
	}
	if v := lastEntryVersion(t, s); v != store.NewestLogVersion {
		t.Fatalf("entry written at version %d, want %d", v, store.NewestLogVersion)
	}

	// The same log as a release before versions left it: no version
	// recorded, and an instance of that release following it (its
	// consumer says nothing of what it reads).
	sc := streamInfo(t, s).Config
	delete(sc.Metadata, "orderd_log_version")
	delete(sc.Metadata, "orderd_log_version_release")
	if _, err := js.UpdateStream(ctx, sc); err != nil {
		t.Fatal(err)
	}
	old, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	it, err := old.Messages()
	if err != nil {
		t.Fatal(err)
	}
	defer it.Stop()
	oldName := old.CachedInfo().Name
	b := startCfg(t, nc, t.TempDir(), cfg("b", "v-new", nil))
	waitFor(t, 10*time.Second, "b follows", func() bool { return b.node.AppliedSeq() == a.node.AppliedSeq() })
	a.node.CheckLog(ctx)
	b.node.CheckLog(ctx)
	a.node.CheckLog(ctx)

	st := a.node.Status(ctx).LogVersion
	if st.InForce != store.OldestLogVersion || st.Next != store.NewestLogVersion {
		t.Fatalf("with an old reader: %+v, want %d in force and %d next", st, store.OldestLogVersion, store.NewestLogVersion)
	}
	if len(st.HeldBy) != 1 || !strings.Contains(st.HeldBy[0], oldName) || !strings.Contains(st.HeldBy[0], "reads 2-2") {
		t.Fatalf("held by %q, want only the old reader's consumer %s", st.HeldBy, oldName)
	}
	var announced int
	for _, r := range st.Readers {
		if r.Announced && (r.Node == "a" || r.Node == "b") && r.Release == "v-new" && r.Reads == (cluster.Versions{Oldest: store.OldestLogVersion, Newest: store.NewestLogVersion}) {
			announced++
		}
	}
	if announced != 2 || len(st.Readers) != 3 {
		t.Fatalf("readers %+v: want a and b announcing what they read on v-new, and the old consumer", st.Readers)
	}
	for _, in := range []*instance{a, b} {
		if _, err := in.st.Exec(ctx, openFinding("from "+in.name)); err != nil {
			t.Fatal(err)
		}
		if v := lastEntryVersion(t, s); v != store.OldestLogVersion {
			t.Fatalf("%s wrote version %d while an old reader follows, want %d", in.name, v, store.OldestLogVersion)
		}
	}
	if v := metricValue(t, reg, "orderd_log_version"); v != store.OldestLogVersion {
		t.Fatalf("orderd_log_version %v, want %d", v, store.OldestLogVersion)
	}

	// The old instance is gone (upgraded): its consumer goes with it.
	it.Stop()
	if err := js.DeleteConsumer(ctx, "ORDERD_LOG", oldName); err != nil {
		t.Fatal(err)
	}
	b.node.CheckLog(ctx) // b does not lead: it does not raise
	if v := b.node.Status(ctx).LogVersion.InForce; v != store.OldestLogVersion {
		t.Fatalf("a follower raised the version to %d", v)
	}
	a.node.CheckLog(ctx)
	if md := streamInfo(t, s).Config.Metadata; md["orderd_log_version"] != strconv.Itoa(store.NewestLogVersion) || md["orderd_log_version_release"] != "v-new" {
		t.Fatalf("after the old reader left, the log records version %q raised by %q; want %d by v-new", md["orderd_log_version"], md["orderd_log_version_release"], store.NewestLogVersion)
	}
	if v := metricValue(t, reg, "orderd_log_version"); v != store.NewestLogVersion {
		t.Fatalf("orderd_log_version %v after the raise", v)
	}
	b.node.CheckLog(ctx)
	for _, in := range []*instance{a, b} {
		if _, err := in.st.Exec(ctx, openFinding("after "+in.name)); err != nil {
			t.Fatal(err)
		}
		if v := lastEntryVersion(t, s); v != store.NewestLogVersion {
			t.Fatalf("%s wrote version %d after the raise, want %d", in.name, v, store.NewestLogVersion)
		}
	}

	// A reader of an old release that comes back does not lower it.
	back, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	it2, err := back.Messages()
	if err != nil {
		t.Fatal(err)
	}
	defer it2.Stop()
	a.node.CheckLog(ctx)
	if st := a.node.Status(ctx).LogVersion; st.InForce != store.NewestLogVersion {
		t.Fatalf("the version went back to %d", st.InForce)
	}
	if _, err := a.st.Exec(ctx, openFinding("still")); err != nil {
		t.Fatal(err)
	}
	if v := lastEntryVersion(t, s); v != store.NewestLogVersion {
		t.Fatalf("wrote version %d after an old reader came back, want %d", v, store.NewestLogVersion)
	}
	da, sa := digest(t, a)
	waitFor(t, 10*time.Second, "b applied everything", func() bool { return b.node.AppliedSeq() == sa })
	if db, _ := digest(t, b); db != da {
		t.Fatalf("a and b differ after entries of both versions: %s, %s", da, db)
	}

	// An instance that meets an entry of a version it does not read says
	// which release raised it.
	sc = streamInfo(t, s).Config
	sc.Metadata["orderd_log_version"], sc.Metadata["orderd_log_version_release"] = "9", "v9.0.0"
	if _, err := js.UpdateStream(ctx, sc); err != nil {
		t.Fatal(err)
	}
	if hint := a.node.VersionHint(ctx, &store.LogVersionError{Version: 9}); !strings.Contains(hint, "v9.0.0") || !strings.Contains(hint, "log version 9") {
		t.Fatalf("hint %q: want the release that raised version 9", hint)
	}
}
