#!/usr/bin/env bash
# make chaos-net: the network fault suite of replicated mode (test/chaos),
# as root. go vet with the suite's build tag, then the suite itself; its
# summary line, written by the suite to a file, is printed last, so that it
# is the last line of the output whatever go test prints after it. The
# exit status is go test's: non-zero when a run lost an acked write,
# duplicated an event, let an instance without the lease call the
# provider, or diverged silently (or could not be checked).
set -uo pipefail
cd "$(dirname "$0")/../.."
GO=${GO:-go}

if [ "$(id -u)" != 0 ]; then
	echo "chaos-net: needs root (network namespaces, iptables, tc)" >&2
	exit 1
fi
"$GO" vet -tags chaos ./test/chaos/ || exit 1

runs=${CHAOS_RUNS:-12}
secs=${CHAOS_SECONDS:-60}
# Each run spends its seconds under load, then up to a few minutes
# settling and checking; go test's own bound is kept above that.
timeout=$((runs * (secs + 300) + 300))s

summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
CHAOS_SUMMARY=$summary "$GO" test -tags chaos -count=1 -timeout "$timeout" -v -run '^(TestCheckLease_Verdicts|TestChaosNet)$' ./test/chaos/
rc=$?
if [ -s "$summary" ]; then
	cat "$summary"
else
	echo "chaos-net: the suite ended before its summary (exit $rc); see above"
	[ "$rc" = 0 ] && rc=1
fi
exit "$rc"
