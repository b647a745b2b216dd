#!/usr/bin/env bash
# End-to-end load run, as "make load" does it: build orderd and orderd-bench,
# make a signing key pair, start "orderd run" on loopback (embedded NATS,
# every schedule off, a fresh SQLite file) trusting the public key, then
#   1. FLAT_SENDERS senders flat out for FLAT_TIME, beside the verify-only
#      ceiling measured in the same run (orderd-bench load -ceiling);
#   2. RATE webhooks per second for RATE_TIME.
# orderd is stopped by its PID and everything is removed afterwards. The
# summary lines are printed at the end; KEEP=1 keeps the directory.
set -euo pipefail
cd "$(dirname "$0")/../.."

GO=${GO:-go}
FLAT_SENDERS=${FLAT_SENDERS:-64}
FLAT_TIME=${FLAT_TIME:-10s}
# Bodies are signed before the clock starts; this bounds the flat phase.
FLAT_MAX=${FLAT_MAX:-40000}
RATE=${RATE:-1000}
RATE_TIME=${RATE_TIME:-10s}
RATE_SENDERS=${RATE_SENDERS:-64}
REPEAT=${REPEAT:-0}
# METRICS=1 prints orderd's store and relay metrics before it is stopped.
# rsa, like the fake provider's default key and the receiver's benchmark;
# ecdsa signs up front much faster but verifies several times slower.
KEY_TYPE=${KEY_TYPE:-rsa}

dir=$(mktemp -d "${TMPDIR:-/tmp}/orderd-bench-load.XXXXXX")
pid=
cleanup() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	if [ "${KEEP:-0}" = 1 ]; then
		echo "load: kept $dir"
	else
		rm -rf "$dir"
	fi
}
trap cleanup EXIT

echo "load: building into $dir"
$GO build -o "$dir/orderd" ./cmd/orderd
$GO build -o "$dir/orderd-bench" ./cmd/orderd-bench
"$dir/orderd-bench" load -gen-key-out "$dir/load-key.pem" -key-type "$KEY_TYPE"

# Every listener on port 0: orderd logs the addresses it bound.
cat >"$dir/config.yaml" <<EOF
provider:
  # Never called: every schedule is off and no creation is made.
  base_url: http://127.0.0.1:9
  api_key: unused-by-the-load-run
  public_keys: [$dir/load-key.pem.pub]
receiver:
  listen: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
store:
  path: $dir/orderd.db
nats:
  embedded:
    listen: 127.0.0.1:0
    store_dir: $dir/nats
reconcile:
  schedules: {stale: "off", doubt: "off", balances: "off", requisites: "off", report: "off"}
log:
  level: info
  format: json
EOF

"$dir/orderd" run -config "$dir/config.yaml" >"$dir/orderd.out" 2>"$dir/orderd.log" &
pid=$!

url=
for _ in $(seq 1 200); do
	if ! kill -0 "$pid" 2>/dev/null; then
		echo "load: orderd exited before it was ready:" >&2
		cat "$dir/orderd.log" >&2
		exit 1
	fi
	addr=$(grep -o '"webhooks":"[^"]*"' "$dir/orderd.log" "$dir/orderd.out" 2>/dev/null | head -n1 | sed 's/.*"webhooks":"\([^"]*\)"/\1/' || true)
	if [ -n "$addr" ]; then
		url="http://$addr/webhooks/orders"
		break
	fi
	sleep 0.1
done
if [ -z "$url" ]; then
	echo "load: orderd did not report its webhook address within 20s:" >&2
	cat "$dir/orderd.log" >&2
	exit 1
fi
echo "load: orderd (pid $pid) takes webhooks at $url"
echo "load: machine: $(nproc) CPUs, $(uname -srm), $($GO env GOVERSION)"

echo "load: phase 1: $FLAT_SENDERS senders flat out for $FLAT_TIME (at most $FLAT_MAX), ceiling first"
"$dir/orderd-bench" load -url "$url" -ceiling -key "$dir/load-key.pem" -flat -c "$FLAT_SENDERS" \
	-d "$FLAT_TIME" -n "$FLAT_MAX" -repeat "$REPEAT" | tee "$dir/flat.txt"
echo "load: phase 2: $RATE webhooks/s for $RATE_TIME"
"$dir/orderd-bench" load -url "$url" -key "$dir/load-key.pem" -rate "$RATE" -c "$RATE_SENDERS" \
	-d "$RATE_TIME" -repeat "$REPEAT" | tee "$dir/rate.txt"

if [ "${METRICS:-0}" = 1 ]; then
	admin=$(grep -o '"admin":"[^"]*"' "$dir/orderd.log" "$dir/orderd.out" 2>/dev/null | head -n1 | sed 's/.*"admin":"\([^"]*\)"/\1/' || true)
	curl -fsS "http://$admin/metrics" >"$dir/metrics.txt"
	echo "load: orderd's store and relay metrics after both phases:"
	grep -E '^(orderd_(store|publish|outbox)[a-z_]*(_sum|_count|_total)?|process_cpu_seconds_total)[ {]' "$dir/metrics.txt" | grep -v '_bucket' || true
fi

kill -TERM "$pid"
if ! wait "$pid"; then
	echo "load: orderd did not stop cleanly:" >&2
	tail -n 20 "$dir/orderd.log" >&2
	exit 1
fi
pid=

echo
echo "load: summary (key $KEY_TYPE, repeat fraction $REPEAT)"
cat "$dir/flat.txt" "$dir/rate.txt"
