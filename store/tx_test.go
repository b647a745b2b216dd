package store_test

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"orderd/store"
)

func TestTx_InsertEvent(t *testing.T) {
	s, _ := openStore(t, store.Options{})
	syntheticEvents(t)
	ev := store.OutboxEvent{
		ID:           store.EventID("m-1", store.EventOrderNotCreated),
		Type:         store.EventOrderNotCreated,
		Subject:      store.OrderSubject("payout", "not_created"),
		EventSubject: "m-1",
		Data:         json.RawMessage(`{"kind": "payout", "merchantOrderId": "m-1"}`),
	}
	var first, second bool
	err := s.Write(t.Context(), func(tx *store.Tx) error {
		var err error
		if first, err = tx.InsertEvent(ev); err != nil {
			return err
		}
		second, err = tx.InsertEvent(ev)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !first || second {
		t.Errorf("inserted %v then %v, want true then false", first, second)
	}
	evs, err := s.PendingEvents(t.Context(), 0, 10)
	if err != nil || len(evs) != 1 {
		t.Fatalf("pending %v %+v", err, evs)
	}
	if evs[0].Subject != "orders.payout.not_created" || string(evs[0].Data) != `{"kind":"payout","merchantOrderId":"m-1"}` {
		t.Errorf("event %+v data %s", evs[0], evs[0].Data)
	}

	bad := []store.OutboxEvent{
		{Type: "t", Subject: "s", Data: json.RawMessage(`{}`)},
		{ID: "x", Subject: "s", Data: json.RawMessage(`{}`)},
		{ID: "x", Type: "t", Data: json.RawMessage(`{}`)},
		{ID: "x", Type: "t", Subject: "s", Data: json.RawMessage(`{`)},
	}
	for i, ev := range bad {
		err := s.Write(t.Context(), func(tx *store.Tx) error { _, err := tx.InsertEvent(ev); return err })
		if err == nil {
			t.Errorf("bad event %d accepted", i)
		}
	}
}

func TestTx_OpenFinding(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s, _ := openStore(t, store.Options{Now: func() time.Time { return now }})
	syntheticEvents(t)
	type result struct {
		id       int64
		opened   bool
		resolved bool
	}
	do := func(fn func(tx *store.Tx) (result, error)) result {
		t.Helper()
		var r result
		if err := s.Write(t.Context(), func(tx *store.Tx) error {
			var err error
			r, err = fn(tx)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return r
	}
	open := func(detail any) result {
		return do(func(tx *store.Tx) (result, error) {
			id, opened, err := tx.OpenFinding(store.FindingBalanceDrift, "brl", detail)
			return result{id: id, opened: opened}, err
		})
	}
	resolve := func() result {
		return do(func(tx *store.Tx) (result, error) {
			ok, err := tx.ResolveFinding(store.FindingBalanceDrift, "brl")
			return result{resolved: ok}, err
		})
	}

	a := open(map[string]string{"drift": "1.00"})
	b := open(map[string]string{"drift": "2.00"})
	if !a.opened || b.opened || a.id != b.id {
		t.Errorf("open twice: %+v %+v, want one finding opened once", a, b)
	}
	var detail string
	if err := s.DB().QueryRow(`SELECT detail FROM findings WHERE id = ?`, a.id).Scan(&detail); err != nil || detail != `{"drift":"2.00"}` {
		t.Errorf("detail %s %v, want the latest", detail, err)
	}
	if r := resolve(); !r.resolved {
		t.Error("open finding not resolved")
	}
	if r := resolve(); r.resolved {
		t.Error("resolved twice")
	}
	c := open(json.RawMessage(`{"drift":"3.00"}`))
	if !c.opened || c.id == a.id {
		t.Errorf("after resolution a new finding opens: %+v", c)
	}

	// Events: opened, resolved, opened again, with deterministic ids.
	evs, err := s.PendingEvents(t.Context(), 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		store.EventID(strconv.FormatInt(a.id, 10), "open"),
		store.EventID(strconv.FormatInt(a.id, 10), "resolved"),
		store.EventID(strconv.FormatInt(c.id, 10), "open"),
	}
	if len(evs) != len(want) {
		t.Fatalf("%d events, want %d: %+v", len(evs), len(want), evs)
	}
	for i, ev := range evs {
		var f store.Finding
		if err := json.Unmarshal(ev.Data, &f); err != nil {
			t.Fatal(err)
		}
		if ev.ID != want[i] || ev.Subject != "reconcile.balance_drift" || ev.Type != "reconcile.balance_drift" ||
			ev.EventSubject != "brl" || f.Kind != store.FindingBalanceDrift || f.Key != "brl" {
			t.Errorf("event %d: %+v finding %+v", i, ev, f)
		}
		if (i == 1) != (f.State == "resolved" && f.ResolvedAt != nil && f.ResolvedAt.Equal(now)) {
			t.Errorf("event %d finding state %s resolved at %v", i, f.State, f.ResolvedAt)
		}
	}
}

func TestTx_UpsertWatch(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s, _ := openStore(t, store.Options{Now: func() time.Time { return now }})
	write := func(fn func(tx *store.Tx) error) {
		t.Helper()
		if err := s.Write(t.Context(), fn); err != nil {
			t.Fatal(err)
		}
	}
	write(func(tx *store.Tx) error {
		return tx.UpsertWatch(store.Watch{MerchantOrderID: "m-1", Type: "payout", Reason: "watch", NextCheckAt: now.Add(time.Hour)})
	})
	if err := s.MarkForPoll(t.Context(), "m-1", "bad signature"); err != nil {
		t.Fatal(err)
	}
	var (
		reason, typ string
		next        int64
	)
	if err := s.DB().QueryRow(`SELECT reason, type, next_check_at FROM watches WHERE merchant_order_id = 'm-1'`).Scan(&reason, &typ, &next); err != nil {
		t.Fatal(err)
	}
	if reason != "bad signature" || typ != "payout" || next != now.UnixMilli() {
		t.Errorf("watch %s %s %d: want the new reason, the kept type, the earlier due time", reason, typ, next)
	}
	write(func(tx *store.Tx) error { return tx.ResolveWatch("m-1") })
	if n := count(t, s, `SELECT count(*) FROM watches WHERE resolved_at IS NULL`); n != 0 {
		t.Errorf("%d open watches after resolve", n)
	}
	if err := s.MarkForPoll(t.Context(), "m-1", "again"); err != nil {
		t.Fatal(err)
	}
	if n := count(t, s, `SELECT count(*) FROM watches WHERE resolved_at IS NULL AND reason = 'again'`); n != 1 {
		t.Errorf("resolved watch not reopened")
	}
	if err := s.MarkForPoll(t.Context(), "", "x"); err == nil {
		t.Error("watch without merchantOrderId accepted")
	}
}

func TestStore_Quarantine(t *testing.T) {
	s, _ := openStore(t, store.Options{})
	known := newOrder("4.00")
	if _, err := s.Apply(t.Context(), obs(t, store.SourceWebhook, known.processing().json(false))); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		q    store.QuarantinedWebhook
		// key of the finding; watch is the merchantOrderId polled ("" none).
		key, watch string
	}{
		{"merchant id readable", store.QuarantinedWebhook{Raw: []byte(`{"merchantOrderId":"m-q1","status":7}`),
			Reason: "status: not a string", MerchantOrderID: "m-q1", OrderID: "p-q1"}, "p-q1", "m-q1"},
		{"only the provider id of a known order", store.QuarantinedWebhook{Raw: []byte(`{"id":"` + known.id + `","transactions":{}}`),
			Reason: "transactions: not an array", OrderID: known.id}, known.id, known.mid},
		{"nothing readable", store.QuarantinedWebhook{Raw: []byte(`not json`), Reason: "invalid character"}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.q.Header = map[string][]string{"Signature": {"c2ln"}}
			for range 2 { // the repeat only bumps the counter
				if err := s.Quarantine(t.Context(), tt.q); err != nil {
					t.Fatal(err)
				}
			}
			var (
				id, seen    int64
				raw, reason string
				headers     string
			)
			if err := s.DB().QueryRow(`SELECT id, raw, reason, headers, times_seen FROM quarantine WHERE raw = ?`, tt.q.Raw).
				Scan(&id, &raw, &reason, &headers, &seen); err != nil {
				t.Fatal(err)
			}
			if reason != tt.q.Reason || seen != 2 || headers != `{"Signature":["c2ln"]}` {
				t.Errorf("quarantined %q %q seen %d", reason, headers, seen)
			}
			key := tt.key
			if key == "" {
				key = "quarantine-" + strconv.FormatInt(id, 10)
			}
			if n := count(t, s, `SELECT count(*) FROM findings WHERE kind = 'quarantined_webhook' AND subject_key = ? AND resolved_at IS NULL`, key); n != 1 {
				t.Errorf("%d open findings for %s, want 1", n, key)
			}
			if n := count(t, s, `SELECT count(*) FROM outbox WHERE type = 'reconcile.quarantined_webhook' AND event_subject = ?`, key); n != 1 {
				t.Errorf("%d finding events for %s, want 1", n, key)
			}
			if tt.watch != "" {
				if n := count(t, s, `SELECT count(*) FROM watches WHERE merchant_order_id = ? AND resolved_at IS NULL`, tt.watch); n != 1 {
					t.Errorf("no watch for %s", tt.watch)
				}
			}
		})
	}
	if n := count(t, s, `SELECT count(*) FROM watches`); n != 2 {
		t.Errorf("%d watches, want 2", n)
	}
	// Quarantine never touches order data.
	if n := count(t, s, `SELECT count(*) FROM orders`); n != 1 {
		t.Errorf("%d orders, want 1", n)
	}
}
