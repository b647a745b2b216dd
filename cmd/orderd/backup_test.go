package main

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"orderd/store"
)

// restoreSetup returns a config whose store.path is a migrated, empty
// database in a directory of its own, and a backup (orderd backup's
// output) holding reportStore's two orders.
func restoreSetup(t *testing.T) (cfg, live, backup string) {
	t.Helper()
	st, _ := reportStore(t)
	backup = filepath.Join(t.TempDir(), "backup.db")
	if err := st.Backup(t.Context(), backup); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	live = filepath.Join(dir, "orderd.db")
	if _, err := store.Migrate(t.Context(), live); err != nil {
		t.Fatal(err)
	}
	cfg = writeFile(t, dir, "config.yaml", withLines("store:\n  path: "+live, "log:\n  level: warn"))
	return cfg, live, backup
}

// orderCount opens the database at path read-only, as SQLite sees it (with
// its WAL), and counts its orders; -1 if it cannot be read.
func orderCount(t *testing.T, path string) int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM orders").Scan(&n); err != nil {
		return -1
	}
	return n
}

// TestRestore_run: a backup replaces the database, and the replaced one is
// kept.
func TestRestore_run(t *testing.T) {
	cfg, live, backup := restoreSetup(t)
	r := runOrderd(t, nil, nil, "restore", "-config", cfg, "-i", backup)
	if r.code != 0 || !strings.Contains(r.stdout, "restored "+live+" from "+backup) {
		t.Fatalf("restore: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if n := orderCount(t, live); n != 2 {
		t.Errorf("restored database holds %d orders, want the backup's 2", n)
	}
	if n := orderCount(t, live+".before-restore"); n != 0 {
		t.Errorf("kept database holds %d orders, want the replaced one's 0", n)
	}
	// Nothing of the restore is left behind: no copy, no -wal of a check.
	entries, err := os.ReadDir(filepath.Dir(live))
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range entries {
		if strings.Contains(de.Name(), "restoring") {
			t.Errorf("store directory holds %s after the restore", de.Name())
		}
	}
}

// TestRestore_keepsOwnerAndMode: the restored database takes the mode and
// the owner of the one it replaces, so that the service, running as its
// own user, can open what root restored.
func TestRestore_keepsOwnerAndMode(t *testing.T) {
	cfg, live, backup := restoreSetup(t)
	if err := os.Chmod(live, 0o640); err != nil {
		t.Fatal(err)
	}
	root := os.Geteuid() == 0
	const uid, gid = 4242, 4343
	if root {
		if err := os.Chown(live, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	r := runOrderd(t, nil, nil, "restore", "-config", cfg, "-i", backup)
	if r.code != 0 {
		t.Fatalf("restore: exit %d, stderr %q", r.code, r.stderr)
	}
	fi, err := os.Stat(live)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o640 {
		t.Errorf("restored database mode %v, want the replaced one's 0640", fi.Mode().Perm())
	}
	if st := fi.Sys().(*syscall.Stat_t); root && (st.Uid != uid || st.Gid != gid) {
		t.Errorf("restored database owned by %d:%d, want the replaced one's %d:%d", st.Uid, st.Gid, uid, gid)
	}
}

// TestRestore_notRegularFile: -i naming a FIFO, a directory or a device is
// refused at once, naming -i, instead of blocking in SQLite's open until
// someone writes to the FIFO.
func TestRestore_notRegularFile(t *testing.T) {
	cfg, live, _ := restoreSetup(t)
	fifo := filepath.Join(t.TempDir(), "backup.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, path, kind string }{
		{"fifo", fifo, "a named pipe"},
		{"directory", t.TempDir(), "a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan result, 1)
			go func() { done <- runOrderd(t, nil, nil, "restore", "-config", cfg, "-i", tc.path) }()
			var r result
			select {
			case r = <-done:
			case <-time.After(10 * time.Second):
				// Unblock the open so the goroutine ends with the test.
				if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					w.Close()
				}
				t.Fatalf("restore -i %s still blocked after 10 s", tc.name)
			}
			if r.code != 2 || !strings.Contains(r.stderr, "-i "+tc.path) || !strings.Contains(r.stderr, tc.kind) {
				t.Errorf("exit %d, stderr %q; want 2 naming -i and %s", r.code, r.stderr, tc.kind)
			}
			if n := orderCount(t, live); n != 0 {
				t.Errorf("database holds %d orders after a refused restore, want 0", n)
			}
		})
	}
}

// TestRestore_swappedAfterCheck: a file put in place of -i once it has
// been checked never reaches store.path; what was checked does.
func TestRestore_swappedAfterCheck(t *testing.T) {
	cfg, live, backup := restoreSetup(t)
	hooks := restoreHooks{checked: func() {
		junk := writeFile(t, filepath.Dir(backup), "junk", "not a database")
		if err := os.Rename(junk, backup); err != nil {
			t.Error(err)
		}
	}}
	r := runWith(t, []command{restoreCommandWith(hooks)}, nil, nil, "restore", "-config", cfg, "-i", backup)
	if r.code != 0 {
		t.Fatalf("restore: exit %d, stderr %q", r.code, r.stderr)
	}
	if n := orderCount(t, live); n != 2 {
		t.Errorf("restored database holds %d orders (-1: not a database), want the checked backup's 2", n)
	}
}

// TestRestore_refusedFiles: a database whose -wal holds committed
// transactions (one in use, or a plain copy of one) is refused rather than
// restored without them, and so is store.path itself, under any name.
func TestRestore_refusedFiles(t *testing.T) {
	cfg, live, _ := restoreSetup(t)
	inUse, _ := reportStore(t)
	link := filepath.Join(t.TempDir(), "link.db")
	if err := os.Link(live, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, in, want string }{
		{"database in use", inUse.Path(), inUse.Path() + "-wal holds committed transactions"},
		{"store.path", live, "is the database at store.path itself"},
		{"store.path by a hard link", link, "is the database at store.path itself"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runOrderd(t, nil, nil, "restore", "-config", cfg, "-i", tc.in)
			if r.code != 2 || !strings.Contains(r.stderr, "-i "+tc.in) || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 saying %q", r.code, r.stderr, tc.want)
			}
			if _, err := os.Stat(live + ".before-restore"); err == nil {
				t.Error("the database was replaced")
			}
		})
	}
}

// TestRestore_keepsReplaced: the replaced database is kept with its -wal
// (holding its last transactions), and a second restore, which would put
// another database in place of the kept one or pair it with the kept
// one's -wal, is refused until the kept files are moved away.
func TestRestore_keepsReplaced(t *testing.T) {
	cfg, live, backup := restoreSetup(t)
	withWAL(t, live)
	r := runOrderd(t, nil, nil, "restore", "-config", cfg, "-i", backup)
	if r.code != 0 {
		t.Fatalf("restore: exit %d, stderr %q", r.code, r.stderr)
	}
	if n := orderCount(t, live+".before-restore"); n != 2 {
		t.Errorf("kept database holds %d orders, want 2 (with its -wal)", n)
	}

	for _, suffix := range []string{"", "-wal", "-shm"} {
		t.Run("kept"+suffix, func(t *testing.T) {
			kept := filepath.Join(t.TempDir(), "kept")
			for _, s := range []string{"", "-wal", "-shm"} {
				if s != suffix {
					os.Rename(live+".before-restore"+s, kept+s)
				}
			}
			t.Cleanup(func() {
				for _, s := range []string{"", "-wal", "-shm"} {
					os.Rename(kept+s, live+".before-restore"+s)
				}
			})
			if _, err := os.Stat(live + ".before-restore" + suffix); err != nil {
				t.Fatal(err)
			}
			r := runOrderd(t, nil, nil, "restore", "-config", cfg, "-i", backup)
			if r.code != 2 || !strings.Contains(r.stderr, live+".before-restore"+suffix+" exists") ||
				!strings.Contains(r.stderr, "move") {
				t.Errorf("second restore: exit %d, stderr %q; want 2 naming the kept file", r.code, r.stderr)
			}
			if n := orderCount(t, live); n != 2 {
				t.Errorf("store.path holds %d orders after a refused restore, want 2", n)
			}
		})
	}
	if n := orderCount(t, live+".before-restore"); n != 2 {
		t.Errorf("kept database holds %d orders after refused restores, want 2", n)
	}
}

// withWAL replaces the database at path with one as a daemon that stopped
// without a checkpoint leaves it: reportStore's two orders are in its -wal.
func withWAL(t *testing.T, path string) {
	t.Helper()
	inUse, _ := reportStore(t)
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(inUse.Path() + suffix)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path+suffix, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	os.Remove(path + "-shm")
	if n := orderCount(t, path); n != 2 {
		t.Fatalf("set-up: %s holds %d orders, want 2", path, n)
	}
}

// TestRestore_rollback: a restore that fails partway puts back what it had
// moved, so store.path holds its database, with its -wal, as before.
func TestRestore_rollback(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func(newpath, live string) bool
	}{
		{"moving the -wal away", func(newpath, live string) bool { return newpath == live+".before-restore-wal" }},
		{"putting the backup in place", func(newpath, live string) bool { return newpath == live }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, live, backup := restoreSetup(t)
			withWAL(t, live)
			hooks := restoreHooks{rename: func(oldpath, newpath string) error {
				if tc.fail(newpath, live) && !strings.Contains(oldpath, ".before-restore") {
					return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: syscall.EIO}
				}
				return os.Rename(oldpath, newpath)
			}}
			r := runWith(t, []command{restoreCommandWith(hooks)}, nil, nil, "restore", "-config", cfg, "-i", backup)
			if r.code != 1 || !strings.Contains(r.stderr, "input/output error") || !strings.Contains(r.stderr, "as it was") {
				t.Errorf("exit %d, stderr %q; want 1 with the error, saying store.path is as it was", r.code, r.stderr)
			}
			if n := orderCount(t, live); n != 2 {
				t.Errorf("store.path holds %d orders, want its own 2 (with its -wal)", n)
			}
			for _, suffix := range dbSuffixes {
				if _, err := os.Stat(live + ".before-restore" + suffix); err == nil {
					t.Errorf(".before-restore%s left behind", suffix)
				}
			}
		})
	}
}

// TestRestore_syncsDirectory: the renames become durable before restore
// reports success, by a sync of the store's directory after the last
// rename; a sync that fails is an error that says the backup is in place.
func TestRestore_syncsDirectory(t *testing.T) {
	for _, tc := range []struct {
		name    string
		syncErr error
	}{{"synced", nil}, {"sync fails", syscall.EIO}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, live, backup := restoreSetup(t)
			var steps []string
			hooks := restoreHooks{
				rename: func(oldpath, newpath string) error {
					steps = append(steps, "rename to "+filepath.Base(newpath))
					return os.Rename(oldpath, newpath)
				},
				syncDir: func(dir string) error {
					steps = append(steps, "sync "+dir)
					if tc.syncErr != nil {
						return tc.syncErr
					}
					return syncDir(dir)
				},
			}
			r := runWith(t, []command{restoreCommandWith(hooks)}, nil, nil, "restore", "-config", cfg, "-i", backup)
			if len(steps) < 2 || steps[len(steps)-2] != "rename to orderd.db" || steps[len(steps)-1] != "sync "+filepath.Dir(live) {
				t.Errorf("steps %q, want the backup renamed into place, then the directory synced", steps)
			}
			if tc.syncErr == nil {
				if r.code != 0 {
					t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
				}
				return
			}
			if r.code != 1 || !strings.Contains(r.stderr, "the backup is in place") || !strings.Contains(r.stderr, "input/output error") {
				t.Errorf("exit %d, stderr %q; want 1, saying the backup is in place and why the sync failed", r.code, r.stderr)
			}
			if n := orderCount(t, live); n != 2 {
				t.Errorf("store.path holds %d orders, want the backup's 2", n)
			}
		})
	}
}
