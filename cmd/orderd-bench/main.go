// Command orderd-bench measures the whole daemon against a verify-only
// ceiling with a light client: wrk and a Lua script posting a pre-signed
// corpus of distinct completed payin orders, so that the client's own cost
// per request is small next to the server's work and the ratio between the
// two is honest on a machine with few cores.
//
// In its default form ("make bench-daemon") it generates an RSA-2048 key,
// signs the corpus, starts "orderd run" (embedded NATS, log.level warn,
// every reconcile schedule off, a fresh database) trusting the key, starts
// the ceiling (a plain net/http server in this process that reads the body
// and verifies the RSA-SHA512 signature, nothing else), and alternates
// rounds: ceiling, orderd, ceiling, orderd, ... Each daemon round posts
// bodies no round posted before. It prints one line per round and a
// summary: the best round of each, the ratio of the two, p50/p99, non-2xx
// answers and socket errors, the daemon's CPU seconds per 1,000 webhooks
// (from the round's start until the relay has published the round's
// events) beside the ceiling's, its peak RSS, and its RSS after -idle
// without load. A paced round follows (-rate webhooks a second). With
// -profile DIR it takes CPU and allocation profiles of the daemon during one
// more round and prints where the microseconds and allocations per webhook
// go; -explain DIR prints that again.
//
// With -url it drives receivers that are already running (several
// instances, or a load balancer in front of them) instead of starting one;
// they must trust the key given with -key. With several URLs one wrk runs
// per URL at the same time, sharing -c and -t. -admin gives their admin
// listeners, from whose /metrics the CPU seconds, RSS and published events
// are read; without -admin those columns stay empty. With -pid the CPU of
// each instance is also read from /proc, and -nats-pid does the same for
// the NATS servers.
//
// With -raw-nats it also measures what the NATS cluster gives without
// orderd, in rounds interleaved with the daemon's: -c publishers, each on
// its own connection, each publishing a -raw-size message to a scratch
// stream (-raw-replicas, file storage, the replicated log's settings) and
// waiting for its PubAck before the next; the stream is deleted after each
// round. The summary then prints the ratio of acked webhooks to raw
// publishes ("result raw_ratio"); a raw round's non-2xx are failed
// publishes.
//
// Usage:
//
//	orderd-bench [-orderd BIN] [-rounds N] [-d D] [-n N] [-c N] [-t N] [-rate N] [-profile DIR]
//	orderd-bench -url URL[,URL...] -key FILE [-admin URL[,URL...]] [-pid PID[,PID...]] ...
//	    [-raw-nats URL[,URL...]] [-nats-pid PID[,PID...]] [-profile DIR -profile-of N [-nats-prof URL[,URL...]]]
//	orderd-bench -explain DIR
//	orderd-bench -counts -raw-nats URL[,URL...]
//
// Exit status: 0 after a run, 1 when the run failed (a process did not
// start, wrk failed), 2 on a usage error. Answers other than 2xx and socket
// errors are reported, not failed on.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// usageError marks a problem with the command line; it exits with status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return usageError{msg: fmt.Sprintf(format, args...)}
}

func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	if errors.Is(err, flag.ErrHelp) {
		return 2
	}
	fmt.Fprintln(stderr, "orderd-bench:", err)
	if _, ok := errors.AsType[usageError](err); ok {
		return 2
	}
	return 1
}
