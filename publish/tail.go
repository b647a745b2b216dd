package publish

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrTailSubject is a subject Tail cannot follow.
var ErrTailSubject = errors.New("not a subject of the stream")

// checkTailSubject refuses a subject that is malformed or outside every
// subject of stream.
func checkTailSubject(ctx context.Context, js jetstream.JetStream, stream, subject string) error {
	if !server.IsValidSubject(subject) {
		return fmt.Errorf("%w: %q is not a NATS subject (dot-separated tokens; * and > only as whole tokens, > last)",
			ErrTailSubject, subject)
	}
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("tail %s: %w", stream, err)
	}
	subjects := s.CachedInfo().Config.Subjects
	for _, ss := range subjects {
		if server.SubjectsCollide(subject, ss) {
			return nil
		}
	}
	return fmt.Errorf("%w: %q matches none of stream %s's subjects (%s)", ErrTailSubject, subject, stream,
		strings.Join(subjects, ", "))
}

// TailOption changes what Tail prints.
type TailOption func(*jetstream.OrderedConsumerConfig)

// TailAll makes Tail start with the oldest event the stream holds instead
// of the next new one.
func TailAll() TailOption {
	return func(c *jetstream.OrderedConsumerConfig) { c.DeliverPolicy = jetstream.DeliverAllPolicy }
}

// Tail prints each event of stream that matches subject (a NATS subject,
// wildcards allowed; empty for all) to w as it arrives, one line each: the
// subject, a space, and the event's JSON on one line. It starts with new
// events unless TailAll is given, and returns nil when ctx is cancelled. It
// uses an ordered consumer: ephemeral, acknowledging nothing, so it changes
// nothing on the stream.
//
// A subject that is not a NATS subject, or that no subject of the stream
// can match (so that Tail would wait for ever), is an error wrapping
// ErrTailSubject, before anything is consumed.
func Tail(ctx context.Context, js jetstream.JetStream, stream, subject string, w io.Writer, opts ...TailOption) error {
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy}
	if subject != "" {
		if err := checkTailSubject(ctx, js, stream, subject); err != nil {
			return err
		}
		cfg.FilterSubjects = []string{subject}
	}
	for _, o := range opts {
		o(&cfg)
	}
	cons, err := js.OrderedConsumer(ctx, stream, cfg)
	if err != nil {
		return fmt.Errorf("tail %s: %w", stream, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("tail %s: %w", stream, err)
	}
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	defer it.Stop()
	var line bytes.Buffer
	for {
		msg, err := it.Next()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return nil
			}
			return fmt.Errorf("tail %s: %w", stream, err)
		}
		line.Reset()
		line.WriteString(msg.Subject())
		line.WriteByte(' ')
		// Order data keeps the provider's formatting, which may span
		// lines; one event per line is easier to read and to grep.
		if err := json.Compact(&line, msg.Data()); err != nil {
			line.Write(msg.Data())
		}
		line.WriteByte('\n')
		if _, err := w.Write(line.Bytes()); err != nil {
			return fmt.Errorf("tail %s: %w", stream, err)
		}
	}
}
