package store_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"testing"

	"orderd/provider"
	"orderd/store"
)

// step is one observation applied in a scenario and what Apply must decide.
type step struct {
	source store.Source
	body   []byte
	want   store.Outcome
	// event is the event type the step must queue ("" for none).
	event string
}

func TestStore_Apply(t *testing.T) {
	base := newOrder("125.50")
	reformatted := base.with(func(o *order) { // same state: "125.5" is "125.50", keys reordered, whitespace
		o.amount = "125.5"
		o.txs[0].amount = "125.500"
	})
	withRefund := base.refunded("25.00")
	lessMoney := base.with(func(o *order) { o.amount = "120.00"; o.txs[0].amount = "120.00" })
	moreTx := base.processing().with(func(o *order) {
		o.txs = append(o.txs, tx{id: uuid(), typ: "payin", status: "processing", amount: "1.00"})
	})

	tests := []struct {
		name  string
		steps []step
		// order is the status stored at the end.
		status string
		// findings is the number of open mismatch findings at the end.
		findings int
	}{
		{
			name:   "new order",
			steps:  []step{{store.SourceWebhook, base.json(false), store.OutcomeNew, "order.completed"}},
			status: "completed",
		},
		{
			name: "byte-identical repeat is a duplicate",
			steps: []step{
				{store.SourceWebhook, base.json(false), store.OutcomeNew, "order.completed"},
				{store.SourceWebhook, base.json(false), store.OutcomeDuplicate, ""},
			},
			status: "completed",
		},
		{
			name: "repeat in other formatting and key order is a duplicate",
			steps: []step{
				{store.SourceWebhook, base.json(false), store.OutcomeNew, "order.completed"},
				{store.SourceWebhook, reformatted.json(true), store.OutcomeDuplicate, ""},
			},
			status: "completed",
		},
		{
			name: "poll of the same state is a duplicate",
			steps: []step{
				{store.SourceWebhook, base.json(false), store.OutcomeNew, "order.completed"},
				{store.SourcePoll, reformatted.json(true), store.OutcomeDuplicate, ""},
			},
			status: "completed",
		},
		{
			name: "processing then completed is a change",
			steps: []step{
				{store.SourceGateway, base.processing().json(false), store.OutcomeNew, "order.processing"},
				{store.SourceWebhook, base.json(false), store.OutcomeChanged, "order.completed"},
			},
			status: "completed",
		},
		{
			name: "processing after completed is stale",
			steps: []step{
				{store.SourceWebhook, base.json(false), store.OutcomeNew, "order.completed"},
				{store.SourceWebhook, base.processing().json(false), store.OutcomeStale, ""},
			},
			status: "completed",
		},
		{
			name: "late processing after processing-to-completed is stale",
			steps: []step{
				{store.SourcePoll, base.processing().json(false), store.OutcomeNew, "order.processing"},
				{store.SourceWebhook, base.json(false), store.OutcomeChanged, "order.completed"},
				{store.SourcePoll, base.processing().json(true), store.OutcomeStale, ""},
			},
			status: "completed",
		},
		{
			name: "an earlier non-final state never comes back",
			steps: []step{
				{store.SourcePoll, base.processing().json(false), store.OutcomeNew, "order.processing"},
				{store.SourcePoll, moreTx.json(false), store.OutcomeChanged, "order.updated"},
				{store.SourcePoll, base.processing().json(false), store.OutcomeStale, ""},
			},
			status: "processing",
		},
		{
			name: "new after processing is stale",
			steps: []step{
				{store.SourcePoll, base.processing().json(false), store.OutcomeNew, "order.processing"},
				{store.SourcePoll, base.processing().with(func(o *order) { o.status = "new" }).json(false), store.OutcomeStale, ""},
			},
			status: "processing",
		},
		{
			name: "refund added to a completed order is a change",
			steps: []step{
				{store.SourceWebhook, base.json(false), store.OutcomeNew, "order.completed"},
				{store.SourceWebhook, withRefund.json(false), store.OutcomeChanged, "order.updated"},
				{store.SourceWebhook, base.json(false), store.OutcomeStale, ""},
			},
			status: "completed",
		},
		{
			name: "rejected after completed is stale and a mismatch",
			steps: []step{
				{store.SourceWebhook, base.json(false), store.OutcomeNew, "order.completed"},
				{store.SourcePoll, base.rejected().json(false), store.OutcomeStale, ""},
				{store.SourcePoll, base.rejected().json(false), store.OutcomeStale, ""},
			},
			status:   "completed",
			findings: 1,
		},
		{
			name: "poll disagreeing on amounts is applied and a mismatch",
			steps: []step{
				{store.SourceWebhook, base.json(false), store.OutcomeNew, "order.completed"},
				{store.SourcePoll, lessMoney.json(false), store.OutcomeChanged, "order.updated"},
			},
			status:   "completed",
			findings: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, _ := openStore(t, store.Options{})
			var wantEvents []string
			for i, st := range tt.steps {
				ob := obs(t, st.source, st.body)
				res, err := s.Apply(t.Context(), ob)
				if err != nil {
					t.Fatalf("step %d: apply: %v", i, err)
				}
				if res.Outcome != st.want {
					t.Fatalf("step %d: outcome %q, want %q", i, res.Outcome, st.want)
				}
				wantID := ""
				if st.event != "" {
					wantID = store.EventID(ob.Order.ID, ob.Order.Fingerprint(), st.event)
					wantEvents = append(wantEvents, wantID)
				}
				if res.EventID != wantID {
					t.Fatalf("step %d: event id %q, want %q", i, res.EventID, wantID)
				}
			}
			// Exactly one outbox row per real change, in order, with the
			// deterministic ids and the provider's JSON as data.
			evs, err := s.PendingEvents(t.Context(), 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			var orderEvents []store.OutboxEvent
			for _, ev := range evs {
				if strings.HasPrefix(ev.Type, "order.") {
					orderEvents = append(orderEvents, ev)
				}
			}
			if len(orderEvents) != len(wantEvents) {
				t.Fatalf("%d order events, want %d: %+v", len(orderEvents), len(wantEvents), orderEvents)
			}
			for i, ev := range orderEvents {
				if ev.ID != wantEvents[i] {
					t.Errorf("event %d id %s, want %s", i, ev.ID, wantEvents[i])
				}
				if ev.EventSubject != base.id || ev.MerchantOrderID != base.mid {
					t.Errorf("event %d subject %q merchantOrderId %q", i, ev.EventSubject, ev.MerchantOrderID)
				}
				var o provider.Order
				if err := json.Unmarshal(ev.Data, &o); err != nil || o.ID != base.id {
					t.Errorf("event %d data is not the order: %v %s", i, err, ev.Data)
				}
			}
			v, err := s.OrderByMerchantID(t.Context(), base.mid)
			if err != nil {
				t.Fatal(err)
			}
			if string(v.Status) != tt.status {
				t.Errorf("stored status %q, want %q", v.Status, tt.status)
			}
			// Every observation is in the history but a duplicate and a
			// webhook's exact bytes again (counted where they are kept).
			var wantHistory int
			bodies := map[string]bool{}
			for _, st := range tt.steps {
				repeat := st.source == store.SourceWebhook && bodies[string(st.body)]
				if st.source == store.SourceWebhook {
					bodies[string(st.body)] = true
				}
				if st.want != store.OutcomeDuplicate && !repeat {
					wantHistory++
				}
			}
			if len(v.History) != wantHistory {
				t.Errorf("history has %d rows, want %d: %+v", len(v.History), wantHistory, v.History)
			}
			for i, h := range v.History {
				if i < len(tt.steps) && h.Source == "" {
					t.Errorf("history row %d has no source", i)
				}
			}
			if n := count(t, s, `SELECT count(*) FROM findings WHERE kind = 'mismatch' AND resolved_at IS NULL`); n != tt.findings {
				t.Errorf("%d open mismatch findings, want %d", n, tt.findings)
			}
		})
	}
}

func TestStore_Apply_eventSubjectAndData(t *testing.T) {
	s, _ := openStore(t, store.Options{})
	o := newOrder("10.00").with(func(o *order) { o.typ = "Pay.In*" })
	body := o.json(true)
	if _, err := s.Apply(t.Context(), obs(t, store.SourceWebhook, body)); err != nil {
		t.Fatal(err)
	}
	evs, err := s.PendingEvents(t.Context(), 0, 10)
	if err != nil || len(evs) != 1 {
		t.Fatalf("pending: %v %+v", err, evs)
	}
	ev := evs[0]
	if ev.Subject != "orders.pay_in_.completed" || ev.Type != "order.completed" || ev.LearnedVia != store.SourceWebhook {
		t.Errorf("subject %q type %q learnedVia %q", ev.Subject, ev.Type, ev.LearnedVia)
	}
	// The data is the body as received, only compacted: same keys in the
	// same order, amounts untouched.
	if strings.ContainsAny(string(ev.Data), "\n ") || !strings.HasPrefix(string(ev.Data), `{"status":"completed","merchantOrderId"`) ||
		!strings.Contains(string(ev.Data), `"amount":"10.00"`) {
		t.Errorf("data is not the compacted body: %s", ev.Data)
	}
}

// TestStore_Apply_recordsDeliveries: every authenticated body is kept
// once, with its facts, and a byte-identical repeat bumps the counter of
// the one row that holds it. A body that brings a new or changed state is
// kept in that state's history row; a body that brings none (a repeat of
// the current state in another formatting, a stale state) in deliveries.
// Replaying an old state's bytes adds nothing but the count.
func TestStore_Apply_recordsDeliveries(t *testing.T) {
	s, _ := openStore(t, store.Options{})
	o := newOrder("7.00")
	p, pPretty, done := o.processing().json(false), o.processing().json(true), o.json(false)
	var indented bytes.Buffer
	if err := json.Indent(&indented, p, "", "\t"); err != nil {
		t.Fatal(err)
	}
	pTab := indented.Bytes() // the older state in a third formatting, first seen once stale
	steps := []struct {
		body []byte
		want store.Outcome
	}{
		{p, store.OutcomeNew},
		{p, store.OutcomeDuplicate},       // the same bytes: its history row counts it
		{pPretty, store.OutcomeDuplicate}, // the same state in another formatting: a deliveries row
		{pPretty, store.OutcomeDuplicate},
		{done, store.OutcomeChanged},
		{p, store.OutcomeStale}, // an older state's bytes again, after the change, three times
		{p, store.OutcomeStale},
		{p, store.OutcomeStale},
		{pPretty, store.OutcomeStale}, // and the other formatting's
		{pTab, store.OutcomeStale},    // a body first seen as a stale state: a history row points at it
		{pTab, store.OutcomeStale},
	}
	for i, st := range steps {
		res, err := s.Apply(t.Context(), obs(t, store.SourceWebhook, st.body))
		if err != nil || res.Outcome != st.want {
			t.Fatalf("step %d: %s, %v; want %s", i, res.Outcome, err, st.want)
		}
	}
	type kept struct {
		inHistory bool
		times     int
	}
	want := map[string]kept{string(p): {true, 5}, string(pPretty): {false, 3}, string(done): {true, 1}, string(pTab): {false, 2}}
	rows, err := s.DB().QueryContext(t.Context(), `SELECT raw, history_id IS NOT NULL, times_seen, headers, remote_addr,
		body_sha256 FROM webhook_deliveries`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]kept{}
	for rows.Next() {
		var (
			raw, headers, remote string
			k                    kept
			sum                  []byte
		)
		if err := rows.Scan(&raw, &k.inHistory, &k.times, &headers, &remote, &sum); err != nil {
			t.Fatal(err)
		}
		want := sha256.Sum256([]byte(raw))
		sumOK := bytes.Equal(sum, want[:])
		if _, dup := got[raw]; dup {
			t.Errorf("body kept twice: %s", raw)
		}
		got[raw] = k
		if !strings.Contains(headers, `"Signature":["c2lnbmF0dXJl"]`) || strings.Contains(headers, "Cookie") || remote != "127.0.0.1:5555" || !sumOK {
			t.Errorf("facts of %s: headers %s, remote %q, sha256 matches %v", raw, headers, remote, sumOK)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) {
		t.Errorf("kept bodies:\n got %v\nwant %v", got, want)
	}
	// Every history row reads its body, and no row holds a copy: a
	// byte-identical replay adds no row; the stale state first seen in
	// the third formatting has one, pointing at its delivery.
	if n := count(t, s, `SELECT count(*) FROM order_history h LEFT JOIN deliveries d ON d.id = h.delivery_id
		WHERE coalesce(h.raw, d.raw) IS NULL`); n != 0 {
		t.Errorf("%d history rows without a body", n)
	}
	if n := count(t, s, `SELECT count(*) FROM order_history`); n != 3 {
		t.Errorf("%d history rows, want 3 (new, changed, one stale)", n)
	}
	if n := count(t, s, `SELECT count(*) FROM order_history WHERE raw IS NOT NULL AND body_sha256 IS NULL`); n != 0 {
		t.Errorf("%d history rows hold a copy of a body", n)
	}
	if n := count(t, s, `SELECT count(*) FROM order_history h JOIN deliveries d ON d.id = h.delivery_id
		WHERE h.outcome = 'stale' AND d.raw = ?`, pTab); n != 1 {
		t.Errorf("%d stale rows pointing at the third formatting's delivery, want 1", n)
	}
}

func TestStore_Apply_amountsAsText(t *testing.T) {
	s, _ := openStore(t, store.Options{})
	o := newOrder("0.10")
	if _, err := s.Apply(t.Context(), obs(t, store.SourceWebhook, o.json(false))); err != nil {
		t.Fatal(err)
	}
	var amount, ccy, typ string
	if err := s.DB().QueryRow(`SELECT target_amount, target_currency, typeof(target_amount) FROM orders`).Scan(&amount, &ccy, &typ); err != nil {
		t.Fatal(err)
	}
	if amount != "0.10" || ccy != "brl" || typ != "text" {
		t.Errorf("stored amount %q %q as %s, want \"0.10\" brl as text", amount, ccy, typ)
	}
}

func TestStore_Apply_mismatchDetail(t *testing.T) {
	s, _ := openStore(t, store.Options{})
	o := newOrder("50.00")
	if _, err := s.Apply(t.Context(), obs(t, store.SourceWebhook, o.json(false))); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(t.Context(), obs(t, store.SourcePoll, o.rejected().json(false))); err != nil {
		t.Fatal(err)
	}
	var key, detail string
	if err := s.DB().QueryRow(`SELECT subject_key, detail FROM findings WHERE kind = 'mismatch'`).Scan(&key, &detail); err != nil {
		t.Fatal(err)
	}
	var d struct {
		Reason string
		Stored struct {
			Source string
			Status string
			Order  provider.Order
		}
		Observed struct {
			Source string
			Status string
			Order  provider.Order
		}
	}
	if err := json.Unmarshal([]byte(detail), &d); err != nil {
		t.Fatal(err)
	}
	if key != o.id || d.Stored.Status != "completed" || d.Stored.Source != "webhook" || d.Stored.Order.ID != o.id ||
		d.Observed.Status != "rejected" || d.Observed.Source != "poll" || d.Observed.Order.Status != "rejected" {
		t.Errorf("finding key %q detail %s", key, detail)
	}
	// The finding is announced on reconcile.mismatch.
	evs, err := s.PendingEvents(t.Context(), 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, ev := range evs {
		found = found || ev.Subject == "reconcile.mismatch" && ev.Type == "reconcile.mismatch" && ev.EventSubject == o.id
	}
	if !found {
		t.Errorf("no reconcile.mismatch event in %+v", evs)
	}
}

func TestStore_Apply_rejectsBadObservations(t *testing.T) {
	s, _ := openStore(t, store.Options{})
	good := obs(t, store.SourceWebhook, newOrder("1.00").json(false))
	tests := []struct {
		name  string
		obs   store.Observation
		field string
	}{
		{"no order", store.Observation{Source: store.SourceWebhook, Raw: good.Raw}, "no order"},
		{"no raw", store.Observation{Source: store.SourceWebhook, Order: good.Order}, "no raw"},
		{"no source", store.Observation{Order: good.Order, Raw: good.Raw}, "source"},
		{"no merchantOrderId", store.Observation{Source: store.SourcePoll, Raw: good.Raw,
			Order: &provider.Order{ID: "x", Type: "payin", Status: "new"}}, "merchantOrderId"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Apply(t.Context(), tt.obs)
			if err == nil || !strings.Contains(err.Error(), tt.field) {
				t.Errorf("error %v, want one naming %q", err, tt.field)
			}
		})
	}
	if n := count(t, s, `SELECT count(*) FROM orders`); n != 0 {
		t.Errorf("%d orders stored from bad observations", n)
	}
}

func TestStore_Apply_merchantOrderIDConflict(t *testing.T) {
	s, _ := openStore(t, store.Options{})
	a := newOrder("1.00")
	b := newOrder("2.00").with(func(o *order) { o.mid = a.mid })
	if _, err := s.Apply(t.Context(), obs(t, store.SourceWebhook, a.json(false))); err != nil {
		t.Fatal(err)
	}
	_, err := s.Apply(t.Context(), obs(t, store.SourceWebhook, b.json(false)))
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("error %v, want ErrConflict", err)
	}
	for table, want := range map[string]int{"orders": 1, "webhook_deliveries": 1, "order_history": 1, "outbox": 1} {
		if n := count(t, s, `SELECT count(*) FROM `+table); n != want {
			t.Errorf("%s has %d rows, want %d", table, n, want)
		}
	}
}

func TestStore_OrderByMerchantID(t *testing.T) {
	s, _ := openStore(t, store.Options{})
	if _, err := s.OrderByMerchantID(t.Context(), "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown order: %v, want ErrNotFound", err)
	}
	o := newOrder("3.00")
	p := obs(t, store.SourcePoll, o.processing().json(true))
	w := obs(t, store.SourceWebhook, o.json(false))
	w.ObservedAt = p.ObservedAt.Add(5e9)
	for _, ob := range []store.Observation{p, w} {
		if _, err := s.Apply(t.Context(), ob); err != nil {
			t.Fatal(err)
		}
	}
	v, err := s.OrderByMerchantID(t.Context(), o.mid)
	if err != nil {
		t.Fatal(err)
	}
	if string(v.Order) != string(o.json(false)) {
		t.Errorf("order %s, want the webhook body", v.Order)
	}
	if v.LearnedVia != store.SourceWebhook || v.ProviderID != o.id || v.Status != "completed" {
		t.Errorf("view %+v", v)
	}
	if !v.FirstSeenAt.Equal(p.ObservedAt.Truncate(1e6)) || !v.UpdatedAt.Equal(w.ObservedAt.Truncate(1e6)) {
		t.Errorf("first seen %v updated %v, want %v %v", v.FirstSeenAt, v.UpdatedAt, p.ObservedAt, w.ObservedAt)
	}
	// completedAt is the provider's, not when orderd learned it.
	if want := "2026-03-01T10:00:05Z"; v.CompletedAt.Format("2006-01-02T15:04:05Z07:00") != want {
		t.Errorf("completed at %v, want %s", v.CompletedAt, want)
	}
	if !v.NextCheckAt.IsZero() {
		t.Errorf("final order still due for a check at %v", v.NextCheckAt)
	}
	if len(v.History) != 2 || v.History[0].Source != store.SourcePoll || v.History[0].Outcome != store.OutcomeNew ||
		v.History[1].Source != store.SourceWebhook || v.History[1].Outcome != store.OutcomeChanged ||
		v.History[1].Fingerprint != w.Order.Fingerprint() {
		t.Errorf("history %+v", v.History)
	}
}

// TestStore_Apply_identityChange: a known provider id that arrives with
// another merchantOrderId or another type is an identity conflict, like a
// known merchantOrderId under another provider id: nothing is written, so
// the stored order, its history and its events stay those of the order
// orderd knows.
func TestStore_Apply_identityChange(t *testing.T) {
	base := newOrder("10.00")
	tests := []struct {
		name         string
		first, other order
		field        string
	}{
		{"another merchantOrderId", base, base.with(func(o *order) { o.mid = "m-" + uuid() }), "merchantOrderId"},
		{"another merchantOrderId already stored", base, base.with(func(o *order) { o.mid = "m-taken" }), "merchantOrderId"},
		{"another type", base, base.with(func(o *order) { o.typ = "payout" }), "type"},
		{"another merchantOrderId while processing", base.processing(), base.with(func(o *order) { o.mid = "m-" + uuid() }), "merchantOrderId"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, _ := openStore(t, store.Options{})
			if _, err := s.Apply(t.Context(), obs(t, store.SourceWebhook, newOrder("1.00").with(func(o *order) { o.mid = "m-taken" }).json(false))); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Apply(t.Context(), obs(t, store.SourceWebhook, tt.first.json(false))); err != nil {
				t.Fatal(err)
			}
			for _, src := range []store.Source{store.SourceWebhook, store.SourcePoll} {
				_, err := s.Apply(t.Context(), obs(t, src, tt.other.json(false)))
				if !errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), tt.field) {
					t.Fatalf("%s: error %v, want ErrConflict naming %s", src, err, tt.field)
				}
			}
			for table, want := range map[string]int{"orders": 2, "webhook_deliveries": 2, "order_history": 2, "outbox": 2} {
				if n := count(t, s, `SELECT count(*) FROM `+table); n != want {
					t.Errorf("%s has %d rows, want %d", table, n, want)
				}
			}
			v, err := s.OrderByMerchantID(t.Context(), base.mid)
			if err != nil {
				t.Fatal(err)
			}
			if string(v.Order) != string(tt.first.json(false)) || v.ProviderID != base.id {
				t.Errorf("stored order changed: %s", v.Order)
			}
			if n := count(t, s, `SELECT count(*) FROM orders WHERE provider_id = ? AND merchant_order_id = ? AND type = 'payin'`,
				base.id, base.mid); n != 1 {
				t.Errorf("orders row of %s no longer has its merchantOrderId and type", base.id)
			}
		})
	}
}

// TestStore_Apply_finalMoneyChange: money changing inside a final order is
// applied (the provider's newer word) with its event, and opens an
// amount_changed finding naming what changed — unless the change is a new
// refund transaction, or a refund's own progress.
func TestStore_Apply_finalMoneyChange(t *testing.T) {
	base := newOrder("125.50")
	refunded := base.refunded("25.00")
	tests := []struct {
		name   string
		first  order
		source store.Source
		next   order
		// edit, when set, changes next's rendering.
		edit func([]byte) []byte
		// changes are texts the finding must name; none means no finding.
		changes []string
	}{
		{"merchantTargetWallet amount", base, store.SourceWebhook,
			base.with(func(o *order) { o.amount = "99.00"; o.txs[0].amount = "125.50" }), nil,
			[]string{"merchantTargetWallet: 125.50 brl → 99.00 brl"}},
		{"transaction amounts", base, store.SourceWebhook,
			base.with(func(o *order) { o.txs[0].amount = "1.00" }), nil,
			[]string{"transaction " + base.txs[0].id + " authorized: 125.50 brl → 1.00 brl"}},
		{"merchantTargetWallet removed", base, store.SourcePoll, base, func(b []byte) []byte {
			return []byte(strings.Replace(string(b), `"merchantTargetWallet":{"amount":"125.50","currency":"brl"}`,
				`"merchantTargetWallet":null`, 1))
		}, []string{"merchantTargetWallet: 125.50 brl → none"}},
		{"another payin transaction", base, store.SourceWebhook,
			base.with(func(o *order) {
				o.txs = append(o.txs, tx{id: "extra-tx", typ: "payin", status: "completed", amount: "5.00"})
			}), nil,
			[]string{"transaction extra-tx (payin) added"}},
		{"a refund's amount", refunded, store.SourceWebhook,
			refunded.with(func(o *order) { o.txs[1].amount = "30.00" }), nil,
			[]string{"transaction " + refunded.txs[1].id + " amount: 25.00 brl → 30.00 brl"}},
		{"a new refund transaction", base, store.SourceWebhook, refunded, nil, nil},
		{"a new refund and the same amounts written otherwise", base, store.SourceWebhook,
			refunded.with(func(o *order) { o.amount = "125.5"; o.txs[0].amount = "125.500" }), nil, nil},
		{"a refund's status", refunded, store.SourceWebhook,
			refunded.with(func(o *order) { o.txs[1].status = "rejected" }), nil, nil},
		{"amounts before the final status", base.processing(), store.SourceWebhook, base, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, _ := openStore(t, store.Options{})
			if _, err := s.Apply(t.Context(), obs(t, store.SourceWebhook, tt.first.json(false))); err != nil {
				t.Fatal(err)
			}
			body := tt.next.json(false)
			if tt.edit != nil {
				body = tt.edit(body)
			}
			ob := obs(t, tt.source, body)
			res, err := s.Apply(t.Context(), ob)
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != store.OutcomeChanged || res.EventID == "" {
				t.Fatalf("result %+v, want a change with its event", res)
			}
			if n := count(t, s, `SELECT count(*) FROM outbox WHERE event_id = ?`, res.EventID); n != 1 {
				t.Errorf("the change's event is not in the outbox")
			}
			var detail string
			err = s.DB().QueryRowContext(t.Context(), `SELECT detail FROM findings
				WHERE kind = 'amount_changed' AND subject_key = ? AND resolved_at IS NULL`, base.id).Scan(&detail)
			if len(tt.changes) == 0 {
				if err == nil {
					t.Errorf("amount_changed finding for %s: %s", tt.name, detail)
				}
				return
			}
			if err != nil {
				t.Fatalf("no open amount_changed finding: %v", err)
			}
			for _, c := range tt.changes {
				if !strings.Contains(detail, c) {
					t.Errorf("finding detail does not name %q: %s", c, detail)
				}
			}
			if !strings.Contains(detail, `"merchantOrderId":"`+base.mid+`"`) {
				t.Errorf("finding detail does not name the order: %s", detail)
			}
			if n := count(t, s, `SELECT count(*) FROM outbox WHERE type = 'reconcile.amount_changed' AND event_subject = ?`, base.id); n != 1 {
				t.Errorf("%d reconcile.amount_changed events, want 1", n)
			}
		})
	}
}
