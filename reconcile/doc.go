// Package reconcile owns orderd's scheduled jobs: it repairs what webhooks
// miss and reports what it cannot repair, as findings (the store's findings
// table, each queuing a reconcile.<kind> event) and as stored run records.
//
// The jobs:
//
//   - stale (RunStale): orders in new or processing whose last change is
//     older than StaleAfter and whose next check is due are polled with
//     get-status, paged by the store's partial index on non-final orders'
//     next_check_at; then the due watches (orders of quarantined or
//     unauthenticated webhooks, orders handed over with watch). A check
//     that changes nothing or fails postpones the order: BackoffBase ×
//     2^attempts, capped at BackoffMax (1 min doubling to 1 h by default);
//     the write path resets the counter when the order changes. An order
//     unchanged for GiveUpAfter becomes a stuck_order finding, resolved by
//     a later run once the order is final. A watched order the provider
//     still does not know after GiveUpAfter becomes a watch_not_found
//     finding; it stays watched.
//   - doubt (RunDoubt): creations left in doubt, once older than
//     DoubtMinAge, are settled with get-status by merchantOrderId: found →
//     created (the order is stored, or, when it contradicts a stored
//     identity, an identity_conflict finding); ORDER_NOT_FOUND → not_created and an
//     order.not_created event; anything else → backoff, and an
//     unresolved_creation finding after UnresolvedAfter.
//   - balances (RunBalances): see below.
//   - requisites (RunRequisites): every active deposit requisite is paged
//     through get-orders-list since its last sweep (less an overlap); orders
//     that no webhook brought are counted in
//     orderd_requisite_orders_recovered_total.
//
// Every answer goes through the store's one write path with source poll, so
// a change publishes its event exactly like a webhook. Mismatches between a
// poll and a webhook (amounts, currency, conflicting final statuses) are
// found by the write path; a poll reporting an older status than a webhook
// is found here, when the poll was asked after the webhook's state arrived
// (an answer asked before it may predate the change, and is late news, not
// a disagreement). Either way a final status is never overwritten: the
// conflict is a mismatch finding with both versions. An answer that
// contradicts a stored identity (the merchantOrderId under another
// provider id, another type) is not applied at all: it opens an
// identity_conflict finding with the provider's answer, the order or
// watch backs off as after a failed call, and a later answer that applies
// resolves the finding.
//
// # Rate and concurrency
//
// Every provider call waits on one token bucket (NewLimiter:
// provider.rate_limit per second, burst provider.rate_burst), which the
// daemon puts on the provider.Client shared by the reconciler and the
// gateway, so their calls together never exceed the rate. At most
// Concurrency calls of a run are in flight; each has the client's timeout.
// The stale job records its answers in batches on separate goroutines, so
// the poll rate is bound by the limiter and the provider's latency, not by
// how long a commit takes.
//
// # Balance drift
//
// Each balances run stores a snapshot per currency (balance_snapshots) and
// compares it with an opening snapshot: the previous one, or, while the
// previous comparison left drift unexplained beyond tolerance, the one
// where the books last balanced.
//
//	actual   = closing − opening
//	expected = Σ ledger movements placed in (opening, closing]
//	drift    = actual − expected
//
// The ledger (store ledger_movements, derived from every applied order
// state) holds: completed payins' merchantTargetWallet (credit), completed
// payouts' merchantSourceWallet (debit: the provider, like its fake, writes
// the amount taken from the merchant as a positive number, and the
// absolute value is subtracted) and completed refund transactions' amount
// (debit). A movement is placed at the provider's completedAt of the
// transaction behind it, or, without one, when orderd learned the state.
//
// The drift is explained by candidates, each with the order ids behind it:
// completions within BoundaryWindow of either snapshot ("boundary", signed
// by which side of the snapshot they fall on), orders still processing
// ("processing", the amount they would move), refunds not final yet
// ("refund_in_flight") and unsettled creations ("in_doubt"). Explain picks
// the smallest exact subset (up to four candidates, bounded search), else a
// greedy non-overshooting selection. The unexplained rest beyond
// DriftTolerance[currency] opens (or refreshes) a balance_drift finding
// keyed by currency; a later comparison within tolerance resolves it. Each
// comparison is stored in balance_drifts with the finding's detail
// (DriftDetail) for reports and charts.
//
// # Runs and schedules
//
// Every run is recorded in reconcile_runs (job, start, end, counts, error)
// and counted in orderd_reconcile_runs_total{job,result} and
// orderd_reconcile_run_seconds{job}; orderd_reconcile_findings_open{kind}
// is refreshed after each run. Start schedules the jobs with robfig/cron in
// UTC ("off" disables one), recovering panics and skipping a run while the
// previous one still runs; Stop cancels the runs in progress and waits for
// them. AddJob registers further jobs (the finance report). Jobs are
// idempotent, so "orderd reconcile" beside a running daemon is harmless.
//
// # Reports
//
// The package also builds finance reports per period [from, to): per
// currency totals, one line per order, findings, and balance snapshots
// with their drift, as CSV, JSON or HTML (Reporter, report*.go), written
// on the report schedule to reports.dir through AddJob.
package reconcile
