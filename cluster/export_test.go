package cluster

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"orderd/store"
)

// PutSnapshot lets the external tests upload a database file the way the
// seed command does, without a node.
var PutSnapshot = putSnapshot

// ChunkBytes is the snapshot chunk size.
const ChunkBytes = chunkBytes

// TakeSnapshotOf lets the external tests take a snapshot of a store the
// way the leader does (a page-for-page copy, its light check or with full
// its full one, the upload, the reading paced at readRate bytes a
// second), without a node.
func TakeSnapshotOf(ctx context.Context, st *store.Store, obj jetstream.ObjectStore, tmp, node string, readRate int64, full bool) (SnapshotInfo, time.Duration, error) {
	si, _, copied, err := takeSnapshot(ctx, st, obj, tmp, node, readRate, full)
	return si, copied, err
}

// UploadCopy lets the external tests upload a page-for-page copy the way
// the leader does after its copy: with the light check (store.CheckCopy).
func UploadCopy(ctx context.Context, obj jetstream.ObjectStore, path, node string) (SnapshotInfo, error) {
	si, _, err := uploadSnapshot(ctx, obj, path, node, store.CheckCopy, nil)
	return si, err
}

// WithSeedFault returns c with a fault at the seed's steps ("marked": the
// log is marked as being seeded; "uploaded": the snapshot is uploaded).
func WithSeedFault(c Config, f func(step string) error) Config {
	c.seedFault = f
	return c
}

// WithCheckEvery returns c comparing the log with what it applied every d.
func WithCheckEvery(c Config, d time.Duration) Config {
	c.checkEvery = d
	return c
}

// CheckLog does once, now, what the node does every few seconds: compares
// the log with what it applied, reports as a member, compares digests.
func (n *Node) CheckLog(ctx context.Context) { n.tick(ctx) }

// VersionAtLeast is versionAtLeast.
var VersionAtLeast = versionAtLeast

// VersionHint is versionHint.
func (n *Node) VersionHint(ctx context.Context, err error) string { return n.versionHint(ctx, err) }

// WithoutOwnSnapshots returns c with a leader that writes no snapshot of
// its own within the test's time (only the ones the test takes).
func WithoutOwnSnapshots(c Config) Config {
	c.firstSnapshotAfter = time.Hour
	return c
}
