package store_test

import (
	"bytes"
	"database/sql"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"orderd/store"
)

// TestMigrate_newerSchema: a database whose schema record holds a migration
// this orderd does not have (a newer orderd wrote it) is refused by every
// read-write open, with a message that names the migration, and nothing is
// written to it; a read-only open still reads it.
func TestMigrate_newerSchema(t *testing.T) {
	tests := []struct {
		name   string
		change string // run on an up-to-date database
		want   []string
	}{
		{"unknown version", `INSERT INTO schema_migrations (version, name, applied_at) VALUES (99, '0099_future.sql', 0)`,
			[]string{"migration 99 (0099_future.sql)"}},
		{"known version, other name", `UPDATE schema_migrations SET name = '0005_other.sql' WHERE version = 5`,
			[]string{"migration 5 as 0005_other.sql", "0005_outbox_cursor.sql"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "orderd.db")
			if _, err := store.Migrate(t.Context(), path); err != nil {
				t.Fatal(err)
			}
			execSQL(t, path, tt.change)
			before := schemaRecord(t, path)

			want := append([]string{path, "schema is newer than this orderd", "run a newer orderd"}, tt.want...)
			_, err := store.Migrate(t.Context(), path)
			checkErr(t, "migrate", err, want)
			s, err := store.Open(t.Context(), path, store.Options{})
			if err == nil {
				s.Close(t.Context())
			}
			checkErr(t, "open", err, want)
			if after := schemaRecord(t, path); after != before {
				t.Errorf("schema record changed:\n%s\nwant\n%s", after, before)
			}

			// Reading cannot harm it: reports and backups still work, with
			// a warning.
			var log bytes.Buffer
			ro, _ := openStoreAt(t, path, store.Options{ReadOnly: true, Logger: slog.New(slog.NewTextHandler(&log, nil))})
			count(t, ro, `SELECT count(*) FROM orders`)
			if !strings.Contains(log.String(), "level=WARN") || !strings.Contains(log.String(), "schema is newer than this orderd") {
				t.Errorf("read-only open logged %q, want a warning that the schema is newer", log.String())
			}
		})
	}
}

// TestMigrate_notOrderd: a database with tables but no schema record
// belongs to something else and gets none of orderd's tables; an empty or
// missing file gets the whole schema.
func TestMigrate_notOrderd(t *testing.T) {
	t.Run("another application's database", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "other.db")
		execSQL(t, path, `CREATE TABLE foo (id INTEGER PRIMARY KEY); INSERT INTO foo VALUES (1)`)

		want := []string{path, "not an orderd database (it has tables but no schema record)"}
		_, err := store.Migrate(t.Context(), path)
		checkErr(t, "migrate", err, want)
		s, err := store.Open(t.Context(), path, store.Options{})
		if err == nil {
			s.Close(t.Context())
		}
		checkErr(t, "open", err, want)
		if got := tables(t, path); got != "foo" {
			t.Errorf("tables %q, want only foo", got)
		}
	})
	for _, tt := range []struct {
		name   string
		create bool
	}{
		{"empty file", true},
		{"missing file", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "orderd.db")
			if tt.create {
				writeEmpty(t, path)
			}
			if _, err := store.Migrate(t.Context(), path); err != nil {
				t.Fatal(err)
			}
			s, _ := openStoreAt(t, path, store.Options{})
			count(t, s, `SELECT count(*) FROM orders`)
		})
	}
}

// checkErr fails the test unless err holds every string in want.
func checkErr(t *testing.T, what string, err error, want []string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want one saying %q", what, want)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %v\nwant it to say %q", what, err, w)
		}
	}
}

// execSQL runs query on the database at path, creating it if needed,
// outside the store.
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

// schemaRecord returns the rows of schema_migrations, one a line.
func schemaRecord(t *testing.T, path string) string {
	t.Helper()
	return queryLines(t, path, `SELECT version || ' ' || name || ' ' || applied_at FROM schema_migrations ORDER BY version`)
}

// tables returns the names of the database's tables, one a line.
func tables(t *testing.T, path string) string {
	t.Helper()
	return queryLines(t, path, `SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name`)
}

func queryLines(t *testing.T, path, query string) string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(t.Context(), query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// writeEmpty creates an empty file at path.
func writeEmpty(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
}
