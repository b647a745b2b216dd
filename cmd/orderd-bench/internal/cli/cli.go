// Package cli is what orderd-bench's subcommands share of a command line's
// end: a usage error, and the exit status an error gives.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// UsageError marks a problem with the command line; it exits with status 2.
type UsageError struct{ msg string }

func (e UsageError) Error() string { return e.msg }

// Usagef is a UsageError with a formatted message.
func Usagef(format string, args ...any) error {
	return UsageError{msg: fmt.Sprintf(format, args...)}
}

// ExitCode is the exit status of a subcommand that ended with err: 0 for
// none, 2 for -h or a usage error, 1 for the rest. A usage error or a
// failure is printed to stderr after prefix.
func ExitCode(err error, stderr io.Writer, prefix string) int {
	if err == nil {
		return 0
	}
	if errors.Is(err, flag.ErrHelp) {
		return 2
	}
	fmt.Fprintln(stderr, prefix+":", err)
	if _, ok := errors.AsType[UsageError](err); ok {
		return 2
	}
	return 1
}
