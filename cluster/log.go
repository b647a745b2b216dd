package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"orderd/internal/telemetry"
	"orderd/store"
)

// Appending: the commands of callers that arrive while this instance's
// entry awaits its quorum's ack go together in the next entry (group
// commit), as the single-node writer groups transactions. window bounds
// the entries in flight. More than one lets a caller skip the wait for the
// previous ack, but makes smaller entries, and every entry costs every
// NATS node and every instance's applier: under make bench-cluster's load
// eight in flight gave entries of 1.5-2 webhooks, one gave 5-7, a third
// less NATS CPU per webhook and more webhooks a second. maxGroupOps
// bounds one entry's ops.
const (
	window      = 1
	maxGroupOps = 256
)

// Headers of a log entry.
const (
	headerNode = "Orderd-Node"
	// headerTrace carries the traceparents of an entry's ops, one per op
	// in order, separated by commas, empty for an op not traced; absent
	// when none is. It is outside what entryHash covers: telemetry, not
	// the entry's meaning, so traced and untraced instances chain alike.
	headerTrace = "Orderd-Trace"
)

// call is one Execute waiting for its ops' results.
type call struct {
	ops  []store.Op
	res  []store.OpResult
	err  error
	done chan struct{}
	// ackedAt (Unix nanoseconds) and seq are set when the entry holding
	// the ops is acknowledged by the log, for the caller's spans.
	ackedAt atomic.Int64
	seq     atomic.Uint64
}

// entry is one appended log entry: the calls whose ops it carries.
type entry struct {
	calls []*call
	once  sync.Once
}

// finish hands each call its slice of res, or err to all.
func (e *entry) finish(res []store.OpResult, err error) {
	e.once.Do(func() {
		for _, c := range e.calls {
			switch {
			case err != nil:
				c.err = err
			case len(res) < len(c.ops):
				c.err = fmt.Errorf("cluster: entry answered %d results for %d ops", len(res), len(c.ops))
			default:
				c.res, res = res[:len(c.ops)], res[len(c.ops):]
			}
			close(c.done)
		}
	})
}

// Execute implements store.Log: it appends ops to the log (with other
// callers' ops) and returns their results once this node has applied the
// entry. A caller whose context ends first gets store.ErrUnconfirmed: the
// entry may still be applied.
func (n *Node) Execute(ctx context.Context, ops []store.Op) ([]store.OpResult, error) {
	if err := n.Fatal(); err != nil {
		// This database can no longer follow the log: nothing it
		// appends could be applied here, and another log's instances
		// would skip it.
		return nil, fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	c := &call{ops: ops, done: make(chan struct{})}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		defer traceCall(ctx, span, c, time.Now())
	}
	select {
	case n.calls <- c:
	case <-n.closed:
		return nil, fmt.Errorf("%w: node closed", store.ErrUnavailable)
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", store.ErrUnavailable, ctx.Err())
	default:
		return nil, fmt.Errorf("%w: %d writes already waiting for the log", store.ErrUnavailable, cap(n.calls))
	}
	select {
	case <-c.done:
		return c.res, c.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", store.ErrUnconfirmed, ctx.Err())
	}
}

// traceCall records, under the caller's span, the two halves of a write
// in replicated mode: the append (until the log's quorum acknowledged the
// entry) and the apply (until this instance applied it). They are made
// afterwards with their times, so that an untraced write pays nothing.
func traceCall(ctx context.Context, parent trace.Span, c *call, start time.Time) {
	tr := parent.TracerProvider().Tracer("orderd/cluster")
	end := time.Now()
	acked := c.ackedAt.Load()
	seq := attribute.Int64("orderd.log.seq", int64(c.seq.Load()))
	ops := attribute.Int("orderd.log.ops", len(c.ops))
	if acked == 0 {
		_, sp := tr.Start(ctx, "log.append", trace.WithTimestamp(start), trace.WithAttributes(ops))
		sp.SetStatus(codes.Error, "not acknowledged by the log")
		sp.End(trace.WithTimestamp(end))
		return
	}
	at := time.Unix(0, acked)
	_, sp := tr.Start(ctx, "log.append", trace.WithTimestamp(start), trace.WithAttributes(seq, ops))
	sp.End(trace.WithTimestamp(at))
	_, sp = tr.Start(ctx, "log.apply", trace.WithTimestamp(at), trace.WithAttributes(seq))
	select {
	case <-c.done:
		if c.err != nil {
			sp.SetStatus(codes.Error, c.err.Error())
		}
	default:
		sp.SetStatus(codes.Error, "not applied here before the caller gave up")
	}
	sp.End(trace.WithTimestamp(end))
}

// entryTraces is an entry's headerTrace value, "" when no op is traced.
func entryTraces(ops []store.Op) string {
	traced := false
	n := len(ops) - 1
	for _, op := range ops {
		traced = traced || op.Trace != ""
		n += len(op.Trace)
	}
	if !traced {
		return ""
	}
	b := make([]byte, 0, n)
	for i, op := range ops {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, op.Trace...)
	}
	return string(b)
}

// setTraces gives ops the traceparents of an entry's headerTrace. A value
// that does not name one per op is ignored, and so is a part that is not a
// traceparent (events pass it on to consumers): it can cost a trace its
// link, never an entry its effects.
func setTraces(ops []store.Op, v string) {
	if v == "" {
		return
	}
	parts := strings.Split(v, ",")
	if len(parts) != len(ops) {
		return
	}
	for i := range ops {
		if telemetry.ValidTraceparent(parts[i]) {
			ops[i].Trace = parts[i]
		}
	}
}

// appendLoop forms entries from waiting calls and appends them, up to
// window at once.
func (n *Node) appendLoop(ctx context.Context) {
	slots := make(chan struct{}, window)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		var first *call
		select {
		case first = <-n.calls:
		case <-ctx.Done():
			return
		}
		group, nops := []*call{first}, len(first.ops)
	gather:
		for nops < maxGroupOps {
			select {
			case c := <-n.calls:
				group = append(group, c)
				nops += len(c.ops)
			default:
				break gather
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			n.appendGroup(ctx, group)
		}()
	}
}

// appendGroup appends the calls' ops as one entry (split when too large).
func (n *Node) appendGroup(ctx context.Context, group []*call) {
	var ops []store.Op
	for _, c := range group {
		ops = append(ops, c.ops...)
	}
	b, err := store.EncodeOpsAt(ops, n.writeVersion())
	if err != nil {
		(&entry{calls: group}).finish(nil, err)
		return
	}
	if len(b) > n.cfg.MaxEntryBytes {
		if len(group) > 1 {
			n.appendGroup(ctx, group[:len(group)/2])
			n.appendGroup(ctx, group[len(group)/2:])
			return
		}
		(&entry{calls: group}).finish(nil, fmt.Errorf("cluster: a write of %d bytes exceeds the log's entry limit of %d bytes", len(b), n.cfg.MaxEntryBytes))
		return
	}
	id := n.cfg.Node + "." + n.boot + "." + strconv.FormatUint(n.next.Add(1), 10)
	e := &entry{calls: group}
	n.mu.Lock()
	n.waiters[id] = e
	n.mu.Unlock()
	msg := nats.NewMsg(n.cfg.subject())
	msg.Data = b
	msg.Header.Set(jetstream.MsgIDHeader, id)
	msg.Header.Set(headerNode, n.cfg.Node)
	msg.Header.Set(headerLogID, n.logID)
	traces := entryTraces(ops)
	if traces != "" {
		msg.Header.Set(headerTrace, traces)
	}
	// The entry links to the last one this instance applied: every
	// applier checks the link against the entry it applied there.
	prev := ""
	if hd := n.head.Load(); hd != nil && hd.hash != nil {
		prev = link{seq: hd.seq, hash: hd.hash}.String()
		msg.Header.Set(headerPrev, prev)
	}
	start := time.Now()
	actx, cancel := context.WithTimeout(ctx, apiTimeout)
	ack, err := n.js.PublishMsg(actx, msg)
	cancel()
	n.m.appendSeconds.Observe(time.Since(start).Seconds())
	if err != nil {
		n.mu.Lock()
		delete(n.waiters, id)
		n.mu.Unlock()
		if ctx.Err() == nil {
			// An append cut short by the node's stop is not the log
			// failing: its callers get the same 503, the alert on
			// append errors stays quiet.
			n.m.appendErrors.Inc()
			n.lastAppendErr.Store(time.Now().UnixNano())
			n.moveOnAfterFailures()
		}
		e.finish(nil, fmt.Errorf("%w: append to %s: %w", store.ErrUnavailable, n.cfg.LogStream, err))
		return
	}
	// Otherwise the applier finishes e when it applies the entry.
	now := time.Now().UnixNano()
	for _, c := range group {
		c.seq.Store(ack.Sequence)
		c.ackedAt.Store(now)
	}
	n.lastAppendOK.Store(now)
	n.failedAppends.Store(0)
	// The entry is in the log at ack.Sequence. The applier may take it
	// from here when it is the next to apply, instead of waiting for the
	// log's consumer to bring it back: the same bytes, one hop sooner.
	select {
	case n.acked <- logMsg{seq: ack.Sequence, id: id, logID: n.logID, prev: prev, data: b, trace: traces, own: true}:
	default:
		// The applier is behind; the consumer brings the entry.
	}
}

// logMsg is a log entry as the applier takes it: from the log's consumer,
// or (own) this instance's entry handed over at its ack.
type logMsg struct {
	seq     uint64
	pending uint64 // the log's entries after it (from the consumer only)
	id      string // the message id
	logID   string // the log its appender followed
	prev    string // its link (headerPrev)
	data    []byte
	trace   string // headerTrace
	own     bool
}

// nextMsg waits for the consumer's next entry.
func nextMsg(it jetstream.MessagesContext) (logMsg, error) {
	msg, err := it.Next()
	if err != nil {
		return logMsg{}, err
	}
	return consumerMsg(msg)
}

// consumerMsg is the entry msg of the log's consumer.
func consumerMsg(msg jetstream.Msg) (logMsg, error) {
	meta, err := msg.Metadata()
	if err != nil {
		return logMsg{}, err
	}
	h := msg.Headers()
	return logMsg{
		seq: meta.Sequence.Stream, pending: meta.NumPending,
		id: h.Get(jetstream.MsgIDHeader), logID: h.Get(headerLogID), prev: h.Get(headerPrev), data: msg.Data(),
		trace: h.Get(headerTrace),
	}, nil
}

// applyLoop follows the log from the last applied entry, applying each in
// order, for the node's life. A gap or an entry it cannot decode stops it
// for good (Fatal): this database can no longer follow the log.
func (n *Node) applyLoop(ctx context.Context) {
	for ctx.Err() == nil {
		err := n.follow(ctx)
		if ctx.Err() != nil {
			return
		}
		var ve *VerifyError
		if errors.As(err, &ve) {
			n.failVerify(ve)
			return
		}
		if errors.Is(err, errFatal) {
			n.fatal.Store(&err)
			n.cfg.Logger.Error("the applier stopped: this instance cannot follow the log; restore it from a snapshot (see docs/replicated-mode.md, Replacing an instance)", "err", err)
			return
		}
		n.cfg.Logger.Warn("log applier interrupted; resuming", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

var errFatal = errors.New("cluster: fatal")

func (n *Node) follow(ctx context.Context) error {
	cons, err := n.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:   n.applied.Load() + 1,
		// Says which log versions this instance reads, so that the lease
		// holder raises the version only when it does.
		Metadata: n.consumerMetadata(),
	})
	if err != nil {
		return fmt.Errorf("follow %s: %w", n.cfg.LogStream, err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(512))
	if err != nil {
		return fmt.Errorf("follow %s: %w", n.cfg.LogStream, err)
	}
	// A reader hands messages over as they come; the applier takes all
	// that are waiting, and this instance's entries acked meanwhile, and
	// applies them in one transaction, so that applying keeps up with a
	// burst as the appender's groups do.
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	msgs := make(chan logMsg, maxApplyBatch)
	readErr := make(chan error, 1)
	go func() {
		defer close(msgs)
		for {
			m, err := nextMsg(it)
			if err != nil {
				readErr <- err
				return
			}
			select {
			case msgs <- m:
			case <-fctx.Done():
				return
			}
		}
	}()
	defer it.Stop()
	batch := make([]logMsg, 0, maxApplyBatch)
	for {
		var first logMsg
		select {
		case m, ok := <-msgs:
			if !ok {
				return <-readErr
			}
			first = m
		case m := <-n.acked:
			first = m
		case <-ctx.Done():
			return ctx.Err()
		}
		batch = append(batch[:0], first)
	fill:
		for len(batch) < maxApplyBatch {
			select {
			case m, ok := <-msgs:
				if !ok {
					break fill
				}
				batch = append(batch, m)
			case m := <-n.acked:
				batch = append(batch, m)
			default:
				break fill
			}
		}
		if err := n.applyMsgs(ctx, batch); err != nil {
			return err
		}
	}
}

// foreignEntry decides about entry seq of log id, which this database
// does not follow: when the stream is still this node's log, the entry
// was appended by an instance following a replaced log and is skipped
// (nil); when the stream is now log id, this node is the stale one and
// stops for good.
func (n *Node) foreignEntry(ctx context.Context, seq uint64, id string) error {
	info, err := n.streamInfo(ctx)
	if err != nil {
		return err
	}
	if cur := streamLogID(info.Config); cur != n.logID {
		return fmt.Errorf("%w: the log %s is now log %s (entry %d), this database follows log %s: restart this instance on an empty disk, which restores the new log's snapshot",
			errFatal, n.cfg.LogStream, cur, seq, n.logID)
	}
	n.m.foreignEntries.Inc()
	n.cfg.Logger.Warn("skipped a log entry of another log: an instance following a replaced log still appends; stop it", "seq", seq, "entry_log", id, "log", n.logID)
	return nil
}

// maxApplyBatch bounds the log entries applied in one transaction.
const maxApplyBatch = 128

// applyMsgs applies the entries of msgs that follow the last applied one
// in one transaction, retrying a failing database (a full disk, say) until
// it succeeds or the node stops: entries are never skipped. An entry
// already applied is passed over, and so is an own entry that does not
// follow yet (the consumer brings it in its turn); a consumer's entry
// that does not follow means the log was trimmed past this database.
func (n *Node) applyMsgs(ctx context.Context, msgs []logMsg) error {
	// The consumer's entries come in log order; own entries may come
	// before those they follow.
	slices.SortStableFunc(msgs, func(a, b logMsg) int { return cmp.Compare(a.seq, b.seq) })
	applied := n.applied.Load()
	entries := make([]store.LogEntry, 0, len(msgs))
	ids := make([]string, 0, len(msgs))
	pending, fromConsumer := uint64(0), false
	// A failed check stops the batch there: the entries before it are
	// applied, then the applier stops.
	var verr error
	for _, msg := range msgs {
		seq := msg.seq
		next := applied + 1 + uint64(len(entries))
		switch {
		case seq < next:
			continue // applied, or delivered again after a consumer reset
		case seq != next && msg.own:
			continue
		case seq != next:
			verr = &VerifyError{Stream: n.cfg.LogStream, Seq: seq, Applied: next - 1, gap: true,
				Problem: fmt.Sprintf("the log continues at %d after %d: entries %d to %d are missing (deleted, lost, or aged out of the log before this instance applied them)", seq, next-1, next, seq-1)}
		}
		if verr != nil {
			break
		}
		hash := entryHash(seq, msg.id, msg.logID, msg.prev, msg.data)
		foreign := msg.logID != "" && msg.logID != n.logID
		if foreign {
			// Its link names an entry of the other log.
		} else if err := checkLink(n.cfg.LogStream, seq, applied, msg.prev, func(p uint64) ([]byte, bool) {
			if p > applied {
				// An entry of this batch.
				return entries[p-applied-1].Hash, true
			}
			return n.ring.get(p)
		}); err != nil {
			var ve *VerifyError
			if errors.As(err, &ve) {
				ve.Applied = next - 1
			}
			verr = err
			break
		}
		var ops []store.Op
		var err error
		if id := msg.logID; foreign {
			// Appended by an instance that follows another log under
			// this stream's name (the log was lost and seeded anew).
			if err := n.foreignEntry(ctx, seq, id); err != nil {
				return err
			}
			// A stale instance's entry: every instance of this log
			// applies it as an entry without ops, so they stay alike.
		} else if ops, err = store.DecodeOps(msg.data); err != nil {
			return fmt.Errorf("%w: entry %d: %w%s", errFatal, seq, err, n.versionHint(ctx, err))
		} else {
			setTraces(ops, msg.trace)
		}
		entries = append(entries, store.LogEntry{Seq: seq, Ops: ops, Hash: hash})
		ids = append(ids, msg.id)
		if !msg.own {
			pending, fromConsumer = msg.pending, true
		}
	}
	if len(entries) == 0 {
		return verr
	}
	// A checkpoint ends a transaction, so that its digest reads the
	// state right after its entry.
	for len(entries) > 0 {
		k := len(entries)
		for i, e := range entries {
			if n.isCheckpoint(e.Seq) {
				k = i + 1
				break
			}
		}
		if err := n.commit(ctx, entries[:k], ids[:k]); err != nil {
			return err
		}
		if last := entries[k-1].Seq; n.isCheckpoint(last) {
			n.checkpoint(ctx, last)
		}
		entries, ids = entries[k:], ids[k:]
	}
	if fromConsumer {
		n.m.lag.Set(float64(pending))
	}
	return verr
}

// commit applies consecutive entries in one transaction and answers their
// callers.
func (n *Node) commit(ctx context.Context, entries []store.LogEntry, ids []string) error {
	var res [][]store.OpResult
	var err error
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 5*time.Second) {
		res, err = n.store.ApplyLogEntries(ctx, entries)
		if err == nil {
			break
		}
		if errors.Is(err, store.ErrLogGap) || errors.Is(err, store.ErrApplied) {
			// The database and the node disagree on what was applied:
			// only a restart (which reads the database) can tell.
			return fmt.Errorf("%w: %w", errFatal, err)
		}
		if ctx.Err() != nil {
			// The node is stopping; whatever did not commit is applied
			// again at the next start, from the database's own seq.
			return ctx.Err()
		}
		n.m.applyErrors.Inc()
		n.cfg.Logger.Error("apply log entries; retrying", "first", entries[0].Seq, "entries", len(entries), "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
	}
	last := entries[len(entries)-1].Seq
	for _, e := range entries {
		n.ring.put(e.Seq, e.Hash)
	}
	n.head.Store(&head{seq: last, hash: entries[len(entries)-1].Hash})
	n.mu.Lock()
	n.applied.Store(last)
	close(n.appliedCh)
	n.appliedCh = make(chan struct{})
	waiting := make([]*entry, len(ids))
	for i, id := range ids {
		waiting[i] = n.waiters[id]
		delete(n.waiters, id)
	}
	n.mu.Unlock()
	n.m.applied.Set(float64(last))
	now := time.Now().UnixNano()
	for i, e := range waiting {
		if e == nil {
			continue
		}
		// The consumer can bring this instance's entry before its
		// append has its ack: applied, it was in the log, at its
		// sequence (for the caller's spans).
		for _, c := range e.calls {
			if c.ackedAt.CompareAndSwap(0, now) {
				c.seq.Store(entries[i].Seq)
			}
		}
		e.finish(res[i], nil)
	}
	return nil
}

// Moving to another NATS server: a server cut off from the others' quorum
// still takes this instance's connection and times out every append, and
// the client stays with it as long as the connection itself lives. After
// failedAppendsToMove appends in a row failed, the instance reconnects
// (to any server of nats.url), at most once per moveEvery; when no server
// can reach a quorum, that changes nothing.
const (
	failedAppendsToMove = 3
	moveEvery           = 10 * time.Second
)

func (n *Node) moveOnAfterFailures() {
	if n.failedAppends.Add(1) < failedAppendsToMove {
		return
	}
	now := time.Now().UnixNano()
	last := n.lastMove.Load()
	if now-last < int64(moveEvery) || !n.lastMove.CompareAndSwap(last, now) {
		return
	}
	n.failedAppends.Store(0)
	n.cfg.Logger.Warn("appends to the log keep failing through this NATS server; reconnecting, to another server if one answers",
		"server", n.nc.ConnectedServerName())
	if err := n.nc.ForceReconnect(); err != nil {
		n.cfg.Logger.Info("reconnect to NATS", "err", err)
	}
}
