#!/usr/bin/env bash
# Replicated mode under load, as "make bench-cluster" runs it: three
# nats-server nodes (built from the module version go.mod pins; JetStream
# with sync_interval: always, the setting replicated mode's guarantees
# assume) and two "orderd run" instances with cluster.enabled, all on this
# machine's loopback, then "orderd-bench daemon" against both instances at once
# (wrk spreading CLUSTER_CONNS connections over them) beside the
# verify-only ceiling and raw JetStream publishes to a scratch stream with
# the log's settings on the same cluster (CLUSTER_CONNS publishers, each
# waiting for its PubAck, 1,200 bytes each), in interleaved rounds. Everything started is stopped
# by its PID at the end; KEEP=1 keeps the directory.
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
# SINGLE=1 (the default) measures single-node mode the same way afterwards
# (orderd run with its embedded server, the same connections, its own
# ceiling); BEFORE=REV also measures the single-node daemon built from
# git revision REV, for a before/after comparison in one run.
SINGLE=${SINGLE:-1}
BEFORE=${BEFORE:-}

dir=$(mktemp -d "${TMPDIR:-/tmp}/orderd-bench-cluster.XXXXXX")
pids=()
cleanup() {
	for p in "${pids[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do
		wait "$p" 2>/dev/null || true
	done
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

nports=()
cports=()
pports=()
mports=()
for _ in 1 2 3; do
	nports+=("$(free_port)")
	cports+=("$(free_port)")
	if [ -n "$NATS_PROFILE" ]; then
		pports+=("$(free_port)")
		mports+=("$(free_port)")
	fi
done
route_list="\"nats://127.0.0.1:${cports[0]}\", \"nats://127.0.0.1:${cports[1]}\", \"nats://127.0.0.1:${cports[2]}\""
nats_url=""
npids=""
nprofs=""
for i in 0 1 2; do
	n=$((i + 1))
	mkdir -p "$dir/nats-$n"
	prof=""
	if [ -n "$NATS_PROFILE" ]; then
		prof="prof_port: ${pports[$i]}
http: 127.0.0.1:${mports[$i]}"
		nprofs="${nprofs:+$nprofs,}http://127.0.0.1:${pports[$i]}"
	fi
	cat >"$dir/nats-$n/nats.conf" <<CONF
server_name: n$n
host: 127.0.0.1
port: ${nports[$i]}
max_payload: 4MB
$prof
jetstream {
  store_dir: "$dir/nats-$n/js"
  sync_interval: always
}
cluster {
  name: bench
  listen: 127.0.0.1:${cports[$i]}
  routes: [$route_list]
}
CONF
	"$dir/nats-server" -c "$dir/nats-$n/nats.conf" >"$dir/nats-$n/log" 2>&1 &
	pids+=($!)
	npids="${npids:+$npids,}$!"
	nats_url="${nats_url:+$nats_url,}nats://127.0.0.1:${nports[$i]}"
done

webhooks=""
admins=""
opids=""
for name in a b; do
	recv=$(free_port)
	admin=$(free_port)
	mkdir -p "$dir/$name"
	cat >"$dir/$name/config.yaml" <<CONF
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
  path: $dir/$name/orderd.db
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
	"$dir/orderd" run -config "$dir/$name/config.yaml" >"$dir/$name/log" 2>&1 &
	pids+=($!)
	opids="${opids:+$opids,}$!"
	webhooks="${webhooks:+$webhooks,}http://127.0.0.1:$recv/webhooks/orders"
	admins="${admins:+$admins,}http://127.0.0.1:$admin"
done
for a in ${admins//,/ }; do
	for _ in $(seq 1 900); do
		if curl -fsS "$a/readyz" >/dev/null 2>&1; then break; fi
		sleep 0.1
	done
	if ! curl -fsS "$a/readyz" >/dev/null; then
		echo "bench-cluster: $a not ready"
		tail -n 20 "$dir"/a/log "$dir"/b/log
		exit 1
	fi
done
echo "bench-cluster: 3 nats-server nodes (R3, sync_interval always) and 2 orderd instances ready"
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
	-raw-nats "$nats_url" -nats-pid "$npids" \
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
for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
pids=()
if [ "$SINGLE" = 1 ]; then
	echo "bench-cluster: single-node mode, the same way"
	"$dir/orderd-bench" daemon -orderd "$dir/orderd" -c "$CONNS" -rounds "$ROUNDS" -d "$DURATION" -n "$N" -idle 5s -rate 0
fi
if [ -n "$BEFORE" ]; then
	echo "bench-cluster: single-node mode built from $BEFORE"
	git worktree add -q --detach "$dir/before" "$BEFORE"
	(cd "$dir/before" && $GO build -o "$dir/orderd-before" ./cmd/orderd)
	git worktree remove --force "$dir/before"
	"$dir/orderd-bench" daemon -orderd "$dir/orderd-before" -c "$CONNS" -rounds "$ROUNDS" -d "$DURATION" -n "$N" -idle 5s -rate 0
fi
