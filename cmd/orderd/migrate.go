package main

import (
	"context"
	"flag"
	"fmt"

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
				if err := store.Migrate(ctx, cfg.Store.Path); err != nil {
					return fmt.Errorf("migrate %s: %w", cfg.Store.Path, err)
				}
				fmt.Fprintf(e.Stdout, "schema of %s is up to date\n", cfg.Store.Path)
				return nil
			}
		},
	}
}
