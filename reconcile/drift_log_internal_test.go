package reconcile

import (
	"testing"
	"time"

	"orderd/store"
)

// TestRecordDriftCmd_Kind: a comparison recorded with a grace is a new
// log kind (older instances stop rather than open findings at the first
// check), and both kinds decode from the log with their rules.
func TestRecordDriftCmd_Kind(t *testing.T) {
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		cmd  *recordDriftCmd
		kind string
	}{
		{&recordDriftCmd{Currency: "brl"}, "reconcile.record_drift"},
		{&recordDriftCmd{Currency: "brl", Grace: 3}, "reconcile.record_drift.2"},
	} {
		b, err := store.EncodeOps([]store.Op{{At: at, Cmd: tc.cmd}, {At: at, Cmd: &store.FindingActionCmd{
			ID: 7, Action: store.ActionResolve, By: "ana", Note: "fee", Resolution: store.ResolutionWrittenOff}}})
		if err != nil {
			t.Fatal(err)
		}
		ops, err := store.DecodeOps(b)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := ops[0].Cmd.(*recordDriftCmd)
		if !ok || got.Kind() != tc.kind || got.Grace != tc.cmd.Grace {
			t.Errorf("decoded %T %+v, want kind %s with grace %d", ops[0].Cmd, ops[0].Cmd, tc.kind, tc.cmd.Grace)
		}
		if act, ok := ops[1].Cmd.(*store.FindingActionCmd); !ok || act.Kind() != "finding.act" || act.Resolution != store.ResolutionWrittenOff || act.By != "ana" {
			t.Errorf("decoded %T %+v", ops[1].Cmd, ops[1].Cmd)
		}
	}
}
