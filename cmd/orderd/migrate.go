package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"orderd/store"
)

func migrateCommand() command {
	return command{
		Name:    "migrate",
		Summary: "apply database schema migrations and exit",
		Setup: func(fs *flag.FlagSet) func(context.Context, *env) error {
			return func(ctx context.Context, e *env) error {
				if err := noArgs(e); err != nil {
					return err
				}
				cfg, err := e.LoadConfigFor(configUse{})
				if err != nil {
					return err
				}
				if err := cfg.checkStorePath(false); err != nil {
					return err
				}
				// A running orderd's schema must not change under it.
				unlock, err := cfg.lockStore(lockAlone)
				if err != nil {
					return err
				}
				defer unlock()
				if _, err := cfg.removeTempFiles(); err != nil {
					fmt.Fprintf(e.Stderr, "orderd migrate: removing temporary files left beside the database: %v\n", err)
				}
				// Background migrations, which orderd run would do while
				// serving, run to their end here, with their progress
				// about once a second.
				var last time.Time
				applied, err := store.MigrateProgress(ctx, cfg.Store.Path, func(p store.MigrationProgress) {
					if p.Done || time.Since(last) < time.Second {
						return
					}
					last = time.Now()
					fmt.Fprintf(e.Stdout, "background migration %s: %d of %d rows (%.0f%%)\n",
						p.Name, p.RowsDone, p.RowsTotal, 100*p.Fraction())
				})
				// What was applied stays applied, even when a later step fails.
				for _, a := range applied {
					if a.Background {
						fmt.Fprintf(e.Stdout, "ran background migration %s (%d rows) in %s\n", a.Name, a.Rows, a.Took.Round(time.Millisecond))
						continue
					}
					fmt.Fprintf(e.Stdout, "applied migration %d (%s) in %s\n", a.Version, a.Name, a.Took.Round(time.Millisecond))
				}
				if err != nil {
					return cfg.storeError(err)
				}
				if len(applied) == 0 {
					fmt.Fprintf(e.Stdout, "schema of %s is up to date: nothing to apply\n", cfg.Store.Path)
					return nil
				}
				fmt.Fprintf(e.Stdout, "schema of %s is up to date\n", cfg.Store.Path)
				return nil
			}
		},
	}
}

// storeLock is how a command holds the database (see store.Lock and
// store.LockUse).
type storeLock int

const (
	// lockOwner: the daemon, one per database, beside the commands that
	// work beside it.
	lockOwner storeLock = iota
	// lockAlone: restore and migrate, which must have the database to
	// themselves.
	lockAlone
	// lockBeside: backup, report and reconcile, which work beside the
	// daemon and each other, never beside a restore or a migrate.
	lockBeside
)

// lockStore takes the database's locks (on the file every path to it
// resolves to) as how says; a database another process holds is a
// configuration error naming store.path.
func (c *Config) lockStore(how storeLock) (release func() error, err error) {
	var releases []func() error
	release = func() error {
		var errs []error
		for _, r := range slices.Backward(releases) {
			errs = append(errs, r())
		}
		return errors.Join(errs...)
	}
	take := func(r func() error, err error, hint string) error {
		if errors.Is(err, store.ErrLocked) {
			return c.errorf("store.path", "%s%s", strings.TrimPrefix(err.Error(), "store: "), hint)
		}
		if err != nil {
			return c.errorf("store.path", "%v", err)
		}
		releases = append(releases, r)
		return nil
	}
	if how != lockBeside {
		r, err := store.Lock(c.Store.Path)
		if err := take(r, err, " (an orderd runs on it, or a restore or a migrate does); stop it or wait for it first"); err != nil {
			return nil, err
		}
	}
	r, err := store.LockUse(c.Store.Path, how == lockAlone)
	if err := take(r, err, "; try again once it is done"); err != nil {
		release()
		return nil, err
	}
	return release, nil
}

// removeTempFiles removes the temporary files that operations killed
// earlier left beside the database (store.RemoveTempFiles), beside
// store.path and beside the file it resolves to, and returns their paths.
// The caller holds the database's lock (lockOwner or lockAlone): every
// operation that writes such files runs under it, so none is in use.
func (c *Config) removeTempFiles() ([]string, error) {
	paths := []string{c.Store.Path}
	if resolved, err := store.ResolvePath(c.Store.Path); err == nil && resolved != c.Store.Path {
		paths = append(paths, resolved)
	}
	var removed []string
	var errs []error
	for _, p := range paths {
		names, err := store.RemoveTempFiles(p)
		for _, n := range names {
			removed = append(removed, filepath.Join(filepath.Dir(p), n))
		}
		errs = append(errs, err)
	}
	return removed, errors.Join(errs...)
}

// storeError is what a command returns when opening the store (Open or
// Migrate) failed. Another application's database is a configuration
// error naming store.path (status 2): store.path points at the wrong file.
// A database from a newer orderd names store.path but exits with status 1:
// store.path is right, it is orderd's own database, and no change to the
// configuration helps; a newer orderd does.
func (c *Config) storeError(err error) error {
	switch {
	case errors.Is(err, store.ErrNotOrderd):
		return c.errorf("store.path", "%v; point store.path at orderd's database, or at a new file", err)
	case errors.Is(err, store.ErrSchemaNewer):
		return fmt.Errorf("store.path %w", err)
	}
	return fmt.Errorf("open store %s: %w", c.Store.Path, err)
}
