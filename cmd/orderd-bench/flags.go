package main

import (
	"flag"
	"io"
	"strconv"
	"strings"
	"time"

	"orderd/cmd/orderd-bench/internal/cli"
)

// Bounds that keep every run finite and its corpus within memory and disk.
const (
	maxRounds    = 20
	maxPerRound  = 1_000_000
	maxRoundTime = 5 * time.Minute
)

// options are the parsed command line.
type options struct {
	orderd   string
	urls     []string
	admins   []string
	pids     []int
	keyFile  string
	conns    int
	threads  int
	duration time.Duration
	rounds   int
	perRound int
	ceiling  bool
	wrk      string
	workDir  string
	keep     bool
	idle     time.Duration
	drain    time.Duration
	timeout  time.Duration

	profileDir  string
	profileTime time.Duration
	profileN    int
	profileOf   int
	explain     string
	counts      bool
	extraYAML   string
	reuse       bool
	rate        int
	rateTime    time.Duration

	rawNATS     []string
	rawReplicas int
	rawSize     int
	// pattern adds a round of replicated mode's NATS traffic alone
	// (patternRound) after each raw round.
	pattern        bool
	patternGroup   int
	patternOpBytes int
	patternBatch   int
	natsPIDs       []int
	natsProf       []string
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	var urls, admins, pids, rawNATS, natsPIDs, natsProf string
	fs := flag.NewFlagSet("orderd-bench daemon", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.orderd, "orderd", "bin/orderd", "orderd `binary` to start (unless -url is given)")
	fs.StringVar(&urls, "url", "", "comma-separated webhook `URLs` of receivers already running; default: start orderd")
	fs.StringVar(&admins, "admin", "", "comma-separated admin listener `URLs` of the receivers under -url (for /metrics and pprof)")
	fs.StringVar(&pids, "pid", "", "comma-separated `PIDs` of the receivers under -url on this machine (for their peak RSS)")
	fs.StringVar(&o.keyFile, "key", "", "private key `file` (PEM: PKCS #8, PKCS #1 or SEC 1) the receivers under -url trust; default: a fresh RSA-2048 key")
	fs.IntVar(&o.conns, "c", 64, "connections wrk keeps open, in total over every URL; with -raw-nats also the raw rounds' publishers (on one connection)")
	fs.IntVar(&o.threads, "t", 2, "wrk threads, in total over every URL")
	fs.DurationVar(&o.duration, "d", 8*time.Second, "length of one round")
	fs.IntVar(&o.rounds, "rounds", 2, "rounds of each target, interleaved")
	fs.IntVar(&o.perRound, "n", 50000, "distinct webhooks signed for each daemon round; a round that uses them up ends early")
	fs.BoolVar(&o.ceiling, "ceiling", true, "measure the verify-only ceiling in interleaved rounds")
	fs.StringVar(&o.wrk, "wrk", "wrk", "wrk `binary`")
	fs.StringVar(&o.workDir, "work", "", "`directory` for the corpus, the key, orderd's files and wrk's output, kept afterwards; default: a new temporary one, removed")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary work directory")
	fs.DurationVar(&o.idle, "idle", 20*time.Second, "after the last round, wait this long without load and report the daemon's RSS")
	fs.DurationVar(&o.drain, "drain", 30*time.Second, "after a daemon round, wait at most this long for the relay to publish its events")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "wrk's bound on one request (a longer one is a socket error)")
	fs.StringVar(&o.profileDir, "profile", "", "after the rounds, one more daemon round while taking CPU and allocation profiles into `directory` (needs admin.pprof, which a started orderd then has)")
	fs.DurationVar(&o.profileTime, "profile-time", 6*time.Second, "length of the profile round's profiles")
	fs.IntVar(&o.profileOf, "profile-of", 1, "with -url: the `instance` (1 for the first -admin URL) whose profiles -profile takes")
	fs.IntVar(&o.profileN, "profile-n", 40000, "distinct webhooks signed for the profile round")
	fs.StringVar(&o.extraYAML, "orderd-yaml", "", "`file` of YAML appended to the started orderd's configuration: sections it does not set (publish:, cluster:, ...)")
	fs.IntVar(&o.rate, "rate", 1000, "after the rounds, one paced round at this many webhooks a second (a fixed schedule per wrk thread, open loop while a connection is free); 0 for none")
	fs.DurationVar(&o.rateTime, "rate-d", 10*time.Second, "length of the paced round")
	fs.BoolVar(&o.reuse, "reuse", false, "with -work and a started orderd: keep the key and the signed corpus in the work directory, and use them again in a later run of the same -rounds, -n, -t and -profile-n instead of signing anew (every run still starts orderd on a fresh database)")
	fs.StringVar(&rawNATS, "raw-nats", "", "comma-separated NATS `URLs`: also measure raw JetStream publishes in interleaved rounds (-c publishers sharing one connection, each waiting for its PubAck, to a scratch stream deleted afterwards) and report the ratio to them")
	fs.IntVar(&o.rawReplicas, "raw-replicas", 3, "replicas of the raw rounds' scratch stream")
	fs.IntVar(&o.rawSize, "raw-size", 1200, "`bytes` of each raw publish")
	fs.BoolVar(&o.pattern, "pattern", false, "with -raw-nats: after each raw round, a round of replicated mode's NATS traffic without orderd (two appenders of log entries, one in flight each, both following the log, one relay of atomic event batches), for the NATS servers' CPU per webhook at that floor")
	fs.IntVar(&o.patternGroup, "pattern-group", 6, "webhooks in one log entry of the -pattern rounds")
	fs.IntVar(&o.patternOpBytes, "pattern-op-bytes", 510, "`bytes` of one webhook's command in a log entry of the -pattern rounds")
	fs.IntVar(&o.patternBatch, "pattern-batch", 26, "events in one atomic batch of the -pattern rounds")
	fs.StringVar(&natsPIDs, "nats-pid", "", "comma-separated `PIDs` of the NATS servers on this machine: report their CPU per webhook and per raw publish, and with -raw-nats the CPU of every process per acked webhook against theirs per raw publish")
	fs.StringVar(&natsProf, "nats-prof", "", "with -profile: comma-separated base `URLs` of the NATS servers' prof_port (http://127.0.0.1:PORT); the profile round also takes each server's CPU profile, nats-N.cpu.pprof in the -profile directory")
	fs.BoolVar(&o.counts, "counts", false, "only read the replicated log and events streams (ORDERD_LOG, ORDERD) through -raw-nats and print their entries by command kind and their events by atomic batch")
	fs.StringVar(&o.explain, "explain", "", "only print the breakdown of the profiles an earlier -profile run left in `directory`")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, cli.Usagef("unexpected argument %q", fs.Arg(0))
	}
	o.urls = splitList(urls)
	o.rawNATS = splitList(rawNATS)
	o.natsProf = splitList(natsProf)
	for _, p := range splitList(natsPIDs) {
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 {
			return o, cli.Usagef("-nats-pid: %q is not a process id", p)
		}
		o.natsPIDs = append(o.natsPIDs, n)
	}
	o.admins = splitList(admins)
	for _, p := range splitList(pids) {
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 {
			return o, cli.Usagef("-pid: %q is not a process id", p)
		}
		o.pids = append(o.pids, n)
	}
	switch {
	case o.reuse && (o.workDir == "" || len(o.urls) > 0):
		return o, cli.Usagef("-reuse needs -work and a started orderd (no -url): only a fresh database can take the same orders again")
	case len(o.urls) > 0 && o.extraYAML != "":
		return o, cli.Usagef("-orderd-yaml configures a started orderd; it does not go with -url")
	case len(o.urls) == 0 && (len(o.admins) > 0 || len(o.pids) > 0):
		return o, cli.Usagef("-admin and -pid go with -url")
	case len(o.urls) > 0 && o.keyFile == "":
		return o, cli.Usagef("-url needs -key: the private key whose public key the receivers trust")
	case len(o.urls) == 0 && o.keyFile != "":
		return o, cli.Usagef("-key goes with -url; a started orderd gets a fresh key")
	case len(o.admins) > 0 && len(o.admins) != len(o.urls):
		return o, cli.Usagef("-admin lists %d URLs and -url %d: give one admin URL per receiver", len(o.admins), len(o.urls))
	case len(o.pids) > 0 && len(o.pids) != len(o.urls):
		return o, cli.Usagef("-pid lists %d processes and -url %d: give one PID per receiver", len(o.pids), len(o.urls))
	case o.profileDir != "" && len(o.urls) > 0 && len(o.admins) == 0:
		return o, cli.Usagef("-profile with -url needs -admin (the profiles come from its /debug/pprof/)")
	case o.pattern && len(o.rawNATS) == 0:
		return o, cli.Usagef("-pattern needs -raw-nats: the NATS servers it publishes to")
	case o.patternGroup < 1 || o.patternGroup > 256 || o.patternOpBytes < 1 || o.patternOpBytes > 1<<16 || o.patternBatch < 1 || o.patternBatch > 1000:
		return o, cli.Usagef("-pattern-group must be between 1 and 256, -pattern-op-bytes between 1 and 65536, -pattern-batch between 1 and 1000")
	case o.counts && len(o.rawNATS) == 0:
		return o, cli.Usagef("-counts needs -raw-nats: the NATS servers to read the streams from")
	case len(o.natsProf) > 0 && o.profileDir == "":
		return o, cli.Usagef("-nats-prof goes with -profile: the NATS servers are profiled during its round")
	case o.profileOf < 1 || (len(o.admins) > 0 && o.profileOf > len(o.admins)) || (len(o.urls) == 0 && o.profileOf != 1):
		return o, cli.Usagef("-profile-of %d: want 1 to the number of -admin URLs", o.profileOf)
	case o.conns < 1 || o.threads < 1:
		return o, cli.Usagef("-c and -t must be at least 1")
	case o.conns < o.threads:
		return o, cli.Usagef("-c %d is below -t %d: wrk needs a connection per thread", o.conns, o.threads)
	case o.threads < len(o.urls):
		return o, cli.Usagef("-t %d is below the %d URLs: wrk needs a thread per URL", o.threads, len(o.urls))
	case o.rounds < 1 || o.rounds > maxRounds:
		return o, cli.Usagef("-rounds must be between 1 and %d", maxRounds)
	case o.perRound < 1 || o.perRound > maxPerRound:
		return o, cli.Usagef("-n must be between 1 and %d", maxPerRound)
	case o.duration <= 0 || o.duration > maxRoundTime:
		return o, cli.Usagef("-d must be positive and at most %s", maxRoundTime)
	case o.profileTime <= 0 || o.profileTime > maxRoundTime:
		return o, cli.Usagef("-profile-time must be positive and at most %s", maxRoundTime)
	case o.profileN < 1 || o.profileN > maxPerRound:
		return o, cli.Usagef("-profile-n must be between 1 and %d", maxPerRound)
	case o.rate < 0 || o.rate > 100_000 || o.rateTime <= 0 || o.rateTime > maxRoundTime:
		return o, cli.Usagef("-rate must be between 0 and 100000 and -rate-d positive and at most %s", maxRoundTime)
	case o.rawReplicas < 1 || o.rawReplicas > 5 || o.rawSize < 1 || o.rawSize > 1<<20:
		return o, cli.Usagef("-raw-replicas must be between 1 and 5 and -raw-size between 1 and 1048576")
	case o.idle < 0 || o.drain < 0 || o.timeout <= 0:
		return o, cli.Usagef("-idle and -drain must not be negative, -timeout must be positive")
	}
	return o, nil
}

func splitList(s string) []string {
	var out []string
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
