package publish_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"orderd/provider"
	"orderd/publish"
	"orderd/store"
)

// checkEvents parses every message as a CloudEvent and checks it against
// the orders it came from: valid, Nats-Msg-Id equal to the event id, no id
// twice, the subject and type of its status, the order's JSON as data and
// the order attributes. It returns the statuses each order's events carry,
// in stream order.
func checkEvents(t *testing.T, msgs []jetstream.Msg, orders map[string]testOrder, via store.Source) map[string][]string {
	t.Helper()
	seen := make(map[string]bool)
	statuses := make(map[string][]string)
	for _, m := range msgs {
		var ce cloudevents.Event
		if err := ce.UnmarshalJSON(m.Data()); err != nil {
			t.Fatalf("message on %s is not a CloudEvent: %v\n%s", m.Subject(), err, m.Data())
		}
		if err := ce.Validate(); err != nil {
			t.Fatalf("invalid CloudEvent: %v", err)
		}
		if got := m.Headers().Get(jetstream.MsgIDHeader); got != ce.ID() {
			t.Errorf("Nats-Msg-Id = %q, event id = %q", got, ce.ID())
		}
		if seen[ce.ID()] {
			t.Errorf("event %s is in the stream twice", ce.ID())
		}
		seen[ce.ID()] = true
		o, ok := orders[ce.Subject()]
		if !ok {
			t.Errorf("event for unknown order %q", ce.Subject())
			continue
		}
		var data struct{ Status string }
		if err := json.Unmarshal(ce.Data(), &data); err != nil {
			t.Fatalf("event data: %v", err)
		}
		if m.Subject() != "orderd.orders.payin."+data.Status || ce.Type() != "order."+data.Status {
			t.Errorf("event for a %s order on %s with type %s", data.Status, m.Subject(), ce.Type())
		}
		var want bytes.Buffer
		if err := json.Compact(&want, o.raw(data.Status, false)); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ce.Data(), want.Bytes()) {
			t.Errorf("data of %s:\n got %s\nwant %s", ce.ID(), ce.Data(), want.Bytes())
		}
		ext := ce.Extensions()
		if ext["merchantorderid"] != o.mid || ext["learnedvia"] != string(via) {
			t.Errorf("extensions of %s = %v, want merchantorderid %s, learnedvia %s", ce.ID(), ext, o.mid, via)
		}
		if ce.Source() != "orderd" || ce.Time().IsZero() {
			t.Errorf("source %q, time %s", ce.Source(), ce.Time())
		}
		statuses[o.id] = append(statuses[o.id], data.Status)
	}
	return statuses
}

func TestRelay_PublishesEachStateOnce(t *testing.T) {
	const n = 40
	tests := []struct {
		name string
		cfg  publish.RelayConfig
		// oneByOne: a stream that refuses atomic batches (as servers
		// before 2.12 do), so every event goes alone.
		oneByOne bool
	}{
		{"defaults", publish.RelayConfig{}, false},
		{"one at a time", publish.RelayConfig{BatchSize: 1, Window: 1}, false},
		{"batches smaller than the load", publish.RelayConfig{BatchSize: 7, Window: 3}, false},
		{"stream without atomic batches", publish.RelayConfig{}, true},
		{"stream without atomic batches, small window", publish.RelayConfig{BatchSize: 7, Window: 3}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // each has its own server and database
			e := startNATS(t, t.TempDir(), "127.0.0.1:0")
			_, js := connectJS(t, e.ClientURL())
			if tt.oneByOne {
				if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{
					Name: "ORDERD", Subjects: []string{"orderd.>"}, Storage: jetstream.FileStorage,
				}); err != nil {
					t.Fatal(err)
				}
			} else if _, err := publish.EnsureStream(t.Context(), js, publish.StreamConfig{}); err != nil {
				t.Fatal(err)
			}
			st, _ := openStore(t, store.Options{})
			runRelay(t, newRelay(t, tt.cfg, st, js))

			orders := make(map[string]testOrder)
			var wg sync.WaitGroup
			for i := range n {
				o := newTestOrder("once", i)
				orders[o.id] = o
				// Orders arrive concurrently, each one's
				// observations in sequence: each state twice,
				// once reformatted, plus a poll of the final
				// state. Two states, two events.
				wg.Go(func() {
					for _, ob := range []struct {
						status string
						pretty bool
						src    store.Source
					}{
						{"processing", false, store.SourceWebhook},
						{"processing", true, store.SourceWebhook},
						{"completed", false, store.SourceWebhook},
						{"completed", true, store.SourceWebhook},
						{"completed", false, store.SourcePoll},
					} {
						if _, err := tryApply(st, o, ob.status, ob.pretty, ob.src); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			waitFor(t, 10*time.Second, "the outbox to drain", func() bool { return backlog(t, st) == 0 })
			// Marked published, nothing more goes out: a few more
			// polls of the outbox must not add events.
			time.Sleep(700 * time.Millisecond)
			msgs := streamMsgs(t, js, "ORDERD")
			if len(msgs) != 2*n {
				t.Fatalf("stream holds %d events, want %d (two states of %d orders)", len(msgs), 2*n, n)
			}
			for id, got := range checkEvents(t, msgs, orders, store.SourceWebhook) {
				if strings.Join(got, ",") != "processing,completed" {
					t.Errorf("order %s: events %v, want processing then completed", id, got)
				}
			}
			batched := 0
			for _, m := range msgs {
				if m.Headers().Get("Nats-Batch-Id") != "" {
					batched++
				}
			}
			t.Logf("%d of %d events came in atomic batches", batched, len(msgs))
			if tt.oneByOne && batched > 0 {
				t.Errorf("%d events were sent in atomic batches to a stream that does not take them", batched)
			}
		})
	}
}

func TestRelay_SurvivesNATSOutage(t *testing.T) {
	dir := t.TempDir()
	e := startNATS(t, dir, "127.0.0.1:0")
	url := e.ClientURL()
	port := url[strings.LastIndex(url, ":")+1:]
	nc, err := publish.Connect(t.Context(), publish.ConnConfig{URL: url, ReconnectWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := publish.NewJetStream(nc, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m, err := publish.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := openStore(t, store.Options{})
	runRelay(t, newRelay(t, publish.RelayConfig{
		Window: 16, PublishTimeout: time.Second, MaxBackoff: 200 * time.Millisecond,
		Stream: &publish.StreamConfig{}, Metrics: m,
	}, st, js))

	orders := make(map[string]testOrder)
	var before []testOrder
	for i := range 20 {
		o := newTestOrder("before", i)
		orders[o.id], before = o, append(before, o)
		apply(t, st, o, "processing", false, store.SourceWebhook)
	}
	_, check := connectJS(t, url)
	waitFor(t, 10*time.Second, "20 events before the outage", func() bool {
		return streamCount(t, check, "ORDERD") == 20 && backlog(t, st) == 0
	})

	e.Shutdown()
	// Ingest goes on: every apply commits while NATS is away.
	for i, o := range before {
		apply(t, st, o, "completed", false, store.SourceWebhook)
		d := newTestOrder("during", i)
		orders[d.id] = d
		apply(t, st, d, "processing", false, store.SourceWebhook)
		apply(t, st, d, "completed", false, store.SourceWebhook)
		apply(t, st, d, "completed", true, store.SourceWebhook) // a reformatted repeat
	}
	waitFor(t, 10*time.Second, "the relay to hit the outage", func() bool {
		return metricValue(t, reg, "orderd_publish_errors_total") > 0
	})
	if got := backlog(t, st); got != 60 {
		t.Fatalf("backlog during the outage = %d, want 60", got)
	}

	startNATS(t, dir, "127.0.0.1:"+port)
	_, check = connectJS(t, url)
	waitFor(t, 20*time.Second, "the outbox to drain after the outage", func() bool { return backlog(t, st) == 0 })
	msgs := streamMsgs(t, check, "ORDERD")
	if len(msgs) != 80 {
		t.Fatalf("stream holds %d events, want 80", len(msgs))
	}
	for id, got := range checkEvents(t, msgs, orders, store.SourceWebhook) {
		if strings.Join(got, ",") != "processing,completed" {
			t.Errorf("order %s: events %v, want processing then completed", id, got)
		}
	}
}

// crashingOutbox is the real store whose MarkPublishedThrough "kills" the relay:
// it cancels the relay's context and fails, as a process killed between
// the publish and the mark would leave things.
type crashingOutbox struct {
	*store.Store
	kill  context.CancelFunc
	calls atomic.Int32
}

func (c *crashingOutbox) MarkPublishedThrough(context.Context, int64) error {
	c.calls.Add(1)
	c.kill()
	return errors.New("killed before mark")
}

func TestRelay_RestartBeforeMark(t *testing.T) {
	const n = 30
	tests := []struct {
		name        string
		restartNATS bool
	}{
		{"relay restarts", false},
		{"relay and NATS restart", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			e := startNATS(t, dir, "127.0.0.1:0")
			url := e.ClientURL()
			_, js := connectJS(t, url)
			if _, err := publish.EnsureStream(t.Context(), js, publish.StreamConfig{}); err != nil {
				t.Fatal(err)
			}
			st, _ := openStore(t, store.Options{})
			orders := make(map[string]testOrder)
			for i := range n {
				o := newTestOrder("restart", i)
				orders[o.id] = o
				apply(t, st, o, "processing", false, store.SourceWebhook)
			}

			ctx, kill := context.WithCancel(t.Context())
			crash := &crashingOutbox{Store: st, kill: kill}
			first := newRelay(t, publish.RelayConfig{}, crash, js)
			if err := first.Run(ctx); err != nil {
				t.Fatalf("first relay: %v", err)
			}
			if crash.calls.Load() == 0 {
				t.Fatal("the first relay never reached MarkPublishedThrough")
			}
			if got := streamCount(t, js, "ORDERD"); got != n {
				t.Fatalf("first relay published %d events, want %d", got, n)
			}
			if got := backlog(t, st); got != n {
				t.Fatalf("backlog after the crash = %d, want %d (nothing marked)", got, n)
			}
			// All were pending at once, so they went as one atomic
			// batch; the second relay's batch of the same events is
			// refused as a whole and it must fall back to one by one.
			firstMsgs := streamMsgs(t, js, "ORDERD")
			if batches := byBatchID(firstMsgs); len(batches) != 1 || batches[""] != 0 {
				t.Errorf("first relay's events by batch id: %v, want one batch of %d", batches, n)
			}
			// Each message of the batch carries its own event's id (the
			// duplicate window's key) and its place in the batch.
			for i, m := range firstMsgs {
				var ev struct {
					ID string `json:"id"`
				}
				if err := json.Unmarshal(m.Data(), &ev); err != nil {
					t.Fatal(err)
				}
				if got := m.Headers().Get(jetstream.MsgIDHeader); got != ev.ID || got == "" {
					t.Errorf("message %d: Nats-Msg-Id %q, its event's id %q", i+1, got, ev.ID)
				}
				if got := m.Headers().Get("Nats-Batch-Sequence"); got != strconv.Itoa(i+1) {
					t.Errorf("message %d: Nats-Batch-Sequence %q", i+1, got)
				}
			}

			if tt.restartNATS {
				e.Shutdown()
				port := url[strings.LastIndex(url, ":")+1:]
				startNATS(t, dir, "127.0.0.1:"+port)
				_, js = connectJS(t, url)
			}
			// Orders keep coming while orderd is down: the second
			// relay's first batch mixes events already in the stream
			// with new ones.
			const more = 5
			for i := range more {
				o := newTestOrder("after", i)
				orders[o.id] = o
				apply(t, st, o, "processing", false, store.SourceWebhook)
			}
			reg := prometheus.NewRegistry()
			m, err := publish.NewMetrics(reg)
			if err != nil {
				t.Fatal(err)
			}
			// An ack later than PublishTimeout (a loaded machine) would
			// make the relay send again from that event: more duplicates
			// than this test counts, and correct. The bound is out of
			// the way; the flush's own bound still ends the test.
			second := newRelay(t, publish.RelayConfig{Metrics: m, PublishTimeout: 30 * time.Second}, st, js)
			ctx2, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			if err := second.Flush(ctx2); err != nil {
				t.Fatalf("second relay: %v", err)
			}
			if got := backlog(t, st); got != 0 {
				t.Errorf("backlog after the second relay = %d, want 0", got)
			}
			if got := metricValue(t, reg, "orderd_publish_duplicates_total"); got != n {
				t.Errorf("JetStream reported %v duplicates, want %d", got, n)
			}
			msgs := streamMsgs(t, js, "ORDERD")
			if len(msgs) != n+more {
				t.Fatalf("stream holds %d events, want each of %d once", len(msgs), n+more)
			}
			checkEvents(t, msgs, orders, store.SourceWebhook)
		})
	}
}

func TestRelay_Prune(t *testing.T) {
	js := startStream(t)
	clk := &clock{t: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
	st, _ := openStore(t, store.Options{Now: clk.Now})
	r := newRelay(t, publish.RelayConfig{Retention: 2 * time.Hour, Now: clk.Now}, st, js)
	ctx := t.Context()
	flush := func() {
		t.Helper()
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := r.Flush(fctx); err != nil {
			t.Fatal(err)
		}
	}
	applyN := func(prefix string, n int) {
		for i := range n {
			apply(t, st, newTestOrder(prefix, i), "processing", false, store.SourceWebhook)
		}
	}

	applyN("early", 3) // published at 00:00
	flush()
	clk.Add(time.Hour)
	applyN("late", 2) // published at 01:00
	flush()
	applyN("unpublished", 4) // never published

	steps := []struct {
		name    string
		advance time.Duration
		want    int64
	}{
		{"nothing is older than the retention", 30 * time.Minute, 0}, // now 01:30, cutoff -00:30
		{"rows published before the cutoff go", time.Hour, 3},        // now 02:30, cutoff 00:30
		{"a second prune finds nothing", 0, 0},
		{"later rows go when they age", time.Hour, 2}, // now 03:30, cutoff 01:30
		{"unpublished rows stay however old", 1000 * time.Hour, 0},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			clk.Add(s.advance)
			n, err := r.Prune(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n != s.want {
				t.Errorf("pruned %d rows, want %d", n, s.want)
			}
		})
	}
	if got := backlog(t, st); got != 4 {
		t.Errorf("backlog = %d, want the 4 unpublished events", got)
	}
	flush()
	if got := streamCount(t, js, "ORDERD"); got != 9 {
		t.Errorf("stream holds %d events, want 9", got)
	}

	keep := newRelay(t, publish.RelayConfig{Retention: -1, Now: clk.Now}, st, js)
	clk.Add(1000 * time.Hour)
	if n, err := keep.Prune(ctx); err != nil || n != 0 {
		t.Errorf("negative retention pruned %d rows (%v), want none", n, err)
	}
}

func TestRelay_PicksUpEventsFromAnotherProcess(t *testing.T) {
	js := startStream(t)
	st, path := openStore(t, store.Options{})
	runRelay(t, newRelay(t, publish.RelayConfig{PollInterval: 200 * time.Millisecond}, st, js))

	// A second handle on the same file, as the reconcile command has: its
	// commits never signal the daemon's store, so only the poll finds them.
	other := openStoreAt(t, path, store.Options{})
	select {
	case <-st.Notify():
	default:
	}
	apply(t, other, newTestOrder("cli", 1), "completed", false, store.SourcePoll)
	waitFor(t, 5*time.Second, "the event written by the other handle, published and marked", func() bool {
		return streamCount(t, js, "ORDERD") == 1 && backlog(t, st) == 0
	})
}

func TestRelay_ProvisionsStreamWhenNATSComesUp(t *testing.T) {
	port := reservedPort(t)
	url := "nats://127.0.0.1:" + port
	nc, err := publish.Connect(t.Context(), publish.ConnConfig{URL: url, ReconnectWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := publish.NewJetStream(nc, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := openStore(t, store.Options{})
	runRelay(t, newRelay(t, publish.RelayConfig{
		Prefix: "acme", MaxBackoff: 200 * time.Millisecond,
		Stream: &publish.StreamConfig{Name: "ACME"},
	}, st, js))

	// orderd started without NATS; orders still come in.
	for i := range 5 {
		apply(t, st, newTestOrder("early", i), "processing", false, store.SourceWebhook)
	}
	time.Sleep(300 * time.Millisecond)
	startNATS(t, t.TempDir(), "127.0.0.1:"+port)
	_, check := connectJS(t, url)
	waitFor(t, 15*time.Second, "the stream to be created and filled", func() bool { return streamCount(t, check, "ACME") == 5 })
	for _, m := range streamMsgs(t, check, "ACME") {
		if m.Subject() != "acme.orders.payin.processing" {
			t.Errorf("event on %s, want acme.orders.payin.processing", m.Subject())
		}
	}
}

// startNATSWithMaxPayload starts an embedded server that takes messages of
// at most maxPayload bytes, with the events stream.
func startNATSWithMaxPayload(t *testing.T, maxPayload int32) jetstream.JetStream {
	t.Helper()
	e, err := publish.StartEmbedded(publish.EmbeddedConfig{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), MaxPayload: maxPayload})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	_, js := connectJS(t, e.ClientURL())
	if _, err := publish.EnsureStream(t.Context(), js, publish.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	return js
}

// TestRelay_SetsAsideEventTooLargeForNATS: an event larger than the
// server's max_payload never stalls the others, and is not left silently in
// the outbox: it is set aside for good (kept, out of the backlog and of
// pruning) with an event_not_published finding whose own event reaches the
// stream, and a restarted relay does not try it again.
func TestRelay_SetsAsideEventTooLargeForNATS(t *testing.T) {
	js := startNATSWithMaxPayload(t, 16<<10)
	st, _ := openStore(t, store.Options{})
	reg := prometheus.NewRegistry()
	m, err := publish.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	stop := runRelay(t, newRelay(t, publish.RelayConfig{Metrics: m, PollInterval: 100 * time.Millisecond}, st, js))

	big := newTestOrder("big", 0)
	big.extra = strings.Repeat("x", 20<<10)
	apply(t, st, big, "processing", false, store.SourceWebhook)
	for i := range 3 {
		apply(t, st, newTestOrder("small", i), "processing", false, store.SourceWebhook)
	}
	// The events behind the oversized one go out, and so does the
	// finding's.
	waitFor(t, 5*time.Second, "the small orders' events and the finding's", func() bool { return streamCount(t, js, "ORDERD") == 4 })
	checkSetAside(t, st, big.id, "max_payload", 16<<10)
	var findingEvents int
	for _, msg := range streamMsgs(t, js, "ORDERD") {
		if msg.Subject() == "orderd.reconcile.event_not_published" {
			findingEvents++
		}
	}
	if findingEvents != 1 {
		t.Errorf("%d orderd.reconcile.event_not_published events in the stream, want 1", findingEvents)
	}
	waitFor(t, 5*time.Second, "an empty backlog: the oversized event set aside, the others marked",
		func() bool { return backlog(t, st) == 0 })
	if got := metricValue(t, reg, "orderd_publish_errors_total"); got != 1 {
		t.Errorf("errors counted = %v, want the oversized event once", got)
	}
	// Pruning keeps it, for someone to send again with a larger limit.
	if n, err := st.PruneOutbox(t.Context(), time.Now().Add(time.Hour)); err != nil || n != 4 {
		t.Errorf("pruned %d rows (%v), want the 4 published ones", n, err)
	}
	if n := countRows(t, st, `SELECT count(*) FROM outbox WHERE set_aside IS NOT NULL`); n != 1 {
		t.Errorf("%d set-aside rows after pruning, want 1", n)
	}
	stop()

	// A new relay (a restart) does not try it again.
	stop = runRelay(t, newRelay(t, publish.RelayConfig{Metrics: m, PollInterval: 50 * time.Millisecond}, st, js))
	apply(t, st, newTestOrder("after", 0), "processing", false, store.SourceWebhook)
	waitFor(t, 5*time.Second, "the next event", func() bool { return streamCount(t, js, "ORDERD") == 5 })
	stop()
	if got := metricValue(t, reg, "orderd_publish_errors_total"); got != 1 {
		t.Errorf("errors counted after a restart = %v (%v), want still 1", got, metricKinds(t, reg, "orderd_publish_errors_total"))
	}
}

// failingSetAside is the real store whose first SetAsideEvent calls fail,
// and which records whether the relay ever moved the cursor over the event
// being set aside before that was recorded.
type failingSetAside struct {
	*store.Store
	failures atomic.Int32
	target   atomic.Int64 // seq of the event being set aside
	recorded atomic.Bool
	passed   atomic.Bool // the cursor passed target before it was recorded
}

func (f *failingSetAside) SetAsideEvent(ctx context.Context, ev store.SetAside) error {
	f.target.Store(ev.Seq)
	if f.failures.Add(-1) >= 0 {
		return errors.New("disk I/O error")
	}
	if err := f.Store.SetAsideEvent(ctx, ev); err != nil {
		return err
	}
	f.recorded.Store(true)
	return nil
}

func (f *failingSetAside) MarkPublishedThrough(ctx context.Context, through int64) error {
	if seq := f.target.Load(); seq > 0 && through >= seq && !f.recorded.Load() {
		f.passed.Store(true)
	}
	return f.Store.MarkPublishedThrough(ctx, through)
}

// When the store cannot record that an event is set aside, the relay must
// not move its cursor over that event (it would be neither published nor
// known to be set aside): the pass stops there and the next one tries
// again, and the events behind it follow once it is recorded.
func TestRelay_SetAsideFailureHoldsTheCursor(t *testing.T) {
	js := startNATSWithMaxPayload(t, 16<<10)
	st, _ := openStore(t, store.Options{})
	for i := range 3 {
		apply(t, st, newTestOrder("before", i), "processing", false, store.SourceWebhook)
	}
	big := newTestOrder("big", 0)
	big.extra = strings.Repeat("x", 20<<10)
	apply(t, st, big, "processing", false, store.SourceWebhook)
	for i := range 3 {
		apply(t, st, newTestOrder("after", i), "processing", false, store.SourceWebhook)
	}
	ob := &failingSetAside{Store: st}
	ob.failures.Store(3)
	runRelay(t, newRelay(t, publish.RelayConfig{PollInterval: 50 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}, ob, js))

	waitFor(t, 10*time.Second, "six order events and the finding's", func() bool { return streamCount(t, js, "ORDERD") == 7 })
	waitFor(t, 5*time.Second, "an empty backlog", func() bool { return backlog(t, st) == 0 })
	if ob.failures.Load() >= 0 {
		t.Fatal("SetAsideEvent never failed; the test proves nothing")
	}
	if ob.passed.Load() {
		t.Error("the cursor moved over the oversized event before it was recorded as set aside")
	}
	checkSetAside(t, st, big.id, "max_payload", 16<<10)
	if n := countRows(t, st, `SELECT count(*) FROM findings WHERE kind = 'event_not_published'`); n != 1 {
		t.Errorf("%d event_not_published findings, want 1", n)
	}
}

// TestRelay_SetsAsideEventTooLargeForStream: a stream with a smaller
// max_msg_size than the server's max_payload refuses an event on the
// server side; the relay sets it aside the same way, also from within an
// atomic batch, and the events around it go out.
func TestRelay_SetsAsideEventTooLargeForStream(t *testing.T) {
	e := startNATS(t, t.TempDir(), "127.0.0.1:0")
	_, js := connectJS(t, e.ClientURL())
	// limitStream creates the stream, or changes its largest message.
	limitStream := func(maxMsgSize int32) {
		t.Helper()
		if _, err := js.CreateOrUpdateStream(t.Context(), jetstream.StreamConfig{
			Name: "ORDERD", Subjects: []string{"orderd.>"}, MaxMsgSize: maxMsgSize, AllowAtomicPublish: true,
			Duplicates: time.Minute,
		}); err != nil {
			t.Fatal(err)
		}
	}
	limitStream(8 << 10)
	st, _ := openStore(t, store.Options{})
	big := newTestOrder("big", 0)
	big.extra = strings.Repeat("x", 10<<10)
	for i := range 20 {
		apply(t, st, newTestOrder("before", i), "processing", false, store.SourceWebhook)
	}
	apply(t, st, big, "processing", false, store.SourceWebhook)
	for i := range 20 {
		apply(t, st, newTestOrder("after", i), "processing", false, store.SourceWebhook)
	}
	// No Stream config: the relay publishes into the stream it finds.
	runRelay(t, newRelay(t, publish.RelayConfig{PollInterval: 100 * time.Millisecond}, st, js))
	waitFor(t, 10*time.Second, "40 order events and the finding's", func() bool { return streamCount(t, js, "ORDERD") == 41 })
	checkSetAside(t, st, big.id, "message size exceeds maximum", 0)

	// The stream's limit shrinks while the relay runs, unknown to it: the
	// batch holding the event now too large is refused as a whole, and
	// the relay falls back to one by one rather than retrying it for ever.
	limitStream(4 << 10)
	big2 := newTestOrder("big2", 0)
	big2.extra = strings.Repeat("y", 6<<10)
	for i := range 20 {
		apply(t, st, newTestOrder("before2", i), "processing", false, store.SourceWebhook)
	}
	apply(t, st, big2, "processing", false, store.SourceWebhook)
	for i := range 20 {
		apply(t, st, newTestOrder("after2", i), "processing", false, store.SourceWebhook)
	}
	waitFor(t, 10*time.Second, "40 more order events and the finding's", func() bool { return streamCount(t, js, "ORDERD") == 82 })
	checkSetAside(t, st, big2.id, "message size exceeds maximum", 0)

	// The limit is raised and both set-aside events are queued anew
	// (POST /v1/outbox/resend), past the relay's cursor: the running relay
	// sends them, once each, then the events of their findings' resolution.
	limitStream(64 << 10)
	if n, err := st.RequeueSetAside(t.Context()); err != nil || n != 2 {
		t.Fatalf("requeue: %d %v, want 2", n, err)
	}
	waitFor(t, 10*time.Second, "the two set-aside events sent again", func() bool { return streamCount(t, js, "ORDERD") == 86 })
	var resent []string
	for _, msg := range streamMsgs(t, js, "ORDERD")[82:84] {
		var ev struct{ Subject string }
		if err := json.Unmarshal(msg.Data(), &ev); err != nil {
			t.Fatal(err)
		}
		resent = append(resent, ev.Subject)
	}
	if want := []string{big.id, big2.id}; !slices.Equal(resent, want) {
		t.Errorf("events sent again are about %v, want %v", resent, want)
	}
	waitFor(t, 5*time.Second, "an empty backlog", func() bool { return backlog(t, st) == 0 })
	if n := countRows(t, st, `SELECT count(*) FROM outbox WHERE set_aside IS NOT NULL`); n != 0 {
		t.Errorf("%d rows still set aside", n)
	}
}

// checkSetAside checks the outbox row and the finding of an event set aside
// because it was too large.
func checkSetAside(t *testing.T, st *store.Store, orderID, reason string, limit int64) {
	t.Helper()
	var setAside string
	if err := st.DB().QueryRowContext(t.Context(), `SELECT set_aside FROM outbox
		WHERE event_subject = ? AND type = 'order.processing' AND published_at IS NOT NULL`, orderID).Scan(&setAside); err != nil {
		t.Fatalf("the oversized event's row: %v", err)
	}
	if !strings.Contains(setAside, reason) {
		t.Errorf("set_aside = %q, want it to mention %q", setAside, reason)
	}
	var detail string
	if err := st.DB().QueryRowContext(t.Context(), `SELECT detail FROM findings
		WHERE kind = 'event_not_published' AND subject_key = ? AND resolved_at IS NULL`, orderID).Scan(&detail); err != nil {
		t.Fatalf("no open event_not_published finding for %s: %v", orderID, err)
	}
	var d store.SetAside
	if err := json.Unmarshal([]byte(detail), &d); err != nil {
		t.Fatal(err)
	}
	if d.ID == "" || d.Type != "order.processing" || d.Subject != "orderd.orders.payin.processing" || d.Bytes <= 4<<10 ||
		(limit > 0 && d.Limit != limit) || !strings.Contains(d.Reason, reason) {
		t.Errorf("finding detail %s", detail)
	}
}

// countRows runs a COUNT query on the store's read pool.
func countRows(t *testing.T, st *store.Store, q string) int {
	t.Helper()
	var n int
	if err := st.DB().QueryRowContext(t.Context(), q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func TestStop(t *testing.T) {
	dir := t.TempDir()
	e := startNATS(t, dir, "127.0.0.1:0")
	url := e.ClientURL()
	nc, err := publish.Connect(t.Context(), publish.ConnConfig{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	js, err := publish.NewJetStream(nc, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := openStore(t, store.Options{})
	r := newRelay(t, publish.RelayConfig{Stream: &publish.StreamConfig{}}, st, js)
	stop := runRelay(t, r)
	stop() // Run is over before the last events were committed
	for i := range 10 {
		apply(t, st, newTestOrder("last", i), "completed", false, store.SourceWebhook)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := publish.Stop(ctx, r, nc, e); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if !nc.IsClosed() {
		t.Error("connection still open after Stop")
	}
	if got := backlog(t, st); got != 0 {
		t.Errorf("backlog after Stop = %d, want 0 (flushed)", got)
	}
	if c, err := net.DialTimeout("tcp", strings.TrimPrefix(url, "nats://"), time.Second); err == nil {
		c.Close()
		t.Error("embedded server still accepts connections after Stop")
	}
	e2 := startNATS(t, dir, strings.TrimPrefix(url, "nats://"))
	_, check := connectJS(t, e2.ClientURL())
	if got := streamCount(t, check, "ORDERD"); got != 10 {
		t.Errorf("stream holds %d events after restart, want the 10 flushed at Stop", got)
	}
}

// relayNATSDown is a relay over a real store whose NATS server was
// reachable when it connected and has gone since.
func relayNATSDown(t *testing.T) (*publish.Relay, *nats.Conn, *store.Store) {
	t.Helper()
	e := startNATS(t, t.TempDir(), "127.0.0.1:0")
	nc, err := publish.Connect(t.Context(), publish.ConnConfig{URL: e.ClientURL()})
	if err != nil {
		t.Fatal(err)
	}
	js, err := publish.NewJetStream(nc, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := openStore(t, store.Options{})
	r := newRelay(t, publish.RelayConfig{Stream: &publish.StreamConfig{}}, st, js)
	e.Shutdown()
	return r, nc, st
}

func TestStop_FlushBoundedWhileNATSIsDown(t *testing.T) {
	r, nc, st := relayNATSDown(t)
	apply(t, st, newTestOrder("stuck", 0), "completed", false, store.SourceWebhook)

	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := publish.Stop(ctx, r, nc, nil)
	if err == nil || !strings.Contains(err.Error(), "flush outbox") {
		t.Errorf("Stop = %v, want the flush error", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Stop took %s with a 500ms bound", d)
	}
	if !nc.IsClosed() {
		t.Error("connection still open after Stop")
	}
	if got := backlog(t, st); got != 1 {
		t.Errorf("backlog = %d, want the event kept for the next start", got)
	}
}

func TestStop_NothingToFlushWhileNATSIsDown(t *testing.T) {
	r, nc, _ := relayNATSDown(t)

	// Nothing is unpublished: Flush has no reason to wait for NATS.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if err := r.Flush(ctx); err != nil {
		t.Errorf("Flush with an empty outbox = %v, want nil", err)
	}
	if ctx.Err() != nil {
		t.Error("Flush with an empty outbox waited for its bound")
	}
	if err := publish.Stop(ctx, r, nc, nil); err != nil {
		t.Errorf("Stop with an empty outbox = %v, want nil", err)
	}
}

// flakyOutbox is the real store whose first MarkPublishedThrough calls fail, as a
// busy or briefly unavailable database would make them.
type flakyOutbox struct {
	*store.Store
	failures atomic.Int32
}

func (f *flakyOutbox) MarkPublishedThrough(ctx context.Context, through int64) error {
	if f.failures.Add(-1) >= 0 {
		return errors.New("database is locked")
	}
	return f.Store.MarkPublishedThrough(ctx, through)
}

func TestRelay_RecoversFromFailedMark(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, r *publish.Relay)
	}{
		{"run", func(t *testing.T, r *publish.Relay) { runRelay(t, r) }},
		{"flush", func(t *testing.T, r *publish.Relay) {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			if err := r.Flush(ctx); err != nil {
				t.Fatalf("Flush: %v", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			js := startStream(t)
			st, _ := openStore(t, store.Options{})
			flaky := &flakyOutbox{Store: st}
			flaky.failures.Store(2)
			orders := make(map[string]testOrder)
			for i := range 12 {
				o := newTestOrder("flaky", i)
				orders[o.id] = o
				apply(t, st, o, "processing", false, store.SourceWebhook)
			}
			tt.run(t, newRelay(t, publish.RelayConfig{BatchSize: 4, MaxBackoff: 100 * time.Millisecond, PollInterval: 100 * time.Millisecond}, flaky, js))
			waitFor(t, 10*time.Second, "every event marked", func() bool { return backlog(t, st) == 0 })
			if flaky.failures.Load() >= 0 {
				t.Fatal("MarkPublishedThrough never failed; the test proves nothing")
			}
			msgs := streamMsgs(t, js, "ORDERD")
			if len(msgs) != len(orders) {
				t.Fatalf("stream holds %d events, want each of %d once", len(msgs), len(orders))
			}
			checkEvents(t, msgs, orders, store.SourceWebhook)
		})
	}
}

// stallingOutbox is the real store whose next read of pending events, or
// next mark, once armed, tells the test it has begun and then waits: the
// read until its context ends (and fails then, as a query cut short does),
// the mark until the test releases it, and then it goes on with the
// context it was given.
type stallingOutbox struct {
	*store.Store
	stallRead, stallMark atomic.Bool
	entered              chan struct{}
	release              chan struct{}
}

func newStallingOutbox(st *store.Store) *stallingOutbox {
	return &stallingOutbox{Store: st, entered: make(chan struct{}, 1), release: make(chan struct{})}
}

func (s *stallingOutbox) PendingEvents(ctx context.Context, afterSeq int64, limit int) ([]store.OutboxEvent, error) {
	if s.stallRead.CompareAndSwap(true, false) {
		s.entered <- struct{}{}
		<-ctx.Done()
		return nil, fmt.Errorf("pending events: %w", ctx.Err())
	}
	return s.Store.PendingEvents(ctx, afterSeq, limit)
}

func (s *stallingOutbox) MarkPublishedThrough(ctx context.Context, through int64) error {
	if s.stallMark.CompareAndSwap(true, false) {
		s.entered <- struct{}{}
		<-s.release
	}
	return s.Store.MarkPublishedThrough(ctx, through)
}

// TestRelay_StopCountsNoFailure: stopping the relay while it reads the
// outbox, or while it moves the cursor, is a clean stop. Run returns nil,
// orderd_publish_errors_total stays at 0 (an alert on it must not fire at
// every restart), and a mark under way still records what JetStream
// acknowledged, so those events are not sent again at the next start.
func TestRelay_StopCountsNoFailure(t *testing.T) {
	tests := []struct {
		name string
		mark bool // stall the mark; otherwise the read
		pub  int  // events published before the stop
	}{
		{"during a read", false, 0},
		{"during a mark", true, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			js := startStream(t)
			st, _ := openStore(t, store.Options{})
			for i := range tt.pub {
				apply(t, st, newTestOrder("stop", i), "processing", false, store.SourceWebhook)
			}
			ob := newStallingOutbox(st)
			if tt.mark {
				ob.stallMark.Store(true)
			} else {
				ob.stallRead.Store(true)
			}
			reg, cancel, done := runMeteredRelay(t, ob, js)
			defer cancel()
			select {
			case <-ob.entered:
			case <-time.After(10 * time.Second):
				t.Fatal("the relay never reached the stalled call")
			}
			// Run is stopped while the call is under way; only then
			// may a stalled mark go on.
			cancel()
			close(ob.release)
			awaitCleanStop(t, done)
			if got := metricValue(t, reg, "orderd_publish_errors_total"); got != 0 {
				t.Errorf("publish errors counted for a stop: %v, want none", metricKinds(t, reg, "orderd_publish_errors_total"))
			}
			if got := streamCount(t, js, "ORDERD"); got != uint64(tt.pub) {
				t.Errorf("stream holds %d events, want %d", got, tt.pub)
			}
			if got := backlog(t, st); got != 0 {
				t.Errorf("backlog after the stop = %d, want 0: the mark under way was lost", got)
			}
		})
	}
}

// runMeteredRelay runs a relay over ob and js with metrics of its own
// until cancel; done gets Run's result.
func runMeteredRelay(t *testing.T, ob publish.Outbox, js jetstream.JetStream) (*prometheus.Registry, context.CancelFunc, <-chan error) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := publish.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	r := newRelay(t, publish.RelayConfig{Metrics: m}, ob, js)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	return reg, cancel, done
}

// awaitCleanStop waits for a stopped Run to return nil.
func awaitCleanStop(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run returned %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of the stop")
	}
}

// heldAcks is a JetStream whose async publishes reach the server at once
// but whose answers reach the relay only once release is closed; entered
// is closed at the first publish.
type heldAcks struct {
	jetstream.JetStream
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (h *heldAcks) PublishMsgAsync(m *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	f, err := h.JetStream.PublishMsgAsync(m, opts...)
	if err != nil {
		return f, err
	}
	h.once.Do(func() { close(h.entered) })
	held := &heldAck{PubAckFuture: f, ok: make(chan *jetstream.PubAck, 1), err: make(chan error, 1)}
	go func() {
		var ack *jetstream.PubAck
		var err error
		select {
		case ack = <-f.Ok():
		case err = <-f.Err():
		}
		<-h.release
		if err != nil {
			held.err <- err
			return
		}
		held.ok <- ack
	}()
	return held, nil
}

type heldAck struct {
	jetstream.PubAckFuture
	ok  chan *jetstream.PubAck
	err chan error
}

func (a *heldAck) Ok() <-chan *jetstream.PubAck { return a.ok }
func (a *heldAck) Err() <-chan error            { return a.err }

// TestRelay_StopHearsWhatItSent: a stop that comes while the relay awaits
// the answers to events it has sent still waits a short while for them,
// and marks those JetStream stored, so that they are not sent again at the
// next start (where only the duplicate window would drop them); it sends
// nothing new, and counts no failure. One by one and as an atomic batch.
func TestRelay_StopHearsWhatItSent(t *testing.T) {
	for _, n := range []int{5, 20} {
		t.Run(strconv.Itoa(n)+" events", func(t *testing.T) {
			js := startStream(t)
			st, _ := openStore(t, store.Options{})
			for i := range n {
				apply(t, st, newTestOrder("held", i), "processing", false, store.SourceWebhook)
			}
			h := &heldAcks{JetStream: js, entered: make(chan struct{}), release: make(chan struct{})}
			reg, cancel, done := runMeteredRelay(t, st, h)
			defer cancel()
			select {
			case <-h.entered:
			case <-time.After(10 * time.Second):
				t.Fatal("the relay never published")
			}
			waitFor(t, 10*time.Second, "the events on the stream", func() bool { return streamCount(t, js, "ORDERD") == uint64(n) })
			// The answers come after the stop, well within its grace.
			cancel()
			time.Sleep(300 * time.Millisecond)
			close(h.release)
			awaitCleanStop(t, done)
			if got := backlog(t, st); got != 0 {
				t.Errorf("backlog after the stop = %d, want 0: the events JetStream stored are marked", got)
			}
			if got := streamCount(t, js, "ORDERD"); got != uint64(n) {
				t.Errorf("stream holds %d events, want %d", got, n)
			}
			if got := metricValue(t, reg, "orderd_publish_errors_total"); got != 0 {
				t.Errorf("publish errors counted for a stop: %v, want none", metricKinds(t, reg, "orderd_publish_errors_total"))
			}
		})
	}
}

// A pass woken by a commit lingers, so the events of the commits right
// behind it go out with it: 20 events committed one at a time within the
// linger leave as one atomic batch instead of one by one (a single commit's
// run of events is below the shortest atomic batch).
func TestRelay_LingerGathersCommits(t *testing.T) {
	st, js := startLingeringRelay(t, publish.RelayConfig{Linger: 2 * time.Second})
	const n = 20
	for i := range n {
		apply(t, st, newTestOrder("linger", i), "processing", false, store.SourceWebhook)
	}
	waitFor(t, 10*time.Second, "the outbox to drain", func() bool { return backlog(t, st) == 0 })
	if batches := byBatchID(streamMsgs(t, js, "ORDERD")); len(batches) != 1 || batches[""] != 0 {
		t.Errorf("events by batch id: %v, want one atomic batch of %d", batches, n)
	}
}

// Events read in several pages go as one atomic batch (the server stages
// each batch in files of its own), and a batch never takes more than the
// server's limit of 1000 events.
func TestRelay_PagesJoinOneBatch(t *testing.T) {
	for _, c := range []struct {
		n, batchSize int
		want         []int // batch sizes, largest first
	}{
		{30, 7, []int{30}},
		{1300, 250, []int{1000, 300}},
	} {
		t.Run(fmt.Sprint(c.n, " events in pages of ", c.batchSize), func(t *testing.T) {
			// The events are queued before the relay starts, so that its
			// first pass finds them all.
			e := startNATS(t, t.TempDir(), "127.0.0.1:0")
			_, js := connectJS(t, e.ClientURL())
			st, _ := openStore(t, store.Options{})
			var wg sync.WaitGroup
			for w := range 4 {
				wg.Go(func() {
					for i := w; i < c.n; i += 4 {
						if _, err := tryApply(st, newTestOrder("pages", i), "processing", false, store.SourceWebhook); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			runRelay(t, newRelay(t, publish.RelayConfig{BatchSize: c.batchSize, Stream: &publish.StreamConfig{}}, st, js))
			waitFor(t, 20*time.Second, "the outbox to drain", func() bool { return backlog(t, st) == 0 })
			var sizes []int
			for id, k := range byBatchID(streamMsgs(t, js, "ORDERD")) {
				if id == "" {
					t.Errorf("%d events went one by one", k)
				}
				sizes = append(sizes, k)
			}
			slices.Sort(sizes)
			slices.Reverse(sizes)
			if fmt.Sprint(sizes) != fmt.Sprint(c.want) {
				t.Errorf("atomic batches of %v events, want %v", sizes, c.want)
			}
		})
	}
}

// startLingeringRelay runs a relay with cfg (and a stream it provisions)
// on a fresh store and NATS server, and returns once the relay's first,
// empty pass is over, so that the next pass is one a commit wakes.
func startLingeringRelay(t *testing.T, cfg publish.RelayConfig) (*store.Store, jetstream.JetStream) {
	t.Helper()
	e := startNATS(t, t.TempDir(), "127.0.0.1:0")
	_, js := connectJS(t, e.ClientURL())
	st, _ := openStore(t, store.Options{})
	if _, err := publish.EnsureStream(t.Context(), js, publish.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	cfg.Stream = &publish.StreamConfig{}
	runRelay(t, newRelay(t, cfg, st, js))
	time.Sleep(300 * time.Millisecond)
	return st, js
}

// byBatchID counts messages by their Nats-Batch-Id header ("" for single
// publishes).
func byBatchID(msgs []jetstream.Msg) map[string]int {
	batches := make(map[string]int)
	for _, m := range msgs {
		batches[m.Headers().Get("Nats-Batch-Id")]++
	}
	return batches
}

// A damaged outbox row (its data no longer JSON) is set aside with an
// "invalid" error and an event_not_published finding; the events around
// it, in the same page, are published.
func TestRelay_DamagedRowIsSetAside(t *testing.T) {
	e := startNATS(t, t.TempDir(), "127.0.0.1:0")
	_, js := connectJS(t, e.ClientURL())
	st, _ := openStore(t, store.Options{})
	var seqs []int64
	for i := range 3 {
		apply(t, st, newTestOrder("damaged", i), "processing", false, store.SourceWebhook)
	}
	evs, err := st.PendingEvents(t.Context(), 0, 10)
	if err != nil || len(evs) != 3 {
		t.Fatalf("pending events: %d, %v", len(evs), err)
	}
	for _, ev := range evs {
		seqs = append(seqs, ev.Seq)
	}
	// Damage the middle event's body where it is stored.
	err = st.Write(t.Context(), func(tx *store.Tx) error {
		_, err := tx.Exec(`UPDATE order_history SET raw = CAST('{"id": broken' AS BLOB) WHERE id = (
			SELECT state_id FROM outbox WHERE seq = ?)`, seqs[1])
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m, err := publish.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	runRelay(t, newRelay(t, publish.RelayConfig{Stream: &publish.StreamConfig{}, Metrics: m}, st, js))
	waitFor(t, 10*time.Second, "two order events and the finding's in the stream", func() bool { return streamCount(t, js, "ORDERD") == 3 })
	waitFor(t, 10*time.Second, "an empty backlog: the damaged event set aside", func() bool { return backlog(t, st) == 0 })
	var got []string
	for _, msg := range streamMsgs(t, js, "ORDERD") {
		if msg.Subject() == "orderd.reconcile.event_not_published" {
			continue
		}
		got = append(got, msg.Headers().Get("Nats-Msg-Id"))
	}
	if want := []string{evs[0].ID, evs[2].ID}; !slices.Equal(got, want) {
		t.Errorf("published %v, want %v", got, want)
	}
	var reason string
	if err := st.DB().QueryRowContext(t.Context(), `SELECT set_aside FROM outbox WHERE seq = ?`, seqs[1]).Scan(&reason); err != nil ||
		!strings.Contains(reason, "cannot be encoded") {
		t.Errorf("the damaged event's set_aside = %q (%v), want the reason", reason, err)
	}
	// The damaged event is the only failure of any kind.
	if n := metricValue(t, reg, "orderd_publish_errors_total"); n != 1 {
		t.Errorf("publish errors = %v, want 1 (the damaged event)", n)
	}
}

// After a pass that published a long run (64 events or more), the relay
// lingers longer (BurstLinger): commits arriving one by one during a burst
// still leave together. With a Linger of 1ms alone, the 20 commits below
// would go out in small runs, one by one.
func TestRelay_BurstLingerGathersMore(t *testing.T) {
	st, js := startLingeringRelay(t, publish.RelayConfig{Linger: time.Millisecond, BurstLinger: 2 * time.Second})
	// A burst: 70 events in one commit make one pass publish them.
	err := st.Write(t.Context(), func(tx *store.Tx) error {
		for i := range 70 {
			raw := newTestOrder("burst", i).raw("processing", false)
			ord, err := provider.DecodeOrder(raw)
			if err != nil {
				return err
			}
			if _, err := tx.ApplyObservation(store.Observation{Source: store.SourcePoll, Order: ord, Raw: raw}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the burst to be published", func() bool { return backlog(t, st) == 0 })
	const n = 20
	for i := range n {
		apply(t, st, newTestOrder("after-burst", i), "processing", false, store.SourceWebhook)
	}
	waitFor(t, 10*time.Second, "the outbox to drain", func() bool { return backlog(t, st) == 0 })
	if batches := byBatchID(streamMsgs(t, js, "ORDERD")[70:]); len(batches) != 1 || batches[""] != 0 {
		t.Errorf("events after the burst by batch id: %v, want one atomic batch of %d", batches, n)
	}
}
