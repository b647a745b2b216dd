package main

import (
	"bytes"
	"context"
	"database/sql"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"orderd/provider/providertest"
	"orderd/test/support/testaddr"
)

// TestMigrate_SaysWhatItApplied: a first migrate names every migration it
// applied, in order, with its time; a second says there was nothing to
// apply.
func TestMigrate_SaysWhatItApplied(t *testing.T) {
	dir := t.TempDir()
	fake := providertest.NewServer(providertest.Options{})
	t.Cleanup(fake.Close)
	cfg := daemonConfig(t, dir, fake, "  url: nats://"+testaddr.Loopback(t)+"\n", quietJobs)
	r := runOrderd(t, nil, nil, "migrate", "-config", cfg)
	if r.code != 0 {
		t.Fatalf("migrate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	first := regexp.MustCompile(`(?m)^applied migration 1 \(0001_core\.sql\) in \d`)
	second := regexp.MustCompile(`(?m)^applied migration 2 \(0002_\w+\.sql\) in \d`)
	if !first.MatchString(r.stdout) || !second.MatchString(r.stdout) ||
		strings.Index(r.stdout, "migration 1 ") > strings.Index(r.stdout, "migration 2 ") ||
		!strings.HasSuffix(r.stdout, " is up to date\n") || strings.Contains(r.stdout, "nothing to apply") {
		t.Errorf("first migrate printed:\n%s", r.stdout)
	}
	r = runOrderd(t, nil, nil, "migrate", "-config", cfg)
	if r.code != 0 || strings.Contains(r.stdout, "applied migration") || !strings.Contains(r.stdout, "is up to date: nothing to apply") {
		t.Errorf("second migrate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

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
	execSQL(t, filepath.Join(dir, "orderd.db"), `INSERT INTO schema_migrations (version, name, applied_at) VALUES (99, '0099_future.sql', 0)`)

	for _, cmd := range []string{"migrate", "reconcile", "run"} {
		t.Run(cmd, func(t *testing.T) {
			r := runBounded(t, 10*time.Second, cmd, "-config", cfg)
			if r.code != 1 || strings.Contains(r.stdout, "up to date") {
				t.Errorf("exit %d, stdout %q; want 1 and nothing done", r.code, r.stdout)
			}
			for _, want := range []string{"store.path ", "schema is newer than this orderd", "migration 99 (0099_future.sql)", "run a newer orderd"} {
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
	} else {
		checkReportSchema(t, []byte(r.stdout))
	}
	copyDB := filepath.Join(dir, "copy.db")
	r = runOrderd(t, nil, nil, "backup", "-config", cfg, "-o", copyDB)
	if r.code != 0 {
		t.Errorf("backup: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// That backup is one for the newer orderd: this one will not put it in
	// place of a database.
	r = runOrderd(t, nil, nil, "restore", "-config", cfg, "-i", copyDB)
	if r.code != 2 || !strings.Contains(r.stderr, "-i "+copyDB) || !strings.Contains(r.stderr, "0099_future.sql") {
		t.Errorf("restore of the newer backup: exit %d, stderr %q; want 2 naming -i and the migration", r.code, r.stderr)
	}
}

// TestMigrate_NotOrderd: store.path pointing at another application's
// database is a configuration error (status 2) naming store.path for every
// command that opens the store, and the database gets none of orderd's
// tables.
func TestMigrate_NotOrderd(t *testing.T) {
	dir := t.TempDir()
	fake := providertest.NewServer(providertest.Options{})
	t.Cleanup(fake.Close)
	cfg := daemonConfig(t, dir, fake, "  url: nats://"+testaddr.Loopback(t)+"\n", quietJobs)
	db := filepath.Join(dir, "orderd.db")
	execSQL(t, db, `CREATE TABLE foo (id INTEGER PRIMARY KEY)`)

	for _, args := range [][]string{
		{"migrate"}, {"reconcile"}, {"run"},
		{"report", "-from", "2026-11-01", "-to", "2026-11-02"},
	} {
		t.Run(args[0], func(t *testing.T) {
			r := runBounded(t, 10*time.Second, append(args, "-config", cfg)...)
			if r.code != 2 || strings.Contains(r.stdout, "up to date") {
				t.Errorf("exit %d, stdout %q; want 2 and nothing done", r.code, r.stdout)
			}
			for _, want := range []string{"store.path: ", db, "not an orderd database (it has tables but no schema record)"} {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
					break
				}
			}
		})
	}
	var tables []string
	rows, err := openDB(t, db).QueryContext(t.Context(), `SELECT name FROM sqlite_schema WHERE type = 'table'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	if len(tables) != 1 || tables[0] != "foo" {
		t.Errorf("tables %q, want only foo", tables)
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
	if _, err := openDB(t, path).ExecContext(t.Context(), query); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// openDB opens the database at path outside the store, until the end of
// the test.
func openDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
