package store_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"orderd/store"
)

// TestStore_Activity checks the windowed counts (the per-minute counters
// from the start of since's minute) against a plain count over the whole
// table from that minute, for windows before, inside and after the rows,
// since on a minute and within one, and after the outbox lost rows to
// pruning: pruned events were still queued in their minute, and the
// counters keep them.
func TestStore_Activity(t *testing.T) {
	base := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	at := base
	// The store's clock (outbox created_at) follows the webhooks' times.
	st, _ := openStore(t, store.Options{Now: func() time.Time { return at }})
	if a, err := st.Activity(t.Context(), time.Unix(0, 0)); err != nil || a != (store.Activity{}) {
		t.Fatalf("empty store: %+v, %v", a, err)
	}
	// 40 webhooks at uneven times: bursts and pauses.
	for i := range 40 {
		at = at.Add(time.Duration(1+(i*7)%13) * time.Second)
		ob := obs(t, store.SourceWebhook, newOrder("10.00").json(false))
		ob.ObservedAt = at
		if _, err := st.Apply(t.Context(), ob); err != nil {
			t.Fatal(err)
		}
	}
	var queued []int64 // every event's created_at, before any pruning
	rows, err := st.DB().QueryContext(t.Context(), `SELECT created_at FROM outbox`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var c int64
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		queued = append(queued, c)
	}
	rows.Close()
	check := func(t *testing.T) {
		t.Helper()
		for _, since := range []time.Time{base.Add(-time.Hour), base, base.Add(30 * time.Second), base.Add(90 * time.Second),
			base.Add(200 * time.Second), at, at.Add(time.Millisecond), at.Add(time.Hour)} {
			a, err := st.Activity(t.Context(), since)
			if err != nil {
				t.Fatal(err)
			}
			from := store.ActivityFrom(since)
			if !from.Equal(since.Truncate(time.Minute)) {
				t.Errorf("since %s: the window starts at %s, want the start of its minute", since, from)
			}
			wantW := int64(count(t, st, `SELECT count(*) FROM webhook_deliveries WHERE first_received_at >= ?`, from.UnixMilli()))
			var wantE int64
			for _, c := range queued {
				if c >= from.UnixMilli() {
					wantE++
				}
			}
			if a.Webhooks != wantW || a.Events != wantE {
				t.Errorf("since %s: %+v, want %d webhooks and %d events", since.Format(time.TimeOnly), a, wantW, wantE)
			}
		}
	}
	t.Run("contiguous keys", check)
	if err := st.Write(t.Context(), func(tx *store.Tx) error {
		_, err := tx.Exec(`DELETE FROM outbox WHERE seq % 3 = 0 OR seq < 5`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Run("keys with gaps", check)
}

// TestStore_RecentOrders_lastChangedFirst: without a query the list is
// in the order of the orders' last state change, not of their creation;
// a stale observation recorded later does not move an order up, and each
// order is listed once.
func TestStore_RecentOrders_lastChangedFirst(t *testing.T) {
	st, _ := openStore(t, store.Options{})
	at := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	apply := func(o order) {
		t.Helper()
		at = at.Add(time.Minute)
		ob := obs(t, store.SourceWebhook, o.json(false))
		ob.ObservedAt = at
		if _, err := st.Apply(t.Context(), ob); err != nil {
			t.Fatal(err)
		}
	}
	orders := map[string]order{}
	for _, mid := range []string{"a", "b", "c", "d"} {
		o := newOrder("5.00")
		o.mid = mid
		orders[mid] = o
		apply(o.processing())
	}
	apply(orders["b"])              // b completes: the latest change
	apply(orders["a"])              // then a, later still
	apply(orders["b"].processing()) // a stale webhook about b changes nothing
	got, err := st.RecentOrders(t.Context(), "", 10)
	if err != nil {
		t.Fatal(err)
	}
	var mids []string
	for i, o := range got {
		mids = append(mids, o.MerchantOrderID)
		if i > 0 && o.UpdatedAt.After(got[i-1].UpdatedAt) {
			t.Errorf("%s (updated %s) follows %s (updated %s)", o.MerchantOrderID, o.UpdatedAt, got[i-1].MerchantOrderID, got[i-1].UpdatedAt)
		}
	}
	if strings.Join(mids, " ") != "a b d c" {
		t.Errorf("recent orders %q, want a b d c (last changed first)", strings.Join(mids, " "))
	}
	if got[0].Status != "completed" || got[3].Status != "processing" {
		t.Errorf("statuses %s, %s: want each order's current state", got[0].Status, got[3].Status)
	}
}

func TestStore_RecentOrders(t *testing.T) {
	st, _ := openStore(t, store.Options{})
	var ids []string
	for _, mid := range []string{"shop-10", "shop-100", "shop-101", "shop-2", "shöp-1", "other"} {
		o := newOrder("5.00")
		o.mid = mid
		ids = append(ids, o.id)
		if _, err := st.Apply(t.Context(), obs(t, store.SourcePoll, o.json(false))); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, query string
		limit       int
		want        string
	}{
		{"newest first without a query", "", 3, "other shöp-1 shop-2"},
		{"a prefix, in merchantOrderId order", "shop-10", 10, "shop-10 shop-100 shop-101"},
		{"the limit", "shop-", 2, "shop-10 shop-100"},
		{"a prefix with a non-ASCII letter", "shö", 10, "shöp-1"},
		{"a provider order id", ids[3], 10, "shop-2"},
		{"nothing", "zzz", 10, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := st.RecentOrders(t.Context(), tc.query, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			var mids []string
			for _, o := range got {
				mids = append(mids, o.MerchantOrderID)
			}
			if strings.Join(mids, " ") != tc.want {
				t.Errorf("got %q, want %q", strings.Join(mids, " "), tc.want)
			}
		})
	}
}

// TestStore_Activity_rolledBack: the counters hold the rows that were
// committed, and only those: a write that fails inside a batch (rolled
// back to its savepoint) or alone leaves no count behind, and events of
// every kind count, not only order events.
func TestStore_Activity_rolledBack(t *testing.T) {
	at := time.Date(2026, 11, 1, 10, 0, 30, 0, time.UTC)
	st, _ := openStore(t, store.Options{Now: func() time.Time { return at }})
	event := func(id string) store.OutboxEvent {
		return store.OutboxEvent{ID: id, Type: "reconcile.test", Subject: "orderd.reconcile.test", Data: []byte(`{}`)}
	}
	fail := errors.New("changed its mind")
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := st.Write(t.Context(), func(tx *store.Tx) error {
				if _, err := tx.InsertEvent(event(fmt.Sprintf("ev-%d", i))); err != nil {
					return err
				}
				if i%3 == 0 {
					return fail
				}
				return nil
			})
			if err != nil && !errors.Is(err, fail) {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	ob := obs(t, store.SourceWebhook, newOrder("1.00").json(false))
	ob.ObservedAt = at
	if _, err := st.Apply(t.Context(), ob); err != nil {
		t.Fatal(err)
	}
	a, err := st.Activity(t.Context(), at.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(count(t, st, `SELECT count(*) FROM outbox`)); a.Events != want || want != 13+1 {
		t.Errorf("events %d, want %d in the outbox, 13 findings' events and the order's", a.Events, want)
	}
	if a.Webhooks != 1 {
		t.Errorf("webhooks %d, want 1", a.Webhooks)
	}
}
