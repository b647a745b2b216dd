package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"orderd/publish"
	"orderd/test/support/testaddr"
)

// TestTail_NATSOutage: orderd tail says on standard error when NATS goes
// away and when it is back, and goes on printing events afterwards.
func TestTail_NATSOutage(t *testing.T) {
	addr, dir := testaddr.Loopback(t), t.TempDir()
	start := func() *publish.Embedded {
		t.Helper()
		e, err := publish.StartEmbedded(publish.EmbeddedConfig{Listen: addr, StoreDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	publishOne := func(id string) {
		t.Helper()
		nc, err := nats.Connect("nats://" + addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := publish.EnsureStream(t.Context(), js, publish.StreamConfig{}); err != nil {
			t.Fatal(err)
		}
		if _, err := js.Publish(t.Context(), "orderd.orders.payin.completed", []byte(`{"id":"`+id+`"}`)); err != nil {
			t.Fatal(err)
		}
	}
	e := start()
	defer func() { e.Shutdown() }()
	publishOne("before")

	ctx, cancel := context.WithCancel(t.Context())
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- dispatch(ctx, commands(), []string{"orderd", "tail", "-server", "nats://" + addr, "-all"},
			func(string) string { return "" }, nil, stdout, stderr)
	}()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("tail: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("tail did not stop within 10s of its cancel")
		}
	}()
	waitFor := func(what string, buf *syncBuffer, text string) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !strings.Contains(buf.String(), text); time.Sleep(20 * time.Millisecond) {
			select {
			case err := <-done:
				t.Fatalf("tail returned while waiting for %s: %v\nstdout:\n%s\nstderr:\n%s", what, err, stdout, stderr)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %s within 20s\nstdout:\n%s\nstderr:\n%s", what, stdout, stderr)
			}
		}
	}
	waitFor("first event", stdout, `{"id":"before"}`)
	if s := stderr.String(); s != "" {
		t.Errorf("stderr before any outage: %q", s)
	}

	e.Shutdown()
	waitFor("line saying NATS went away", stderr, "orderd tail: lost the connection to NATS")
	e = start()
	waitFor("line saying NATS is back", stderr, "orderd tail: reconnected to NATS at nats://"+addr)
	publishOne("after")
	waitFor("event after the outage", stdout, `{"id":"after"}`)
	if strings.Contains(stdout.String(), "orderd tail:") {
		t.Errorf("connection notices on standard output:\n%s", stdout)
	}
}
