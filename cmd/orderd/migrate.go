package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

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
				unlock, err := cfg.lockStore()
				if err != nil {
					return err
				}
				defer unlock()
				if err := store.Migrate(ctx, cfg.Store.Path); err != nil {
					return cfg.storeError(err)
				}
				fmt.Fprintf(e.Stdout, "schema of %s is up to date\n", cfg.Store.Path)
				return nil
			}
		},
	}
}

// lockStore takes the database's lock (store.Lock: the file every path to
// it resolves to) for a command that must have the database to itself; a
// database a running orderd holds is a configuration error naming
// store.path.
func (c *Config) lockStore() (release func() error, err error) {
	release, err = store.Lock(c.Store.Path)
	if errors.Is(err, store.ErrLocked) {
		return nil, c.errorf("store.path", "%s; stop the orderd running on it first", strings.TrimPrefix(err.Error(), "store: "))
	}
	if err != nil {
		return nil, c.errorf("store.path", "%v", err)
	}
	return release, nil
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
