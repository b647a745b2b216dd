// Command orderd-bench is orderd's one load and benchmark command. Its
// subcommands:
//
//	orderd-bench daemon [flags]   the whole daemon against a verify-only ceiling (make bench-daemon, make bench-cluster)
//	orderd-bench load [flags]     signed webhooks at a rate or flat out, latency from the sender's side (make load)
//	orderd-bench scale [flags]    a database of a long life, or a pending migration (make bench-scale, make bench-migrate)
//
// "orderd-bench SUBCOMMAND -h" lists a subcommand's flags. The load and
// scale subcommands are described in their packages (internal/load,
// internal/scale); the rest of this comment is the daemon subcommand's.
//
// "orderd-bench daemon" measures the whole daemon against a verify-only
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
// orderd, in rounds interleaved with the daemon's: -c publishers sharing
// one connection (the stronger client: many connections each with one
// publisher get fewer publishes a second from the same servers), each
// publishing a -raw-size message to a scratch stream (-raw-replicas, file
// storage, the replicated log's settings) and waiting for its PubAck
// before the next; the stream is deleted after each round. The summary
// then prints the ratio of acked webhooks to raw publishes ("result
// raw_ratio"); a raw round's non-2xx are failed publishes. With -nats-pid
// and -admin it also prints the CPU of every process, the receivers and
// the NATS servers together, per acked webhook, the NATS servers' CPU per
// raw publish, and the multiple of the two ("result
// cluster_cpu_ms_per_webhook=... raw_nats_cpu_ms_per_publish=...
// cpu_multiple=...", over every round).
//
// With -pattern, each raw round is followed by a round of replicated
// mode's NATS traffic without orderd: two appenders each keeping one log
// entry of -pattern-group webhooks in flight, both following the log, and
// a relay publishing an event per acked webhook in atomic batches of
// -pattern-batch. The summary prints the NATS servers' CPU per webhook of
// that traffic against theirs per raw publish ("result
// pattern_nats_cpu_ms_per_webhook=... pattern_multiple=..."): the part of
// cpu_multiple that no change inside orderd takes away.
//
// Usage:
//
//	orderd-bench daemon [-orderd BIN] [-rounds N] [-d D] [-n N] [-c N] [-t N] [-rate N] [-profile DIR]
//	orderd-bench daemon -url URL[,URL...] -key FILE [-admin URL[,URL...]] [-pid PID[,PID...]] ...
//	    [-raw-nats URL[,URL...] [-pattern]] [-nats-pid PID[,PID...]] [-profile DIR -profile-of N [-nats-prof URL[,URL...]]]
//	orderd-bench daemon -explain DIR
//	orderd-bench daemon -counts -raw-nats URL[,URL...]
//
// Exit status: 0 after a run, 1 when the run failed (a process did not
// start, wrk failed), 2 on a usage error. Answers other than 2xx and socket
// errors are reported, not failed on.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"orderd/cmd/orderd-bench/internal/cli"
	"orderd/cmd/orderd-bench/internal/load"
	"orderd/cmd/orderd-bench/internal/scale"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := dispatch(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// subcommands are orderd-bench's, in the order the usage lists them.
var subcommands = []struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}{
	{"daemon", "the whole daemon (or running receivers with -url) against a verify-only ceiling, driven by wrk", func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
		return cli.ExitCode(run(ctx, args, stdout, stderr), stderr, "orderd-bench daemon")
	}},
	{"load", "signed webhooks at a rate or flat out, latency from the sender's side; -gen-key-out writes a key pair", load.Run},
	{"scale", "a database of a long life (-scenario month|busy) or a pending migration (-migration) under the real daemon", scale.Run},
}

// dispatch runs the subcommand named by args[0] with the rest of args and
// returns the exit status: 2 when no subcommand, -h, or an unknown one is
// given.
func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		printUsage(stderr)
		return 2
	}
	for _, c := range subcommands {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "orderd-bench: unknown subcommand %q\n", args[0])
	printUsage(stderr)
	return 2
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: orderd-bench SUBCOMMAND [flags]  (orderd-bench SUBCOMMAND -h lists its flags)")
	fmt.Fprintln(w, "subcommands:")
	for _, c := range subcommands {
		fmt.Fprintf(w, "  %-7s %s\n", c.name, c.summary)
	}
}
