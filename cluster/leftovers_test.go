package cluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// dbFiles are the names a database's folder may hold for good: the
// database, its WAL and the WAL's index, and the locks of the process
// that owns it and of those that use it.
var dbFiles = []string{"orderd.db", "orderd.db-wal", "orderd.db-shm", "orderd.db.lock", "orderd.db.use.lock"}

// leftovers lists what dir holds besides the database's own files.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var extra []string
	for _, e := range ents {
		if !slices.Contains(dbFiles, e.Name()) {
			extra = append(extra, e.Name())
		}
	}
	return extra
}

// snapshotRounds is how many snapshots TestNode_TakeSnapshot_leavesNoFiles
// takes: each is checked, so a file one leaves shows at once, and twenty
// keep the test to seconds under -race.
const snapshotRounds = 20

// TestNode_TakeSnapshot_leavesNoFiles: snapshots, and one that fails
// midway, leave nothing beside the database but its own files. They are
// taken on a follower, whose folder no scheduled snapshot touches between
// two checks (the leader takes its first ten seconds after it starts).
func TestNode_TakeSnapshot_leavesNoFiles(t *testing.T) {
	nc := startNATS(t)
	a := startInstance(t, nc, "a", t.TempDir(), 3*time.Second)
	dir := t.TempDir()
	b := startInstance(t, nc, "b", dir, 3*time.Second)
	addOrders(t, a.st, 40, 4)
	waitFor(t, 30*time.Second, "b caught up", func() bool { return b.node.AppliedSeq() == a.node.AppliedSeq() })
	start := time.Now()
	for i := range snapshotRounds {
		if _, err := b.node.TakeSnapshot(t.Context()); err != nil {
			t.Fatal(err)
		}
		if left := leftovers(t, dir); len(left) > 0 {
			t.Fatalf("after snapshot %d the database's folder also holds %v", i+1, left)
		}
	}
	t.Logf("%d snapshots took %s", snapshotRounds, time.Since(start).Round(time.Millisecond))

	// Snapshots cut short: each one's context ends as soon as its copy
	// shows in the folder, at whatever step it has reached then.
	for i := range 3 {
		ctx, cancel := context.WithCancel(t.Context())
		go func() {
			defer cancel()
			for ctx.Err() == nil {
				if len(leftovers(t, dir)) > 0 {
					time.Sleep(time.Duration(i) * time.Millisecond)
					return
				}
				time.Sleep(100 * time.Microsecond)
			}
		}()
		_, err := b.node.TakeSnapshot(ctx)
		cancel()
		t.Logf("snapshot cut short after %dms: %v", i, err)
		if left := leftovers(t, dir); len(left) > 0 {
			t.Fatalf("after a snapshot cut short the database's folder also holds %v", left)
		}
	}
}

// TestRestoreSnapshot_leavesNoFiles: an instance that starts on an empty
// disk restores the newest snapshot and keeps nothing of the download
// beside its database, also when an earlier restore was killed and left
// its download behind.
func TestRestoreSnapshot_leavesNoFiles(t *testing.T) {
	nc := startNATS(t)
	a := startInstance(t, nc, "a", t.TempDir(), 3*time.Second)
	addOrders(t, a.st, 40, 4)
	if _, err := a.node.TakeSnapshot(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, killed := range []bool{false, true} {
		dir := t.TempDir()
		if killed {
			for _, name := range []string{"orderd.db.restore", "orderd.db.restore-wal", "orderd.db.restore-shm"} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte("left by a killed restore"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}
		in := startInstance(t, nc, fmt.Sprintf("r%v", killed), dir, 3*time.Second)
		if st := in.node.Status(t.Context()); st.Snapshot == nil {
			t.Fatalf("the instance on an empty disk (killed restore before: %v) restored no snapshot", killed)
		}
		if left := leftovers(t, dir); len(left) > 0 {
			t.Fatalf("after a restore (killed restore before: %v) the database's folder also holds %v", killed, left)
		}
	}
}
