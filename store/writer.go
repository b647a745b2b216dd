package store

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
)

// Request states. The caller and the writer race to move a queued request
// out of stateQueued: the writer to run it, the caller (whose context ended)
// to abandon it. Whoever wins decides whether it can be written.
const (
	stateQueued int32 = iota
	stateTaken
	stateAbandoned
)

// gatherYields is how many times the writer yields the processor before
// taking a batch during a burst (see run). A yield puts the writer behind
// every goroutine ready to run, and in a burst most of those are handlers
// verifying signatures, so each one delays the whole batch. Under the Go
// load client (make load, 64 senders) 4 yields grew batches from about 4
// writes to about 12; with a light client (make bench-daemon, wrk, 64
// connections) more handlers are ready at once, batches held about 20
// writes with 4 yields, and the yields cost throughput: one did 7,585–9,531
// webhooks/s where 4 did 7,509–8,808 and none 7,208–8,218, interleaved in
// one run (BENCHMARKS.md).
const gatherYields = 1

// request is one write waiting for the writer.
type request struct {
	ctx context.Context
	fn  func(*Tx) error
	// rerun marks a write whose fn may run twice: its only effects
	// outside the transaction are results it overwrites on each run.
	rerun bool
	state atomic.Int32
	done  chan error // buffered: the writer never blocks on a gone caller
}

// Write runs fn inside the writer's current transaction, in a savepoint of
// its own: if fn returns an error (or panics) its changes are rolled back
// and the other writes of the batch are unaffected. Write returns after the
// transaction holding fn's changes has committed (nil) or failed (an error).
//
// fn must not keep tx, must not block on anything slow (it holds up every
// write in the batch), and must not call the Store's own write methods
// (that would deadlock); it uses tx's methods instead.
//
// In replicated mode Write fails with ErrNotReplicable: a function cannot
// be sent to the other instances; use a Command (Exec) instead.
func (s *Store) Write(ctx context.Context, fn func(tx *Tx) error) error {
	if s.replog != nil {
		return ErrNotReplicable
	}
	return s.write(ctx, fn, false)
}

// write is Write; rerun says fn may run more than once (see request).
func (s *Store) write(ctx context.Context, fn func(tx *Tx) error, rerun bool) error {
	if s.opts.ReadOnly {
		return ErrReadOnly
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("store write: %w", err)
	}
	r := &request{ctx: ctx, fn: fn, rerun: rerun, done: make(chan error, 1)}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return ErrClosed
	}
	select {
	case s.queue <- r:
	default:
		s.mu.RUnlock()
		s.overloaded.Add(1)
		return ErrOverloaded
	}
	s.mu.RUnlock()

	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
	}
	// The result may have arrived together with the cancellation.
	select {
	case err := <-r.done:
		return err
	default:
	}
	if r.state.CompareAndSwap(stateQueued, stateAbandoned) {
		// The writer will skip it: nothing of it is written.
		return fmt.Errorf("store write: %w", ctx.Err())
	}
	return fmt.Errorf("%w: %w", ErrUnconfirmed, ctx.Err())
}

// run is the writer goroutine. It takes every request waiting at that
// moment (up to MaxBatch), runs them in one transaction and releases them
// after the commit, so one fsync serves the whole group. It exits when the
// queue is closed and drained.
//
// When the previous transaction held more than one write, writes are
// arriving from several goroutines at once (a burst of webhooks), and most
// of their senders are a moment away from queueing: still verifying or
// decoding. The writer then yields the processor a few times before it
// takes the batch, so that they join it. Fewer, larger transactions write
// the pages every write touches (table tails, index pages) and sync the
// log fewer times. A lone write (previous batch of one) never waits.
func (s *Store) run() {
	defer close(s.done)
	batch := make([]*request, 0, s.opts.MaxBatch)
	last := 0 // writes in the previous batch
	for {
		r, ok := <-s.queue
		if !ok {
			return
		}
		batch = append(batch[:0], r)
		if last > 1 {
			for i := 0; i < gatherYields && len(s.queue) < s.opts.MaxBatch/4; i++ {
				runtime.Gosched()
			}
		}
	fill:
		for len(batch) < s.opts.MaxBatch {
			select {
			case r, ok := <-s.queue:
				if !ok {
					break fill
				}
				batch = append(batch, r)
			default:
				break fill
			}
		}
		s.commitBatch(batch)
		last = len(batch)
		clear(batch)
	}
}

// commitBatch runs one group of requests in one transaction.
func (s *Store) commitBatch(batch []*request) {
	live := batch[:0:0]
	for _, r := range batch {
		if !r.state.CompareAndSwap(stateQueued, stateTaken) {
			continue // abandoned by its caller
		}
		if err := r.ctx.Err(); err != nil {
			s.expired.Add(1)
			r.done <- fmt.Errorf("store write: %w", err)
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	start := time.Now()
	errs := make([]error, len(live))
	events, err := s.runBatch(live, errs)
	if err != nil {
		s.log.Error("write batch failed", "writes", len(live), "err", err)
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
	} else {
		s.commits.Add(1)
	}
	d := time.Since(start)
	var failed, refused uint64
	for i := range live {
		switch {
		case errs[i] == nil:
		case err == nil && refusal(errs[i]):
			refused++
		default:
			failed++
		}
	}
	s.failed.Add(failed)
	s.refused.Add(refused)
	// Counters, hook and wake-up come before the waiters are released, so
	// whoever sees a write succeed also sees its effects on them.
	if err == nil {
		s.writes.Add(uint64(len(live)) - failed - refused)
		if s.opts.OnCommit != nil {
			s.opts.OnCommit(len(live), d)
		}
		if events > 0 {
			select {
			case s.notify <- struct{}{}:
			default:
			}
		}
	}
	for i, r := range live {
		r.done <- errs[i]
	}
}

// refusal reports whether a write's error is a refusal the store makes by
// design, a write that contradicts what is stored (an order's identity, an
// idempotency key's request), rather than a failure of the database.
func refusal(err error) bool {
	return errors.Is(err, ErrConflict) || errors.Is(err, ErrAttemptConflict)
}

// runBatch runs live in one transaction and commits it. errs receives each
// request's own error; the returned error is one that sank the whole
// transaction (then nothing was written). events counts the outbox rows of
// the requests that stayed in.
//
// Each request normally runs in a savepoint of its own, so that a failing
// one leaves no trace while the others commit. A savepoint is not free,
// though: two more statements, and SQLite copies every page the request
// touches that an earlier request of the batch already changed. So when
// every request of the batch may run twice (the webhook path and the
// relay's marks), the batch first runs without savepoints; only if one of
// its requests fails is that attempt rolled back and the batch run again
// the careful way.
func (s *Store) runBatch(live []*request, errs []error) (events int, err error) {
	fast := true
	for _, r := range live {
		fast = fast && r.rerun
	}
	if fast {
		events, failed, err := s.runOnce(live, errs, false)
		if err != nil || !failed {
			return events, err
		}
		clear(errs)
		s.reruns.Add(1)
	}
	events, _, err = s.runOnce(live, errs, true)
	return events, err
}

// runOnce is one attempt of runBatch, with a savepoint per request or
// without. Without savepoints it stops at the first failing request and
// rolls back, reporting failed; the caller then runs the batch again.
func (s *Store) runOnce(live []*request, errs []error, savepoints bool) (events int, failed bool, err error) {
	st := s.st
	if _, err := st.begin.Exec(); err != nil {
		return 0, false, fmt.Errorf("begin: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			if _, rbErr := st.rollback.Exec(); rbErr != nil {
				s.log.Debug("rollback after failed batch", "err", rbErr)
			}
		}
	}()
	tx := &Tx{s: s}
	for i, r := range live {
		if savepoints {
			if _, err := st.savepoint.Exec(); err != nil {
				return 0, false, fmt.Errorf("savepoint: %w", err)
			}
		}
		tx.events = 0
		fed, act := len(tx.fed), len(tx.activity)
		ferr := callFn(r.fn, tx)
		switch {
		case ferr == nil:
			events += tx.events
		case !savepoints:
			return 0, true, nil // the deferred ROLLBACK undoes the attempt
		default:
			errs[i] = ferr
			// A failure may have rolled the whole transaction back
			// already (SQLITE_FULL, IOERR, ...); then ROLLBACK TO fails
			// and the batch fails with it.
			if _, err := st.rollbackTo.Exec(); err != nil {
				return 0, false, fmt.Errorf("roll back failed write (%v): %w", ferr, err)
			}
			tx.fed, tx.activity = tx.fed[:fed], tx.activity[:act]
		}
		if savepoints {
			if _, err := st.release.Exec(); err != nil {
				return 0, false, fmt.Errorf("release savepoint: %w", err)
			}
		}
	}
	if err := tx.flushActivity(); err != nil {
		return 0, false, err
	}
	if _, err := st.commit.Exec(); err != nil {
		return 0, false, fmt.Errorf("commit: %w", err)
	}
	committed = true
	s.feed.push(tx.fed, tx.feedReset, tx.cursor)
	return events, false, nil
}

// callFn runs fn, turning a panic into that request's error so one bad
// write cannot stop the writer.
func callFn(fn func(*Tx) error, tx *Tx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("store write panicked: %v", p)
		}
	}()
	return fn(tx)
}
