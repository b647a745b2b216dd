package store

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// migrationFiles holds the schema. A migration is a file named
// "NNNN_name.sql" where NNNN is its version; files are applied in version
// order, each in its own transaction, and recorded in schema_migrations.
// Adding a feature's tables means dropping the next numbered file here.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one schema step.
type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations reads and orders the embedded migrations. Two files with
// one version are an error, caught by the tests of this package.
func loadMigrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var ms []migration
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || path.Ext(name) != ".sql" {
			continue
		}
		num, _, ok := strings.Cut(name, "_")
		if !ok {
			return nil, fmt.Errorf("migration %s: name must be NNNN_name.sql", name)
		}
		v, err := strconv.Atoi(num)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: version %q is not a positive number", name, num)
		}
		b, err := migrationFiles.ReadFile("migrations/" + name)
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", name, err)
		}
		ms = append(ms, migration{version: v, name: name, sql: string(b)})
	}
	slices.SortFunc(ms, func(a, b migration) int { return a.version - b.version })
	for i := 1; i < len(ms); i++ {
		if ms[i].version == ms[i-1].version {
			return nil, fmt.Errorf("migrations %s and %s share version %d", ms[i-1].name, ms[i].name, ms[i].version)
		}
	}
	return ms, nil
}

// Applied is one migration Migrate applied, and how long it took: an
// operator upgrading a large database sees which step took the time. A
// background migration run to its end has Background set, Version 0 and
// its step's name.
type Applied struct {
	Version    int
	Name       string
	Took       time.Duration
	Background bool
	// Rows is how many rows a background migration walked.
	Rows int64
}

// Migrate applies the pending schema migrations to the database at path,
// creating the file if needed, then runs every unfinished background
// migration to its end, and returns those it applied, in order (none when
// the schema was up to date). It is what `orderd migrate` runs; Open
// applies the schema migrations on start and leaves the background ones to
// RunBackgroundMigrations. Like Open, it refuses a database from a newer
// orderd (ErrSchemaNewer) or another application's (ErrNotOrderd) and
// leaves it untouched.
func Migrate(ctx context.Context, path string) ([]Applied, error) {
	return MigrateProgress(ctx, path, nil)
}

// MigrateProgress is Migrate, calling progress (when not nil) after every
// batch of a background migration.
func MigrateProgress(ctx context.Context, path string, progress func(MigrationProgress)) ([]Applied, error) {
	if err := createPrivate(path); err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := checkSchema(ctx, path); err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", writerDSN(path, false))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	applied, err := migrate(ctx, db, time.Now, slog.New(slog.DiscardHandler))
	db.Close()
	if err != nil {
		return applied, err
	}
	// The background migrations run through a store's writer, as after a
	// start.
	s, err := Open(ctx, path, Options{})
	if err != nil {
		return applied, err
	}
	start := time.Now()
	err = s.RunBackgroundMigrations(ctx, BackgroundOptions{Progress: func(p MigrationProgress) {
		if progress != nil {
			progress(p)
		}
		if p.Done {
			applied = append(applied, Applied{Name: p.Name, Took: time.Since(start), Background: true, Rows: p.RowsDone})
			start = time.Now()
		}
	}})
	if cerr := s.Close(context.WithoutCancel(ctx)); err == nil && cerr != nil {
		err = cerr
	}
	return applied, err
}

// checkSchema refuses a database that this orderd must not write to: one
// with tables but no schema record (schema_migrations), which belongs to
// another application (ErrNotOrderd), and one whose schema record holds a
// version this orderd does not have, or a version of its own under another
// name, which a newer orderd wrote (ErrSchemaNewer). It reads through a
// query-only connection of its own, before the writer's connection is
// made, so a refused file is left exactly as it was.
func checkSchema(ctx context.Context, path string) error {
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	db, err := sql.Open("sqlite", readerDSN(path))
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer db.Close()
	var record int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'schema_migrations'`).Scan(&record); err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	if record == 0 {
		// orderd creates schema_migrations before any other table, so
		// a table without it is not orderd's, even mid-migration.
		var tables int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\_%' ESCAPE '\'`).Scan(&tables); err != nil {
			return fmt.Errorf("open %s: %w", path, err)
		}
		if tables > 0 {
			return fmt.Errorf("%s: %w", path, ErrNotOrderd)
		}
		return nil
	}
	rows, err := db.QueryContext(ctx, `SELECT version, name FROM schema_migrations ORDER BY version`)
	if err != nil {
		return fmt.Errorf("open %s: read schema_migrations: %w", path, err)
	}
	defer rows.Close()
	known := make(map[int]string, len(ms))
	for _, m := range ms {
		known[m.version] = m.name
	}
	for rows.Next() {
		var (
			version int
			name    string
		)
		if err := rows.Scan(&version, &name); err != nil {
			return fmt.Errorf("open %s: read schema_migrations: %w", path, err)
		}
		ours, ok := known[version]
		switch {
		case !ok:
			return fmt.Errorf("%s: %w: it records migration %d (%s), which this orderd does not have; run a newer orderd",
				path, ErrSchemaNewer, version, name)
		case name != ours:
			return fmt.Errorf("%s: %w: it records migration %d as %s, which this orderd has as %s; run a newer orderd",
				path, ErrSchemaNewer, version, name, ours)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("open %s: read schema_migrations: %w", path, err)
	}
	return nil
}

// migrate applies every embedded migration not yet recorded. Each runs in
// an immediate transaction that re-checks schema_migrations, so two
// processes migrating the same file at once apply each step exactly once.
// It returns the migrations it applied.
func migrate(ctx context.Context, db *sql.DB, now func() time.Time, log *slog.Logger) ([]Applied, error) {
	ms, err := loadMigrations()
	if err != nil {
		return nil, err
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL
	)`); err != nil {
		return nil, fmt.Errorf("create schema_migrations: %w", err)
	}
	// A migration that rewrites every row of a table with values from a
	// subquery (filling a new column from other tables) has SQLite keep
	// the rows to write in a temporary table first: hundreds of MiB for a
	// million orders when temporary storage is memory, as the writer's
	// connection has it (db is that one connection). Migrations keep it in
	// a file; the writer gets its setting back after.
	if _, err := db.ExecContext(ctx, `PRAGMA temp_store = FILE`); err != nil {
		return nil, fmt.Errorf("migrate: temp_store: %w", err)
	}
	var done []Applied
	for _, m := range ms {
		start := time.Now()
		applied, err := applyMigration(ctx, db, m, now)
		if err != nil {
			return done, err
		}
		if applied {
			took := time.Since(start)
			log.Info("applied migration", "version", m.version, "name", m.name, "took", took)
			done = append(done, Applied{Version: m.version, Name: m.name, Took: took})
		}
	}
	if _, err := db.ExecContext(ctx, `PRAGMA temp_store = MEMORY`); err != nil {
		return done, fmt.Errorf("migrate: temp_store: %w", err)
	}
	return done, nil
}

func applyMigration(ctx context.Context, db *sql.DB, m migration, now func() time.Time) (applied bool, err error) {
	// The writer DSN makes BeginTx an immediate transaction.
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("migration %s: begin: %w", m.name, err)
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, m.version).Scan(&n); err != nil {
		return false, fmt.Errorf("migration %s: check: %w", m.name, err)
	}
	if n > 0 {
		return false, nil
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return false, fmt.Errorf("migration %s: %w", m.name, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
		m.version, m.name, now().UnixMilli()); err != nil {
		return false, fmt.Errorf("migration %s: record: %w", m.name, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("migration %s: commit: %w", m.name, err)
	}
	return true, nil
}
