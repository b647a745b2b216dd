//go:build e2e

// Package e2e is orderd's fault suite: it drives the real binaries, built
// once per run with go build, as separate processes on loopback — orderd
// ("orderd run" and "orderd reconcile"), the fake provider
// (cmd/providertest) and a real nats-server built from the
// github.com/nats-io/nats-server/v2 version that go.mod pins, with
// JetStream syncing every write to disk ("sync_interval: always") so an
// acknowledged message is durable. The suite proves the invariants of the
// design under faults, reading what a user would read: HTTP answers, the
// SQLite file (opened read-only) and the whole JetStream stream (an
// ordered consumer from the first message).
//
//   - TestOrderd_KillUnderLoad: orderd is killed with SIGKILL at random
//     moments, 20 times, while signed webhooks arrive at a steady rate.
//     Every delivery answered 200 is in the store and appears exactly once
//     as an event in the stream; the database passes PRAGMA integrity_check.
//   - TestNATS_KilledUnderLoad and TestNATS_DownAtStart: every webhook is
//     still answered 200 while NATS is down, /readyz reports the outage,
//     and every event arrives once NATS is back, in order per order, once.
//   - TestProvider_FaultsDuringStalePolling and
//     TestGateway_FaultsDuringCreation: 5xx answers, timeouts and reset
//     connections from the provider. Stale polling ("orderd reconcile -job
//     stale") completes every order exactly once; each in-doubt creation is
//     settled as created or not_created, and nothing is created twice.
//   - TestReceiver_WebhookRetrySchedule: the provider's retries (up to 21
//     deliveries of one body), duplicates, an older state after the final
//     one and a re-formatted repeat give one event per distinct state.
//   - TestStore_DiskFull: the store on a small tmpfs that is filled up
//     (SQLite: "database or disk is full"); the receiver answers 503, never
//     200 for what it did not store, the provider's own deliveries are
//     retried, and it recovers without a restart once space returns. It is
//     skipped, with the reason, only where mounting a tmpfs is not
//     permitted.
//
// The tests need a Go toolchain (to build the binaries) and permission to
// mount a tmpfs for the disk-full test (root). Run them with
//
//	make e2e
//
// or go test -tags e2e -timeout 20m -v ./test/e2e/ (add -run to pick one).
// ORDERD_E2E_SEED fixes the seed of the random kill moments; every test
// logs the seed it used and the figures it measured.
package e2e
