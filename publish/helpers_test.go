package publish_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"orderd/publish"
)

// startNATS starts an embedded server on listen ("127.0.0.1:0" for any
// port) with its store in dir, stopped when the test ends.
func startNATS(t testing.TB, dir, listen string) *publish.Embedded {
	t.Helper()
	e, err := publish.StartEmbedded(publish.EmbeddedConfig{Listen: listen, StoreDir: dir})
	if err != nil {
		t.Fatalf("start embedded nats: %v", err)
	}
	t.Cleanup(e.Shutdown)
	return e
}

// connectJS connects a plain client for the test's own use.
func connectJS(t testing.TB, url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return nc, js
}

// startStream starts an embedded server on any loopback port, connects a
// plain client and creates orderd's stream with the defaults.
func startStream(t testing.TB) jetstream.JetStream {
	t.Helper()
	e := startNATS(t, t.TempDir(), "127.0.0.1:0")
	_, js := connectJS(t, e.ClientURL())
	if _, err := publish.EnsureStream(t.Context(), js, publish.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	return js
}

// streamMsgs reads every message of the stream in order, through an ordered
// consumer, with a bound on the wait.
func streamMsgs(t testing.TB, js jetstream.JetStream, stream string) []jetstream.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	want := int(info.State.Msgs)
	if want == 0 {
		return nil
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatalf("ordered consumer: %v", err)
	}
	var msgs []jetstream.Msg
	for len(msgs) < want {
		batch, err := cons.Fetch(want-len(msgs), jetstream.FetchMaxWait(5*time.Second))
		if errors.Is(err, nats.ErrNoResponders) && ctx.Err() == nil {
			// The consumer is not being served yet (JetStream just
			// restarted inside the server): ask again.
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatalf("fetch: %v", err)
		}
		n := 0
		for m := range batch.Messages() {
			msgs = append(msgs, m)
			n++
		}
		if err := batch.Error(); err != nil {
			t.Fatalf("fetch: %v", err)
		}
		if n == 0 {
			t.Fatalf("stream %s: read %d of %d messages", stream, len(msgs), want)
		}
	}
	return msgs
}

// waitFor polls cond until it holds or the bound passes.
func waitFor(t testing.TB, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", bound, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
