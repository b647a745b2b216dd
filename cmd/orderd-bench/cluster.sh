#!/usr/bin/env bash
# Replicated mode under load, as "make bench-cluster" runs it: three
# nats-server nodes (built from the module version go.mod pins; JetStream
# with sync_interval: always, the setting replicated mode's guarantees
# assume) and two "orderd run" instances with cluster.enabled, all on this
# machine's loopback, then "orderd-bench daemon" against both instances at
# once (wrk spreading CLUSTER_CONNS connections over them) beside the
# verify-only ceiling and raw JetStream publishes to a scratch stream with
# the log's settings on the same cluster (CLUSTER_CONNS publishers sharing
# one connection, each waiting for its PubAck, 1,200 bytes each), in
# interleaved rounds. With BEFORE=REV the replicated measurement alternates
# between this tree's orderd and REV's, each round on a fresh cluster (see
# below). Everything started is stopped by its PID at the end; KEEP=1 keeps
# the directory.
set -euo pipefail
cd "$(dirname "$0")/../.."

GO=${GO:-go}
CONNS=${CLUSTER_CONNS:-32}
ROUNDS=${CLUSTER_ROUNDS:-2}
DURATION=${CLUSTER_DURATION:-8s}
N=${CLUSTER_N:-30000}
# CLUSTER_PROFILE=DIR: one more round while taking the first instance's
# CPU and allocation profiles into DIR.
PROFILE=${CLUSTER_PROFILE:-}
# CLUSTER_PROFILE_OF=2 profiles the second instance instead;
# CLUSTER_PROFILE_OF=leader the one holding the lease at the start (the
# one whose relay publishes the events).
PROFILE_OF=${CLUSTER_PROFILE_OF:-1}
# NATS_PROFILE=DIR: the profile round also takes a CPU profile of each
# nats-server node (prof_port) into DIR as nats-N.cpu.pprof, and after the
# run each node's JetStream report (jsz: streams, their leaders, message
# counts and consumers' deliveries) as nats-N.jsz.json. Without
# CLUSTER_PROFILE the instance's profiles go into DIR too.
NATS_PROFILE=${NATS_PROFILE:-}
if [ -n "$NATS_PROFILE" ] && [ -z "$PROFILE" ]; then PROFILE=$NATS_PROFILE; fi
# BEFORE=REV: the replicated measurement of the orderd built from git
# revision REV and of this tree's, interleaved in one run: CLUSTER_ROUNDS
# rounds of each, in the order new, old, then old, new, and so on, each
# round on a fresh three-node cluster with fresh instance directories (the
# log's stream name is fixed, so two builds cannot share a cluster) and
# with its own raw publishes on that cluster; then a comparison. The
# ceiling, the paced round and the idle wait are left out of these
# rounds. SINGLE=1 (the default) measures single-node mode the same way
# afterwards (orderd run with its embedded server, the same connections,
# its own ceiling), and with BEFORE the single-node daemon of REV after it.
SINGLE=${SINGLE:-1}
# PATTERN=1 (the default; not with BEFORE): after each raw round, a round
# of replicated mode's NATS traffic without orderd on the same cluster
# (orderd-bench daemon -pattern: two appenders of log entries of 6
# webhooks, one in flight each, both following the log, and a relay of
# atomic batches of 26 events), for the NATS nodes' CPU per webhook at
# that floor against theirs per raw publish (pattern_multiple).
# PATTERN_FLAGS="-pattern-group 64 -pattern-batch 256" measures another
# shape of that traffic.
PATTERN=${PATTERN:-1}
PATTERN_FLAGS=${PATTERN_FLAGS:-}
BEFORE=${BEFORE:-}
if [ -n "$BEFORE" ] && [ -n "$PROFILE" ]; then
	echo "bench-cluster: BEFORE compares builds without profiles; take CLUSTER_PROFILE or NATS_PROFILE in a run without BEFORE" >&2
	exit 2
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/orderd-bench-cluster.XXXXXX")
# The PIDs of the cluster and instances running now.
pids=()
stop_all() {
	for p in "${pids[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	pids=()
}
cleanup() {
	stop_all
	if [ -d "$dir/before" ]; then git worktree remove --force "$dir/before" || true; fi
	if [ "${KEEP:-0}" = 1 ]; then echo "bench-cluster: kept $dir"; else rm -rf "$dir"; fi
}
trap cleanup EXIT

# A free loopback port, picked just before use: this is a measurement run
# by hand, not a test; a lost race fails a start, which the run reports.
free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

echo "bench-cluster: building into $dir"
$GO build -o "$dir/orderd" ./cmd/orderd
$GO build -o "$dir/orderd-bench" ./cmd/orderd-bench
$GO build -o "$dir/nats-server" github.com/nats-io/nats-server/v2
"$dir/orderd-bench" load -gen-key-out "$dir/key.pem" -key-type rsa >/dev/null
if [ -n "$BEFORE" ]; then
	before_rev=$(git rev-parse --short "$BEFORE^{commit}")
	new_rev=$(git rev-parse --short HEAD)
	if [ -n "$(git status --porcelain)" ]; then new_rev="$new_rev+changes"; fi
	echo "bench-cluster: building orderd of $BEFORE ($before_rev)"
	git worktree add -q --detach "$dir/before" "$before_rev"
	(cd "$dir/before" && $GO build -o "$dir/orderd-before" ./cmd/orderd)
	git worktree remove --force "$dir/before"
fi

# wait_ok URL N: polls URL every 0.1 s until it answers 2xx, at most N
# times; fails (with curl's error) if it never does.
wait_ok() {
	local url=$1 n=$2
	for _ in $(seq 1 "$n"); do
		if curl -fsS "$url" >/dev/null 2>&1; then return 0; fi
		sleep 0.1
	done
	curl -fsS "$url" >/dev/null
}

# start_cluster DIR: three nats-server nodes, R3-capable JetStream with
# sync_interval always, their files under DIR/nats-N; returns when each
# says it is healthy (its JetStream included). Sets nats_url, npids
# (comma-separated) and mports (the nodes' monitoring ports), and with
# NATS_PROFILE nprofs (their prof_port URLs).
start_cluster() {
	local base=$1 i n prof route_list
	local nports=() cports=() pports=()
	mports=()
	for _ in 1 2 3; do
		nports+=("$(free_port)")
		cports+=("$(free_port)")
		mports+=("$(free_port)")
		if [ -n "$NATS_PROFILE" ]; then
			pports+=("$(free_port)")
		fi
	done
	route_list="\"nats://127.0.0.1:${cports[0]}\", \"nats://127.0.0.1:${cports[1]}\", \"nats://127.0.0.1:${cports[2]}\""
	nats_url=""
	npids=""
	nprofs=""
	for i in 0 1 2; do
		n=$((i + 1))
		mkdir -p "$base/nats-$n"
		prof="http: 127.0.0.1:${mports[$i]}"
		if [ -n "$NATS_PROFILE" ]; then
			prof="$prof
prof_port: ${pports[$i]}"
			nprofs="${nprofs:+$nprofs,}http://127.0.0.1:${pports[$i]}"
		fi
		cat >"$base/nats-$n/nats.conf" <<CONF
server_name: n$n
host: 127.0.0.1
port: ${nports[$i]}
max_payload: 4MB
$prof
jetstream {
  store_dir: "$base/nats-$n/js"
  sync_interval: always
}
cluster {
  name: bench
  listen: 127.0.0.1:${cports[$i]}
  routes: [$route_list]
}
CONF
		"$dir/nats-server" -c "$base/nats-$n/nats.conf" >"$base/nats-$n/log" 2>&1 &
		pids+=($!)
		npids="${npids:+$npids,}$!"
		nats_url="${nats_url:+$nats_url,}nats://127.0.0.1:${nports[$i]}"
	done
	# JetStream answers "temporarily unavailable" until the nodes have
	# elected their meta leader. The instances wait for it at start (the
	# cluster's streams and buckets are looked up and created with
	# retries); the rounds start from a healthy cluster all the same, so
	# that every round, of either build, starts alike.
	for i in 0 1 2; do
		if ! wait_ok "http://127.0.0.1:${mports[$i]}/healthz" 300; then
			echo "bench-cluster: nats-server n$((i + 1)) not healthy"
			tail -n 20 "$base/nats-$((i + 1))/log"
			exit 1
		fi
	done
}

# start_instances BIN DIR: two "orderd run" instances of BIN, a and b, with
# cluster.enabled on the cluster at nats_url, their files under DIR/a and
# DIR/b; returns when both are ready. Sets webhooks, admins and opids
# (comma-separated).
start_instances() {
	local bin=$1 base=$2 name recv admin a
	webhooks=""
	admins=""
	opids=""
	for name in a b; do
		recv=$(free_port)
		admin=$(free_port)
		mkdir -p "$base/$name"
		cat >"$base/$name/config.yaml" <<CONF
provider:
  # Never called: every schedule is off.
  base_url: http://127.0.0.1:9
  api_key: unused
  public_keys: [$dir/key.pem.pub]
receiver:
  listen: 127.0.0.1:$recv
admin:
  listen: 127.0.0.1:$admin
  # Profiles for CLUSTER_PROFILE (loopback only, no token: a bench run).
  pprof: true
store:
  path: $base/$name/orderd.db
nats:
  url: $nats_url
cluster:
  enabled: true
  node: $name
reconcile:
  schedules: {stale: "off", doubt: "off", balances: "off", requisites: "off", report: "off"}
log:
  level: warn
  format: json
CONF
		"$bin" run -config "$base/$name/config.yaml" >"$base/$name/log" 2>&1 &
		pids+=($!)
		opids="${opids:+$opids,}$!"
		webhooks="${webhooks:+$webhooks,}http://127.0.0.1:$recv/webhooks/orders"
		admins="${admins:+$admins,}http://127.0.0.1:$admin"
	done
	for a in ${admins//,/ }; do
		if ! wait_ok "$a/readyz" 900; then
			echo "bench-cluster: $a not ready"
			tail -n 20 "$base"/a/log "$base"/b/log
			exit 1
		fi
	done
	echo "bench-cluster: 3 nats-server nodes (R3, sync_interval always) and 2 orderd instances ready"
}

# cluster_row ROUND BUILD FILE: the "result" lines of one daemon run in
# FILE as one line of the comparison: build, round, the replicated rate and
# p99, the raw rate, the ratio, the CPU of every process per acked
# webhook, the NATS CPU per raw publish and their multiple ("-" when not
# measured).
cluster_row() {
	awk -v round="$1" -v build="$2" '
		$1 != "result" || ($2 ~ /^target=/ && $2 != "target=orderd" && $2 != "target=raw") { next }
		{
			pre = ($2 == "target=raw") ? "raw_" : ""
			for (i = 2; i <= NF; i++) {
				k = substr($i, 1, index($i, "=") - 1)
				v[pre k] = substr($i, index($i, "=") + 1)
			}
		}
		function f(k) { return (k in v) ? v[k] : "-" }
		END {
			print build, round, f("rate"), f("p99_ms"), f("raw_rate"), f("raw_ratio"),
				f("cluster_cpu_ms_per_webhook"), f("raw_nats_cpu_ms_per_publish"), f("cpu_multiple")
		}' "$3"
}

if [ -z "$BEFORE" ]; then
	start_cluster "$dir"
	start_instances "$dir/orderd" "$dir"
	if [ "$PROFILE_OF" = leader ]; then
		PROFILE_OF=""
		for _ in $(seq 1 100); do
			i=0
			for a in ${admins//,/ }; do
				i=$((i + 1))
				if curl -fsS "$a/v1/cluster" | grep -q '"leading":true'; then PROFILE_OF=$i; fi
			done
			if [ -n "$PROFILE_OF" ]; then break; fi
			sleep 0.1
		done
		if [ -z "$PROFILE_OF" ]; then
			echo "bench-cluster: no instance holds the lease"
			exit 1
		fi
		echo "bench-cluster: instance $PROFILE_OF leads; its profiles are taken"
	fi

	"$dir/orderd-bench" daemon -url "$webhooks" -admin "$admins" -pid "$opids" -key "$dir/key.pem" \
		-raw-nats "$nats_url" -nats-pid "$npids" $([ "$PATTERN" = 1 ] && echo -pattern $PATTERN_FLAGS) \
		-c "$CONNS" -rounds "$ROUNDS" -d "$DURATION" -n "$N" -idle 5s ${PROFILE:+-profile "$PROFILE" -profile-of "$PROFILE_OF"} ${nprofs:+-nats-prof "$nprofs"}
	for a in ${admins//,/ }; do
		echo "bench-cluster: $a/v1/cluster: $(curl -fsS "$a/v1/cluster")"
	done
	if [ -n "$NATS_PROFILE" ]; then
		mkdir -p "$NATS_PROFILE"
		for i in 0 1 2; do
			curl -fsS "http://127.0.0.1:${mports[$i]}/jsz?streams=true&consumers=true&config=true" >"$NATS_PROFILE/nats-$((i + 1)).jsz.json"
		done
		"$dir/orderd-bench" daemon -counts -raw-nats "$nats_url"
		echo "bench-cluster: NATS CPU profiles and JetStream reports in $NATS_PROFILE (nats-N.cpu.pprof, nats-N.jsz.json)"
	fi
	# The cluster stops before single-node mode is measured on the same cores.
	stop_all
else
	echo "bench-cluster: $ROUNDS rounds each of new ($new_rev) and old ($before_rev), interleaved, each on a fresh cluster"
	: >"$dir/compare.txt"
	for r in $(seq 1 "$ROUNDS"); do
		if [ $((r % 2)) = 1 ]; then order="new old"; else order="old new"; fi
		for build in $order; do
			base="$dir/round$r-$build"
			bin="$dir/orderd" rev=$new_rev
			if [ "$build" = old ]; then bin="$dir/orderd-before" rev=$before_rev; fi
			mkdir -p "$base"
			echo "bench-cluster: round $r, $build ($rev)"
			start_cluster "$base"
			start_instances "$bin" "$base"
			"$dir/orderd-bench" daemon -url "$webhooks" -admin "$admins" -pid "$opids" -key "$dir/key.pem" \
				-raw-nats "$nats_url" -nats-pid "$npids" -ceiling=false -rate 0 -idle 0s \
				-c "$CONNS" -rounds 1 -d "$DURATION" -n "$N" | tee "$base/bench.out"
			stop_all
			cluster_row "$r" "$build" "$base/bench.out" >>"$dir/compare.txt"
		done
	done
	echo
	echo "bench-cluster: replicated mode, new ($new_rev) against old ($before_rev), interleaved, each round on a fresh cluster (wrk -c$CONNS, $DURATION rounds; raw: $CONNS publishers on one connection)"
	awk -v newrev="$new_rev" -v oldrev="$before_rev" '
		function num(x) { return x != "-" }
		{
			print "result build=" $1 " round=" $2 " rate=" $3 " p99_ms=" $4 " raw_rate=" $5 " raw_ratio=" $6 \
				" cluster_cpu_ms_per_webhook=" $7 " raw_nats_cpu_ms_per_publish=" $8 " cpu_multiple=" $9
			b = $1
			n[b]++
			if (num($3)) { rate[b] += $3; if ($3 > best[b]) best[b] = $3 }
			if (num($4)) { p99[b] += $4; np99[b]++ }
			if (num($6)) { ratio[b] += $6; nratio[b]++ }
			if (num($7)) { cpu[b] += $7; ncpu[b]++ }
			if (num($9)) { mult[b] += $9; nmult[b]++ }
		}
		function mean(s, k, format) { return k > 0 ? sprintf(format, s / k) : "-" }
		END {
			for (i = 1; i <= 2; i++) {
				b = (i == 1) ? "new" : "old"
				rev = (i == 1) ? newrev : oldrev
				line[b] = sprintf("rounds=%d rate_mean=%.0f rate_best=%.0f p99_ms_mean=%s raw_ratio_mean=%s cluster_cpu_ms_per_webhook_mean=%s cpu_multiple_mean=%s",
					n[b], n[b] ? rate[b] / n[b] : 0, best[b], mean(p99[b], np99[b], "%.2f"), mean(ratio[b], nratio[b], "%.3f"),
					mean(cpu[b], ncpu[b], "%.3f"), mean(mult[b], nmult[b], "%.2f"))
				print "result build=" b " rev=" rev " " line[b]
			}
			if (rate["old"] > 0 && nratio["new"] && nratio["old"] && ncpu["new"] && ncpu["old"]) {
				printf "result new_vs_old rate=%.3f raw_ratio=%.3f cluster_cpu_ms_per_webhook=%.3f (new over old, means)\n",
					(rate["new"] / n["new"]) / (rate["old"] / n["old"]), (ratio["new"] / nratio["new"]) / (ratio["old"] / nratio["old"]),
					(cpu["new"] / ncpu["new"]) / (cpu["old"] / ncpu["old"])
			}
		}' "$dir/compare.txt"
fi

if [ "$SINGLE" = 1 ]; then
	echo "bench-cluster: single-node mode, the same way"
	"$dir/orderd-bench" daemon -orderd "$dir/orderd" -c "$CONNS" -rounds "$ROUNDS" -d "$DURATION" -n "$N" -idle 5s -rate 0
	if [ -n "$BEFORE" ]; then
		echo "bench-cluster: single-node mode built from $BEFORE ($before_rev)"
		"$dir/orderd-bench" daemon -orderd "$dir/orderd-before" -c "$CONNS" -rounds "$ROUNDS" -d "$DURATION" -n "$N" -idle 5s -rate 0
	fi
fi
