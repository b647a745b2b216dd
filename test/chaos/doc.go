//go:build chaos

// Package chaos is orderd's network fault suite for replicated mode, in the
// style of Jepsen (make chaos-net). Each run builds a world of its own:
// three nats-server nodes (JetStream, sync_interval: always), two orderd
// instances in replicated mode (cluster.lease_ttl 2s) and the fake
// provider (cmd/providertest), each in a network namespace of its own,
// joined by veth pairs to a bridge in a further namespace. The only
// address outside those namespaces is the suite's own end of one veth pair
// (10.99.0.1/24 by default), from which it sends the load and reads the
// results; every address of the suite lies in that private /24 and no
// traffic leaves it.
//
// Under a bounded load of signed webhooks to both instances and gateway
// creations (POST /v1/payins), the suite injects faults, one kind per run
// and then mixed runs whose schedule comes from the run's seed:
//
//   - the lease holder cut from every NATS node, but not from the provider;
//   - one NATS node cut from the other two;
//   - the NATS majority cut from both instances;
//   - asymmetric loss and delay (tc netem; where the kernel has no netem,
//     iptables' statistic match for loss and a slow htb class for delay,
//     said so in the run's line);
//   - links that flap;
//   - SIGSTOP/SIGCONT of the lease holder and of the NATS node leading the
//     log stream;
//   - kill -9 of NATS nodes and of instances;
//   - a stopped minority node's log stream files truncated, or a byte
//     flipped, before it starts again.
//
// One more fault, damaged-majority, runs only when CHAOS_FAULTS names it:
// every node killed and the log's newest message block cut in half on two
// of them, beyond what JetStream promises to survive. It shows whether
// orderd notices a log that lost acknowledged entries and refuses.
//
// After each run the faults are healed and the cluster settles; then the
// checker reads every acknowledged webhook and creation, every event on
// the events stream, every provider call (with its caller's address) and
// the lease's history (watched in its key-value bucket through every NATS
// node), and the instances' SQLite files. It counts acknowledged writes
// with no event or no row (lost), events that are on the stream more than
// once (duplicated), calls of the leader-only jobs made by an instance
// whose last lease write was older than 9/10 of lease_ttl (unleased; a run
// whose faults left no leader-only call waits, bounded, for the healed
// leader's first one, so that the check always has a call to judge), and
// instances that say they are ready at the same applied sequence with
// different digests (silent divergence). An instance that refuses, and
// says why (readyz 503, an error in GET /v1/cluster, exit 1), is a correct
// outcome and is reported, not counted. A run in which NATS is shown to
// have lost an acknowledged log entry is reported as such with its seed;
// it fails the suite unless orderd refused.
//
// The suite needs root (network namespaces, iptables, tc), the ip, iptables
// and tc commands, and a Go toolchain: it builds orderd, the fake provider
// and nats-server (the version go.mod pins, as test/e2e does) itself. Run
//
//	make chaos-net CHAOS_RUNS=12 CHAOS_SECONDS=60 CHAOS_SEED=1
//
// CHAOS_RUNS and CHAOS_SECONDS set the runs and their length, CHAOS_SEED
// the seed (each run prints its own, which repeats that run's schedule as
// CHAOS_SEED of a one-run suite with the same CHAOS_FAULTS), CHAOS_FAULTS
// limits the kinds (comma-separated names, or mixed), CHAOS_LOGS names a
// directory that keeps every run's process logs (without it, a failed run
// prints each instance's last leadership changes, warnings and errors
// under its line), and CHAOS_ORDERD and
// CHAOS_NATS_SERVER name binaries to run instead of building them. The last line it prints
// is the summary:
//
//	chaos-net: runs <R>, acked <A>, lost <L>, duplicated <D>, unleased provider calls <P>, silent divergence <S>
//
// Only one suite may run on a machine at a time: it owns the namespaces
// named ochaos-* and the link ochaos0, and before it starts it removes
// what an earlier run of its own left (a go test killed midway): those
// namespaces, the processes still in them, and the link.
package chaos
