package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"orderd/publish"
)

// A raw round publishes to a scratch stream, waiting for each PubAck,
// reports what it measured, the NATS server's CPU among it, and leaves no
// stream behind.
func TestRawRound(t *testing.T) {
	srv, err := publish.StartEmbedded(publish.EmbeddedConfig{Listen: "127.0.0.1:0", StoreDir: filepath.Join(t.TempDir(), "nats")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	b := &bench{out: io.Discard, o: options{
		rawNATS: []string{srv.ClientURL()}, rawReplicas: 1, rawSize: 1200, conns: 4,
		duration: 300 * time.Millisecond, timeout: 5 * time.Second,
		// The server runs in this process.
		natsPIDs: []int{os.Getpid()},
	}}
	rr, err := b.rawRound(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if rr.target != "raw" || rr.answers == 0 || rr.rate <= 0 || rr.p50 <= 0 || rr.p99 < rr.p50 || rr.non2xx != 0 {
		t.Errorf("raw round = %+v", rr)
	}
	if rr.natsCPUPer1k <= 0 {
		t.Errorf("NATS CPU per 1,000 publishes = %v, want it measured", rr.natsCPUPer1k)
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for name := range js.StreamNames(t.Context()).Name() {
		t.Errorf("stream %s left behind", name)
	}
}
