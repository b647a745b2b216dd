package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"orderd/store"
)

// apiTimeout bounds one JetStream API request (stream info, KV, object
// store) so that a cluster without quorum is answered, not waited on.
const apiTimeout = 5 * time.Second

// Node is one orderd instance of a replicated deployment: the store's Log
// (Execute), its applier, its lease and its snapshots.
type Node struct {
	cfg   Config
	nc    *nats.Conn
	js    jetstream.JetStream
	store *store.Store
	m     *metrics

	stream jetstream.Stream
	kv     jetstream.KeyValue
	obj    jetstream.ObjectStore
	// dkv is the digests bucket: checkpoint digests and members.
	dkv jetstream.KeyValue
	dg  digests
	// digestq hands checkpoint snapshots to digestLoop.
	digestq chan *store.ReadSnapshot
	// logID is the id of the log this node follows: the log stream's,
	// which its database records.
	logID string

	boot  string        // this process's id in message ids
	next  atomic.Uint64 // message id counter
	calls chan *call
	// acked hands this instance's entries to the applier at their ack.
	acked chan logMsg

	mu      sync.Mutex
	waiters map[string]*entry // by message id, until applied

	applied   atomic.Uint64 // last applied log sequence
	appliedCh chan struct{} // closed and replaced on each apply
	// head is the last applied entry and its hash; ring the hashes of
	// the entries before it (the applier's alone).
	head  atomic.Pointer[head]
	ring  *hashRing
	fatal atomic.Pointer[error]
	// logVersion is the log version in force as last read from the
	// log stream (logversion.go).
	logVersion atomic.Int32

	lease lease

	// snapMu makes one snapshot at a time.
	snapMu sync.Mutex
	// lastFullCheck is when a snapshot's copy was last checked in full
	// (under snapMu).
	lastFullCheck time.Time

	// lastAppendOK and lastAppendErr are when appends last succeeded
	// and failed (Unix nanoseconds), for Ready.
	lastAppendOK, lastAppendErr atomic.Int64
	// suspicion is a failed comparison of the log with what this node
	// applied, not yet confirmed (verify.go, suspect).
	suspicion atomic.Pointer[suspicion]
	// failedAppends counts appends failed in a row; lastMove is when the
	// node last reconnected to NATS because of them (moveOnAfterFailures).
	failedAppends atomic.Int64
	lastMove      atomic.Int64

	wg          sync.WaitGroup // appender and applier
	leaseWG     sync.WaitGroup
	cancel      context.CancelFunc
	cancelLease context.CancelFunc
	closed      chan struct{}
}

// New makes a node on a connected NATS client and an open store, and
// creates (or finds) the log stream, the lease bucket and the snapshot
// store. Call it after RestoreSnapshot and before store.Replicate.
func New(ctx context.Context, nc *nats.Conn, st *store.Store, cfg Config) (*Node, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	n := &Node{
		cfg: cfg, nc: nc, js: js, store: st,
		boot:      nuid.Next(),
		calls:     make(chan *call, 4096),
		acked:     make(chan logMsg, 64),
		waiters:   map[string]*entry{},
		appliedCh: make(chan struct{}),
		closed:    make(chan struct{}),
		ring:      newHashRing(),
		digestq:   make(chan *store.ReadSnapshot, 1),
	}
	n.m = newMetrics(cfg.Registerer)
	if err := checkServerVersion(nc); err != nil {
		return nil, err
	}
	md := n.newLogMetadata()
	md[logIDKey] = newLogID()
	if err := n.provision(ctx, md); err != nil {
		return nil, err
	}
	if err := n.checkSettings(ctx); err != nil {
		return nil, err
	}
	seq, err := st.AppliedSeq(ctx)
	if err != nil {
		return nil, err
	}
	// A cluster that is electing a leader (after a restart, or during a
	// partition) may not answer at once: wait up to a minute, as for the
	// assets themselves, rather than exit on the first timeout.
	info, err := ensure(ctx, func(ctx context.Context) (*jetstream.StreamInfo, error) {
		return n.stream.Info(ctx)
	}, func(context.Context) (*jetstream.StreamInfo, error) {
		return nil, fmt.Errorf("log stream %s: %w", cfg.LogStream, jetstream.ErrStreamNotFound)
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: log stream %s: %w", cfg.LogStream, err)
	}
	n.noteLogVersion(info)
	follow, err := n.checkIdentity(ctx, info, seq)
	if err != nil {
		return nil, err
	}
	hd := head{seq: seq}
	if hd.hash, _, err = st.EntryHash(ctx, seq); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if err := n.checkHoldsConfirmed(ctx, info, hd); err != nil {
		return nil, err
	}
	if err := n.loadRing(ctx, seq); err != nil {
		return nil, err
	}
	n.head.Store(&hd)
	if follow {
		// Recorded only once every check passed: a refused database
		// stays as it was.
		if err := st.FollowLog(ctx, n.logID); err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
	}
	n.applied.Store(seq)
	n.m.applied.Set(float64(seq))
	return n, nil
}

// provision finds or creates the JetStream assets. Each is looked up
// before it is created: instances starting together must not race to
// create with different answers.
//
// A log stream it creates gets the metadata (its id, or a seed's mark). The assets it finds keep
// their settings: checkSettings compares them with this instance's.
func (n *Node) provision(ctx context.Context, metadata map[string]string) error {
	c := n.cfg
	var err error
	n.stream, err = ensure(ctx, func(ctx context.Context) (jetstream.Stream, error) {
		return n.js.Stream(ctx, c.LogStream)
	}, func(ctx context.Context) (jetstream.Stream, error) {
		return n.js.CreateStream(ctx, jetstream.StreamConfig{
			Metadata:    metadata,
			Name:        c.LogStream,
			Description: "orderd's replicated log: every store write, in order",
			Subjects:    []string{c.subject()},
			Storage:     jetstream.FileStorage,
			Replicas:    c.Replicas,
			MaxAge:      c.LogMaxAge,
			Duplicates:  2 * time.Minute,
			MaxMsgSize:  int32(min(c.MaxEntryBytes+4096, 1<<30)),
			Discard:     jetstream.DiscardOld,
		})
	})
	if err != nil {
		return fmt.Errorf("cluster: log stream %s: %w%s", c.LogStream, err, placementHint(err))
	}
	n.kv, err = ensure(ctx, func(ctx context.Context) (jetstream.KeyValue, error) {
		return n.js.KeyValue(ctx, c.leaseBucket())
	}, func(ctx context.Context) (jetstream.KeyValue, error) {
		return n.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: c.leaseBucket(), Description: "orderd's leader lease",
			TTL: c.LeaseTTL, History: 1, Replicas: c.Replicas, Storage: jetstream.FileStorage,
		})
	})
	if err != nil {
		return fmt.Errorf("cluster: lease bucket %s: %w%s", c.leaseBucket(), err, placementHint(err))
	}
	n.obj, err = ensure(ctx, func(ctx context.Context) (jetstream.ObjectStore, error) {
		return n.js.ObjectStore(ctx, c.snapshotBucket())
	}, func(ctx context.Context) (jetstream.ObjectStore, error) {
		return n.js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{
			Bucket: c.snapshotBucket(), Description: "orderd's database snapshots",
			Replicas: c.Replicas, Storage: jetstream.FileStorage,
		})
	})
	if err != nil {
		return fmt.Errorf("cluster: snapshot store %s: %w%s", c.snapshotBucket(), err, placementHint(err))
	}
	n.dkv, err = ensure(ctx, func(ctx context.Context) (jetstream.KeyValue, error) {
		return n.js.KeyValue(ctx, c.digestBucket())
	}, func(ctx context.Context) (jetstream.KeyValue, error) {
		return n.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: c.digestBucket(), Description: "orderd's instances and their state digests at checkpoints",
			History: 1, Replicas: c.Replicas, Storage: jetstream.FileStorage, TTL: c.LogMaxAge,
		})
	})
	if err != nil {
		return fmt.Errorf("cluster: digests bucket %s: %w%s", c.digestBucket(), err, placementHint(err))
	}
	return nil
}

// placementHint explains JetStream's refusal to place a replicated asset.
func placementHint(err error) string {
	if err != nil && strings.Contains(err.Error(), "no suitable peers") {
		return " (JetStream places a new replicated stream only on nodes that are up: the first start of replicated mode needs cluster.replicas NATS nodes running; later starts do not)"
	}
	return ""
}

// ensure looks an asset up and creates it when it is not there, retrying
// for up to a minute: a cluster that has just started (or lost a node)
// may not have a JetStream meta leader yet, and a concurrent creation by
// another instance may leave this one's unanswered.
func ensure[T any](ctx context.Context, lookup, create func(context.Context) (T, error)) (T, error) {
	var zero T
	deadline := time.Now().Add(time.Minute)
	for {
		actx, cancel := context.WithTimeout(ctx, 3*time.Second)
		v, err := lookup(actx)
		if err != nil && isNotFound(err) {
			v, err = create(actx)
		}
		cancel()
		if err == nil {
			return v, nil
		}
		if time.Now().After(deadline) {
			return zero, err
		}
		select {
		case <-ctx.Done():
			return zero, errors.Join(ctx.Err(), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func isNotFound(err error) bool {
	return errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrBucketNotFound) ||
		errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrObjectNotFound) ||
		errors.Is(err, jetstream.ErrNoObjectsFound)
}

// Start runs the appender, the applier, the lease and, while this node
// leads, duties (given a context that ends when the lease is lost) and
// the snapshots. It returns at once; Close stops everything.
func (n *Node) Start(duties func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	n.wg.Add(2)
	go func() { defer n.wg.Done(); n.appendLoop(ctx) }()
	go func() { defer n.wg.Done(); n.applyLoop(ctx) }()
	n.wg.Add(2)
	go func() { defer n.wg.Done(); n.lagLoop(ctx) }()
	go func() { defer n.wg.Done(); n.digestLoop(ctx) }()
	lctx, cancelLease := context.WithCancel(ctx)
	n.cancelLease = cancelLease
	n.leaseWG.Add(1)
	go func() { defer n.leaseWG.Done(); n.leaseLoop(lctx, duties) }()
}

// Close steps down (releasing the lease, so another instance takes over
// at once), stops the loops and fails waiting callers.
func (n *Node) Close(ctx context.Context) {
	select {
	case <-n.closed:
		return
	default:
	}
	// Duties stop first, while the log still takes their last writes
	// (the relay's marks); then the appender and the applier.
	if n.cancelLease != nil {
		n.cancelLease()
	}
	wait(ctx, &n.leaseWG)
	close(n.closed)
	if n.cancel != nil {
		n.cancel()
	}
	wait(ctx, &n.wg)
	n.mu.Lock()
	for id, e := range n.waiters {
		e.finish(nil, fmt.Errorf("%w: node closed", store.ErrUnavailable))
		delete(n.waiters, id)
	}
	n.mu.Unlock()
}

// wait waits for wg or ctx.
func wait(ctx context.Context, wg *sync.WaitGroup) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// Fatal returns the error that stopped the applier for good (a gap in the
// log, an entry it cannot decode), or nil.
func (n *Node) Fatal() error {
	if p := n.fatal.Load(); p != nil {
		return *p
	}
	return nil
}

// Ready reports whether this node can serve writes: its applier runs and
// the log stream answers (it has a leader, so appends can be
// acknowledged).
func (n *Node) Ready(ctx context.Context) error {
	if err := n.Fatal(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	if n.lastAppendErr.Load() > n.lastAppendOK.Load() {
		// The last append failed: only a new one tells that the log
		// takes writes again.
		if _, err := n.Execute(ctx, []store.Op{{At: time.Now(), Cmd: store.NoopCmd{}}}); err != nil {
			return fmt.Errorf("append to the log: %w", err)
		}
		return nil
	}
	info, err := n.stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("log stream %s: %w", n.cfg.LogStream, err)
	}
	if info.Cluster != nil && info.Cluster.Leader == "" {
		return fmt.Errorf("log stream %s has no leader (no quorum)", n.cfg.LogStream)
	}
	return nil
}

// AppliedSeq is the last log sequence this node applied.
func (n *Node) AppliedSeq() uint64 { return n.applied.Load() }

// WaitApplied waits until this node has applied seq.
func (n *Node) WaitApplied(ctx context.Context, seq uint64) error {
	for {
		n.mu.Lock()
		ch := n.appliedCh
		n.mu.Unlock()
		if n.applied.Load() >= seq {
			return nil
		}
		if err := n.Fatal(); err != nil {
			return err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// CatchUp waits until this node has applied every entry the log held
// when CatchUp was called.
func (n *Node) CatchUp(ctx context.Context) error {
	last, err := n.lastSeq(ctx)
	if err != nil {
		return err
	}
	return n.WaitApplied(ctx, last)
}

func (n *Node) lastSeq(ctx context.Context) (uint64, error) {
	info, err := n.streamInfo(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.LastSeq, nil
}

func (n *Node) streamInfo(ctx context.Context) (*jetstream.StreamInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	info, err := n.stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("log stream %s: %w", n.cfg.LogStream, err)
	}
	return info, nil
}

// lagLoop keeps orderd_log_lag current also when nothing is being
// applied (an applier that stopped, or waits for an entry that never
// comes): every few seconds, the log's last sequence less the applied one.
// It also checks, as often, that the log still holds the entry this
// instance applied last and reaches its sequence (checkHolds).
func (n *Node) lagLoop(ctx context.Context) {
	t := time.NewTicker(n.cfg.checkEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n.tick(ctx)
	}
}

// tick is lagLoop's work: report, compare digests, check the log.
func (n *Node) tick(ctx context.Context) {
	n.checkLog(ctx)
	n.report(ctx)
	n.compareDigests(ctx)
	n.maybeRaise(ctx)
}

// checkLog compares the log with this instance once: its id, that it
// still holds the entry applied last, and the lag.
func (n *Node) checkLog(ctx context.Context) {
	// The head is read before the log: an entry applied meanwhile is in
	// the log already.
	hd := n.head.Load()
	info, err := n.streamInfo(ctx)
	if err != nil {
		return
	}
	n.noteLogVersion(info)
	if id := streamLogID(info.Config); id != n.logID && id != "" {
		// The log was replaced under this instance (lost and seeded
		// anew): nothing more of it may be applied here.
		err := fmt.Errorf("%w: the log %s is now log %s; this database follows log %s: restart this instance on an empty disk, which restores the new log's snapshot",
			errFatal, n.cfg.LogStream, id, n.logID)
		if n.fatal.CompareAndSwap(nil, &err) {
			n.cfg.Logger.Error("the log was replaced; this instance stops applying it", "err", err)
		}
	}
	if hd != nil && n.Fatal() == nil {
		// The log still holds what this instance applied.
		var ve *VerifyError
		if err := n.checkHolds(ctx, info, *hd); errors.As(err, &ve) {
			n.suspect(ve)
		} else if err == nil {
			n.clearSuspicion()
		} else if ctx.Err() == nil {
			n.cfg.Logger.Info("could not re-read the last applied log entry", "seq", hd.seq, "err", err)
		}
	}
	last := info.State.LastSeq
	applied := n.applied.Load()
	lag := uint64(0)
	if last > applied {
		lag = last - applied
	}
	n.m.lag.Set(float64(lag))
}
