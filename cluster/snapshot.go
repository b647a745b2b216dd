package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"orderd/store"
)

// snapshotName is the object holding the newest snapshot.
const snapshotName = "orderd.db"

// Snapshot object headers.
const (
	headerSeq     = "Orderd-Seq"
	headerTakenAt = "Orderd-Taken-At"
)

// SnapshotInfo describes a snapshot in the snapshot store.
type SnapshotInfo struct {
	// Seq is the last log sequence the snapshot's database applied.
	Seq     uint64    `json:"seq"`
	TakenAt time.Time `json:"takenAt"`
	Node    string    `json:"node,omitempty"`
	Bytes   uint64    `json:"bytes,omitempty"`
}

func snapshotInfo(oi *jetstream.ObjectInfo) SnapshotInfo {
	si := SnapshotInfo{Bytes: oi.Size, Node: oi.Headers.Get(headerNode)}
	si.Seq, _ = strconv.ParseUint(oi.Headers.Get(headerSeq), 10, 64)
	si.TakenAt, _ = time.Parse(time.RFC3339Nano, oi.Headers.Get(headerTakenAt))
	return si
}

// LatestSnapshot returns the newest snapshot's description; ok is false
// when there is none.
func (n *Node) LatestSnapshot(ctx context.Context) (si SnapshotInfo, ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	oi, err := n.obj.GetInfo(ctx, snapshotName)
	if isNotFound(err) {
		return SnapshotInfo{}, false, nil
	}
	if err != nil {
		return SnapshotInfo{}, false, err
	}
	return snapshotInfo(oi), true, nil
}

// TakeSnapshot writes a consistent copy of this node's database (VACUUM
// INTO) to the snapshot store, replacing the previous one.
func (n *Node) TakeSnapshot(ctx context.Context) (SnapshotInfo, error) {
	tmp := n.store.Path() + ".snapshot-" + nuid.Next()
	defer os.Remove(tmp)
	if err := n.store.Backup(ctx, tmp); err != nil {
		return SnapshotInfo{}, err
	}
	start := time.Now()
	si, err := putSnapshot(ctx, n.obj, tmp, n.cfg.Node)
	if err != nil {
		return SnapshotInfo{}, err
	}
	n.m.snapshotSeq.Set(float64(si.Seq))
	n.cfg.Logger.Info("snapshot written", "seq", si.Seq, "bytes", si.Bytes, "took", time.Since(start).Round(time.Millisecond))
	return si, nil
}

// putSnapshot uploads the consistent database file at dbPath (a backup
// nobody writes to) as the newest snapshot, taken by node; its log
// sequence is read from the file, which is checked first.
func putSnapshot(ctx context.Context, obj jetstream.ObjectStore, dbPath, node string) (SnapshotInfo, error) {
	seq, err := store.CheckBackup(ctx, dbPath)
	if err != nil {
		return SnapshotInfo{}, err
	}
	f, err := os.Open(dbPath)
	if err != nil {
		return SnapshotInfo{}, err
	}
	defer f.Close()
	taken := time.Now().UTC()
	meta := jetstream.ObjectMeta{Name: snapshotName, Description: "orderd database snapshot",
		Headers: nats.Header{
			headerSeq:     {strconv.FormatUint(seq, 10)},
			headerTakenAt: {taken.Format(time.RFC3339Nano)},
			headerNode:    {node},
		}}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	oi, err := obj.Put(pctx, meta, f)
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("put snapshot: %w", err)
	}
	return snapshotInfo(oi), nil
}

// snapshotLoop takes a snapshot every SnapshotEvery while this node leads
// (and one soon after it starts leading when the newest is older than
// that).
func (n *Node) snapshotLoop(ctx context.Context) {
	next := n.cfg.SnapshotEvery
	if si, ok, err := n.LatestSnapshot(ctx); err == nil && ok {
		next = max(time.Until(si.TakenAt.Add(n.cfg.SnapshotEvery)), 10*time.Second)
	} else if err == nil {
		next = 10 * time.Second
	}
	t := time.NewTimer(next)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n.Leading() {
			if _, err := n.TakeSnapshot(ctx); err != nil && ctx.Err() == nil {
				n.m.snapshotErrors.Inc()
				n.cfg.Logger.Error("snapshot failed", "err", err)
			}
		}
		t.Reset(n.cfg.SnapshotEvery)
	}
}

// RestoreSnapshot prepares the database file at path for a node that
// starts on an empty disk: when path does not exist and the snapshot store
// holds a snapshot, it downloads it (checked) to path. It reports what it
// restored; ok is false when path exists or there is no snapshot (the
// node then applies the log from its start).
func RestoreSnapshot(ctx context.Context, nc *nats.Conn, cfg Config, path string) (si SnapshotInfo, ok bool, err error) {
	if err := cfg.setDefaults(); err != nil {
		return SnapshotInfo{}, false, err
	}
	if _, err := os.Stat(path); err == nil || !errors.Is(err, os.ErrNotExist) {
		return SnapshotInfo{}, false, nil
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return SnapshotInfo{}, false, err
	}
	obj, err := ensure(ctx, func(ctx context.Context) (jetstream.ObjectStore, error) {
		o, err := js.ObjectStore(ctx, cfg.snapshotBucket())
		if isNotFound(err) {
			return nil, nil
		}
		return o, err
	}, func(ctx context.Context) (jetstream.ObjectStore, error) { return nil, nil })
	if err != nil || obj == nil {
		return SnapshotInfo{}, false, err
	}
	var oi *jetstream.ObjectInfo
	for deadline := time.Now().Add(time.Minute); ; {
		gctx, cancel := context.WithTimeout(ctx, apiTimeout)
		oi, err = obj.GetInfo(gctx, snapshotName)
		cancel()
		if isNotFound(err) {
			return SnapshotInfo{}, false, nil
		}
		if err == nil {
			break
		}
		// A cluster just started (or without a quorum yet) answers
		// nothing for a while.
		if time.Now().After(deadline) || ctx.Err() != nil {
			return SnapshotInfo{}, false, fmt.Errorf("snapshot store: %w", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	tmp := path + ".restore"
	os.Remove(tmp)
	defer os.Remove(tmp)
	dctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if err := obj.GetFile(dctx, snapshotName, tmp); err != nil {
		return SnapshotInfo{}, false, fmt.Errorf("download snapshot: %w", err)
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return SnapshotInfo{}, false, err
	}
	seq, err := store.CheckBackup(ctx, tmp)
	if err != nil {
		return SnapshotInfo{}, false, fmt.Errorf("downloaded snapshot: %w", err)
	}
	si = snapshotInfo(oi)
	if seq != si.Seq {
		return SnapshotInfo{}, false, fmt.Errorf("downloaded snapshot holds seq %d, its header says %d", seq, si.Seq)
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		os.Remove(path + suffix)
	}
	if err := os.Rename(tmp, path); err != nil {
		return SnapshotInfo{}, false, err
	}
	return si, true, nil
}
