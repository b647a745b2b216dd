package cluster

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"orderd/publish"
	"orderd/store"
)

// TestNode_StopCountsNoFailure: an append or an apply cut short by the
// node's stop is not counted as a failure of the log nor logged as an
// error, and what it did not finish is still done when the node goes on.
func TestNode_StopCountsNoFailure(t *testing.T) {
	ctx := t.Context()
	n, st, reg, logged := testNode(t)
	stopped, stop := context.WithCancel(ctx)
	stop()

	// An append under way when the node stops: the caller is told the
	// log is unavailable; the log is not.
	cut := write("cut")
	n.appendGroup(stopped, []*call{cut})
	<-cut.done
	if !errors.Is(cut.err, store.ErrUnavailable) {
		t.Fatalf("append cut short by the stop: err = %v, want ErrUnavailable", cut.err)
	}
	if got := counter(t, reg, "orderd_log_append_errors_total"); got != 0 {
		t.Errorf("append errors after a stop = %v, want 0", got)
	}
	if n.lastAppendErr.Load() != 0 {
		t.Error("an append cut short by the stop marked the log as failing")
	}

	// An apply under way when the node stops: a real entry of the log,
	// appended while the node ran (no applier here, so it waits).
	kept := write("kept")
	n.appendGroup(ctx, []*call{kept})
	cons, err := n.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	jmsg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	msg, err := consumerMsg(jmsg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.applyMsgs(stopped, []logMsg{msg}); !errors.Is(err, context.Canceled) {
		t.Fatalf("apply cut short by the stop: err = %v, want context.Canceled", err)
	}
	if got := counter(t, reg, "orderd_log_apply_errors_total"); got != 0 {
		t.Errorf("apply errors after a stop = %v, want 0", got)
	}
	if strings.Contains(logged.String(), "level=ERROR") {
		t.Errorf("a stop was logged as an error:\n%s", logged.String())
	}

	// Going on, the entry is applied and its caller answered.
	if err := n.applyMsgs(ctx, []logMsg{msg}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-kept.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the caller of the entry applied after the stop was not answered")
	}
	if kept.err != nil {
		t.Fatalf("the entry applied after the stop: %v", kept.err)
	}
	if seq, err := st.AppliedSeq(ctx); err != nil || seq != 1 {
		t.Fatalf("applied seq = %d (%v), want 1", seq, err)
	}
}

// testNode is a node on an embedded NATS server and a fresh store, with
// neither its appender nor its applier running; its log lines go to
// logged.
func testNode(t *testing.T) (n *Node, st *store.Store, reg *prometheus.Registry, logged *bytes.Buffer) {
	t.Helper()
	ctx := t.Context()
	dir := t.TempDir()
	srv, err := publish.StartEmbedded(publish.EmbeddedConfig{Listen: "127.0.0.1:0", StoreDir: filepath.Join(dir, "nats")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	st, err = store.Open(ctx, filepath.Join(dir, "orderd.db"), store.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close(context.Background()) })
	logged = &bytes.Buffer{}
	reg = prometheus.NewRegistry()
	n, err = New(ctx, nc, st, Config{Node: "a", Replicas: 1, Registerer: reg,
		Logger: slog.New(slog.NewTextHandler(logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return n, st, reg, logged
}

// write is a call of one write (a finding keyed key), for appendGroup.
func write(key string) *call {
	cmd := &store.OpenFindingCmd{FindingKind: "test", Key: key, Detail: []byte(`{"k":1}`)}
	return &call{ops: []store.Op{{At: time.Now(), Cmd: cmd}}, done: make(chan struct{})}
}

// counter reads the counter name from reg.
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
