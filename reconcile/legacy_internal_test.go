package reconcile

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"orderd/provider"
	"orderd/store"
)

// A log entry keeps the rules of its kind: entries of the kinds written
// before identity_conflict findings still fail on a conflict, as an
// instance on the older orderd applies them, while the ".2" kinds open the
// finding. Both come back from the log as they went in.
func TestCommands_legacyKindsKeepTheirRules(t *testing.T) {
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "orderd.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close(context.Background())
	raw := []byte(`{"id":"provider-m1","merchantOrderId":"m1","type":"payin","createdAt":"2026-03-01T12:00:00+00:00",` +
		`"status":"processing","rejectReason":null,"auth":{"type":"pixDynamicQrCode","code":"qr","expiresAt":"2026-03-01T13:00:00Z"}}`)
	other := bytes.Replace(raw, []byte(`"provider-m1"`), []byte(`"provider-other"`), 1)
	seq := uint64(0)
	apply := func(cmd store.Command) store.OpResult {
		t.Helper()
		b, err := store.EncodeOps([]store.Op{{At: time.Now(), Cmd: cmd}})
		if err != nil {
			t.Fatal(err)
		}
		ops, err := store.DecodeOps(b)
		if err != nil {
			t.Fatal(err)
		}
		if ops[0].Cmd.Kind() != cmd.Kind() {
			t.Fatalf("%s came back from the log as %s", cmd.Kind(), ops[0].Cmd.Kind())
		}
		seq++
		res, err := st.ApplyLog(t.Context(), seq, ops)
		if err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
	observe := func(b []byte) store.Observation {
		o, err := provider.DecodeOrder(b)
		if err != nil {
			t.Fatal(err)
		}
		return store.Observation{Source: store.SourcePoll, Order: o, Raw: b, ObservedAt: time.Now()}
	}
	if res := apply(&applyPolledCmd{Obs: observe(other)}); res.Err != nil {
		t.Fatal(res.Err)
	}
	openConflicts := func() int {
		fs, err := st.FindingsPage(t.Context(), store.FindingQuery{Kind: store.FindingIdentityConflict, State: "open", Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		return len(fs)
	}

	for _, cmd := range []store.Command{
		&applyPolledCmd{Obs: observe(raw), legacy: true},
		&watchPollCmd{W: store.DueWatch{MerchantOrderID: "m1"}, Order: observe(raw).Order, Raw: raw, Now: time.Now(), legacy: true},
	} {
		if res := apply(cmd); !errors.Is(res.Err, store.ErrConflict) {
			t.Errorf("%s: %v, want the conflict as the command's error", cmd.Kind(), res.Err)
		}
	}
	if res := apply(&recordChecksCmd{Answers: []polled{{Due: store.DueOrder{ProviderID: "provider-other", MerchantOrderID: "m1"},
		Order: observe(raw).Order, Raw: raw}}, Now: time.Now(), legacy: true}); res.Err == nil {
		t.Error("reconcile.record_checks: no error for an answer about another order")
	}
	if n := openConflicts(); n != 0 {
		t.Fatalf("legacy entries opened %d identity_conflict findings", n)
	}

	res := apply(&applyPolledCmd{Obs: observe(raw)})
	if res.Err != nil || res.Value.(store.Result).Outcome != outcomeConflict {
		t.Fatalf("reconcile.apply_polled.2: %+v, want outcome conflict", res)
	}
	if n := openConflicts(); n != 1 {
		t.Fatalf("%d identity_conflict findings open, want 1", n)
	}
}

// The commands that carry when their polls were asked come back from the
// log as ".3" kinds with the time; without it they stay ".2".
func TestCommands_askedKindsRoundTrip(t *testing.T) {
	asked := time.Date(2026, 3, 1, 10, 0, 0, 123e6, time.UTC)
	for _, tc := range []struct {
		cmd  store.Command
		kind string
		got  func(store.Command) time.Time
	}{
		{&applyPolledCmd{Asked: asked}, "reconcile.apply_polled.3", func(c store.Command) time.Time { return c.(*applyPolledCmd).Asked }},
		{&recordChecksCmd{Answers: []polled{{Asked: asked}}}, "reconcile.record_checks.3",
			func(c store.Command) time.Time { return c.(*recordChecksCmd).Answers[0].Asked }},
		{&watchPollCmd{Asked: asked}, "reconcile.watch_poll.3", func(c store.Command) time.Time { return c.(*watchPollCmd).Asked }},
		{&applyPolledCmd{}, "reconcile.apply_polled.2", func(c store.Command) time.Time { return c.(*applyPolledCmd).Asked }},
	} {
		if tc.cmd.Kind() != tc.kind {
			t.Errorf("kind %s, want %s", tc.cmd.Kind(), tc.kind)
		}
		b, err := store.EncodeOps([]store.Op{{At: asked, Cmd: tc.cmd}})
		if err != nil {
			t.Fatal(err)
		}
		ops, err := store.DecodeOps(b)
		if err != nil {
			t.Fatalf("%s: %v", tc.kind, err)
		}
		if ops[0].Cmd.Kind() != tc.kind {
			t.Errorf("%s came back as %s", tc.kind, ops[0].Cmd.Kind())
		}
		want := asked
		if tc.kind == "reconcile.apply_polled.2" {
			want = time.Time{}
		}
		if got := tc.got(ops[0].Cmd); !got.Equal(want) {
			t.Errorf("%s: asked %v, want %v", tc.kind, got, want)
		}
	}
}
