package cluster_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"orderd/cluster"
	"orderd/store"
)

// TestNew_logIdentity: a fresh log gets an id that every instance's
// database records and Status shows; a database recording another log's
// id is refused with both ids, and so is a setting that differs from the
// log's.
func TestNew_logIdentity(t *testing.T) {
	nc := startNATS(t)
	a := startInstance(t, nc, "a", t.TempDir(), 3*time.Second)
	b := startInstance(t, nc, "b", t.TempDir(), 3*time.Second)
	id := a.node.Status(t.Context()).Log
	if id == "" || b.node.Status(t.Context()).Log != id {
		t.Fatalf("log ids: a %q, b %q; want one id", id, b.node.Status(t.Context()).Log)
	}
	for _, in := range []*instance{a, b} {
		if got, err := in.st.LogID(t.Context()); err != nil || got != id {
			t.Errorf("%s's database follows %q (%v), want %q", in.name, got, err, id)
		}
	}

	conn, st := connAndStore(t, nc)
	const other = "11111111-2222-4333-8444-555555555555"
	if _, err := st.StartLog(t.Context(), other); err != nil {
		t.Fatal(err)
	}
	_, err := cluster.New(t.Context(), conn, st, cluster.Config{Node: "c", LeaseTTL: 3 * time.Second})
	var ol *cluster.OtherLogError
	if !errors.As(err, &ol) || ol.Database != other || ol.Log != id || !strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), id) {
		t.Fatalf("a database of another log: %v, want an OtherLogError naming %s and %s", err, other, id)
	}

	fresh, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "orderd.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close(context.Background())
	_, err = cluster.New(t.Context(), conn, fresh, cluster.Config{Node: "c", LeaseTTL: 3 * time.Second, Replicas: 1})
	var se *cluster.SettingError
	if !errors.As(err, &se) || se.Key != "cluster.replicas" || se.Have != "1" || se.AssetValue != "3" {
		t.Fatalf("another replica count: %v, want a SettingError for cluster.replicas, 1 against 3", err)
	}
	if got, _ := fresh.LogID(t.Context()); got != "" {
		t.Errorf("a refused database records log %q", got)
	}
	js, _ := jetstream.New(conn)
	s, err := js.Stream(t.Context(), "ORDERD_LOG")
	if err != nil {
		t.Fatal(err)
	}
	if r := s.CachedInfo().Config.Replicas; r != 3 {
		t.Errorf("the log has %d replicas after the refusal, want 3", r)
	}
}

// TestNode_skipsForeignEntries: an entry appended under another log's id
// (by an instance still following a log replaced under the same name) is
// applied by no instance of this log, and they stay alike and writable.
func TestNode_skipsForeignEntries(t *testing.T) {
	nc := startNATS(t)
	a := startInstance(t, nc, "a", t.TempDir(), 3*time.Second)
	b := startInstance(t, nc, "b", t.TempDir(), 3*time.Second)
	if _, err := a.st.Exec(t.Context(), openFinding("before")); err != nil {
		t.Fatal(err)
	}
	// The stale instance's entry: a valid command, another log's id.
	ops, err := store.EncodeOps([]store.Op{{At: time.Now(), Cmd: openFinding("foreign")}})
	if err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg("orderd_log.orderd_log")
	msg.Data = ops
	msg.Header.Set("Orderd-Log", "11111111-2222-4333-8444-555555555555")
	js, _ := jetstream.New(a.nc)
	if _, err := js.PublishMsg(t.Context(), msg); err != nil {
		t.Fatal(err)
	}
	if _, err := b.st.Exec(t.Context(), openFinding("after")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "both applied everything", func() bool {
		return a.node.AppliedSeq() == b.node.AppliedSeq() && a.node.AppliedSeq() >= 3
	})
	for _, in := range []*instance{a, b} {
		if err := in.node.Fatal(); err != nil {
			t.Errorf("%s stopped: %v", in.name, err)
		}
		var n int
		in.st.DB().QueryRowContext(t.Context(), "SELECT count(*) FROM findings WHERE subject_key = 'foreign'").Scan(&n)
		if n != 0 {
			t.Errorf("%s applied the foreign entry", in.name)
		}
	}
	da, _ := digest(t, a)
	db, _ := digest(t, b)
	if da != db {
		t.Fatal("the instances' databases differ")
	}
}

// TestNew_restoresLostLogID: a log stream whose id was dropped (an edit
// that lost its metadata) takes back the id its databases follow, and they
// start on it.
func TestNew_restoresLostLogID(t *testing.T) {
	nc := startNATS(t)
	dir := t.TempDir()
	a := startInstance(t, nc, "a", dir, 3*time.Second)
	id := a.node.Status(t.Context()).Log
	if _, err := a.st.Exec(t.Context(), openFinding("kept")); err != nil {
		t.Fatal(err)
	}
	a.close()
	conn, err := nats.Connect(nc.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	js, _ := jetstream.New(conn)
	s, err := js.Stream(t.Context(), "ORDERD_LOG")
	if err != nil {
		t.Fatal(err)
	}
	sc := s.CachedInfo().Config
	sc.Metadata = nil
	if _, err := js.UpdateStream(t.Context(), sc); err != nil {
		t.Fatal(err)
	}
	if s, _ = js.Stream(t.Context(), "ORDERD_LOG"); s.CachedInfo().Config.Metadata["orderd_log_id"] != "" {
		t.Skip("the server kept the metadata")
	}
	again := startInstance(t, nc, "a", dir, 3*time.Second)
	if got := again.node.Status(t.Context()).Log; got != id {
		t.Fatalf("the instance follows %q after the id was dropped, want %q", got, id)
	}
	s, _ = js.Stream(t.Context(), "ORDERD_LOG")
	if got := s.CachedInfo().Config.Metadata["orderd_log_id"]; got != id {
		t.Fatalf("the stream's id is %q, want %q back", got, id)
	}
}
