package publish

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"orderd/internal/telemetry"
	"orderd/store"
)

// Outbox is what the relay needs from the store: the unpublished events in
// sequence order, a way to mark them published, pruning, a backlog summary,
// and a signal after each commit that queued events.
type Outbox interface {
	// PendingEvents returns up to limit unpublished events with a
	// sequence above afterSeq, in sequence order.
	PendingEvents(ctx context.Context, afterSeq int64, limit int) ([]store.OutboxEvent, error)
	// MarkPublishedThrough records that JetStream acknowledged every
	// event up to and including this sequence (or it was set aside).
	MarkPublishedThrough(ctx context.Context, through int64) error
	// PruneOutbox deletes published events queued before the given time
	// and returns how many it deleted.
	PruneOutbox(ctx context.Context, queuedBefore time.Time) (int64, error)
	// OutboxStats counts unpublished events and gives the creation time
	// of the oldest (zero when there is none).
	OutboxStats(ctx context.Context) (backlog int64, oldest time.Time, err error)
	// Notify is signalled after each commit that added outbox events.
	Notify() <-chan struct{}
	// SetAsideEvent takes an event that can never be published as it is
	// out of the queue, with a finding that says why.
	SetAsideEvent(ctx context.Context, ev store.SetAside) error
}

// The store is the outbox orderd runs with.
var _ Outbox = (*store.Store)(nil)

// Relay defaults.
const (
	defaultBatchSize      = 256
	defaultWindow         = 256
	defaultPublishTimeout = 5 * time.Second
	defaultPollInterval   = 500 * time.Millisecond
	defaultLinger         = 5 * time.Millisecond
	defaultBurstLinger    = 30 * time.Millisecond
	// burstRun is the pass that switches the relay to BurstLinger: well
	// above what a pass takes at 1,000 events a second (about a dozen),
	// so a steady moderate rate keeps the short Linger and its latency.
	burstRun             = 64
	maxPollInterval      = time.Second
	defaultMaxBackoff    = 10 * time.Second
	minBackoff           = 100 * time.Millisecond
	defaultRetention     = 72 * time.Hour
	defaultPruneInterval = 10 * time.Minute
	statsInterval        = 15 * time.Second
	// markOnStopTimeout bounds the last MarkPublished after Run's context
	// is cancelled, so that acknowledged events are not sent again.
	markOnStopTimeout = 2 * time.Second
	// ackOnStopTimeout bounds how long a pass still waits, after Run's
	// context is cancelled, for the answers to what it had already sent:
	// an event JetStream stores during a stop is then marked, and not
	// sent again at the next start.
	ackOnStopTimeout = 2 * time.Second
)

// RelayConfig configures a Relay. Zero values take the defaults given.
type RelayConfig struct {
	// Gate, when set, is asked before every publish; false stops the
	// relay with ErrNotLeading. Replicated mode's lease: only the leader
	// publishes, and a deposed one stops at its next publish even if it
	// was paused past its lease.
	Gate func() bool
	// Prefix leads every subject; default "orderd".
	Prefix string
	// Source is the CloudEvents source attribute; default "orderd".
	Source string
	// SchemaURL is the URL of the AsyncAPI document of the events; each
	// event's dataschema is it with a fragment naming the schema of its
	// data. Default DefaultSchemaURL.
	SchemaURL string
	// BatchSize is how many events are read and marked published at a
	// time; default 256. A full page and the pages behind it go as one
	// atomic batch of up to 1000 events.
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
	// Linger is how long a pass woken by a commit waits before it reads
	// the outbox, so that the events of the commits right behind it go in
	// the same read and the same atomic batch; default 5ms, negative for
	// none. When events trickle in it only delays each by Linger.
	Linger time.Duration
	// BurstLinger replaces Linger while the last pass that published
	// anything published 64 events or more: events are coming faster
	// than one pass per Linger takes them (over 5,000 a second with the
	// defaults), so the relay gathers more of them per pass, and spends
	// less of the machine per event on reads, batches and markings while
	// the receiver is busiest; default 30ms (none when Linger is
	// negative), at least Linger; negative for none.
	BurstLinger time.Duration
	// MaxBackoff caps the exponential back-off after a failure; default 10s.
	MaxBackoff time.Duration
	// Retention is how long published events stay in the outbox, counted
	// from when they were queued; default
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
	// TracerProvider makes a span of each traced event's publication,
	// a child of the span that caused the event; nil (tracing off)
	// makes none. Events carry their traceparent either way.
	TracerProvider trace.TracerProvider
}

// Relay moves events from the outbox to JetStream: at least once, in order
// per order (per event subject), and without ever holding up the writers of
// the outbox. Each event is published with Nats-Msg-Id set to its id, so
// the stream's duplicate window drops a second publication after a retry or
// a restart.
//
// When the stream allows atomic publish (EnsureStream turns it on; servers
// from 2.12 have it), a run of 16 or more pending events goes as one
// JetStream atomic batch: stored all or nothing, with one fsync under SyncAlways instead of
// one per event, and acknowledged once. Each message is still one event on
// its own subject with its own Nats-Msg-Id; it also carries the batch's
// Nats-Batch-Id and Nats-Batch-Sequence headers. Otherwise events go one by
// one, with a window of outstanding acks.
type Relay struct {
	cfg    RelayConfig
	outbox Outbox
	js     jetstream.JetStream
	log    *slog.Logger
	tracer trace.Tracer // nil: tracing off

	// sem lets one pass over the outbox run at a time (Run's or Flush's)
	// and guards the fields below.
	sem         chan struct{}
	streamReady bool
	atomic      bool  // the stream takes atomic batches
	maxMsgSize  int64 // the stream's largest message; 0 or less: no limit of its own
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
	if cfg.SchemaURL == "" {
		cfg.SchemaURL = DefaultSchemaURL
	}
	if err := ValidateSchemaURL(cfg.SchemaURL); err != nil {
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
	if cfg.Linger == 0 {
		cfg.Linger = defaultLinger
	}
	switch {
	case cfg.BurstLinger == 0 && cfg.Linger < 0:
		cfg.BurstLinger = cfg.Linger // no linger at all
	case cfg.BurstLinger == 0:
		cfg.BurstLinger = defaultBurstLinger
	}
	if cfg.BurstLinger > 0 {
		cfg.BurstLinger = max(cfg.BurstLinger, cfg.Linger)
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
		cfg:    cfg,
		outbox: outbox,
		js:     js,
		log:    log,
		tracer: telemetry.Tracer(cfg.TracerProvider, "orderd/publish"),
		sem:    make(chan struct{}, 1),
	}, nil
}

// ErrNotLeading stops a relay whose Gate closed.
var ErrNotLeading = errors.New("relay: not the leader")

// gate returns ErrNotLeading when the relay's Gate is closed.
func (r *Relay) gate() error {
	if r.cfg.Gate != nil && !r.cfg.Gate() {
		return ErrNotLeading
	}
	return nil
}

// Run publishes until ctx is cancelled, then, once the events JetStream
// acknowledged are marked published, returns nil. It drains the
// outbox at start, after every Notify, on each poll tick, and after a
// failure with exponential back-off (capped by MaxBackoff), retrying at once
// when the connection comes back. It also prunes and, with metrics, reports
// the backlog. Run never returns early: NATS and store errors are logged and
// retried. The one exception is a closed Gate: Run returns ErrNotLeading.
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

	ss := r.newSession(ctx, ackOnStopTimeout)
	defer ss.close()
	r.prune(ctx)
	var backoff time.Duration
	burst := false // the last pass published a run worth a batch
	for {
		// While backing off, only the retry timer and a reconnect end
		// the wait; new events wait in the outbox.
		var wake <-chan struct{}
		var tick <-chan time.Time
		if backoff == 0 {
			wake, tick = r.outbox.Notify(), poll.C
		}
		rescan := false
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
			if !r.linger(ctx, burst) {
				return nil
			}
		case <-tick:
			rescan = true
		case <-retry.C:
		case <-reconnected:
		case <-prune.C:
			r.prune(ctx)
			continue
		case <-stats.C:
			r.reportBacklog(ctx)
			continue
		}
		n, err := r.drain(ctx, ss, rescan)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, ErrNotLeading) {
			r.log.Warn("relay stopped: this instance no longer holds the lease", "published", n)
			return err
		}
		if n > 0 {
			// An empty pass (a poll tick, say) says nothing of the rate.
			burst = n >= burstRun
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

// linger waits cfg.Linger, or cfg.BurstLinger during a burst (see
// RelayConfig), and reports false if ctx ended meanwhile.
func (r *Relay) linger(ctx context.Context, burst bool) bool {
	d := r.cfg.Linger
	if burst {
		d = r.cfg.BurstLinger
	}
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Flush publishes everything pending and returns when the outbox is empty,
// retrying failures with back-off until ctx ends; then it returns the last
// error. It is meant for shutdown, after Run has returned and before the
// connection is drained, with a bounded ctx. It may also run beside Run: the
// two take turns. With nothing unpublished it returns at once, without
// NATS, which may be unreachable.
func (r *Relay) Flush(ctx context.Context) error {
	if pending, err := r.outbox.PendingEvents(ctx, 0, 1); err == nil && len(pending) == 0 {
		return nil
	}
	ss := r.newSession(ctx, 0)
	defer ss.close()
	var backoff time.Duration
	for {
		_, err := r.drain(ctx, ss, true)
		if err == nil {
			// Done once every acknowledged event is marked.
			if err = ss.marker.wait(); err == nil {
				return nil
			}
			ss.cursor = 0
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

// Prune deletes published outbox events queued more than Retention ago and
// returns how many went. Unpublished events are never pruned.
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
