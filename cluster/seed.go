package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

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
	if err := checkServerVersion(nc); err != nil {
		return SeedResult{}, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return SeedResult{}, fmt.Errorf("cluster: %w", err)
	}
	n := &Node{cfg: cfg, nc: nc, js: js, store: st}
	id := newLogID()
	// A log stream created here is marked as a seed from its first
	// moment: no instance follows it before the last step below.
	if err := n.provision(ctx, map[string]string{seedKey: id}); err != nil {
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
	if prev := info.Config.Metadata[seedKey]; prev != "" && streamLogID(info.Config) == "" {
		// A seed that did not finish: no instance follows its log, so
		// what it put in the snapshot store is no instance's base. It
		// starts again from the beginning.
		removed, err := purgeSnapshots(ctx, n.obj)
		if err != nil {
			return SeedResult{}, fmt.Errorf("cluster: snapshot store %s: remove the unfinished seed's snapshot: %w", cfg.snapshotBucket(), err)
		}
		cfg.Logger.Warn("restarting a seed that did not finish", "unfinished_log", prev, "removed_objects", removed)
	} else if si, ok, err := n.LatestSnapshot(ctx); err != nil {
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
	removeSeedFiles(st.Path())
	// The log is marked as a seed in progress, without an id: an empty
	// log an instance created earlier becomes the new log, and every
	// instance refuses it until the seed finishes.
	if err := updateMetadata(ctx, js, info.Config, map[string]string{seedKey: id}, logIDKey, baseKey); err != nil {
		return SeedResult{}, fmt.Errorf("cluster: %w", err)
	}
	if err := cfg.fault("marked"); err != nil {
		return SeedResult{}, err
	}
	orders, err := st.StartLog(ctx, id)
	if err != nil {
		return SeedResult{}, err
	}
	// A page-for-page copy, as the leader's snapshots take: the first of
	// them then finds most of its chunks in the store already.
	tmp := st.Path() + seedFileInfix + nuid.Next()
	defer removeDB(tmp)
	if err := st.Copy(ctx, tmp); err != nil {
		return SeedResult{}, err
	}
	si, err := putSnapshot(ctx, n.obj, tmp, cfg.Node)
	if err != nil {
		return SeedResult{}, err
	}
	removeDB(tmp)
	if err := cfg.fault("uploaded"); err != nil {
		return SeedResult{}, err
	}
	base, err := readBack(ctx, n.obj, st.Path(), id)
	if err != nil {
		return SeedResult{}, fmt.Errorf("cluster: the seed's snapshot, read back from %s: %w", cfg.snapshotBucket(), err)
	}
	base.Orders = orders
	if err := finishSeed(ctx, n, id, base); err != nil {
		return SeedResult{}, err
	}
	cfg.Logger.Info("log seeded", "log", id, "orders", orders, "snapshot_bytes", si.Bytes)
	return SeedResult{Log: id, Orders: orders, Snapshot: si}, nil
}

// seedFileInfix names a seed's temporary files: the database's path,
// this, and a unique suffix.
const seedFileInfix = ".seed-"

// removeSeedFiles removes the temporary files of seeds of the database
// at path that were killed before they could.
func removeSeedFiles(path string) {
	old, _ := filepath.Glob(path + seedFileInfix + "*")
	for _, f := range old {
		os.Remove(f)
	}
}

// removeDB removes a database file with its -wal and -shm files.
func removeDB(path string) {
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(path + suffix)
	}
}

// readBack fetches the newest snapshot into a temporary file beside
// dbPath, as an instance on an empty disk would, checks it (every pack,
// chunk and the whole file against the manifest, then the database) and
// that it is the start of log id, and returns the base it is.
func readBack(ctx context.Context, obj jetstream.ObjectStore, dbPath, id string) (baseInfo, error) {
	tmp := dbPath + seedFileInfix + "check-" + nuid.Next()
	defer removeDB(tmp)
	if err := fetchChunked(ctx, obj, tmp); err != nil {
		return baseInfo{}, err
	}
	seq, err := store.CheckBackup(ctx, tmp)
	if err != nil {
		return baseInfo{}, err
	}
	if seq != 0 {
		return baseInfo{}, fmt.Errorf("it holds applied sequence %d, not 0", seq)
	}
	if got, err := store.ReadLogID(ctx, tmp); err != nil {
		return baseInfo{}, err
	} else if got != id {
		return baseInfo{}, fmt.Errorf("it follows log %s, not %s", orNone(got), id)
	}
	_, m, err := readLatest(ctx, obj)
	if err != nil {
		return baseInfo{}, err
	}
	if m == nil {
		return baseInfo{}, errors.New("its manifest cannot be read")
	}
	return baseInfo{Seq: 0, SHA256: m.SHA256, Bytes: m.Bytes}, nil
}

// finishSeed is the seed's last step: the log's id and its base appear
// together, in one update of the stream, provided the stream is still
// this seed's and still empty.
func finishSeed(ctx context.Context, n *Node, id string, base baseInfo) error {
	info, err := n.streamInfo(ctx)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	if got := info.Config.Metadata[seedKey]; got != id || info.State.LastSeq > 0 {
		return fmt.Errorf("cluster: the log stream %s changed while it was seeded (seed %s, entries up to %d): another seed ran; run orderd cluster seed again",
			n.cfg.LogStream, orNone(got), info.State.LastSeq)
	}
	b, err := json.Marshal(base)
	if err != nil {
		return err
	}
	if err := updateMetadata(ctx, n.js, info.Config, map[string]string{logIDKey: id, baseKey: string(b), logVersionKey: strconv.Itoa(store.NewestLogVersion), logVersionReleaseKey: n.release()}, seedKey); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	return nil
}

// purgeSnapshots removes every object of the snapshot store.
func purgeSnapshots(ctx context.Context, obj jetstream.ObjectStore) (int, error) {
	lctx, cancel := context.WithTimeout(ctx, apiTimeout)
	infos, err := obj.List(lctx)
	cancel()
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	for _, oi := range infos {
		dctx, cancel := context.WithTimeout(ctx, apiTimeout)
		err := obj.Delete(dctx, oi.Name)
		cancel()
		if err != nil && !isNotFound(err) {
			return 0, fmt.Errorf("delete %s: %w", oi.Name, err)
		}
	}
	return len(infos), nil
}

func orNone(id string) string {
	if id == "" {
		return "(no id)"
	}
	return id
}

// fault is the tests' seed fault at step, if any.
func (c *Config) fault(step string) error {
	if c.seedFault == nil {
		return nil
	}
	return c.seedFault(step)
}
