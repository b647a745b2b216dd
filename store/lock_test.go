package store_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"orderd/store"
)

// TestLock_symlinks: every path that leads to one database takes the same
// lock, whether the link is on the file, on a directory above it, relative,
// chained, or leads to a database not created yet; a second Lock through
// any of them is ErrLocked until the first is released.
func TestLock_symlinks(t *testing.T) {
	dir := t.TempDir()
	realPath := filepath.Join(dir, "data", "orderd.db")
	if err := os.Mkdir(filepath.Dir(realPath), 0o700); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"alias.db":    realPath,                       // absolute link to the file
		"relative.db": "data/orderd.db",               // relative link
		"chain.db":    filepath.Join(dir, "alias.db"), // a link to a link
		"datalink":    "data",                         // a link to the directory
		"other/up.db": "../data/orderd.db",            // relative, from another directory
	}
	if err := os.Mkdir(filepath.Join(dir, "other"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	paths := []string{
		realPath,
		filepath.Join(dir, "alias.db"),
		filepath.Join(dir, "relative.db"),
		filepath.Join(dir, "chain.db"),
		filepath.Join(dir, "datalink", "orderd.db"),
		filepath.Join(dir, "other", "up.db"),
		filepath.Join(dir, "other", "..", "data", "orderd.db"),
	}
	// The database does not exist yet (a first start), then it does.
	for _, exists := range []bool{false, true} {
		if exists {
			if _, err := store.Migrate(t.Context(), filepath.Join(dir, "alias.db")); err != nil {
				t.Fatal(err)
			}
			// SQLite followed the link: the database is the realPath file.
			if fi, err := os.Lstat(realPath); err != nil || !fi.Mode().IsRegular() {
				t.Fatalf("migrate through a link made no regular file at %s: %v", realPath, err)
			}
		}
		for _, held := range paths {
			release, err := store.Lock(held)
			if err != nil {
				t.Fatalf("exists %v: lock %s: %v", exists, held, err)
			}
			for _, other := range paths {
				if rel, err := store.Lock(other); !errors.Is(err, store.ErrLocked) {
					if err == nil {
						rel()
					}
					t.Errorf("exists %v: %s locked, then Lock(%s) = %v; want ErrLocked", exists, held, other, err)
				}
			}
			if err := release(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Another database beside it is not held by it.
	release, err := store.Lock(realPath)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	other, err := store.Lock(filepath.Join(dir, "data", "second.db"))
	if err != nil {
		t.Fatalf("a second database: %v", err)
	}
	other()
}

// TestResolvePath_loop: a loop of links is an error, not a hang.
func TestResolvePath_loop(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.db"), filepath.Join(dir, "b.db")
	if err := os.Symlink(b, a); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(a, b); err != nil {
		t.Fatal(err)
	}
	if _, err := store.ResolvePath(a); err == nil {
		t.Fatal("ResolvePath of a loop of links: no error")
	}
	if _, err := store.Lock(a); err == nil {
		t.Fatal("Lock through a loop of links: no error")
	}
}

// TestLockUse: shared use locks go together, through any path; an
// exclusive one goes with none, either way round.
func TestLockUse(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "orderd.db")
	link := filepath.Join(dir, "alias.db")
	if err := os.Symlink(db, link); err != nil {
		t.Fatal(err)
	}
	r1, err := store.LockUse(db, false)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := store.LockUse(link, false)
	if err != nil {
		t.Fatalf("a second shared use: %v", err)
	}
	if _, err := store.LockUse(link, true); !errors.Is(err, store.ErrLocked) {
		t.Errorf("exclusive use beside shared ones = %v, want ErrLocked", err)
	}
	r1()
	r2()
	ex, err := store.LockUse(link, true)
	if err != nil {
		t.Fatalf("exclusive use once the shared ones are released: %v", err)
	}
	if _, err := store.LockUse(db, false); !errors.Is(err, store.ErrLocked) {
		t.Errorf("shared use beside an exclusive one = %v, want ErrLocked", err)
	}
	ex()
}
