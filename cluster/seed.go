package cluster

import (
	"context"
	"fmt"
	"os"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"orderd/store"
)

// SeedResult is what Seed did.
type SeedResult struct {
	// Log is the new log's id.
	Log string
	// Orders is the number of orders the database holds.
	Orders int64
	// Snapshot is the first snapshot: the database at log sequence 0.
	Snapshot SnapshotInfo
}

// Seed starts a new log from the database of st, which no daemon may have
// open: a single-node database moving to replicated mode, or a replicated
// instance's database after its log was lost. It creates the log's assets
// when they are missing (or checks their settings, *SettingError), refuses
// a log that holds an entry, a snapshot or a lease (ErrLogNotEmpty), gives
// the log a new id, records it in the database with applied sequence 0,
// and writes the database as the first snapshot.
//
// Every record comes along as it is, the outbox's cursor too: the leader's
// relay goes on after the last event the database knows published, so
// nothing published before is published again. Instances on empty disks
// restore the snapshot; the database itself carries on in place.
func Seed(ctx context.Context, nc *nats.Conn, st *store.Store, cfg Config) (SeedResult, error) {
	if err := cfg.setDefaults(); err != nil {
		return SeedResult{}, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return SeedResult{}, fmt.Errorf("cluster: %w", err)
	}
	n := &Node{cfg: cfg, nc: nc, js: js, store: st}
	id := newLogID()
	if err := n.provision(ctx, id); err != nil {
		return SeedResult{}, err
	}
	if err := n.checkSettings(ctx); err != nil {
		return SeedResult{}, err
	}
	info, err := n.streamInfo(ctx)
	if err != nil {
		return SeedResult{}, fmt.Errorf("cluster: %w", err)
	}
	if last := info.State.LastSeq; last > 0 {
		return SeedResult{}, fmt.Errorf("%w: the log stream %s holds entries (up to sequence %d) of log %s; a log is seeded only before its first entry: "+
			"when that log is lost for good, stop every instance and delete the stream, the lease bucket %s and the snapshot store %s first (docs/replicated-mode.md, When the log is lost)",
			ErrLogNotEmpty, cfg.LogStream, last, orNone(streamLogID(info.Config)), cfg.leaseBucket(), cfg.snapshotBucket())
	}
	if si, ok, err := n.LatestSnapshot(ctx); err != nil {
		return SeedResult{}, fmt.Errorf("cluster: snapshot store %s: %w", cfg.snapshotBucket(), err)
	} else if ok {
		return SeedResult{}, fmt.Errorf("%w: the snapshot store %s holds a snapshot (sequence %d, taken %s by %s): instances restore it; "+
			"delete the snapshot store first if the log it belongs to is lost for good (docs/replicated-mode.md, When the log is lost)",
			ErrLogNotEmpty, cfg.snapshotBucket(), si.Seq, si.TakenAt.Format("2006-01-02T15:04:05Z07:00"), si.Node)
	}
	if holder, _, err := n.Holder(ctx); err != nil {
		return SeedResult{}, fmt.Errorf("cluster: lease bucket %s: %w", cfg.leaseBucket(), err)
	} else if holder != "" {
		return SeedResult{}, fmt.Errorf("%w: instance %s holds the lease in %s: it runs on this log; stop every instance before seeding",
			ErrLogNotEmpty, holder, cfg.leaseBucket())
	}
	if streamLogID(info.Config) != id {
		// An empty log created earlier (by an instance, or a seed that
		// did not finish) becomes the new log.
		actx, cancel := context.WithTimeout(ctx, apiTimeout)
		err := setLogID(actx, js, info.Config, id)
		cancel()
		if err != nil {
			return SeedResult{}, fmt.Errorf("cluster: %w", err)
		}
	}
	orders, err := st.StartLog(ctx, id)
	if err != nil {
		return SeedResult{}, err
	}
	// A page-for-page copy, as the leader's snapshots take: the first of
	// them then finds most of its chunks in the store already.
	tmp := st.Path() + ".seed-" + nuid.Next()
	defer os.Remove(tmp)
	if err := st.Copy(ctx, tmp); err != nil {
		return SeedResult{}, err
	}
	si, err := putSnapshot(ctx, n.obj, tmp, cfg.Node)
	if err != nil {
		return SeedResult{}, err
	}
	cfg.Logger.Info("log seeded", "log", id, "orders", orders, "snapshot_bytes", si.Bytes)
	return SeedResult{Log: id, Orders: orders, Snapshot: si}, nil
}

func orNone(id string) string {
	if id == "" {
		return "(no id)"
	}
	return id
}
