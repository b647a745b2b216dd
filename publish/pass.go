package publish

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"go.opentelemetry.io/otel/trace"

	"orderd/store"
)

// JetStream error codes the relay reacts to.
const (
	errCodeAtomicDisabled   jetstream.ErrorCode = 10174 // atomic publish is disabled
	errCodeAtomicDuplicate  jetstream.ErrorCode = 10201 // atomic batch contains a duplicate message id
	errCodeAtomicIncomplete jetstream.ErrorCode = 10176 // a message of the batch was not taken
)

const (
	// minAtomicBatch is the shortest run sent as an atomic batch. A batch
	// costs the server a few milliseconds of its own (it stages the
	// messages in files of their own) but only one fsync; a single
	// publish costs one fsync. Measured on a small VM, batches win from
	// 16 to 32 events on; shorter runs go one by one, which also keeps the
	// latency low when events trickle in.
	minAtomicBatch = 16
	// maxAtomicBatch is the server's default limit on an atomic batch.
	maxAtomicBatch = 1000
	// batchHeaderRoom is more than the headers of a batch message take.
	batchHeaderRoom = 512
)

const (
	// markLinger is how long the marker gathers acknowledged events
	// before it commits them.
	markLinger = 20 * time.Millisecond
	// markBatches bounds one marking commit, in BatchSize units.
	markBatches = 4
)

// errAckTimeout is returned when no ack came within PublishTimeout.
var errAckTimeout = errors.New("no ack within the publish timeout")

// session is what one Run or Flush keeps from pass to pass.
//
// The cursor is the sequence up to which every event is acknowledged by
// JetStream (handed to the marker) or set aside, so a pass woken by a
// commit reads only newer events and never waits for the previous pass's
// marking. The store's sequences only grow (AUTOINCREMENT, and SQLite has
// one writer at a time), so nothing committed later can hide below the
// cursor. To be safe regardless — and to resend events whose marking
// failed — the cursor goes back to 0 after a failure and on each poll tick
// while no marking is under way.
type session struct {
	cursor int64
	marker *marker
	// chunk is the run being assembled, kept from pass to pass: a pass
	// woken by every commit would otherwise allocate BatchSize events'
	// room (48 KiB with the defaults) for the few events it finds.
	chunk []encoded
	// ackGrace is how long a pass still waits for acks after its context
	// ends (pass.acks): Run's passes wait ackOnStopTimeout; a Flush, whose
	// context is already the stop's bound, does not wait past it.
	ackGrace time.Duration
}

func (r *Relay) newSession(ctx context.Context, ackGrace time.Duration) *session {
	return &session{marker: startMarker(ctx, r), ackGrace: ackGrace}
}

// close waits until every acknowledged event is marked.
func (ss *session) close() { ss.marker.close() }

// prepare makes sure the stream exists (when the relay provisions it) and
// learns whether it takes atomic batches.
func (r *Relay) prepare(ctx context.Context) error {
	if r.streamReady {
		return nil
	}
	var s jetstream.Stream
	var err error
	if r.cfg.Stream != nil {
		s, err = EnsureStream(ctx, r.js, *r.cfg.Stream)
	} else {
		var name string
		name, err = r.js.StreamNameBySubject(ctx, r.cfg.Prefix+".orders")
		if err == nil {
			s, err = r.js.Stream(ctx, name)
		}
		if err != nil {
			err = fmt.Errorf("find the stream for %s.>: %w", r.cfg.Prefix, err)
		}
	}
	if err != nil {
		r.cfg.Metrics.failure(errKindNATS)
		return err
	}
	r.maxMsgSize = int64(s.CachedInfo().Config.MaxMsgSize)
	batches := s.CachedInfo().Config.AllowAtomicPublish
	if batches != r.atomic {
		r.log.Info("publishing mode", "atomic_batches", batches, "stream", s.CachedInfo().Config.Name)
	}
	r.atomic = batches
	r.streamReady = true
	return nil
}

// drain makes one pass over the outbox from the session's cursor (from the
// start with rescan, when no marking is under way) and returns how many
// events JetStream acknowledged.
//
// With a stream that takes atomic batches it sends each run of pending
// events as one batch, which JetStream stores with a single fsync under
// SyncAlways and acknowledges once; otherwise, or when a batch is refused
// because it holds an event already in the stream, it publishes events one
// by one with up to Window acks outstanding. The next run is read while the
// current one is published, and acknowledged events are marked published
// in the background. On the first failure it stops and returns the error;
// the next pass starts again from the first unacknowledged event.
func (r *Relay) drain(ctx context.Context, ss *session, rescan bool) (acked int, err error) {
	select {
	case r.sem <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	defer func() { <-r.sem }()

	if rescan && ss.marker.idle() {
		ss.cursor = 0
	}
	if err := r.prepare(ctx); err != nil {
		return 0, err
	}
	if ss.chunk == nil {
		ss.chunk = make([]encoded, 0, r.cfg.BatchSize)
	}
	acks, cancel := ctx, context.CancelFunc(func() {})
	if ss.ackGrace > 0 {
		acks, cancel = outlive(ctx, ss.ackGrace)
	}
	defer cancel()
	p := pass{r: r, marker: ss.marker, acks: acks, busy: make(map[string]int), done: ss.cursor, chunk: ss.chunk[:0]}
	err = p.run(ctx)
	// The events' bytes go to the collector once sent; the room stays.
	clear(p.chunk[:cap(p.chunk)])
	p.flushAcked()
	ss.cursor = p.done
	if ss.marker.failed() != nil {
		// Events whose marking failed (in this pass or since the
		// last) are still unpublished in the store, below the cursor:
		// read them again from the start once the marker has settled.
		merr := ss.marker.wait()
		ss.cursor = 0
		if merr != nil && !errors.Is(err, merr) {
			err = errors.Join(err, merr)
		}
	}
	if err != nil && errors.Is(err, jetstream.ErrNoStreamResponse) {
		// The stream may be gone: provision (or look it up) again
		// before the next pass.
		r.streamReady = false
	}
	return p.acked, err
}

// pass is the state of one drain.
type pass struct {
	r      *Relay
	marker *marker
	// acks is the context acks are awaited under: it ends
	// ackOnStopTimeout after the pass's own, so that a stop still hears
	// what was sent before it. Nothing new is sent once the pass's own
	// context has ended.
	acks  context.Context
	queue []inflight     // single publishes in order; the head is the oldest
	busy  map[string]int // single publishes in flight per event subject
	// unmarked counts the events acknowledged since the marker was last
	// handed done.
	unmarked int
	acked    int
	// done is the highest sequence up to which every event read is
	// acknowledged or set aside.
	done int64
	// chunk is the session's room for the run being assembled (empty).
	chunk []encoded
}

// inflight is one published event awaiting its ack.
type inflight struct {
	seq      int64
	key      string // the event subject: the order, for ordering
	id       string
	paf      jetstream.PubAckFuture
	deadline time.Time
	// ev and bytes are the event and its message size, for setting it
	// aside when the stream refuses it (single publishes only).
	ev    store.OutboxEvent
	bytes int64
	// span is the event's publish span, nil when not traced.
	span trace.Span
}

// encoded is an outbox event ready to be sent.
type encoded struct {
	ev      store.OutboxEvent
	subject string
	payload []byte
}

// page is the result of one read of the outbox.
type page struct {
	events []store.OutboxEvent
	err    error
}

func (p *pass) run(ctx context.Context) error {
	r := p.r
	// Reads run one page ahead, in a goroutine this function waits for
	// before it returns.
	var reads sync.WaitGroup
	defer reads.Wait()
	read := func(after int64) <-chan page {
		ch := make(chan page, 1)
		reads.Go(func() {
			evs, err := r.outbox.PendingEvents(ctx, after, r.cfg.BatchSize)
			ch <- page{evs, err}
		})
		return ch
	}

	next := read(p.done)
	chunk := p.chunk
	for next != nil {
		pg := <-next
		next = nil
		if pg.err != nil {
			if ctx.Err() == nil { // a read cut short by a stop is no failure
				r.cfg.Metrics.failure(errKindStore)
			}
			return fmt.Errorf("read outbox: %w", pg.err)
		}
		if len(pg.events) == r.cfg.BatchSize {
			next = read(pg.events[len(pg.events)-1].Seq)
		}
		for _, ev := range pg.events {
			subject, payload, err := EncodeEvent(ev, r.cfg.Prefix, r.cfg.Source, r.cfg.SchemaURL)
			if err != nil {
				if err := r.setAside(ctx, ev, 0, 0, fmt.Errorf("cannot be encoded: %w", err)); err != nil {
					return err
				}
				if len(chunk) == 0 {
					p.settled(ev.Seq)
				}
				continue
			}
			chunk = append(chunk, encoded{ev: ev, subject: subject, payload: payload})
		}
		// A full page has more behind it: they join the same run, up to
		// the server's limit on a batch. The server stages each atomic
		// batch in files of its own, so fewer, longer batches cost it
		// less per event.
		if next != nil && len(chunk)+r.cfg.BatchSize <= maxAtomicBatch {
			continue
		}
		if len(chunk) == 0 {
			continue
		}
		if err := p.send(ctx, chunk); err != nil {
			return err
		}
		chunk = chunk[:0]
		if err := p.marker.failed(); err != nil {
			return err
		}
	}
	return p.awaitAll(ctx)
}

// settled moves done past seq, an event set aside, when no event before it
// is still to be acknowledged: none in flight, and (the caller checks) none
// earlier in the run being assembled.
func (p *pass) settled(seq int64) {
	if len(p.queue) == 0 && seq > p.done {
		p.done = seq
	}
}

// send publishes a run of events in sequence order: as one atomic batch
// when it can and the run is long enough, else one by one.
func (p *pass) send(ctx context.Context, chunk []encoded) error {
	r := p.r
	if err := r.gate(); err != nil {
		return err
	}
	if r.atomic && len(chunk) >= minAtomicBatch && p.fitsBatch(chunk) {
		// A batch must not overtake events still awaiting their ack.
		if err := p.awaitAll(ctx); err != nil {
			return err
		}
		err := p.sendBatch(ctx, chunk)
		var apiErr *jetstream.APIError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeAtomicDuplicate:
			// Some of these events are in the stream already (a
			// retry after a lost ack, or a restart before the mark).
			// One by one, the duplicate window acknowledges those
			// without storing them again.
			r.log.Debug("batch holds events already published; sending them one by one", "events", len(chunk))
		case errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeAtomicDisabled:
			r.log.Warn("the stream no longer takes atomic batches; publishing one by one")
			r.atomic = false
		case errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum ||
			apiErr.ErrorCode == errCodeAtomicIncomplete):
			// The stream did not take one of the events (larger than it
			// takes, say): one by one, that one meets its own error —
			// and is set aside when it can never be taken — while the
			// others go.
			r.log.Debug("batch refused; sending its events one by one", "events", len(chunk), "err", err)
		default:
			return err
		}
	}
	for _, e := range chunk {
		if e.ev.Seq <= p.done {
			continue // acknowledged in a part of the batch that went through
		}
		if err := p.publishOne(ctx, e); err != nil {
			return err
		}
	}
	return nil
}

// fitsBatch reports whether every event of chunk is well below the
// server's maximum payload and the stream's maximum message size; an
// oversized one is left to publishOne, which sets it aside.
func (p *pass) fitsBatch(chunk []encoded) bool {
	nc := p.r.js.Conn()
	if nc == nil {
		return false
	}
	limit := nc.MaxPayload() - batchHeaderRoom
	if m := p.r.maxMsgSize; m > 0 {
		limit = min(limit, m-batchHeaderRoom)
	}
	for _, e := range chunk {
		if int64(len(e.subject)+len(e.payload)) > limit {
			return false
		}
	}
	return true
}

// sendBatch publishes chunk as atomic batches of at most maxAtomicBatch
// events, each sent once the previous one is acknowledged.
func (p *pass) sendBatch(ctx context.Context, chunk []encoded) error {
	r := p.r
	nc := r.js.Conn()
	for len(chunk) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		part := chunk[:min(len(chunk), maxAtomicBatch)]
		chunk = chunk[len(part):]
		batchID := nuid.Next()
		var commit jetstream.PubAckFuture
		sent := time.Now()
		// The messages before the commit share one Msg and its header:
		// PublishMsg copies them into the connection's buffer before it
		// returns. The commit, which the client keeps until its ack, has
		// its own.
		id, seq := []string{""}, []string{""}
		shared := &nats.Msg{Header: nats.Header{
			jetstream.MsgIDHeader: id,
			"Nats-Batch-Id":       {batchID},
			"Nats-Batch-Sequence": seq,
		}}
		var spans []trace.Span
		if r.tracer != nil {
			spans = make([]trace.Span, 0, len(part))
		}
		for i, e := range part {
			if sp := r.publishSpan(ctx, e); sp != nil {
				spans = append(spans, sp)
			}
			if i < len(part)-1 {
				shared.Subject, shared.Data = e.subject, e.payload
				id[0], seq[0] = e.ev.ID, strconv.Itoa(i+1)
				if e.ev.Traceparent != "" {
					shared.Header[headerTraceparent] = []string{e.ev.Traceparent}
				} else {
					delete(shared.Header, headerTraceparent)
				}
				// Only the commit is acknowledged; a failure of an
				// earlier message fails the commit.
				if err := nc.PublishMsg(shared); err != nil {
					r.cfg.Metrics.failure(errKindNATS)
					endPublishSpans(spans, err)
					return fmt.Errorf("publish batch at %s: %w", e.ev.ID, err)
				}
				continue
			}
			m := &nats.Msg{Subject: e.subject, Data: e.payload, Header: nats.Header{
				jetstream.MsgIDHeader: {e.ev.ID},
				"Nats-Batch-Id":       {batchID},
				"Nats-Batch-Sequence": {strconv.Itoa(i + 1)},
				"Nats-Batch-Commit":   {"1"},
			}}
			if e.ev.Traceparent != "" {
				m.Header[headerTraceparent] = []string{e.ev.Traceparent}
			}
			var err error
			if commit, err = r.js.PublishMsgAsync(m); err != nil {
				r.cfg.Metrics.failure(errKindNATS)
				endPublishSpans(spans, err)
				return fmt.Errorf("publish batch at %s: %w", e.ev.ID, err)
			}
		}
		last := part[len(part)-1].ev
		ack, err := awaitAck(p.acks, inflight{seq: last.Seq, id: last.ID, paf: commit, deadline: sent.Add(r.cfg.PublishTimeout)})
		if err != nil {
			endPublishSpans(spans, err)
		} else {
			for _, sp := range spans {
				endPublishSpan(sp, ack, nil)
			}
		}
		if err != nil {
			var apiErr *jetstream.APIError
			switch {
			case errors.As(err, &apiErr) && (apiErr.ErrorCode == errCodeAtomicDuplicate || apiErr.ErrorCode == errCodeAtomicDisabled ||
				apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum || apiErr.ErrorCode == errCodeAtomicIncomplete):
				// The caller falls back; not a failure to count.
			case ctx.Err() != nil:
				// A stop is no failure.
			case errors.Is(err, errAckTimeout):
				r.cfg.Metrics.failure(errKindTimeout)
			default:
				r.cfg.Metrics.failure(errKindNATS)
			}
			return fmt.Errorf("publish batch of %d events ending at %s: %w", len(part), last.ID, err)
		}
		for _, e := range part {
			r.cfg.Metrics.ack(false)
			p.acknowledged(e.ev.Seq)
		}
	}
	return nil
}

// publishOne publishes one event asynchronously. It first waits, if need
// be, for the ack of the same order's previous event (order per order) and
// for room in the window.
func (p *pass) publishOne(ctx context.Context, e encoded) error {
	r := p.r
	ev := e.ev
	for p.busy[ev.EventSubject] > 0 || len(p.queue) >= r.cfg.Window {
		if err := p.ackHead(ctx); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := r.gate(); err != nil {
		return err
	}
	sent := time.Now()
	span := r.publishSpan(ctx, e)
	msg := &nats.Msg{Subject: e.subject, Data: e.payload}
	if ev.Traceparent != "" {
		msg.Header = nats.Header{headerTraceparent: {ev.Traceparent}}
	}
	paf, err := r.js.PublishMsgAsync(msg, jetstream.WithMsgID(ev.ID))
	if err != nil {
		endPublishSpan(span, nil, err)
		if errors.Is(err, nats.ErrMaxPayload) {
			var limit int64
			if nc := r.js.Conn(); nc != nil {
				limit = nc.MaxPayload()
			}
			if err := r.setAside(ctx, ev, int64(len(e.subject)+len(e.payload)), limit,
				errors.New("larger than the NATS server's max_payload")); err != nil {
				return err
			}
			p.settled(ev.Seq)
			return nil
		}
		r.cfg.Metrics.failure(errKindNATS)
		return fmt.Errorf("publish %s: %w", ev.ID, err)
	}
	p.queue = append(p.queue, inflight{
		seq: ev.Seq, key: ev.EventSubject, id: ev.ID, paf: paf,
		deadline: sent.Add(r.cfg.PublishTimeout), ev: ev, bytes: int64(len(e.subject) + len(e.payload)),
		span: span,
	})
	p.busy[ev.EventSubject]++
	return nil
}

// awaitAll waits for every outstanding ack.
func (p *pass) awaitAll(ctx context.Context) error {
	for len(p.queue) > 0 {
		if err := p.ackHead(ctx); err != nil {
			return err
		}
	}
	return nil
}

// ackHead waits for the oldest outstanding ack.
func (p *pass) ackHead(ctx context.Context) error {
	r := p.r
	f := p.queue[0]
	p.queue = p.queue[1:]
	if p.busy[f.key]--; p.busy[f.key] == 0 {
		delete(p.busy, f.key)
	}
	ack, err := awaitAck(p.acks, f)
	endPublishSpan(f.span, ack, err)
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum {
		// Larger than the stream's max_msg_size: it will never be
		// taken. The events after it are not held back.
		if err := r.setAside(ctx, f.ev, f.bytes, 0, fmt.Errorf("refused by the stream: %w", err)); err != nil {
			return err
		}
		if f.seq > p.done {
			p.done = f.seq // it was the oldest outstanding: all before it is settled
		}
		return nil
	}
	if err != nil {
		switch {
		case ctx.Err() != nil:
			// A stop is no failure, even when the wait for the
			// answer after it ran out.
		case errors.Is(err, errAckTimeout):
			r.cfg.Metrics.failure(errKindTimeout)
		default:
			r.cfg.Metrics.failure(errKindNATS)
		}
		return fmt.Errorf("publish %s: %w", f.id, err)
	}
	r.cfg.Metrics.ack(ack.Duplicate)
	p.acknowledged(f.seq)
	return nil
}

// acknowledged records an acked event. Acks are taken oldest first, so
// every event up to seq is now acknowledged or set aside; once a batch's
// worth has come in, the marker is told to move the store's cursor there.
func (p *pass) acknowledged(seq int64) {
	p.acked++
	if seq > p.done {
		p.done = seq
	}
	if p.unmarked++; p.unmarked >= p.r.cfg.BatchSize {
		p.flushAcked()
	}
}

func (p *pass) flushAcked() {
	if p.unmarked == 0 {
		return
	}
	p.marker.add(p.done)
	p.unmarked = 0
}

func awaitAck(ctx context.Context, f inflight) (*jetstream.PubAck, error) {
	ok, failed := f.paf.Ok(), f.paf.Err()
	select {
	case ack := <-ok:
		return ack, nil
	case err := <-failed:
		return nil, err
	default:
	}
	t := time.NewTimer(time.Until(f.deadline))
	defer t.Stop()
	select {
	case ack := <-ok:
		return ack, nil
	case err := <-failed:
		return nil, err
	case <-t.C:
		return nil, errAckTimeout
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// setAside takes an event that can never be published as it is (its row
// does not encode, or it is larger than the server's or the stream's
// largest message) out of the queue for good: the store marks it, keeps it
// out of pruning and opens an "event_not_published" finding, whose own
// small event reaches consumers. Holding every other event back behind it
// would be worse. When the store cannot record that, setAside returns the
// error and the pass stops there: the relay's cursor must not pass an event
// that is neither published nor recorded as set aside, so the next pass
// tries again.
func (r *Relay) setAside(ctx context.Context, ev store.OutboxEvent, bytes, limit int64, cause error) error {
	r.cfg.Metrics.failure(errKindInvalid)
	sa := store.SetAside{Seq: ev.Seq, ID: ev.ID, Type: ev.Type, Subject: r.cfg.Prefix + "." + ev.Subject,
		EventSubject: ev.EventSubject, Bytes: bytes, Limit: limit, Reason: cause.Error()}
	if err := r.outbox.SetAsideEvent(ctx, sa); err != nil {
		if ctx.Err() == nil {
			r.cfg.Metrics.failure(errKindStore)
		}
		return fmt.Errorf("set aside event %s (%v): %w", ev.ID, cause, err)
	}
	r.log.Error("event cannot be published; set aside with an event_not_published finding",
		"seq", ev.Seq, "id", ev.ID, "subject", ev.Subject, "bytes", bytes, "limit", limit, "err", cause)
	return nil
}

// marker moves the store's outbox cursor over acknowledged events in a
// goroutine of its own, so that the store's commit overlaps with
// publishing and never delays the next pass. Its owner, the session, stops
// it with close.
type marker struct {
	r    *Relay
	ch   chan int64 // "every event up to here is acknowledged or set aside"
	done chan struct{}

	mu      sync.Mutex
	settled *sync.Cond // signalled when queued drops
	queued  int        // batches handed over and not yet committed
	err     error      // the first failure since the last wait
}

func startMarker(ctx context.Context, r *Relay) *marker {
	mk := &marker{r: r, ch: make(chan int64, 64), done: make(chan struct{})}
	mk.settled = sync.NewCond(&mk.mu)
	go mk.loop(ctx)
	return mk
}

func (mk *marker) loop(ctx context.Context) {
	defer close(mk.done)
	for through := range mk.ch {
		// Gather what comes in over a short while: one move of the
		// cursor, in one commit, for all of it. Marking is not urgent
		// (an unmarked event is at worst sent again and dropped as a
		// duplicate), and commits are what the webhook path waits for.
		n := 1
		linger := time.NewTimer(markLinger)
	gather:
		for n < markBatches {
			select {
			case t, ok := <-mk.ch:
				if !ok {
					break gather
				}
				through = max(through, t)
				n++
			case <-linger.C:
				break gather
			case <-ctx.Done():
				break gather
			}
		}
		linger.Stop()
		// A stop, before this mark or during it, still lets it record
		// what JetStream acknowledged, within a short bound, so it is
		// not sent again at the next start.
		mctx, cancel := outlive(ctx, markOnStopTimeout)
		err := mk.r.outbox.MarkPublishedThrough(mctx, through)
		cancel()
		if err != nil {
			mk.r.cfg.Metrics.failure(errKindStore)
			err = fmt.Errorf("mark events up to seq %d published: %w", through, err)
		}
		mk.mu.Lock()
		mk.queued -= n
		if err != nil && mk.err == nil {
			mk.err = err
		}
		mk.settled.Broadcast()
		mk.mu.Unlock()
	}
}

// outlive returns a context that is not cancelled with ctx but grace
// after it: work begun before a stop runs to its end, within a bound.
func outlive(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	octx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(grace, cancel)
		context.AfterFunc(octx, func() { t.Stop() })
	})
	return octx, func() {
		stop()
		cancel()
	}
}

// add hands over a new cursor: every event up to through is acknowledged
// or set aside.
func (mk *marker) add(through int64) {
	mk.mu.Lock()
	mk.queued++
	mk.mu.Unlock()
	mk.ch <- through
}

// idle reports whether nothing is waiting to be marked.
func (mk *marker) idle() bool {
	mk.mu.Lock()
	defer mk.mu.Unlock()
	return mk.queued == 0
}

// failed returns the first marking error since the last wait, if any.
func (mk *marker) failed() error {
	mk.mu.Lock()
	defer mk.mu.Unlock()
	return mk.err
}

// wait blocks until everything handed over is committed (each commit is
// bounded by the store's context handling) and returns, and forgets, the
// first error.
func (mk *marker) wait() error {
	mk.mu.Lock()
	defer mk.mu.Unlock()
	for mk.queued > 0 {
		mk.settled.Wait()
	}
	err := mk.err
	mk.err = nil
	return err
}

// close waits for the last marks and stops the goroutine.
func (mk *marker) close() {
	close(mk.ch)
	<-mk.done
}
