package publish_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"orderd/publish"
)

func TestStartEmbedded_SurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	e := startNATS(t, dir, "127.0.0.1:0")
	url := e.ClientURL()
	host, port, err := net.SplitHostPort(strings.TrimPrefix(url, "nats://"))
	if !strings.HasPrefix(url, "nats://") || err != nil || host != "127.0.0.1" || port == "0" {
		t.Fatalf("ClientURL = %q, want nats://127.0.0.1:<bound port>", url)
	}

	_, js := connectJS(t, url)
	if _, err := publish.EnsureStream(t.Context(), js, publish.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	ack, err := js.Publish(t.Context(), "orderd.orders.payin.completed", []byte(`{"n":1}`), jetstream.WithMsgID("e1"))
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	e.Shutdown()

	// The same store and port: the acked message is still there, and
	// the duplicate window still knows its id.
	e2 := startNATS(t, dir, "127.0.0.1:"+port)
	if e2.ClientURL() != url {
		t.Fatalf("restarted on %s, want %s", e2.ClientURL(), url)
	}
	_, js2 := connectJS(t, url)
	msgs := streamMsgs(t, js2, publish.DefaultStreamName)
	if len(msgs) != 1 || string(msgs[0].Data()) != `{"n":1}` {
		t.Fatalf("after restart the stream holds %d messages, want the 1 acked", len(msgs))
	}
	ack2, err := js2.Publish(t.Context(), "orderd.orders.payin.completed", []byte(`{"n":1}`), jetstream.WithMsgID("e1"))
	if err != nil {
		t.Fatal(err)
	}
	if !ack2.Duplicate || ack2.Sequence != ack.Sequence {
		t.Errorf("republished after restart: ack %+v, want a duplicate of seq %d", ack2, ack.Sequence)
	}
}

func TestStartEmbedded_BadConfig(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	tests := []struct {
		name string
		cfg  publish.EmbeddedConfig
		want string
	}{
		{"no store dir", publish.EmbeddedConfig{Listen: "127.0.0.1:0"}, "store_dir"},
		{"listen without port", publish.EmbeddedConfig{Listen: "127.0.0.1", StoreDir: t.TempDir()}, "listen"},
		{"port out of range", publish.EmbeddedConfig{Listen: "127.0.0.1:70000", StoreDir: t.TempDir()}, "port"},
		{"port taken", publish.EmbeddedConfig{Listen: busy.Addr().String(), StoreDir: t.TempDir()}, "address already in use"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := publish.StartEmbedded(tt.cfg)
			if err == nil {
				e.Shutdown()
				t.Fatal("started, want an error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %q, want it to mention %q", err, tt.want)
			}
		})
	}
}

// TestEmbedded_RecoverJetStream: restarting JetStream inside the running
// server (what the watchdog does after a write error) keeps the stream and
// what it acknowledged, keeps the client connected, and leaves the
// duplicate window knowing the ids it stored.
func TestEmbedded_RecoverJetStream(t *testing.T) {
	e := startNATS(t, t.TempDir(), "127.0.0.1:0")
	if err := e.JetStreamErr(); err != nil {
		t.Fatalf("a fresh server: %v", err)
	}
	nc, js := connectJS(t, e.ClientURL())
	if _, err := publish.EnsureStream(t.Context(), js, publish.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	ack, err := js.Publish(t.Context(), "orderd.orders.payin.completed", []byte(`{"n":1}`), jetstream.WithMsgID("e1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.RecoverJetStream(); err != nil {
		t.Fatalf("RecoverJetStream: %v", err)
	}
	if !nc.IsConnected() {
		t.Fatal("the client lost its connection")
	}
	var again *jetstream.PubAck
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		again, err = js.Publish(t.Context(), "orderd.orders.payin.completed", []byte(`{"n":1}`), jetstream.WithMsgID("e1"))
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("publish after the restart: %v", err)
	}
	if !again.Duplicate || again.Sequence != ack.Sequence {
		t.Errorf("the same id after the restart: %+v, want a duplicate of seq %d", again, ack.Sequence)
	}
	if _, err := js.Publish(t.Context(), "orderd.orders.payin.completed", []byte(`{"n":2}`), jetstream.WithMsgID("e2")); err != nil {
		t.Fatal(err)
	}
	if msgs := streamMsgs(t, js, publish.DefaultStreamName); len(msgs) != 2 {
		t.Errorf("stream holds %d messages, want 2", len(msgs))
	}
}
