package publish

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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
	// BatchSize is how many events are read, and marked published, at a
	// time; default 256.
	BatchSize int
	// Window is how many publishes may await their ack at once; default
	// 256. Two events of the same order are never in flight together.
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

// errAckTimeout is returned when no ack came within PublishTimeout.
var errAckTimeout = errors.New("no ack within the publish timeout")

// drain makes one pass: it publishes every pending event, keeping up to
// Window acks outstanding, and marks events published in batches as their
// acks arrive in order. On the first failure it stops, marks the
// acknowledged prefix and returns the error; the next pass starts again from
// the first unacknowledged event. Each pass starts from the lowest pending
// sequence, so nothing is skipped however the store assigns sequences.
func (r *Relay) drain(ctx context.Context) (published int, err error) {
	select {
	case r.sem <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	defer func() { <-r.sem }()

	if r.cfg.Stream != nil && !r.streamReady {
		if _, err := EnsureStream(ctx, r.js, *r.cfg.Stream); err != nil {
			r.cfg.Metrics.failure(errKindNATS)
			return 0, err
		}
		r.streamReady = true
	}

	p := pass{r: r, busy: make(map[string]int)}
	err = p.run(ctx)
	if err != nil {
		// Keep what was acknowledged; even when ctx is done, so that a
		// shutdown does not send those events again.
		mctx := ctx
		if ctx.Err() != nil {
			var cancel context.CancelFunc
			mctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), markOnStopTimeout)
			defer cancel()
		}
		if merr := p.mark(mctx); merr != nil {
			err = errors.Join(err, merr)
		}
		if errors.Is(err, jetstream.ErrNoStreamResponse) {
			r.streamReady = false
		}
	}
	return p.marked, err
}

// pass is the state of one drain.
type pass struct {
	r      *Relay
	queue  []inflight     // in publish order; the head is the oldest
	busy   map[string]int // in-flight events per key
	acked  []int64        // acknowledged, not yet marked
	marked int
}

func (p *pass) run(ctx context.Context) error {
	r := p.r
	var cursor int64
	for {
		events, err := r.outbox.PendingEvents(ctx, cursor, r.cfg.BatchSize)
		if err != nil {
			r.cfg.Metrics.failure(errKindStore)
			return fmt.Errorf("read outbox after %d: %w", cursor, err)
		}
		if len(events) == 0 {
			break
		}
		for _, ev := range events {
			cursor = ev.Seq
			if r.skipped[ev.Seq] {
				continue
			}
			subject, payload, err := EncodeEvent(ev, r.cfg.Prefix, r.cfg.Source)
			if err != nil {
				r.skip(ev, err)
				continue
			}
			// Keep order per order: an event waits until its order's
			// previous event is acknowledged.
			for p.busy[ev.EventSubject] > 0 || len(p.queue) >= r.cfg.Window {
				if err := p.ackHead(ctx); err != nil {
					return err
				}
			}
			sent := time.Now()
			paf, err := r.js.PublishMsgAsync(&nats.Msg{Subject: subject, Data: payload}, jetstream.WithMsgID(ev.ID))
			if err != nil {
				if errors.Is(err, nats.ErrMaxPayload) {
					r.skip(ev, err)
					continue
				}
				r.cfg.Metrics.failure(errKindNATS)
				return fmt.Errorf("publish %s: %w", ev.ID, err)
			}
			p.queue = append(p.queue, inflight{
				seq: ev.Seq, key: ev.EventSubject, id: ev.ID, paf: paf,
				deadline: sent.Add(r.cfg.PublishTimeout),
			})
			p.busy[ev.EventSubject]++
		}
		if len(events) < r.cfg.BatchSize {
			break
		}
	}
	for len(p.queue) > 0 {
		if err := p.ackHead(ctx); err != nil {
			return err
		}
	}
	return p.mark(ctx)
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
	p.acked = append(p.acked, f.seq)
	if len(p.acked) >= r.cfg.BatchSize {
		return p.mark(ctx)
	}
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

// mark records the acknowledged events as published.
func (p *pass) mark(ctx context.Context) error {
	if len(p.acked) == 0 {
		return nil
	}
	if err := p.r.outbox.MarkPublished(ctx, p.acked); err != nil {
		p.r.cfg.Metrics.failure(errKindStore)
		return fmt.Errorf("mark %d events published: %w", len(p.acked), err)
	}
	p.marked += len(p.acked)
	p.acked = p.acked[:0]
	return nil
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
