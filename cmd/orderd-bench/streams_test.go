package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"orderd/publish"
	"orderd/store"
)

// The counts read every log entry and every event, by command kind and by
// atomic batch.
func TestStreamCounts(t *testing.T) {
	// Three nodes and R3 streams, as bench-cluster reads them.
	srv, err := publish.StartEmbeddedCluster(publish.EmbeddedClusterConfig{Dir: filepath.Join(t.TempDir(), "nats")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for name, subject := range map[string]string{"ORDERD_LOG": "log", "ORDERD": "ev.>"} {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject}, Replicas: 3, AllowAtomicPublish: true}); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		b, err := store.EncodeOps([]store.Op{{At: time.Now(), Cmd: store.NoopCmd{}}, {At: time.Now(), Cmd: store.NoopCmd{}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.Publish(ctx, "log", b); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if _, err := js.Publish(ctx, "ev.a", []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		m := nats.NewMsg("ev.b")
		m.Data = []byte("{}")
		m.Header.Set("Nats-Batch-Id", "b1")
		m.Header.Set("Nats-Batch-Sequence", []string{"1", "2", "3"}[i])
		if i < 2 {
			if err := nc.PublishMsg(m); err != nil {
				t.Fatal(err)
			}
			continue
		}
		m.Header.Set("Nats-Batch-Commit", "1")
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if err := streamCounts(ctx, &out, []string{srv.ClientURL()}, "ORDERD_LOG", "ORDERD"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"ORDERD_LOG: 3 entries", "6 commands; 0 entries of relay marks",
		"ORDERD: 5 events, 2 published one by one, 3 in 1 atomic batches (sizes: smallest 3, median 3, largest 3)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("counts say\n%s\nwant %q in them", out.String(), want)
		}
	}
}
