package store_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"orderd/store"
)

// TestRemoveTempFiles: the temporary files of killed snapshots, seeds and
// restores go, with the -wal and -shm SQLite kept beside them; the
// database's own files, what a restore keeps on purpose, another
// database's temporary files and anything else stay.
func TestRemoveTempFiles(t *testing.T) {
	dir := t.TempDir()
	temp := []string{
		"orderd.db.snapshot-4KxZ", "orderd.db.snapshot-4KxZ-wal", "orderd.db.snapshot-4KxZ-shm",
		"orderd.db.seed-Yq2R", "orderd.db.seed-check-Yq2S-shm",
		"orderd.db.restore", "orderd.db.restore-wal", "orderd.db.restore-shm",
		".orderd.db.restoring-81723", ".orderd.db.restoring-81723-wal",
	}
	kept := []string{
		"orderd.db", "orderd.db-wal", "orderd.db-shm", "orderd.db.lock", "orderd.db.use.lock",
		"orderd.db.before-restore", "orderd.db.before-restore-wal", "orderd.db.restored",
		"other.db.snapshot-4KxZ", "config.yaml",
	}
	for _, name := range append(slices.Clone(temp), kept...) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := store.RemoveTempFiles(filepath.Join(dir, "orderd.db"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	slices.Sort(temp)
	if !slices.Equal(removed, temp) {
		t.Errorf("removed %v, want %v", removed, temp)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range ents {
		left = append(left, e.Name())
	}
	slices.Sort(kept)
	if !slices.Equal(left, kept) {
		t.Errorf("the folder holds %v, want %v", left, kept)
	}
}
