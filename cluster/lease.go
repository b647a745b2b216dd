package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// leaseKey is the lease's key in the lease bucket.
const leaseKey = "leader"

// lease is this node's view of the lease.
type lease struct {
	mu         sync.Mutex
	leading    bool
	rev        uint64    // revision of our last write, while leading
	term       uint64    // revision that created our lease
	validUntil time.Time // monotonic: when our lease may have ended elsewhere
}

// leaseValue is the lease's value in the bucket.
type leaseValue struct {
	Node string `json:"node"`
	Term uint64 `json:"term"`
}

// Leading reports whether this node holds the lease now. Duties check it
// before every action with outside effects (a publish, a provider call):
// it turns false when the lease may have ended, even if this process was
// paused and its lease loop has not run since.
func (n *Node) Leading() bool {
	n.lease.mu.Lock()
	defer n.lease.mu.Unlock()
	return n.lease.leading && time.Now().Before(n.lease.validUntil)
}

// LeaseUntil returns when this node's lease may have ended elsewhere, and
// false when it does not hold one now: a call with outside effects that
// cannot be finished by then must not start.
func (n *Node) LeaseUntil() (time.Time, bool) {
	n.lease.mu.Lock()
	defer n.lease.mu.Unlock()
	if !n.lease.leading || !time.Now().Before(n.lease.validUntil) {
		return time.Time{}, false
	}
	return n.lease.validUntil, true
}

// validity is how long after a successful write's start the lease is
// surely still ours: the bucket's TTL runs from the server's store of the
// write, which is after the request's start; a tenth of the TTL covers
// clock rate differences.
func (n *Node) validity() time.Duration { return n.cfg.LeaseTTL - n.cfg.LeaseTTL/10 }

// leaseLoop acquires and renews the lease every LeaseTTL/3, running
// duties while it leads.
func (n *Node) leaseLoop(ctx context.Context, duties func(context.Context)) {
	var (
		stopDuties context.CancelFunc
		dutiesDone chan struct{}
	)
	// A step down the node did not choose is a warning; one at a clean
	// shutdown is not.
	stepDown := func(level slog.Level, why string, release bool) {
		n.lease.mu.Lock()
		was, rev := n.lease.leading, n.lease.rev
		n.lease.leading = false
		n.lease.mu.Unlock()
		n.m.leader.Set(0)
		if stopDuties != nil {
			stopDuties()
			<-dutiesDone
			stopDuties = nil
		}
		if was {
			n.cfg.Logger.Log(context.Background(), level, "stepped down as leader", "reason", why)
		}
		if release && was {
			rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			if err := n.kv.Delete(rctx, leaseKey, jetstream.LastRevision(rev)); err != nil {
				n.cfg.Logger.Info("release the lease", "err", err)
			}
			cancel()
		}
	}
	tick := time.NewTicker(n.cfg.LeaseTTL / 3)
	defer tick.Stop()
	for {
		if n.Fatal() == nil {
			if n.Leading() {
				if err := n.renew(ctx); err != nil && ctx.Err() == nil {
					if errors.Is(err, errLeaseLost) || !n.Leading() {
						stepDown(slog.LevelWarn, err.Error(), false)
					} else {
						n.cfg.Logger.Warn("renew the lease; still within it", "err", err)
					}
				}
			} else {
				if stopDuties != nil { // lease ran out between renewals
					stepDown(slog.LevelWarn, "lease expired before it could be renewed", false)
				}
				if n.acquire(ctx) && ctx.Err() == nil {
					n.cfg.Logger.Info("became leader", "term", n.term())
					n.m.leader.Set(1)
					// Duties start on a database that has applied the
					// whole log: the relay and the jobs see every write.
					cctx, cancel := context.WithTimeout(ctx, n.validity())
					err := n.CatchUp(cctx)
					cancel()
					if err != nil {
						stepDown(slog.LevelWarn, "could not catch up with the log: "+err.Error(), true)
					} else {
						dctx, cancelDuties := context.WithCancel(ctx)
						stopDuties = cancelDuties
						dutiesDone = make(chan struct{})
						go func() {
							defer close(dutiesDone)
							n.runDuties(dctx, duties)
						}()
					}
				}
			}
		} else if n.Leading() || stopDuties != nil {
			stepDown(slog.LevelWarn, "the applier stopped", true)
		}
		select {
		case <-ctx.Done():
			stepDown(slog.LevelInfo, "shutting down", true)
			return
		case <-tick.C:
		}
	}
}

// runDuties runs the caller's duties and the snapshots until ctx ends.
func (n *Node) runDuties(ctx context.Context, duties func(context.Context)) {
	var wg sync.WaitGroup
	if duties != nil {
		wg.Go(func() { duties(ctx) })
	}
	wg.Go(func() { n.snapshotLoop(ctx) })
	wg.Wait()
}

var errLeaseLost = errors.New("lease taken by another instance")

func (n *Node) term() uint64 {
	n.lease.mu.Lock()
	defer n.lease.mu.Unlock()
	return n.lease.term
}

// acquire tries to create the lease; it reports whether this node leads.
func (n *Node) acquire(ctx context.Context) bool {
	start := time.Now()
	actx, cancel := context.WithTimeout(ctx, min(apiTimeout, n.cfg.LeaseTTL/3))
	defer cancel()
	val, _ := json.Marshal(leaseValue{Node: n.cfg.Node})
	rev, err := n.kv.Create(actx, leaseKey, val)
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyExists) {
			n.cfg.Logger.Debug("acquire the lease", "err", err)
		}
		return false
	}
	n.lease.mu.Lock()
	n.lease.leading, n.lease.rev, n.lease.term = true, rev, rev
	n.lease.validUntil = start.Add(n.validity())
	n.lease.mu.Unlock()
	return true
}

// renew extends the lease; errLeaseLost when another instance holds it.
func (n *Node) renew(ctx context.Context) error {
	n.lease.mu.Lock()
	rev, term := n.lease.rev, n.lease.term
	n.lease.mu.Unlock()
	start := time.Now()
	// A slow renewal may take as long as the lease surely lasts: it still
	// extends the lease from its start.
	n.lease.mu.Lock()
	left := time.Until(n.lease.validUntil)
	n.lease.mu.Unlock()
	actx, cancel := context.WithTimeout(ctx, max(min(apiTimeout, left), 10*time.Millisecond))
	defer cancel()
	val, _ := json.Marshal(leaseValue{Node: n.cfg.Node, Term: term})
	next, err := n.kv.Update(actx, leaseKey, val, rev)
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return errLeaseLost
		}
		return err
	}
	n.lease.mu.Lock()
	n.lease.rev = next
	n.lease.validUntil = start.Add(n.validity())
	n.lease.mu.Unlock()
	return nil
}

// Holder returns the instance that holds the lease and its term, as the
// bucket's stream leader says; empty when none does. It does not use the
// bucket's direct get: any replica answers that, and a follower that has
// not yet stored the newest write would name a lease that has already
// moved.
func (n *Node) Holder(ctx context.Context) (node string, term uint64, err error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	js, err := n.js.Conn().JetStream()
	if err != nil {
		return "", 0, err
	}
	bucket := n.cfg.leaseBucket()
	m, err := js.GetLastMsg("KV_"+bucket, "$KV."+bucket+"."+leaseKey, nats.Context(ctx))
	if errors.Is(err, nats.ErrMsgNotFound) {
		return "", 0, nil
	}
	if err != nil {
		return "", 0, err
	}
	if op := m.Header.Get("KV-Operation"); op == "DEL" || op == "PURGE" {
		return "", 0, nil
	}
	var v leaseValue
	if err := json.Unmarshal(m.Data, &v); err != nil {
		return "", 0, err
	}
	if v.Term == 0 {
		v.Term = m.Sequence
	}
	return v.Node, v.Term, nil
}
