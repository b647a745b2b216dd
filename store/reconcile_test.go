package store_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"orderd/provider"
	"orderd/store"
)

// rcClock is a settable clock for the reconcile tests of this package.
type rcClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *rcClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *rcClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func openReconcileStore(tb testing.TB) (*store.Store, *rcClock) {
	tb.Helper()
	ck := &rcClock{t: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)}
	st, err := store.Open(context.Background(), filepath.Join(tb.TempDir(), "orderd.db"),
		store.Options{Now: ck.Now, CheckAfter: 5 * time.Minute})
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := st.Close(ctx); err != nil {
			tb.Errorf("close: %v", err)
		}
	})
	return st, ck
}

// rcOrder renders an order as the provider would: typ payin or payout,
// one own transaction of amount brl (net is what the merchant receives),
// and refunds given as "id:status:amount".
func rcOrder(id, mid, typ, status, amount, net, completedAt string, refunds ...string) []byte {
	completed, target, source := "null", "null", "null"
	if completedAt != "" {
		completed = `"` + completedAt + `"`
	}
	if status == "completed" {
		if typ == "payin" {
			target = fmt.Sprintf(`{"amount":%q,"currency":"brl"}`, net)
		} else {
			source = fmt.Sprintf(`{"amount":%q,"currency":"brl"}`, amount)
		}
	}
	txs := []string{fmt.Sprintf(`{"id":"tx-%s","type":%q,"status":%q,"authorized":{"amount":%q,"currency":"brl"},`+
		`"merchantWallet":{"amount":%q,"currency":"brl"},"createdAt":"2026-03-01T09:00:00Z","completedAt":%s,"rejectReason":null}`,
		id, typ, status, amount, net, completed)}
	for _, r := range refunds {
		p := strings.Split(r, ":")
		rc := "null"
		if p[1] == "completed" {
			rc = `"2026-03-01T09:30:00Z"`
		}
		txs = append(txs, fmt.Sprintf(`{"id":%q,"type":"refund","status":%q,"amount":{"amount":%q,"currency":"brl"},`+
			`"createdAt":"2026-03-01T09:20:00Z","completedAt":%s,"rejectReason":null}`, p[0], p[1], p[2], rc))
	}
	return fmt.Appendf(nil, `{"id":%q,"merchantOrderId":%q,"type":%q,"createdAt":"2026-03-01T09:00:00+00:00",`+
		`"status":%q,"rejectReason":null,"merchantSourceWallet":%s,"merchantTargetWallet":%s,"transactions":[%s]}`,
		id, mid, typ, status, source, target, strings.Join(txs, ","))
}

func rcApply(tb testing.TB, st *store.Store, src store.Source, raw []byte, at time.Time) store.Result {
	tb.Helper()
	o, err := provider.DecodeOrder(raw)
	if err != nil {
		tb.Fatalf("decode: %v", err)
	}
	res, err := st.Apply(context.Background(), store.Observation{Source: src, Order: o, Raw: raw, ObservedAt: at})
	if err != nil {
		tb.Fatalf("apply: %v", err)
	}
	return res
}

func TestStore_DueOrdersPlan(t *testing.T) {
	st, _ := openReconcileStore(t)
	plan, err := st.DueOrdersPlan(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(plan, "; ")
	if !strings.Contains(joined, "USING INDEX orders_due") || strings.Contains(joined, "USE TEMP B-TREE") {
		t.Fatalf("due-orders plan does not walk orders_due in order: %s", joined)
	}
}

func TestStore_DueOrders(t *testing.T) {
	st, ck := openReconcileStore(t)
	start := ck.Now()
	for i := range 7 {
		rcApply(t, st, store.SourceGateway, rcOrder(fmt.Sprintf("p%d", i), fmt.Sprintf("m%d", i), "payin", "processing", "10", "9.80", ""), ck.Now())
		ck.Advance(time.Second)
	}
	rcApply(t, st, store.SourceWebhook, rcOrder("done", "m-done", "payin", "completed", "10", "9.80", "2026-03-01T09:10:00Z"), ck.Now())
	ck.Advance(10 * time.Minute)
	// Changed just now: due by next_check_at is not enough, it is not stale.
	rcApply(t, st, store.SourceGateway, rcOrder("fresh", "m-fresh", "payin", "processing", "10", "9.80", ""), ck.Now())
	if err := st.Write(t.Context(), func(tx *store.Tx) error {
		_, err := tx.Exec(`UPDATE orders SET next_check_at = ? WHERE provider_id = 'fresh'`, start.UnixMilli())
		return err
	}); err != nil {
		t.Fatal(err)
	}

	now := ck.Now()
	changedBefore := now.Add(-5 * time.Minute)
	n, err := st.CountDueOrders(t.Context(), now, changedBefore)
	if err != nil || n != 7 {
		t.Fatalf("count = %d, %v; want 7", n, err)
	}
	var (
		got    []string
		cursor store.DueCursor
	)
	for {
		page, err := st.DueOrders(t.Context(), now, changedBefore, cursor, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, o := range page {
			got = append(got, o.MerchantOrderID)
		}
		cursor = page[len(page)-1].Cursor()
	}
	if strings.Join(got, ",") != "m0,m1,m2,m3,m4,m5,m6" {
		t.Fatalf("due orders = %v", got)
	}

	// Postponing moves an order out of the due set, growing its wait.
	for i := range 3 {
		err := st.Write(t.Context(), func(tx *store.Tx) error {
			ok, err := tx.PostponeOrderCheck("p0", now.Add(time.Duration(i+1)*time.Minute))
			if !ok {
				t.Error("a processing order was not postponed")
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	page, err := st.DueOrders(t.Context(), now, changedBefore, store.DueCursor{}, 10)
	if err != nil || len(page) != 6 || page[0].MerchantOrderID != "m1" {
		t.Fatalf("after postponing m0: %d due, first %+v (%v)", len(page), page, err)
	}
	later, err := st.DueOrders(t.Context(), now.Add(3*time.Minute), changedBefore, store.DueCursor{}, 10)
	if err != nil || len(later) != 7 || later[6].MerchantOrderID != "m0" || later[6].CheckAttempts != 3 {
		t.Fatalf("3 minutes later: %+v (%v)", later, err)
	}
	// A final order is not postponed.
	err = st.Write(t.Context(), func(tx *store.Tx) error {
		ok, err := tx.PostponeOrderCheck("done", now.Add(time.Hour))
		if ok {
			t.Error("a completed order was postponed")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestLedgerEntries(t *testing.T) {
	learned := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	provided := time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC)
	tests := []struct {
		name    string
		raw     []byte
		moves   []string // kind:amount:placedByProvider
		pending []string // kind:amount
	}{
		{"processing payin", rcOrder("a", "ma", "payin", "processing", "100", "98", ""), nil, []string{"processing:98"}},
		{"completed payin credits the target wallet", rcOrder("a", "ma", "payin", "completed", "100", "98", "2026-03-01T09:30:00Z"),
			[]string{"payin:98:true"}, nil},
		{"completed payin without completedAt is placed when learned", rcOrder("a", "ma", "payin", "completed", "100", "98", ""),
			[]string{"payin:98:false"}, nil},
		{"completed payout debits the source wallet", rcOrder("b", "mb", "payout", "completed", "40", "40", "2026-03-01T09:30:00Z"),
			[]string{"payout:-40:true"}, nil},
		{"processing payout may debit", rcOrder("b", "mb", "payout", "processing", "40", "40", ""), nil, []string{"processing:-40"}},
		{"rejected order moves nothing", rcOrder("c", "mc", "payin", "rejected", "40", "39", ""), nil, nil},
		{"refunds", rcOrder("d", "md", "payin", "completed", "100", "98", "2026-03-01T09:30:00Z", "r1:completed:30", "r2:processing:20", "r3:rejected:5"),
			[]string{"payin:98:true", "refund:-30:true"}, []string{"refund_in_flight:-20"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := provider.DecodeOrder(tt.raw)
			if err != nil {
				t.Fatal(err)
			}
			moves, pending := store.LedgerEntries(o, learned)
			var gotM, gotP []string
			for _, m := range moves {
				gotM = append(gotM, fmt.Sprintf("%s:%s:%v", m.Kind, m.Amount, m.PlacedByProvider))
				if m.PlacedByProvider && !m.PlacedAt.Equal(provided) || !m.PlacedByProvider && !m.PlacedAt.Equal(learned) {
					t.Errorf("%s placed at %s", m.Kind, m.PlacedAt)
				}
			}
			for _, p := range pending {
				gotP = append(gotP, fmt.Sprintf("%s:%s", p.Kind, p.Amount))
			}
			if strings.Join(gotM, ",") != strings.Join(tt.moves, ",") || strings.Join(gotP, ",") != strings.Join(tt.pending, ",") {
				t.Fatalf("moves %v pending %v; want %v %v", gotM, gotP, tt.moves, tt.pending)
			}
		})
	}
}

func TestStore_UpdateLedger(t *testing.T) {
	st, ck := openReconcileStore(t)
	ctx := t.Context()
	rcApply(t, st, store.SourceGateway, rcOrder("a", "ma", "payin", "processing", "100", "98", ""), ck.Now())
	rcApply(t, st, store.SourceGateway, rcOrder("b", "mb", "payout", "processing", "40", "40", ""), ck.Now())
	if _, err := st.UpdateLedger(ctx, 0); err != nil {
		t.Fatal(err)
	}
	pending, err := st.PendingMovements(ctx, "brl", 0)
	if err != nil || len(pending) != 2 {
		t.Fatalf("pending = %+v (%v)", pending, err)
	}

	ck.Advance(time.Hour)
	rcApply(t, st, store.SourceWebhook, rcOrder("a", "ma", "payin", "completed", "100", "98", "2026-03-01T10:30:00Z"), ck.Now())
	rcApply(t, st, store.SourcePoll, rcOrder("a", "ma", "payin", "completed", "100", "98", "2026-03-01T10:30:00Z", "r1:processing:30"), ck.Now())
	rcApply(t, st, store.SourcePoll, rcOrder("a", "ma", "payin", "completed", "100", "98", "2026-03-01T10:30:00Z", "r1:completed:30"), ck.Now())
	// A repeat and a late older state change nothing.
	rcApply(t, st, store.SourceWebhook, rcOrder("a", "ma", "payin", "completed", "100", "98", "2026-03-01T10:30:00Z"), ck.Now())
	rcApply(t, st, store.SourceWebhook, rcOrder("b", "mb", "payout", "rejected", "40", "40", ""), ck.Now())
	for range 2 { // a second call reads nothing new
		if _, err := st.UpdateLedger(ctx, 2); err != nil {
			t.Fatal(err)
		}
	}
	from, to := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	sum, n, err := st.LedgerSum(ctx, "brl", from, to)
	if err != nil || n != 2 || !sum.Equal(decimal.RequireFromString("68")) {
		t.Fatalf("ledger sum = %s over %d movements (%v), want 68 over 2", sum, n, err)
	}
	moves, err := st.LedgerMovements(ctx, "brl", from, to)
	if err != nil || len(moves) != 2 || moves[0].Kind != store.MovementRefund && moves[1].Kind != store.MovementRefund {
		t.Fatalf("movements = %+v (%v)", moves, err)
	}
	if pending, _ := st.PendingMovements(ctx, "brl", 0); len(pending) != 0 {
		t.Fatalf("pending after everything settled = %+v", pending)
	}

	// A poll restating the payin's amount is the newer truth: the ledger
	// follows it.
	rcApply(t, st, store.SourcePoll, rcOrder("a", "ma", "payin", "completed", "100", "97.50", "2026-03-01T10:30:00Z", "r1:completed:30"), ck.Now())
	if _, err := st.UpdateLedger(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if sum, n, _ := st.LedgerSum(ctx, "brl", from, to); n != 2 || !sum.Equal(decimal.RequireFromString("67.5")) {
		t.Fatalf("ledger sum after the restated amount = %s over %d, want 67.5 over 2", sum, n)
	}
}

func TestStore_DriftOpening(t *testing.T) {
	st, ck := openReconcileStore(t)
	ctx := t.Context()
	snap := func(amount string) store.BalanceSnapshot {
		s, err := st.InsertBalanceSnapshot(ctx, "BRL", decimal.RequireFromString(amount), ck.Now(), 0)
		if err != nil {
			t.Fatal(err)
		}
		ck.Advance(time.Minute)
		return s
	}
	record := func(open, close store.BalanceSnapshot, within bool) {
		err := st.Write(ctx, func(tx *store.Tx) error {
			_, err := tx.InsertBalanceDrift(store.BalanceDrift{Currency: "brl", Opening: open, Closing: close,
				WithinTolerance: within, Detail: []byte(`{}`)})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	s1 := snap("100")
	if _, ok, err := st.DriftOpening(ctx, s1); ok || err != nil {
		t.Fatalf("first snapshot has an opening: %v %v", ok, err)
	}
	s2 := snap("110")
	if o, ok, _ := st.DriftOpening(ctx, s2); !ok || o.ID != s1.ID || !o.Amount.Equal(decimal.NewFromInt(100)) {
		t.Fatalf("opening of s2 = %+v", o)
	}
	record(s1, s2, false) // drift left unexplained
	s3 := snap("120")
	if o, _, _ := st.DriftOpening(ctx, s3); o.ID != s1.ID {
		t.Fatalf("opening after unexplained drift = %d, want s1 %d", o.ID, s1.ID)
	}
	record(s1, s3, true) // explained now
	s4 := snap("130")
	if o, _, _ := st.DriftOpening(ctx, s4); o.ID != s3.ID {
		t.Fatalf("opening after explained drift = %d, want s3 %d", o.ID, s3.ID)
	}
	drifts, err := st.BalanceDrifts(ctx, "brl", time.Time{}, ck.Now())
	if err != nil || len(drifts) != 2 || drifts[1].Closing.ID != s3.ID || !drifts[1].WithinTolerance {
		t.Fatalf("drifts = %+v (%v)", drifts, err)
	}
}

func TestStore_Requisites(t *testing.T) {
	st, ck := openReconcileStore(t)
	ctx := t.Context()
	if err := st.UpsertRequisite(ctx, store.Requisite{}); err == nil {
		t.Fatal("a requisite without id was accepted")
	}
	if err := st.UpsertRequisite(ctx, store.Requisite{ID: "AAA-1", Currency: "MXN"}); err != nil {
		t.Fatal(err)
	}
	if err := st.UpsertRequisite(ctx, store.Requisite{ID: "bbb-2", Source: store.RequisiteFromWatch}); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkRequisiteSwept(ctx, "aaa-1", ck.Now(), 3); err != nil {
		t.Fatal(err)
	}
	if err := st.DeactivateRequisite(ctx, "bbb-2"); err != nil {
		t.Fatal(err)
	}
	active, err := st.Requisites(ctx, true)
	if err != nil || len(active) != 1 || active[0].ID != "aaa-1" || active[0].Currency != "mxn" ||
		active[0].Recovered != 3 || !active[0].LastSweptAt.Equal(ck.Now()) || active[0].Source != store.RequisiteFromGateway {
		t.Fatalf("active requisites = %+v (%v)", active, err)
	}
	// Registering again reactivates and keeps the sweep position.
	if err := st.UpsertRequisite(ctx, store.Requisite{ID: "aaa-1"}); err != nil {
		t.Fatal(err)
	}
	if err := st.UpsertRequisite(ctx, store.Requisite{ID: "bbb-2"}); err != nil {
		t.Fatal(err)
	}
	all, _ := st.Requisites(ctx, true)
	if len(all) != 2 || all[0].Currency != "mxn" || all[0].LastSweptAt.IsZero() {
		t.Fatalf("after re-registering: %+v", all)
	}
}

func TestStore_ReconcileRuns(t *testing.T) {
	st, ck := openReconcileStore(t)
	ctx := t.Context()
	id, err := st.StartReconcileRun(ctx, "stale", ck.Now())
	if err != nil {
		t.Fatal(err)
	}
	runs, _ := st.ReconcileRuns(ctx, "stale", 10)
	if len(runs) != 1 || !runs[0].FinishedAt.IsZero() {
		t.Fatalf("running run = %+v", runs)
	}
	ck.Advance(time.Second)
	if err := st.FinishReconcileRun(ctx, id, ck.Now(), map[string]int{"checked": 4}, "boom"); err != nil {
		t.Fatal(err)
	}
	runs, _ = st.ReconcileRuns(ctx, "", 10)
	if len(runs) != 1 || runs[0].Counts["checked"] != 4 || runs[0].Error != "boom" ||
		runs[0].FinishedAt.Sub(runs[0].StartedAt) != time.Second {
		t.Fatalf("finished run = %+v", runs)
	}
}

// BenchmarkStore_DueOrders measures one page of the reconciler's
// due-orders query on 1,000,000 orders (80% final, 20% in processing,
// next checks spread over a day). The ceiling it is compared with is
// 20 ms per query.
func BenchmarkStore_DueOrders(b *testing.B) {
	st, ck := openReconcileStore(b)
	const total = 1_000_000
	start := ck.Now().Add(-24 * time.Hour).UnixMilli()
	err := st.Write(context.Background(), func(tx *store.Tx) error {
		// ?1 is the count, ?2 the first update time (one order every 86 ms).
		_, err := tx.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
			INSERT INTO orders (provider_id, merchant_order_id, type, status, fingerprint, learned_via,
				first_seen_at, updated_at, next_check_at)
			SELECT 'p-' || i, 'm-' || i, 'payin',
				CASE WHEN i % 5 = 0 THEN 'processing' ELSE 'completed' END, 'fp', 'webhook',
				?2 + i * 86, ?2 + i * 86,
				CASE WHEN i % 5 = 0 THEN ?2 + (i * 7919 % ?1) * 86 + 300000 END
			FROM n`, total, start)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	plan, err := st.DueOrdersPlan(context.Background())
	if err != nil || !strings.Contains(strings.Join(plan, ";"), "orders_due") {
		b.Fatalf("plan %v (%v)", plan, err)
	}
	now := ck.Now()
	changedBefore := now.Add(-5 * time.Minute)
	b.ResetTimer()
	var rows int
	for i := 0; b.Loop(); i++ {
		// Walk pages from the start and from the middle of the due set.
		cursor := store.DueCursor{}
		if i%2 == 1 {
			cursor.NextCheckAt = start + 12*3600*1000
		}
		page, err := st.DueOrders(context.Background(), now, changedBefore, cursor, 500)
		if err != nil {
			b.Fatal(err)
		}
		rows += len(page)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/query")
	b.ReportMetric(20, "ceiling-ms/query")
	b.ReportMetric(float64(rows)/float64(b.N), "rows/query")
}
