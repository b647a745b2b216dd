package main

import (
	"context"
)

// This file holds the commands of the contract whose feature is not built
// yet. Each one already has its contract's flags (so "-h" is truthful) and
// loads the config where the real command will, so configuration errors
// exit 2 today exactly as they will later; then it says "not built yet" and
// exits 2. To build one, write its function in a file of its own and
// delete the stub here.

// pending is the body of a command that is not built yet.
func pending(needsConfig bool, check func(e *env) error) func(ctx context.Context, e *env) error {
	return func(ctx context.Context, e *env) error {
		if check != nil {
			if err := check(e); err != nil {
				return err
			}
		}
		if needsConfig {
			// Every key, but none of the daemon's files: the command
			// opens nothing yet.
			if _, err := e.LoadConfigFor(useAll); err != nil {
				return err
			}
		}
		return notBuiltError{}
	}
}

// noArgs rejects positional arguments.
func noArgs(e *env) error {
	if len(e.Args) > 0 {
		return e.usagef("unexpected argument %q", e.Args[0])
	}
	return nil
}
