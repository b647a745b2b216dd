package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"orderd/api"
	"orderd/cluster"
	"orderd/provider"
	"orderd/publish"
	"orderd/store"
)

// clusterConfig is the cluster package's view of cluster.*.
func (d *daemon) clusterConfig() cluster.Config {
	c := d.cfg.Cluster
	return cluster.Config{
		Node:             c.NodeName(),
		Release:          releaseName(),
		LogStream:        c.LogStream,
		Replicas:         c.Replicas,
		LeaseTTL:         c.LeaseTTL,
		SnapshotEvery:    c.SnapshotEvery,
		LogMaxAge:        c.LogMaxAge,
		SnapshotReadRate: int64(c.SnapshotReadRate),
		DigestEvery:      uint64(c.DigestEvery),
		Logger:           d.log.With("component", "cluster"),
		Registerer:       d.registry,
	}
}

// restoreSnapshot gives an instance with no database the newest snapshot.
func (d *daemon) restoreSnapshot(ctx context.Context) error {
	// Into the file store.path leads to: renamed onto a symbolic link, the
	// snapshot would replace the link rather than fill in its database.
	path, err := store.ResolvePath(d.cfg.Store.Path)
	if err != nil {
		return d.cfg.errorf("store.path", "%v", err)
	}
	si, ok, err := cluster.RestoreSnapshot(ctx, d.nc, d.clusterConfig(), path)
	if err != nil {
		return clusterError(d.cfg, fmt.Errorf("restore the newest snapshot into %s: %w", d.cfg.Store.Path, err))
	}
	if ok {
		d.log.Info("database restored from the newest snapshot; applying the log after it",
			"component", "cluster", "seq", si.Seq, "taken_at", si.TakenAt, "by", si.Node)
	}
	return nil
}

// joinCluster makes the store replicated: every write goes through the
// log. It waits (a bounded time) until the database has applied the log
// as it stands, so reads are current when the listeners open.
func (d *daemon) joinCluster(ctx context.Context) error {
	cc := d.clusterConfig()
	if mp := d.nc.MaxPayload(); mp > 0 {
		// A webhook of max_body_bytes must fit in one log entry.
		cc.MaxEntryBytes = int(mp) - 64<<10
		if need := d.cfg.Receiver.MaxBodyBytes + 64<<10; int64(cc.MaxEntryBytes) < int64(need) {
			return d.cfg.errorf("receiver.max_body_bytes", "%s does not fit in one log entry: the NATS servers' max_payload is %d bytes (raise max_payload to at least %d, or lower receiver.max_body_bytes)",
				d.cfg.Receiver.MaxBodyBytes, mp, need+64<<10)
		}
	}
	if err := d.checkEventStream(ctx); err != nil {
		return err
	}
	node, err := cluster.New(ctx, d.nc, d.store, cc)
	if err != nil {
		return clusterError(d.cfg, fmt.Errorf("cluster: %w", err))
	}
	d.node = node
	d.store.Replicate(node)
	return nil
}

// checkEventStream refuses to start when the events stream exists with
// other settings than this instance's: the instance that created it
// configured it, and no instance changes it (exit 2 naming the key). A
// stream that cannot be read now is checked again by nobody but is never
// updated either: the relay uses an existing stream as it is.
func (d *daemon) checkEventStream(ctx context.Context) error {
	js, err := jetstream.New(d.nc)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err = publish.CheckStream(cctx, js, *d.eventStream())
	var se *publish.SettingError
	switch {
	case errors.As(err, &se):
		key := "nats." + se.Setting
		if se.Setting == "replicas" && d.cfg.NATS.Replicas == 0 {
			key = "nats.replicas" // unset: cluster.replicas gave the value
			se.Have += " (nats.replicas is unset, so cluster.replicas)"
		}
		return d.cfg.errorf(key, "%s but the events stream %s has %s: shared assets keep the settings they were created with; "+
			"give this instance the stream's value, or change the stream deliberately first (nats stream edit; docs/replicated-mode.md, Changing a shared setting)",
			se.Have, se.Stream, se.StreamValue)
	case err != nil:
		d.log.Warn("could not compare the events stream's settings with this instance's; it is used as it is, never updated",
			"component", "publish", "err", err)
	}
	return nil
}

// catchUp waits until this instance has applied the log as it stood, for
// a bounded time; a node still behind keeps applying in the background.
func (d *daemon) catchUp(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := d.node.CatchUp(cctx); err != nil {
		d.log.Warn("still applying the log; reads may be behind for a while", "component", "cluster",
			"applied", d.node.AppliedSeq(), "err", err)
	}
}

// lead runs the leader's duties until ctx ends (the lease is lost or
// orderd stops): the relay, from where the events stream's marks in the
// log end (an overlap is dropped by the stream's duplicate window), and
// the scheduled jobs.
func (d *daemon) lead(ctx context.Context) {
	log := d.log.With("component", "cluster")
	relDone := make(chan error, 1)
	go func() { relDone <- d.relay.Run(ctx) }()
	if err := d.rec.Start(ctx); err != nil {
		log.Error("reconcile schedules", "err", err)
	}
	var relErr error
	select {
	case <-ctx.Done():
		relErr = <-relDone
	case relErr = <-relDone:
		<-ctx.Done()
	}
	if relErr != nil && !errors.Is(relErr, publish.ErrNotLeading) {
		log.Error("relay stopped", "err", relErr)
	}
	sctx, cancel := context.WithTimeout(context.Background(), d.cfg.ShutdownTimeout)
	defer cancel()
	if err := d.rec.Stop(sctx); err != nil {
		log.Warn("stop reconcile jobs", "err", err)
	}
}

// leaderLimiter paces the jobs' provider calls like the shared limiter,
// and refuses them on an instance that does not lead: a deposed leader
// (paused past its lease, say) makes no call, so two leaders cannot
// double the provider rate.
type leaderLimiter struct {
	inner   provider.Limiter
	leading func() bool
}

func (l leaderLimiter) Wait(ctx context.Context) error {
	if !l.leading() {
		return errNotLeading
	}
	if err := l.inner.Wait(ctx); err != nil {
		return err
	}
	if !l.leading() {
		return errNotLeading
	}
	return nil
}

// leaseTransport sends the jobs' provider requests only under the lease:
// it checks the lease right before a request goes to the transport, and
// cancels a request that is not written by the time the lease may have
// ended elsewhere. The limiter's check comes earlier, before the request
// is built; a leader paused between the two (SIGSTOP, a long GC, a VM
// stall) would otherwise send the call after its lease ended, beside the
// new leader's. What remains is the moment between the last check and
// the bytes leaving: the provider has no fencing token to close it.
type leaseTransport struct {
	next  http.RoundTripper
	until func() (time.Time, bool)
}

func (t leaseTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	until, ok := t.until()
	if !ok {
		return nil, errNotLeading
	}
	ctx, cancel := context.WithCancel(req.Context())
	// Once the request is written, the answer may take as long as the
	// provider's timeout allows: only the sending needs the lease.
	expire := time.AfterFunc(time.Until(until), cancel)
	trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { expire.Stop() }}
	resp, err := t.next.RoundTrip(req.WithContext(httptrace.WithClientTrace(ctx, trace)))
	if err != nil {
		expire.Stop()
		cancel()
		if _, still := t.until(); !still && req.Context().Err() == nil {
			return nil, fmt.Errorf("%w: %w", errNotLeading, err)
		}
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelOnClose ends a request's context when its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

var errNotLeading = errors.New("this instance does not hold the lease; the leader makes the reconciler's provider calls")

// clusterAPI is api.Cluster over the node; nil in single-node mode.
func (d *daemon) clusterAPI() api.Cluster {
	if d.node == nil {
		return nil
	}
	return clusterAPI{d.node}
}

type clusterAPI struct{ n *cluster.Node }

func (c clusterAPI) Status(ctx context.Context) any { return c.n.Status(ctx) }

func (c clusterAPI) Snapshot(ctx context.Context) (any, error) {
	if !c.n.Leading() {
		return nil, api.ErrNotLeader
	}
	return c.n.TakeSnapshot(ctx)
}
