package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"orderd/store"
)

// streamCounts reads a replicated run's log and events streams through
// the NATS servers at urls and prints what the NATS nodes stored for it:
// log entries by the kinds of the commands in them (an entry of relay
// marks alone is an entry the webhooks did not bring), and events
// published one by one against those in atomic batches, with the batches'
// sizes. It is what the NATS nodes' CPU per webhook is spent on.
func streamCounts(ctx context.Context, out io.Writer, urls []string, logStream, eventStream string) error {
	nc, err := nats.Connect(strings.Join(urls, ","), nats.Name("orderd-bench counts"))
	if err != nil {
		return fmt.Errorf("counts: connect: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("counts: %w", err)
	}

	var entries, marksOnly, ops, bytes int
	kinds := map[string]int{}
	err = readStream(ctx, js, logStream, func(m *jetstream.RawStreamMsg) error {
		dec, err := store.DecodeOps(m.Data)
		if err != nil {
			return err
		}
		entries++
		bytes += len(m.Data)
		only := len(dec) > 0
		for _, op := range dec {
			k := op.Cmd.Kind()
			kinds[k]++
			ops++
			only = only && k == "outbox.advance"
		}
		if only {
			marksOnly++
		}
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "counts: %s: %d entries, %d bytes, %d commands; %d entries of relay marks (outbox.advance) alone\n", logStream, entries, bytes, ops, marksOnly)
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range kinds {
			if !yield(k) {
				return
			}
		}
	}) {
		fmt.Fprintf(out, "counts:   %-28s %d\n", k, kinds[k])
	}

	batches := map[string]int{}
	var events, singles int
	err = readStream(ctx, js, eventStream, func(m *jetstream.RawStreamMsg) error {
		events++
		if id := m.Header.Get("Nats-Batch-Id"); id != "" {
			batches[id]++
		} else {
			singles++
		}
		return nil
	})
	if err != nil {
		return err
	}
	sizes := make([]int, 0, len(batches))
	for _, n := range batches {
		sizes = append(sizes, n)
	}
	slices.Sort(sizes)
	fmt.Fprintf(out, "counts: %s: %d events, %d published one by one, %d in %d atomic batches", eventStream, events, singles, events-singles, len(sizes))
	if len(sizes) > 0 {
		fmt.Fprintf(out, " (sizes: smallest %d, median %d, largest %d)", sizes[0], sizes[len(sizes)/2], sizes[len(sizes)-1])
	}
	fmt.Fprintln(out)
	return nil
}

// readStream hands every message of the stream, oldest first, to fn. It
// reads each message by its sequence (the stream's get API): slower than a
// consumer, but it answers on a cluster under any load, where an ordered
// consumer's pulls were seen to go unanswered.
func readStream(ctx context.Context, js jetstream.JetStream, name string, fn func(*jetstream.RawStreamMsg) error) error {
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := js.Stream(sctx, name)
	if err != nil {
		return fmt.Errorf("counts: stream %s: look it up: %w", name, err)
	}
	st := s.CachedInfo().State
	for seq := st.FirstSeq; seq <= st.LastSeq && seq > 0; seq++ {
		gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		m, err := s.GetMsg(gctx, seq)
		cancel()
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // deleted
		}
		if err != nil {
			return fmt.Errorf("counts: stream %s: read %d: %w", name, seq, err)
		}
		if err := fn(m); err != nil {
			return fmt.Errorf("counts: stream %s at %d: %w", name, seq, err)
		}
	}
	return nil
}
