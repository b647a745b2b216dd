package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// folderFiles lists the names in dir.
func folderFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// newFiles lists what dir holds beyond before and the database's own
// files: orderd.db, its -wal and -shm, and its locks.
func newFiles(t *testing.T, dir string, before []string) []string {
	t.Helper()
	own := []string{"orderd.db", "orderd.db-wal", "orderd.db-shm", "orderd.db.lock", "orderd.db.use.lock"}
	var extra []string
	for _, name := range folderFiles(t, dir) {
		if !slices.Contains(before, name) && !slices.Contains(own, name) {
			extra = append(extra, name)
		}
	}
	return extra
}

// leaveKilled writes, beside the database at path, the files that a
// snapshot, a seed and both kinds of restore leave when they are killed:
// copies of the database with the -wal and -shm SQLite kept beside them.
func leaveKilled(t *testing.T, path string) []string {
	t.Helper()
	db, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dir, base := filepath.Split(path)
	var names []string
	for _, name := range []string{base + ".snapshot-4KxZ", base + ".seed-Yq2R", base + ".seed-check-Yq2S", base + ".restore", "." + base + ".restoring-81723"} {
		for _, suffix := range dbSuffixes {
			if err := os.WriteFile(filepath.Join(dir, name+suffix), db, 0o600); err != nil {
				t.Fatal(err)
			}
			names = append(names, name+suffix)
		}
	}
	return names
}

// TestBackup_leavesNoFiles: a backup, and one that fails, leave nothing
// beside the database, and nothing beside the backup but the backup.
func TestBackup_leavesNoFiles(t *testing.T) {
	cfg, live, _ := restoreSetup(t)
	dir := filepath.Dir(live)
	before := folderFiles(t, dir)
	out := t.TempDir()
	if r := runOrderd(t, nil, nil, "backup", "-config", cfg, "-o", filepath.Join(out, "b.db")); r.code != 0 {
		t.Fatalf("backup: exit %d: %s", r.code, r.stderr)
	}
	if left := newFiles(t, dir, before); len(left) > 0 {
		t.Errorf("after a backup the database's folder also holds %v", left)
	}
	if got := folderFiles(t, out); !slices.Equal(got, []string{"b.db"}) {
		t.Errorf("after a backup its folder holds %v, want only b.db", got)
	}
	if r := runOrderd(t, nil, nil, "backup", "-config", cfg, "-o", filepath.Join(out, "missing", "b.db")); r.code == 0 {
		t.Fatal("a backup into a missing folder succeeded")
	}
	if left := newFiles(t, dir, before); len(left) > 0 {
		t.Errorf("after a failed backup the database's folder also holds %v", left)
	}
}

// TestRestore_leavesNoFiles: a restore keeps the replaced database (on
// purpose, as .before-restore) and nothing else of its work; a restore
// that fails leaves nothing; and one run after a killed restore removes
// what that one left.
func TestRestore_leavesNoFiles(t *testing.T) {
	cfg, live, backup := restoreSetup(t)
	dir := filepath.Dir(live)
	before := folderFiles(t, dir)
	bad := writeFile(t, t.TempDir(), "bad.db", "not a database")
	if r := runOrderd(t, nil, nil, "restore", "-config", cfg, "-i", bad); r.code != 2 {
		t.Fatalf("restore of a bad file: exit %d: %s", r.code, r.stderr)
	}
	if left := newFiles(t, dir, before); len(left) > 0 {
		t.Errorf("after a refused restore the database's folder also holds %v", left)
	}
	leaveKilled(t, live)
	if r := runOrderd(t, nil, nil, "restore", "-config", cfg, "-i", backup); r.code != 0 {
		t.Fatalf("restore: exit %d: %s", r.code, r.stderr)
	}
	kept := []string{"orderd.db.before-restore", "orderd.db.before-restore-wal", "orderd.db.before-restore-shm"}
	if left := newFiles(t, dir, append(before, kept...)); len(left) > 0 {
		t.Errorf("after a restore following a killed one the database's folder also holds %v", left)
	}
	if n := orderCount(t, live); n != 2 {
		t.Errorf("the restored database holds %d orders, want the backup's 2", n)
	}
}

// TestMigrate_leavesNoFiles: a migrate leaves nothing beside the database,
// removes what killed operations left, and a refused one leaves nothing.
func TestMigrate_leavesNoFiles(t *testing.T) {
	cfg, live, _ := restoreSetup(t)
	dir := filepath.Dir(live)
	before := folderFiles(t, dir)
	leaveKilled(t, live)
	if r := runOrderd(t, nil, nil, "migrate", "-config", cfg); r.code != 0 {
		t.Fatalf("migrate: exit %d: %s", r.code, r.stderr)
	}
	if left := newFiles(t, dir, before); len(left) > 0 {
		t.Errorf("after a migrate the database's folder also holds %v", left)
	}
	execSQL(t, live, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (99, '0099_future.sql', 0)`)
	if r := runOrderd(t, nil, nil, "migrate", "-config", cfg); r.code != 1 {
		t.Fatalf("migrate of a newer schema: exit %d: %s", r.code, r.stderr)
	}
	if left := newFiles(t, dir, before); len(left) > 0 {
		t.Errorf("after a refused migrate the database's folder also holds %v", left)
	}
}

// TestClusterSeed_leavesNoFiles: a seed run after one that was killed
// (which left its full-size copy) removes that copy and leaves nothing of
// its own; a seed refused (the log is already seeded) still removes what
// a killed one left; and orderd run starts by removing what killed
// snapshots, seeds and restores left.
func TestClusterSeed_leavesNoFiles(t *testing.T) {
	ec, fake := natsAndFake(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "orderd.db")
	buildSingleNode(t, db, 0, 40)
	cfg := daemonConfig(t, dir, fake, natsYAML(ec.ClientURL(), ""), clusterYAML("a", ""))
	before := folderFiles(t, dir)

	leaveKilled(t, db)
	if r := runOrderd(t, nil, nil, "cluster", "seed", "-config", cfg); r.code != 0 {
		t.Fatalf("seed: exit %d: %s", r.code, r.stderr)
	}
	if left := newFiles(t, dir, before); len(left) > 0 {
		t.Fatalf("after a seed following a killed one the database's folder also holds %v", left)
	}

	leaveKilled(t, db)
	if r := runOrderd(t, nil, nil, "cluster", "seed", "-config", cfg); r.code != 2 || !strings.Contains(r.stderr, "cluster.log_stream") {
		t.Fatalf("a second seed: exit %d: %s; want 2 naming cluster.log_stream", r.code, r.stderr)
	}
	if left := newFiles(t, dir, before); len(left) > 0 {
		t.Fatalf("after a refused seed the database's folder also holds %v", left)
	}

	left := leaveKilled(t, db)
	ctx, cancel := context.WithCancel(context.Background())
	log := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"orderd", "run", "-config", cfg}, func(string) string { return "" }, nil, io.Discard, log)
	}()
	waitStarted(t, log, done)
	remaining := newFiles(t, dir, before)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if len(remaining) > 0 {
		t.Fatalf("orderd run started with %v beside the database", remaining)
	}
	if !strings.Contains(log.String(), "removed temporary files a killed operation left") || !strings.Contains(log.String(), left[0]) {
		t.Errorf("the start does not log what it removed:\n%s", log.String())
	}
	if left := newFiles(t, dir, before); len(left) > 0 {
		t.Fatalf("after orderd run stopped the database's folder also holds %v", left)
	}
}
