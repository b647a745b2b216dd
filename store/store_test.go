package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"orderd/store"
)

func TestMigrate(t *testing.T) {
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("migration files: %v %v", files, err)
	}
	path := filepath.Join(t.TempDir(), "orderd.db")
	applied, err := store.Migrate(t.Context(), path)
	if err != nil {
		t.Fatalf("first migrate: %v", err)
	}
	if len(applied) != len(files) {
		t.Errorf("first migrate applied %d migrations, want %d: %+v", len(applied), len(files), applied)
	}
	// In version order, each under its file's number. (A branch may lack
	// a number that another branch holds until they are merged.)
	for i, a := range applied {
		if (i > 0 && a.Version <= applied[i-1].Version) || !strings.HasPrefix(a.Name, fmt.Sprintf("%04d_", a.Version)) {
			t.Errorf("applied[%d] = %+v, want the versions in order, each its file's number", i, a)
		}
	}
	if len(applied) > 0 && applied[0].Version != 1 {
		t.Errorf("first migration applied is version %d, want 1", applied[0].Version)
	}
	s, err := store.Open(t.Context(), path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var first int64
	if err := s.DB().QueryRow(`SELECT applied_at FROM schema_migrations WHERE version = 1`).Scan(&first); err != nil {
		t.Fatal(err)
	}
	s.Close(t.Context())

	// Again, through Migrate and through Open: nothing is applied twice.
	if again, err := store.Migrate(t.Context(), path); err != nil || len(again) != 0 {
		t.Fatalf("second migrate: applied %+v, %v; want nothing", again, err)
	}
	s, _ = openStoreAt(t, path, store.Options{})
	rows, err := s.DB().Query(`SELECT version, name, applied_at FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var n int
	for rows.Next() {
		var (
			version int
			name    string
			at      int64
		)
		if err := rows.Scan(&version, &name, &at); err != nil {
			t.Fatal(err)
		}
		if n < len(files) && name != filepath.Base(files[n]) {
			t.Errorf("migration %d is %s, want %s", version, name, filepath.Base(files[n]))
		}
		if version == 1 && at != first {
			t.Errorf("migration 1 re-applied (applied_at %d, first %d)", at, first)
		}
		n++
	}
	if n != len(files) {
		t.Errorf("%d migrations recorded, want %d", n, len(files))
	}
	// The schema is usable: the core tables exist.
	for _, table := range []string{"orders", "deliveries", "order_history", "webhook_deliveries", "outbox", "quarantine", "findings", "watches"} {
		count(t, s, `SELECT count(*) FROM `+table)
	}
}

func TestOpen_connections(t *testing.T) {
	s, path := openStore(t, store.Options{})
	// The writer runs with the durability settings the design requires.
	err := s.Write(t.Context(), func(tx *store.Tx) error {
		for pragma, want := range map[string]string{
			"journal_mode": "wal", "synchronous": "2", "foreign_keys": "1", "busy_timeout": "10000",
		} {
			var got string
			if err := tx.QueryRow("PRAGMA " + pragma).Scan(&got); err != nil {
				return err
			}
			if got != want {
				t.Errorf("writer PRAGMA %s = %s, want %s", pragma, got, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The read pool cannot write.
	if _, err := s.DB().Exec(`INSERT INTO store_meta (key, value) VALUES ('x', 'y')`); err == nil {
		t.Error("the read pool accepted a write")
	}
	if err := s.Ready(t.Context()); err != nil {
		t.Errorf("ready: %v", err)
	}
	if err := s.IntegrityCheck(t.Context()); err != nil {
		t.Errorf("integrity: %v", err)
	}

	// A read-only store reads the same file and refuses writes.
	ro, err := store.Open(t.Context(), path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close(context.Background())
	if err := ro.Ready(t.Context()); !errors.Is(err, store.ErrReadOnly) {
		t.Errorf("read-only write: %v, want ErrReadOnly", err)
	}
	count(t, ro, `SELECT count(*) FROM orders`)
	if _, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "missing.db"), store.Options{ReadOnly: true}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("read-only open of a missing file: %v", err)
	}
}

// openStoreAt opens an existing path and closes it at the end of the test.
func openStoreAt(tb testing.TB, path string, opts store.Options) (*store.Store, string) {
	tb.Helper()
	s, err := store.Open(tb.Context(), path, opts)
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(func() { s.Close(context.Background()) })
	return s, path
}

func TestStore_IntegrityCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "orderd.db")
	s, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for range 300 {
		if _, err := s.Apply(t.Context(), obs(t, store.SourceWebhook, newOrder("1.00").json(false))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.IntegrityCheck(t.Context()); err != nil {
		t.Fatalf("healthy database: %v", err)
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Overwrite a page in the middle of the file with garbage.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	page := (st.Size() / 4096 / 2) * 4096
	if _, err := f.WriteAt([]byte(strings.Repeat("\xde\xad\xbe\xef", 1024)), page); err != nil {
		t.Fatal(err)
	}
	f.Close()
	ro, err := store.Open(t.Context(), path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close(context.Background())
	if err := ro.IntegrityCheck(t.Context()); err == nil {
		t.Error("integrity check passed on a damaged file")
	}
}

// TestOpen_createsPrivateFiles: the database holds customer data, so a
// database orderd creates is readable by its owner only (0600), and so are
// the WAL and shared-memory files SQLite makes beside it, whatever the
// umask lets through. An existing file keeps the mode its owner gave it.
func TestOpen_createsPrivateFiles(t *testing.T) {
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
	s, path := openStore(t, store.Options{})
	if _, err := s.Apply(t.Context(), obs(t, store.SourceWebhook, newOrder("1.00").json(false))); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if m := fi.Mode().Perm(); m != 0o600 {
			t.Errorf("%s has mode %o, want 600", filepath.Base(p), m)
		}
	}

	existing := filepath.Join(t.TempDir(), "existing.db")
	if err := os.WriteFile(existing, nil, 0o640); err != nil {
		t.Fatal(err)
	}
	s2, err := store.Open(t.Context(), existing, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(existing); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("existing database's mode changed: %v %v", fi.Mode(), err)
	}

	// Migrate alone and a backup create theirs private too.
	migrated := filepath.Join(t.TempDir(), "migrated.db")
	if _, err := store.Migrate(t.Context(), migrated); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(t.TempDir(), "backup.db")
	if err := s.Backup(t.Context(), backup); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{migrated, backup} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v %v, want 600", filepath.Base(p), fi.Mode(), err)
		}
	}
	if _, err := store.CheckBackup(t.Context(), backup); err != nil {
		t.Errorf("the backup made into a file created first is not a database: %v", err)
	}
}

// TestStore_ReadsAfterClose: a read that comes after Close (a relay or a
// request finishing during a shutdown) gets an error, never a panic, and a
// second Close is harmless.
func TestStore_ReadsAfterClose(t *testing.T) {
	s, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "orderd.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, after := range []int64{0, 5} {
		if evs, err := s.PendingEvents(t.Context(), after, 10); err == nil {
			t.Errorf("PendingEvents(%d) after Close = %v, nil; want an error", after, evs)
		}
	}
	var n int
	if err := s.DB().QueryRow(`SELECT count(*) FROM orders`).Scan(&n); err == nil {
		t.Error("a query on DB() after Close succeeded; want an error")
	}
	if err := s.Close(t.Context()); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
