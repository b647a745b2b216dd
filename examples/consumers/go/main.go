// Command consumer is an example of a platform consuming orderd's events
// from NATS JetStream with the nats.go jetstream package: a durable pull
// consumer that handles every event once by its id, in order per order,
// acknowledges an event only after its work is done, survives its own
// restart, and can start from a point in time.
//
// The work here is appending a line to a ledger file (-ledger); a real
// platform would write to its database. The ledger is also the record of
// the ids already handled: read back at start, it makes a redelivered
// event (JetStream delivers at least once) a no-op. In a database, record
// the event id in the same transaction as the work, with a unique
// constraint on it.
//
//	go run ./examples/consumers/go -server nats://127.0.0.1:4222
//	go run ./examples/consumers/go -durable replay -since 2026-11-27T00:00:00Z
//
// Before its work, each event's data is validated against the schema its
// dataschema attribute names (orderd's AsyncAPI document, fetched from the
// admin API, with github.com/santhosh-tekuri/jsonschema/v6). An event that
// does not match stops the consumer without acknowledging it: a contract
// break is for a person to look at, not to be skipped (-validate=false
// turns this off).
//
// Each event prints one line: "handled seq=… id=… type=… subject=…" the
// first time, "duplicate seq=… id=…" when it comes again.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "consumer:", err)
		os.Exit(1)
	}
}

type options struct {
	server, stream, durable, filter, ledger string
	since                                   time.Time
	ackWait                                 time.Duration
	crashAfter                              int
	validate                                bool
	adminToken                              string
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	var o options
	fs := flag.NewFlagSet("consumer", flag.ContinueOnError)
	fs.StringVar(&o.server, "server", nats.DefaultURL, "NATS `URL`")
	fs.StringVar(&o.stream, "stream", "ORDERD", "the events' stream (nats.stream)")
	fs.StringVar(&o.durable, "durable", "example-go", "durable consumer `name`: its position survives restarts")
	fs.StringVar(&o.filter, "subject", "orderd.>", "subjects to consume, e.g. orderd.orders.> or orderd.reconcile.>")
	fs.StringVar(&o.ledger, "ledger", "ledger-go.txt", "`file` of handled events: the work, and the ids handled")
	since := fs.String("since", "", "when the durable is created: start from this RFC 3339 `time` instead of the stream's first event")
	fs.DurationVar(&o.ackWait, "ack-wait", 30*time.Second, "how long an unacknowledged event waits before JetStream delivers it again")
	fs.IntVar(&o.crashAfter, "crash-after", 0, "for tests: exit abruptly after the work of the `N`th event, before acknowledging it")
	fs.BoolVar(&o.validate, "validate", true, "validate each event's data against the schema its dataschema names")
	fs.StringVar(&o.adminToken, "admin-token", os.Getenv("ORDERD_ADMIN_TOKEN"), "bearer `token` for fetching the schema from orderd's admin API, when it has one (default $ORDERD_ADMIN_TOKEN)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *since != "" {
		t, err := time.Parse(time.RFC3339, *since)
		if err != nil {
			return fmt.Errorf("-since: %w", err)
		}
		o.since = t
	}

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	handled, err := loadLedger(o.ledger)
	if err != nil {
		return err
	}
	ledger, err := os.OpenFile(o.ledger, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer ledger.Close()

	nc, err := nats.Connect(o.server, nats.Name("orderd example consumer (go)"), nats.MaxReconnects(-1))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	// orderd creates the stream at its first publish; until then, wait.
	cons, err := durable(ctx, js, o, stdout)
	for waited := false; errors.Is(err, jetstream.ErrStreamNotFound); waited = true {
		if !waited {
			fmt.Fprintf(stdout, "waiting for stream %s\n", o.stream)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
		cons, err = durable(ctx, js, o, stdout)
	}
	if err != nil {
		return err
	}
	msgs, err := cons.Messages(jetstream.PullMaxMessages(1))
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		msgs.Stop() // Next returns once the event in hand is done
	}()

	var sch *schemas
	if o.validate {
		sch = newSchemas(o.adminToken)
	}
	n := 0
	for {
		msg, err := msgs.Next()
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			return nil
		}
		if err != nil {
			return err
		}
		meta, err := msg.Metadata()
		if err != nil {
			return err
		}
		var ev struct {
			ID         string          `json:"id"`
			Type       string          `json:"type"`
			Subject    string          `json:"subject"`
			DataSchema string          `json:"dataschema"`
			Data       json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(msg.Data(), &ev); err != nil || ev.ID == "" {
			// Not an orderd event: nothing to do with it, ever.
			fmt.Fprintf(stdout, "skipped seq=%d subject=%s: not a CloudEvent with an id\n", meta.Sequence.Stream, msg.Subject())
			if err := msg.Term(); err != nil {
				return err
			}
			continue
		}
		if sch != nil {
			if err := sch.validate(ev.DataSchema, ev.Data); err != nil {
				fmt.Fprintf(stdout, "invalid seq=%d id=%s type=%s: %v\n", meta.Sequence.Stream, ev.ID, ev.Type, err)
				return fmt.Errorf("event seq %d does not match its dataschema %s; not acknowledged", meta.Sequence.Stream, ev.DataSchema)
			}
		}
		if handled[ev.ID] {
			fmt.Fprintf(stdout, "duplicate seq=%d id=%s type=%s (handled before; acknowledged again)\n", meta.Sequence.Stream, ev.ID, ev.Type)
		} else {
			// The work, and the record that it is done, in one write.
			line := fmt.Sprintf("%s %d %s %s\n", ev.ID, meta.Sequence.Stream, ev.Type, ev.Subject)
			if _, err := ledger.WriteString(line); err != nil {
				return err
			}
			if err := ledger.Sync(); err != nil {
				return err
			}
			handled[ev.ID] = true
			n++
			fmt.Fprintf(stdout, "handled seq=%d id=%s type=%s subject=%s\n", meta.Sequence.Stream, ev.ID, ev.Type, ev.Subject)
			if o.crashAfter > 0 && n == o.crashAfter {
				fmt.Fprintf(stdout, "crashing before acknowledging seq=%d, as -crash-after asks\n", meta.Sequence.Stream)
				os.Exit(3)
			}
		}
		// Only now, with the work durable: DoubleAck waits for the server,
		// so a lost acknowledgement is an error here, not a silent
		// redelivery later (which the ledger would absorb anyway).
		if err := msg.DoubleAck(ctx); err != nil && ctx.Err() == nil {
			return fmt.Errorf("ack seq %d: %w", meta.Sequence.Stream, err)
		}
	}
}

// durable returns the durable consumer, creating it when it does not exist
// yet. MaxAckPending 1 keeps the events in stream order, and so in order
// per order, even across redeliveries: JetStream hands out nothing after an
// unacknowledged event until it is acknowledged.
func durable(ctx context.Context, js jetstream.JetStream, o options, stdout io.Writer) (jetstream.Consumer, error) {
	cons, err := js.Consumer(ctx, o.stream, o.durable)
	if err == nil {
		if !o.since.IsZero() {
			fmt.Fprintf(stdout, "durable %s exists and keeps its position; -since applies to a new one (another -durable, or nats consumer rm %s %s)\n",
				o.durable, o.stream, o.durable)
		}
		return cons, nil
	}
	if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, err
	}
	cfg := jetstream.ConsumerConfig{
		Durable:       o.durable,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       o.ackWait,
		MaxAckPending: 1,
		FilterSubject: o.filter,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
	if !o.since.IsZero() {
		cfg.DeliverPolicy = jetstream.DeliverByStartTimePolicy
		cfg.OptStartTime = &o.since
	}
	cons, err = js.CreateConsumer(ctx, o.stream, cfg)
	if err == nil {
		fmt.Fprintf(stdout, "created durable %s on %s (%s)\n", o.durable, o.stream, o.filter)
	}
	return cons, err
}

// loadLedger reads the ids of the events already handled. A last line cut
// short by a crash is dropped (its event was not acknowledged, so it comes
// again).
func loadLedger(path string) (map[string]bool, error) {
	handled := map[string]bool{}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return handled, nil
	}
	if err != nil {
		return nil, err
	}
	if i := strings.LastIndexByte(string(b), '\n'); i+1 < len(b) {
		if err := os.Truncate(path, int64(i+1)); err != nil {
			return nil, err
		}
		b = b[:i+1]
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		if id, _, _ := strings.Cut(sc.Text(), " "); id != "" {
			handled[id] = true
		}
	}
	return handled, sc.Err()
}
