package main

import (
	"bytes"
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"orderd/internal/testaddr"
	"orderd/provider/providertest"
)

// TestMigrate_NewerSchema: a database a newer orderd has migrated is
// refused by every command that would write to it, with status 1 and a
// message naming store.path and the migration this orderd lacks; report
// and backup, which only read, still work on it.
func TestMigrate_NewerSchema(t *testing.T) {
	dir := t.TempDir()
	fake := providertest.NewServer(providertest.Options{})
	t.Cleanup(fake.Close)
	cfg := daemonConfig(t, dir, fake, "  url: nats://"+testaddr.Loopback(t)+"\n", quietJobs)
	if r := runOrderd(t, nil, nil, "migrate", "-config", cfg); r.code != 0 {
		t.Fatalf("migrate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	execSQL(t, filepath.Join(dir, "orderd.db"), `INSERT INTO schema_migrations (version, name, applied_at) VALUES (6, '0006_future.sql', 0)`)

	for _, cmd := range []string{"migrate", "reconcile", "run"} {
		t.Run(cmd, func(t *testing.T) {
			r := runBounded(t, 10*time.Second, cmd, "-config", cfg)
			if r.code != 1 || strings.Contains(r.stdout, "up to date") {
				t.Errorf("exit %d, stdout %q; want 1 and nothing done", r.code, r.stdout)
			}
			for _, want := range []string{"store.path ", "schema is newer than this orderd", "migration 6 (0006_future.sql)", "run a newer orderd"} {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
					break
				}
			}
		})
	}

	r := runOrderd(t, nil, nil, "report", "-config", cfg, "-from", "2026-11-01", "-to", "2026-11-02", "-format", "json")
	if r.code != 0 || !strings.Contains(r.stdout, `"currencies"`) {
		t.Errorf("report: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	copyDB := filepath.Join(dir, "copy.db")
	r = runOrderd(t, nil, nil, "backup", "-config", cfg, "-o", copyDB)
	if r.code != 0 {
		t.Errorf("backup: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// That backup is one for the newer orderd: this one will not put it in
	// place of a database.
	r = runOrderd(t, nil, nil, "restore", "-config", cfg, "-i", copyDB)
	if r.code != 2 || !strings.Contains(r.stderr, "-i "+copyDB) || !strings.Contains(r.stderr, "0006_future.sql") {
		t.Errorf("restore of the newer backup: exit %d, stderr %q; want 2 naming -i and the migration", r.code, r.stderr)
	}
}

// runBounded is runOrderd with no environment and no input, cancelled
// after d, so that a daemon that starts where it should have refused stops
// again and fails the test instead of hanging it.
func runBounded(t *testing.T, d time.Duration, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	var stdout, stderr bytes.Buffer
	err := run(ctx, append([]string{"orderd"}, args...), func(string) string { return "" }, nil, &stdout, &stderr)
	return result{code: exitCode(err, &stderr), stdout: stdout.String(), stderr: stderr.String()}
}

// execSQL runs query on the database at path, outside the store, creating
// the file if needed.
func execSQL(t *testing.T, path, query string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(t.Context(), query); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}
