package publish_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"orderd/publish"
	"orderd/test/support/syncbuf"
)

func TestTail(t *testing.T) {
	js := startStream(t)
	pub := func(subject, data string) {
		t.Helper()
		if _, err := js.Publish(t.Context(), subject, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	pub("orderd.orders.payin.completed", `{"id": "old-1"}`)

	tests := []struct {
		name    string
		subject string
		opts    []publish.TailOption
		want    []string
	}{
		{
			name: "new events only",
			want: []string{
				`orderd.orders.payin.processing {"id":"new-1"}`,
				`orderd.reconcile.stuck_order {"id":"new-2"}`,
			},
		},
		{
			name:    "subject filter",
			subject: "orderd.orders.>",
			want:    []string{`orderd.orders.payin.processing {"id":"new-1"}`},
		},
		{
			name: "all from the start",
			opts: []publish.TailOption{publish.TailAll()},
			want: []string{
				`orderd.orders.payin.completed {"id":"old-1"}`,
				`orderd.orders.payin.processing {"id":"new-1"}`,
				`orderd.reconcile.stuck_order {"id":"new-2"}`,
			},
		},
	}
	var outs []*syncbuf.Buffer
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(t.Context())
	errs := make([]error, len(tests))
	for i, tt := range tests {
		out := &syncbuf.Buffer{}
		outs = append(outs, out)
		wg.Go(func() { errs[i] = publish.Tail(ctx, js, "ORDERD", tt.subject, out, tt.opts...) })
	}
	// Tail has no "ready" signal; wait until its consumers exist.
	waitFor(t, 5*time.Second, "tail consumers", func() bool {
		s, err := js.Stream(t.Context(), "ORDERD")
		if err != nil {
			return false
		}
		info, err := s.Info(t.Context())
		return err == nil && info.State.Consumers == len(tests)
	})
	pub("orderd.orders.payin.processing", "{\n  \"id\": \"new-1\"\n}")
	pub("orderd.reconcile.stuck_order", `{"id":"new-2"}`)
	for i, tt := range tests {
		want := strings.Join(tt.want, "\n") + "\n"
		waitFor(t, 5*time.Second, tt.name+" output", func() bool { return len(outs[i].String()) >= len(want) })
	}
	cancel()
	wg.Wait()
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if errs[i] != nil {
				t.Errorf("Tail returned %v after cancel, want nil", errs[i])
			}
			if got, want := outs[i].String(), strings.Join(tt.want, "\n")+"\n"; got != want {
				t.Errorf("output:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func TestTail_UnknownStream(t *testing.T) {
	e := startNATS(t, t.TempDir(), "127.0.0.1:0")
	_, js := connectJS(t, e.ClientURL())
	err := publish.Tail(t.Context(), js, "NOPE", "", &bytes.Buffer{})
	if !errors.Is(err, jetstream.ErrStreamNotFound) || !strings.Contains(err.Error(), "NOPE") {
		t.Fatalf("err = %v, want stream not found naming the stream", err)
	}
}

// A subject that is not one, or that no subject of the stream can match
// (Tail would wait for ever), is refused before anything is consumed.
func TestTail_BadSubject(t *testing.T) {
	js := startStream(t)
	for _, subject := range []string{"orderd..x", "a b", ".", "orderd.>.x", "foo.bar", "*"} {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		err := publish.Tail(ctx, js, "ORDERD", subject, &bytes.Buffer{})
		cancel()
		if !errors.Is(err, publish.ErrTailSubject) || !strings.Contains(err.Error(), subject) {
			t.Errorf("Tail(%q) = %v, want ErrTailSubject naming it", subject, err)
		}
	}
	s, err := js.Stream(t.Context(), "ORDERD")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := s.Info(t.Context()); err != nil || info.State.Consumers != 0 {
		t.Errorf("consumers after the refusals: %d (%v), want 0", info.State.Consumers, err)
	}
}
