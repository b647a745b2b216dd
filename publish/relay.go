package publish

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"orderd/store"
)

// Outbox is what the relay needs from the store: the unpublished events in
// sequence order, a way to mark them published, pruning, a backlog summary,
// and a signal after each commit that queued events.
type Outbox interface {
	// PendingEvents returns up to limit unpublished events with a
	// sequence above afterSeq, in sequence order.
	PendingEvents(ctx context.Context, afterSeq int64, limit int) ([]store.OutboxEvent, error)
	// MarkPublished records that JetStream acknowledged these events.
	MarkPublished(ctx context.Context, seqs []int64) error
	// PruneOutbox deletes events published before the given time and
	// returns how many it deleted.
	PruneOutbox(ctx context.Context, publishedBefore time.Time) (int64, error)
	// OutboxStats counts unpublished events and gives the creation time
	// of the oldest (zero when there is none).
	OutboxStats(ctx context.Context) (backlog int64, oldest time.Time, err error)
	// Notify is signalled after each commit that added outbox events.
	Notify() <-chan struct{}
}

// The store is the outbox orderd runs with.
var _ Outbox = (*store.Store)(nil)

// Relay defaults.
const (
	defaultBatchSize      = 256
	defaultWindow         = 256
	defaultPublishTimeout = 5 * time.Second
	defaultPollInterval   = 500 * time.Millisecond
	maxPollInterval       = time.Second
	defaultMaxBackoff     = 10 * time.Second
	minBackoff            = 100 * time.Millisecond
	defaultRetention      = 72 * time.Hour
	defaultPruneInterval  = 10 * time.Minute
	statsInterval         = 15 * time.Second
	// markOnStopTimeout bounds the last MarkPublished after Run's context
	// is cancelled, so that acknowledged events are not sent again.
	markOnStopTimeout = 2 * time.Second
)

// RelayConfig configures a Relay. Zero values take the defaults given.
type RelayConfig struct {
	// Prefix leads every subject; default "orderd".
	Prefix string
	// Source is the CloudEvents source attribute; default "orderd".
	Source string
	// BatchSize is how many events are read, sent as one atomic batch
	// (at most 1000), and marked published at a time; default 256.
	BatchSize int
	// Window is how many single publishes may await their ack at once,
	// when events go one by one; default 256. Two events of the same
	// order are never in flight together.
	Window int
	// PublishTimeout is how long an ack may take before the relay gives
	// up and resends from that event; default 5s.
	PublishTimeout time.Duration
	// PollInterval is the fallback poll of the outbox, which also picks
	// up events written by another process (the reconcile command);
	// default 500ms, at most 1s.
	PollInterval time.Duration
	// MaxBackoff caps the exponential back-off after a failure; default 10s.
	MaxBackoff time.Duration
	// Retention is how long published events stay in the outbox; default
	// 72h; negative keeps them for ever.
	Retention time.Duration
	// PruneInterval is how often Run prunes; default 10m.
	PruneInterval time.Duration
	// Stream, when set, is created or updated before the first publish
	// and again after JetStream said no stream takes the subject, so
	// orderd can start while NATS is down and provision it when it is up.
	Stream  *StreamConfig
	Logger  *slog.Logger
	Metrics *Metrics
	Now     func() time.Time
}

// Relay moves events from the outbox to JetStream: at least once, in order
// per order (per event subject), and without ever holding up the writers of
// the outbox. Each event is published with Nats-Msg-Id set to its id, so
// the stream's duplicate window drops a second publication after a retry or
// a restart.
type Relay struct {
	cfg    RelayConfig
	outbox Outbox
	js     jetstream.JetStream
	log    *slog.Logger

	// sem lets one pass over the outbox run at a time (Run's or Flush's)
	// and guards the fields below.
	sem         chan struct{}
	skipped     map[int64]bool
	streamReady bool
	atomic      bool // the stream takes atomic batches
}

// NewRelay checks cfg, fills in defaults and returns a relay that publishes
// outbox's events through js. Create js with NewJetStream so abandoned acks
// expire in the client too.
func NewRelay(cfg RelayConfig, outbox Outbox, js jetstream.JetStream) (*Relay, error) {
	if outbox == nil || js == nil {
		return nil, errors.New("new relay: outbox and jetstream are required")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if err := ValidatePrefix(cfg.Prefix); err != nil {
		return nil, fmt.Errorf("new relay: %w", err)
	}
	if cfg.Source == "" {
		cfg.Source = "orderd"
	}
	if cfg.BatchSize < 0 || cfg.Window < 0 || cfg.PublishTimeout < 0 || cfg.PollInterval < 0 || cfg.MaxBackoff < 0 || cfg.PruneInterval < 0 {
		return nil, errors.New("new relay: negative batch size, window or interval")
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = defaultBatchSize
	}
	if cfg.Window == 0 {
		cfg.Window = defaultWindow
	}
	if cfg.PublishTimeout == 0 {
		cfg.PublishTimeout = defaultPublishTimeout
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = defaultPollInterval
	}
	if cfg.PollInterval > maxPollInterval {
		return nil, fmt.Errorf("new relay: poll interval %s above %s: events from other processes would wait too long", cfg.PollInterval, maxPollInterval)
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = defaultMaxBackoff
	}
	if cfg.Retention == 0 {
		cfg.Retention = defaultRetention
	}
	if cfg.PruneInterval == 0 {
		cfg.PruneInterval = defaultPruneInterval
	}
	if cfg.Stream != nil {
		s := *cfg.Stream
		if s.Prefix == "" {
			s.Prefix = cfg.Prefix
		}
		if s.Prefix != cfg.Prefix {
			return nil, fmt.Errorf("new relay: stream prefix %q differs from relay prefix %q", s.Prefix, cfg.Prefix)
		}
		if _, err := s.streamConfig(); err != nil {
			return nil, fmt.Errorf("new relay: %w", err)
		}
		cfg.Stream = &s
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Relay{
		cfg:     cfg,
		outbox:  outbox,
		js:      js,
		log:     log,
		sem:     make(chan struct{}, 1),
		skipped: make(map[int64]bool),
	}, nil
}

// Run publishes until ctx is cancelled, then returns nil. It drains the
// outbox at start, after every Notify, on each poll tick, and after a
// failure with exponential back-off (capped by MaxBackoff), retrying at once
// when the connection comes back. It also prunes and, with metrics, reports
// the backlog. Run never returns early: NATS and store errors are logged and
// retried.
func (r *Relay) Run(ctx context.Context) error {
	var reconnected chan nats.Status
	if nc := r.js.Conn(); nc != nil {
		reconnected = nc.StatusChanged(nats.CONNECTED)
		defer nc.RemoveStatusListener(reconnected)
	}
	poll := time.NewTicker(r.cfg.PollInterval)
	defer poll.Stop()
	prune := time.NewTicker(r.cfg.PruneInterval)
	defer prune.Stop()
	stats := time.NewTicker(statsInterval)
	defer stats.Stop()
	retry := time.NewTimer(0) // the first pass runs at once
	defer retry.Stop()

	r.prune(ctx)
	var backoff time.Duration
	for {
		// While backing off, only the retry timer and a reconnect end
		// the wait; new events wait in the outbox.
		var wake <-chan struct{}
		var tick <-chan time.Time
		if backoff == 0 {
			wake, tick = r.outbox.Notify(), poll.C
		}
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		case <-tick:
		case <-retry.C:
		case <-reconnected:
		case <-prune.C:
			r.prune(ctx)
			continue
		case <-stats.C:
			r.reportBacklog(ctx)
			continue
		}
		n, err := r.drain(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			backoff = min(max(2*backoff, minBackoff), r.cfg.MaxBackoff)
			r.log.Warn("publishing failed; retrying", "err", err, "published", n, "backoff", backoff)
			retry.Reset(backoff)
			continue
		}
		if backoff > 0 {
			r.log.Info("publishing resumed", "published", n)
			backoff = 0
			retry.Stop()
		}
	}
}

// Flush publishes everything pending and returns when the outbox is empty,
// retrying failures with back-off until ctx ends; then it returns the last
// error. It is meant for shutdown, after Run has returned and before the
// connection is drained, with a bounded ctx. It may also run beside Run: the
// two take turns.
func (r *Relay) Flush(ctx context.Context) error {
	var backoff time.Duration
	for {
		_, err := r.drain(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("flush outbox: %w", err)
		}
		backoff = min(max(2*backoff, minBackoff), r.cfg.MaxBackoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("flush outbox: %w (last error: %v)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// Prune deletes outbox events published more than Retention ago and returns
// how many went. Unpublished events are never pruned.
func (r *Relay) Prune(ctx context.Context) (int64, error) {
	if r.cfg.Retention < 0 {
		return 0, nil
	}
	n, err := r.outbox.PruneOutbox(ctx, r.cfg.Now().Add(-r.cfg.Retention))
	if err != nil {
		return 0, fmt.Errorf("prune outbox: %w", err)
	}
	r.cfg.Metrics.prunedRows(n)
	return n, nil
}

func (r *Relay) prune(ctx context.Context) {
	n, err := r.Prune(ctx)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("pruning the outbox failed", "err", err)
		}
		return
	}
	if n > 0 {
		r.log.Info("pruned published events", "deleted", n, "retention", r.cfg.Retention)
	}
}

func (r *Relay) reportBacklog(ctx context.Context) {
	if r.cfg.Metrics == nil {
		return
	}
	n, oldest, err := r.outbox.OutboxStats(ctx)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("reading outbox stats failed", "err", err)
		}
		return
	}
	var age float64
	if n > 0 && !oldest.IsZero() {
		age = max(r.cfg.Now().Sub(oldest).Seconds(), 0)
	}
	r.cfg.Metrics.setBacklog(n, age)
}

// inflight is one published event awaiting its ack.
type inflight struct {
	seq      int64
	key      string // the event subject: the order, for ordering
	id       string
	paf      jetstream.PubAckFuture
	deadline time.Time
}

// encoded is an outbox event ready to be sent.
type encoded struct {
	ev      store.OutboxEvent
	subject string
	payload []byte
}

// errAckTimeout is returned when no ack came within PublishTimeout.
var errAckTimeout = errors.New("no ack within the publish timeout")

// JetStream error codes the relay reacts to.
const (
	errCodeAtomicDisabled  jetstream.ErrorCode = 10174 // atomic publish is disabled
	errCodeAtomicDuplicate jetstream.ErrorCode = 10201 // atomic batch contains a duplicate message id
)

// maxAtomicBatch is the server's default limit on an atomic batch.
const maxAtomicBatch = 1000

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
	batches := s.CachedInfo().Config.AllowAtomicPublish
	if batches != r.atomic {
		r.log.Info("publishing mode", "atomic_batches", batches, "stream", s.CachedInfo().Config.Name)
	}
	r.atomic = batches
	r.streamReady = true
	return nil
}

// drain makes one pass over the outbox and returns how many events it
// marked published. With a stream that takes atomic batches it sends each
// run of pending events as one batch, which JetStream stores with a single
// fsync under SyncAlways and acknowledges once; otherwise, or when a batch
// is refused because it holds an event already in the stream, it publishes
// events one by one with up to Window acks outstanding. Reading the next
// run from the store and marking acknowledged events published overlap with
// publishing. On the first failure it stops, marks the acknowledged prefix
// and returns the error; the next pass starts again from the first
// unacknowledged event. Each pass starts from the lowest pending sequence,
// so nothing is skipped however the store assigns sequences.
func (r *Relay) drain(ctx context.Context) (published int, err error) {
	select {
	case r.sem <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	defer func() { <-r.sem }()

	if err := r.prepare(ctx); err != nil {
		return 0, err
	}
	p := pass{r: r, busy: make(map[string]int), marker: startMarker(ctx, r.outbox, r.cfg.Metrics)}
	err = p.run(ctx)
	// Keep what was acknowledged, also after a failure or a cancelled
	// ctx, so that those events are not sent again.
	p.flushAcked()
	marked, merr := p.marker.close()
	if merr != nil {
		err = errors.Join(err, merr)
	}
	if errors.Is(err, jetstream.ErrNoStreamResponse) {
		// The stream may be gone: provision (or look it up) again
		// before the next pass.
		r.streamReady = false
	}
	return marked, err
}

// pass is the state of one drain.
type pass struct {
	r      *Relay
	queue  []inflight     // in publish order; the head is the oldest
	busy   map[string]int // in-flight events per key
	acked  []int64        // acknowledged, not yet handed to the marker
	marker *marker
}

// page is the result of one read of the outbox.
type page struct {
	events []store.OutboxEvent
	err    error
}

func (p *pass) run(ctx context.Context) error {
	r := p.r
	// Reads run ahead by one page, in a goroutine this function waits
	// for before it returns.
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

	next := read(0)
	chunk := make([]encoded, 0, r.cfg.BatchSize)
	for next != nil {
		pg := <-next
		next = nil
		if pg.err != nil {
			r.cfg.Metrics.failure(errKindStore)
			return fmt.Errorf("read outbox: %w", pg.err)
		}
		if len(pg.events) == 0 {
			break
		}
		if len(pg.events) == r.cfg.BatchSize {
			next = read(pg.events[len(pg.events)-1].Seq)
		}
		chunk = chunk[:0]
		for _, ev := range pg.events {
			if r.skipped[ev.Seq] {
				continue
			}
			subject, payload, err := EncodeEvent(ev, r.cfg.Prefix, r.cfg.Source)
			if err != nil {
				r.skip(ev, err)
				continue
			}
			chunk = append(chunk, encoded{ev: ev, subject: subject, payload: payload})
		}
		if err := p.send(ctx, chunk); err != nil {
			return err
		}
		if err := p.marker.failed(); err != nil {
			return err
		}
	}
	return p.awaitAll(ctx)
}

// acknowledged records an acked event; full batches go to the marker.
func (p *pass) acknowledged(seq int64) {
	p.acked = append(p.acked, seq)
	if len(p.acked) >= p.r.cfg.BatchSize {
		p.flushAcked()
	}
}

func (p *pass) flushAcked() {
	if len(p.acked) == 0 {
		return
	}
	p.marker.add(p.acked)
	p.acked = make([]int64, 0, p.r.cfg.BatchSize)
}

// marker marks acknowledged events published in a goroutine of its own, so
// that the store's commit overlaps with publishing. Its owner, the pass,
// stops it with close.
type marker struct {
	ch   chan []int64
	done chan struct{}
	err  atomic.Pointer[error]
	n    int // marked; read after done
}

func startMarker(ctx context.Context, outbox Outbox, m *Metrics) *marker {
	mk := &marker{ch: make(chan []int64, 16), done: make(chan struct{})}
	go func() {
		defer close(mk.done)
		for seqs := range mk.ch {
			if mk.err.Load() != nil {
				continue // the pass is failing; it stops soon
			}
			// Take what queued up during the previous commit too:
			// one commit (one fsync) for all of it.
		more:
			for {
				select {
				case s, ok := <-mk.ch:
					if !ok {
						break more
					}
					seqs = append(seqs, s...)
				default:
					break more
				}
			}
			mctx, cancel := ctx, context.CancelFunc(func() {})
			if ctx.Err() != nil {
				// Shutting down: still record what JetStream
				// acknowledged, within a short bound.
				mctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), markOnStopTimeout)
			}
			err := outbox.MarkPublished(mctx, seqs)
			cancel()
			if err != nil {
				m.failure(errKindStore)
				err = fmt.Errorf("mark %d events published: %w", len(seqs), err)
				mk.err.Store(&err)
				continue
			}
			mk.n += len(seqs)
		}
	}()
	return mk
}

func (mk *marker) add(seqs []int64) { mk.ch <- seqs }

// failed returns the first marking error so far.
func (mk *marker) failed() error {
	if e := mk.err.Load(); e != nil {
		return *e
	}
	return nil
}

// close waits for every handed batch to be marked and reports how many
// events were marked and the first error.
func (mk *marker) close() (int, error) {
	close(mk.ch)
	<-mk.done
	return mk.n, mk.failed()
}

// send publishes a run of events in sequence order: as one atomic batch
// when it can, else one by one.
func (p *pass) send(ctx context.Context, chunk []encoded) error {
	r := p.r
	if r.atomic && len(chunk) > 1 && p.fitsBatch(chunk) {
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
		default:
			return err
		}
	}
	for _, e := range chunk {
		if err := p.publishOne(ctx, e); err != nil {
			return err
		}
	}
	return nil
}

// fitsBatch reports whether every event of chunk is well below the
// server's maximum payload; an oversized one is left to publishOne, which
// sets it aside.
func (p *pass) fitsBatch(chunk []encoded) bool {
	nc := p.r.js.Conn()
	if nc == nil {
		return false
	}
	limit := nc.MaxPayload() - batchHeaderRoom
	for _, e := range chunk {
		if int64(len(e.subject)+len(e.payload)) > limit {
			return false
		}
	}
	return true
}

// batchHeaderRoom is more than the headers of a batch message take.
const batchHeaderRoom = 512

// sendBatch publishes chunk as atomic batches of at most maxAtomicBatch
// events and waits for each commit's ack.
func (p *pass) sendBatch(ctx context.Context, chunk []encoded) error {
	r := p.r
	nc := r.js.Conn()
	for len(chunk) > 0 {
		part := chunk[:min(len(chunk), maxAtomicBatch)]
		chunk = chunk[len(part):]
		batchID := nuid.Next()
		var commit jetstream.PubAckFuture
		sent := time.Now()
		for i, e := range part {
			m := &nats.Msg{Subject: e.subject, Data: e.payload, Header: nats.Header{
				jetstream.MsgIDHeader: {e.ev.ID},
				"Nats-Batch-Id":       {batchID},
				"Nats-Batch-Sequence": {strconv.Itoa(i + 1)},
			}}
			if i < len(part)-1 {
				// Only the commit is acknowledged; a failure of an
				// earlier message fails the commit.
				if err := nc.PublishMsg(m); err != nil {
					r.cfg.Metrics.failure(errKindNATS)
					return fmt.Errorf("publish batch at %s: %w", e.ev.ID, err)
				}
				continue
			}
			m.Header.Set("Nats-Batch-Commit", "1")
			var err error
			if commit, err = r.js.PublishMsgAsync(m); err != nil {
				r.cfg.Metrics.failure(errKindNATS)
				return fmt.Errorf("publish batch at %s: %w", e.ev.ID, err)
			}
		}
		last := part[len(part)-1].ev
		if _, err := awaitAck(ctx, inflight{seq: last.Seq, id: last.ID, paf: commit, deadline: sent.Add(r.cfg.PublishTimeout)}); err != nil {
			var apiErr *jetstream.APIError
			switch {
			case errors.As(err, &apiErr) && (apiErr.ErrorCode == errCodeAtomicDuplicate || apiErr.ErrorCode == errCodeAtomicDisabled):
				// The caller falls back; not a failure to count.
			case errors.Is(err, errAckTimeout):
				r.cfg.Metrics.failure(errKindTimeout)
			case ctx.Err() == nil:
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
	sent := time.Now()
	paf, err := r.js.PublishMsgAsync(&nats.Msg{Subject: e.subject, Data: e.payload}, jetstream.WithMsgID(ev.ID))
	if err != nil {
		if errors.Is(err, nats.ErrMaxPayload) {
			r.skip(ev, err)
			return nil
		}
		r.cfg.Metrics.failure(errKindNATS)
		return fmt.Errorf("publish %s: %w", ev.ID, err)
	}
	p.queue = append(p.queue, inflight{
		seq: ev.Seq, key: ev.EventSubject, id: ev.ID, paf: paf,
		deadline: sent.Add(r.cfg.PublishTimeout),
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
	ack, err := awaitAck(ctx, f)
	if err != nil {
		if errors.Is(err, errAckTimeout) {
			r.cfg.Metrics.failure(errKindTimeout)
		} else if ctx.Err() == nil {
			r.cfg.Metrics.failure(errKindNATS)
		}
		return fmt.Errorf("publish %s: %w", f.id, err)
	}
	r.cfg.Metrics.ack(ack.Duplicate)
	p.acknowledged(f.seq)
	return nil
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

// skip sets aside an event that can never be published as it is (its row
// is malformed, or it exceeds the server's maximum payload). It stays
// unpublished in the outbox, where the backlog metrics and an error log
// line show it; holding every other event back behind it would be worse.
func (r *Relay) skip(ev store.OutboxEvent, err error) {
	r.skipped[ev.Seq] = true
	r.cfg.Metrics.failure(errKindInvalid)
	r.log.Error("event cannot be published; left in the outbox", "seq", ev.Seq, "id", ev.ID, "subject", ev.Subject, "err", err)
}
