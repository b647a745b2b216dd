// Package reconcile will own orderd's scheduled jobs and finance reports.
// The jobs repair what webhooks miss and report what cannot be repaired:
//
//   - stale: orders in new or processing whose state has not changed for
//     reconcile.stale_after are polled with get-status, with per-order
//     backoff, and become a stuck_order finding after
//     reconcile.give_up_after;
//   - doubt: gateway creations left in doubt are settled with get-status
//     (ORDER_NOT_FOUND proves the order was not created);
//   - balances: provider balances are snapshotted per currency and their
//     drift against the orders orderd saw becoming final is explained, the
//     unexplained rest beyond reconcile.drift_tolerance being a
//     balance_drift finding;
//   - requisites: deposits to active requisites are swept for orders no
//     webhook brought.
//
// Every answer goes through the store's one write path, exactly like a
// webhook. Jobs run on robfig/cron schedules in UTC, share one token-bucket
// rate limit towards the provider, and are idempotent, so "orderd reconcile"
// beside a running daemon is harmless. Reports (CSV, JSON, HTML) cover a
// period [from, to) per currency.
package reconcile
