// Command orderd is the merchant-side daemon for the payment provider: it
// receives the provider's signed webhooks, keeps every order durably in
// SQLite, publishes order events to NATS JetStream through an outbox, and
// reconciles what webhooks miss.
//
// Usage:
//
//	orderd [-config FILE] <command> [flags]
//
// Run "orderd -h" for the commands and "orderd <command> -h" for a
// command's flags. Exit status: 0 ok, 1 runtime failure, 2 usage or
// configuration error.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal has cancelled ctx, restore the default
	// handling, so that a second Ctrl-C kills a shutdown that hangs.
	context.AfterFunc(ctx, stop)
	err := run(ctx, os.Args, os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}
