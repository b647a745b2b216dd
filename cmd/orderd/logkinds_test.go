package main

import (
	"slices"
	"testing"

	"orderd/store"
)

// kindsOfLogVersion3 are the command kinds that entries of log versions 2
// and 3 carry: every release that reads those versions decodes them.
var kindsOfLogVersion3 = []string{
	"attempt.begin", "attempt.finish", "attempt.finish.2", "attempt.postpone", "attempt.recover_pending",
	"attempt.settle_created", "attempt.settle_created.2", "attempt.settle_created.3", "attempt.settle_not_created",
	"balance.snapshot", "finding.act", "finding.open", "finding.resolve", "ledger.advance", "noop", "observe", "observe.2",
	"outbox.advance", "outbox.mark_published", "outbox.prune", "outbox.requeue_set_aside", "outbox.set_aside", "quarantine",
	"reconcile.apply_polled", "reconcile.apply_polled.2", "reconcile.finish_run", "reconcile.postpone_check",
	"reconcile.postpone_watch", "reconcile.record_checks", "reconcile.record_checks.2", "reconcile.record_drift",
	"reconcile.record_drift.2", "reconcile.start_run", "reconcile.watch_poll", "reconcile.watch_poll.2",
	"requisite.deactivate", "requisite.swept", "requisite.upsert", "watch",
}

// TestCommandKinds_newKindsWaitForTheirLogVersion: a command kind that
// entries of log version 3 did not carry must say from which log version
// it may be written and what it is before that (store.VersionedCommand),
// so that a cluster in the middle of a rolling upgrade never writes a
// kind an instance not yet upgraded cannot decode. A kind that no longer
// decodes would strand old entries.
func TestCommandKinds_newKindsWaitForTheirLogVersion(t *testing.T) {
	kinds := store.CommandKinds()
	for _, k := range kindsOfLogVersion3 {
		if !slices.Contains(kinds, k) {
			t.Errorf("kind %s is no longer decoded: entries of it in a log would stop every instance", k)
		}
	}
	for _, k := range kinds {
		if slices.Contains(kindsOfLogVersion3, k) {
			continue
		}
		cmd, _ := store.NewCommand(k)
		vc, ok := cmd.(store.VersionedCommand)
		if !ok {
			t.Errorf("kind %s is new since log version 3 but is not a store.VersionedCommand: a mixed cluster would write it to instances that cannot read it", k)
			continue
		}
		if vc.LogVersion() <= 3 || vc.LogVersion() > store.NewestLogVersion {
			t.Errorf("kind %s says log version %d; want one after 3 that this release writes (up to %d)", k, vc.LogVersion(), store.NewestLogVersion)
		}
		if older := store.AtLogVersion(cmd, 3).Kind(); !slices.Contains(kindsOfLogVersion3, older) {
			t.Errorf("kind %s is written at log version 3 as %s, which version 3 does not carry", k, older)
		}
	}
}
