package main

import (
	"context"
	"flag"
	"slices"
	"strings"
	"time"
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
			if _, err := e.LoadConfig(); err != nil {
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

func reportCommand() command {
	return command{
		Name:    "report",
		Summary: "write the finance reconciliation report for a period",
		Help:    "The period is [from, to): from inclusive, to exclusive, as dates (2006-01-02) in UTC.",
		Setup: func(fs *flag.FlagSet) func(context.Context, *env) error {
			reportFormats := []string{"csv", "json", "html"}
			from := fs.String("from", "", "first `DATE` of the period, inclusive (required)")
			to := fs.String("to", "", "`DATE` the period ends, exclusive (required)")
			format := fs.String("format", "csv", "output format: "+strings.Join(reportFormats, "|"))
			fs.String("o", "", "write to `FILE` instead of standard output")
			return pending(true, func(e *env) error {
				for _, d := range []struct{ flag, value string }{{"from", *from}, {"to", *to}} {
					if d.value == "" {
						return e.usagef("-%s is required", d.flag)
					}
					if _, err := time.Parse(time.DateOnly, d.value); err != nil {
						return e.usagef("-%s %q is not a date (2006-01-02)", d.flag, d.value)
					}
				}
				if *from >= *to {
					return e.usagef("-from %s is not before -to %s", *from, *to)
				}
				if !slices.Contains(reportFormats, *format) {
					return e.usagef("-format %q is not one of %s", *format, strings.Join(reportFormats, ", "))
				}
				return noArgs(e)
			})
		},
	}
}
