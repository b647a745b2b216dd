package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"orderd/provider"
	"orderd/store"
)

// attemptClock is a settable clock for the attempt tests.
type attemptClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *attemptClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *attemptClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// openAttemptStore opens a store on a fresh file with clock c.
func openAttemptStore(t *testing.T, c *attemptClock) *store.Store {
	t.Helper()
	s, err := store.Open(t.Context(), t.TempDir()+"/orderd.db", store.Options{Now: c.Now})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return s
}

func newClock() *attemptClock {
	return &attemptClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

// payinAttempt describes a pending payin attempt for merchantOrderID whose
// request differs by body.
func payinAttempt(merchantOrderID, body string) store.NewAttempt {
	req := fmt.Sprintf(`{"merchantOrderId":%q,"invoice":{"amount":%q,"currency":"brl"}}`, merchantOrderID, body)
	return store.NewAttempt{
		Kind:            store.AttemptPayin,
		Origin:          store.OriginGateway,
		MerchantOrderID: merchantOrderID,
		IdempotencyKey:  "order:" + merchantOrderID,
		Request:         json.RawMessage(req),
		RequestHash:     "hash-" + body,
		State:           store.AttemptPending,
	}
}

// createdPayin is a create answer for a payin in processing.
func createdPayin(merchantOrderID string) ([]byte, *provider.Order) {
	raw := fmt.Appendf(nil, `{"id":"provider-%s","merchantOrderId":%q,"type":"payin","createdAt":"2026-03-01T12:00:00+00:00",`+
		`"status":"processing","rejectReason":null,"auth":{"type":"pixDynamicQrCode","code":"qr","expiresAt":"2026-03-01T13:00:00Z"}}`,
		merchantOrderID, merchantOrderID)
	o, err := provider.DecodeOrder(raw)
	if err != nil {
		panic(err)
	}
	return raw, o
}

func TestStore_BeginAttempt(t *testing.T) {
	tests := []struct {
		name string
		// prev is the state the first attempt is finished with; empty
		// leaves it pending.
		prev      store.AttemptState
		prevCode  string
		second    string // body of the second request ("a" is the first's)
		anyReq    bool
		retry     bool
		wantNew   bool
		wantError error
	}{
		{name: "identical repeat of a pending attempt reuses it", second: "a"},
		{name: "different request while pending conflicts", second: "b", wantError: store.ErrAttemptConflict},
		{name: "identical repeat of an in-doubt attempt reuses it", prev: store.AttemptInDoubt, second: "a"},
		{name: "different request while in doubt conflicts", prev: store.AttemptInDoubt, second: "b", wantError: store.ErrAttemptConflict},
		{name: "identical repeat of a created attempt reuses it", prev: store.AttemptCreated, second: "a"},
		{name: "different request after created conflicts", prev: store.AttemptCreated, second: "b", wantError: store.ErrAttemptConflict},
		{name: "identical repeat of a rejection reuses it", prev: store.AttemptRejected, prevCode: "VALIDATION", second: "a"},
		{name: "corrected request after a rejection is new", prev: store.AttemptRejected, prevCode: "VALIDATION", second: "b", wantNew: true},
		{name: "identical repeat of a retryable rejection is new", prev: store.AttemptRejected, prevCode: "PAYIN_DISABLED", second: "a", retry: true, wantNew: true},
		{name: "identical repeat of a final rejection reuses it even when retrying", prev: store.AttemptRejected, prevCode: "VALIDATION", second: "a", retry: true},
		{name: "identical repeat after not created is new", prev: store.AttemptNotCreated, second: "a", wantNew: true},
		{name: "any request joins a live attempt", prev: store.AttemptInDoubt, second: "b", anyReq: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openAttemptStore(t, newClock())
			first, isNew, err := s.BeginAttempt(t.Context(), payinAttempt("m1", "a"))
			if err != nil || !isNew {
				t.Fatalf("first attempt: new %v, err %v", isNew, err)
			}
			switch tt.prev {
			case "":
			case store.AttemptNotCreated:
				if _, err := s.FinishAttempt(t.Context(), first.ID, store.AttemptOutcome{State: store.AttemptInDoubt}); err != nil {
					t.Fatal(err)
				}
				if err := s.SettleAttemptNotCreated(t.Context(), first.ID); err != nil {
					t.Fatal(err)
				}
			case store.AttemptCreated:
				raw, o := createdPayin("m1")
				if _, err := s.FinishAttempt(t.Context(), first.ID, store.AttemptOutcome{State: store.AttemptCreated, Response: raw,
					Observation: &store.Observation{Source: store.SourceGateway, Order: o, Raw: raw}}); err != nil {
					t.Fatal(err)
				}
			default:
				if _, err := s.FinishAttempt(t.Context(), first.ID, store.AttemptOutcome{State: tt.prev, ErrorCode: tt.prevCode}); err != nil {
					t.Fatal(err)
				}
			}
			na := payinAttempt("m1", tt.second)
			na.AnyRequest, na.RetryRejected, na.FinalCodes = tt.anyReq, tt.retry, []string{"VALIDATION"}
			got, isNew, err := s.BeginAttempt(t.Context(), na)
			if tt.wantError != nil {
				var ce *store.AttemptConflictError
				if !errors.Is(err, tt.wantError) || !errors.As(err, &ce) || ce.Existing.ID != first.ID {
					t.Fatalf("second attempt: err %v, want %v naming attempt %d", err, tt.wantError, first.ID)
				}
				return
			}
			if err != nil {
				t.Fatalf("second attempt: %v", err)
			}
			if isNew != tt.wantNew {
				t.Fatalf("second attempt new = %v, want %v", isNew, tt.wantNew)
			}
			if !tt.wantNew && got.ID != first.ID {
				t.Errorf("second attempt reused %d, want %d", got.ID, first.ID)
			}
			if tt.wantNew && (got.ID == first.ID || got.State != store.AttemptPending) {
				t.Errorf("second attempt = %d %s, want a new pending one", got.ID, got.State)
			}
			all, err := s.AttemptsByMerchantID(t.Context(), "m1")
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: 2, false: 1}[tt.wantNew]; len(all) != want {
				t.Errorf("stored attempts = %d, want %d", len(all), want)
			}
		})
	}
}

func TestStore_BeginAttempt_refusesBadInput(t *testing.T) {
	s := openAttemptStore(t, newClock())
	tests := []struct {
		name string
		edit func(*store.NewAttempt)
	}{
		{"empty key", func(na *store.NewAttempt) { na.IdempotencyKey = "" }},
		{"empty hash", func(na *store.NewAttempt) { na.RequestHash = "" }},
		{"request not JSON", func(na *store.NewAttempt) { na.Request = json.RawMessage("{") }},
		{"settled state", func(na *store.NewAttempt) { na.State = store.AttemptCreated }},
		{"unknown kind", func(na *store.NewAttempt) { na.Kind = "transfer" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			na := payinAttempt("m-bad", "a")
			tt.edit(&na)
			if _, _, err := s.BeginAttempt(t.Context(), na); err == nil {
				t.Fatal("BeginAttempt accepted it")
			}
			if as, _ := s.ListAttempts(t.Context(), store.AttemptQuery{}); len(as) != 0 {
				t.Fatalf("%d attempts stored after a refusal", len(as))
			}
		})
	}
}

func TestStore_FinishAttempt(t *testing.T) {
	t.Run("created stores the order through the one write path", func(t *testing.T) {
		s := openAttemptStore(t, newClock())
		a, _, err := s.BeginAttempt(t.Context(), payinAttempt("m1", "a"))
		if err != nil {
			t.Fatal(err)
		}
		raw, o := createdPayin("m1")
		got, err := s.FinishAttempt(t.Context(), a.ID, store.AttemptOutcome{State: store.AttemptCreated, Response: raw,
			Observation: &store.Observation{Source: store.SourceGateway, Order: o, Raw: raw}})
		if err != nil {
			t.Fatal(err)
		}
		if got.State != store.AttemptCreated || string(got.Response) != string(raw) || got.SettledAt.IsZero() {
			t.Errorf("attempt = %s response %s settled %v", got.State, got.Response, got.SettledAt)
		}
		v, err := s.OrderByMerchantID(t.Context(), "m1")
		if err != nil {
			t.Fatalf("order not stored: %v", err)
		}
		if v.LearnedVia != store.SourceGateway || v.Status != provider.StatusProcessing {
			t.Errorf("order learned via %s status %s", v.LearnedVia, v.Status)
		}
		evs, err := s.PendingEvents(t.Context(), 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 1 || evs[0].Type != "order.processing" || evs[0].LearnedVia != store.SourceGateway {
			t.Errorf("events = %+v, want one order.processing learned via gateway", evs)
		}
	})
	t.Run("a created order that contradicts a stored one keeps the outcome and opens a finding", func(t *testing.T) {
		s := openAttemptStore(t, newClock())
		// orderd already holds m1 under another provider id.
		raw, o := createdPayin("m1")
		other := bytes.Replace(raw, []byte(`"provider-m1"`), []byte(`"provider-other"`), 1)
		otherOrder, err := provider.DecodeOrder(other)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Apply(t.Context(), store.Observation{Source: store.SourcePoll, Order: otherOrder, Raw: other}); err != nil {
			t.Fatal(err)
		}
		a, _, err := s.BeginAttempt(t.Context(), payinAttempt("m1", "a"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.FinishAttempt(t.Context(), a.ID, store.AttemptOutcome{State: store.AttemptCreated, Response: raw,
			Observation: &store.Observation{Source: store.SourceGateway, Order: o, Raw: raw}})
		if err != nil {
			t.Fatal(err)
		}
		if got.State != store.AttemptCreated || !strings.Contains(got.Detail, "belongs to another order") {
			t.Errorf("attempt = %s, detail %q", got.State, got.Detail)
		}
		if v, err := s.OrderByMerchantID(t.Context(), "m1"); err != nil || v.ProviderID != "provider-other" {
			t.Fatalf("stored m1 = %+v (%v), want the order held before", v, err)
		}
		fs, err := s.FindingsPage(t.Context(), store.FindingQuery{Kind: store.FindingIdentityConflict, State: "open", Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(fs) != 1 || fs[0].Key != "m1" {
			t.Fatalf("identity_conflict findings = %+v, want one about m1", fs)
		}
		var d store.IdentityConflict
		if err := json.Unmarshal(fs[0].Detail, &d); err != nil {
			t.Fatal(err)
		}
		if d.OrderID != "provider-m1" || d.Source != store.SourceGateway || string(d.Order) != string(raw) ||
			!strings.Contains(d.Reason, "belongs to another order") {
			t.Errorf("finding detail = %+v", d)
		}
	})
	t.Run("in doubt is due at once", func(t *testing.T) {
		c := newClock()
		s := openAttemptStore(t, c)
		a, _, _ := s.BeginAttempt(t.Context(), payinAttempt("m1", "a"))
		got, err := s.FinishAttempt(t.Context(), a.ID, store.AttemptOutcome{State: store.AttemptInDoubt, Detail: "HTTP 502"})
		if err != nil {
			t.Fatal(err)
		}
		if got.State != store.AttemptInDoubt || !got.NextCheckAt.Equal(c.Now()) || got.Detail != "HTTP 502" || !got.SettledAt.IsZero() {
			t.Errorf("attempt = %+v", got)
		}
	})
	t.Run("a settled attempt is left as it is", func(t *testing.T) {
		s := openAttemptStore(t, newClock())
		a, _, _ := s.BeginAttempt(t.Context(), payinAttempt("m1", "a"))
		if _, err := s.RecoverPendingAttempts(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := s.SettleAttemptNotCreated(t.Context(), a.ID); err != nil {
			t.Fatal(err)
		}
		got, err := s.FinishAttempt(t.Context(), a.ID, store.AttemptOutcome{State: store.AttemptRejected, ErrorCode: "UNKNOWN"})
		if err != nil {
			t.Fatal(err)
		}
		if got.State != store.AttemptNotCreated || got.ErrorCode != "" {
			t.Errorf("attempt = %s %q, want not_created untouched", got.State, got.ErrorCode)
		}
	})
}

func TestStore_RecoverPendingAttempts(t *testing.T) {
	s := openAttemptStore(t, newClock())
	pending, _, _ := s.BeginAttempt(t.Context(), payinAttempt("m1", "a"))
	created, _, _ := s.BeginAttempt(t.Context(), payinAttempt("m2", "a"))
	raw, o := createdPayin("m2")
	if _, err := s.FinishAttempt(t.Context(), created.ID, store.AttemptOutcome{State: store.AttemptCreated, Response: raw,
		Observation: &store.Observation{Source: store.SourceGateway, Order: o, Raw: raw}}); err != nil {
		t.Fatal(err)
	}
	n, err := s.RecoverPendingAttempts(t.Context())
	if err != nil || n != 1 {
		t.Fatalf("recovered %d, %v; want 1", n, err)
	}
	a, err := s.AttemptByID(t.Context(), pending.ID)
	if err != nil {
		t.Fatal(err)
	}
	if a.State != store.AttemptInDoubt || a.NextCheckAt.IsZero() {
		t.Errorf("pending attempt became %s (next check %v), want in_doubt and due", a.State, a.NextCheckAt)
	}
	b, _ := s.AttemptByID(t.Context(), created.ID)
	if b.State != store.AttemptCreated {
		t.Errorf("created attempt became %s", b.State)
	}
	if n, err := s.RecoverPendingAttempts(t.Context()); err != nil || n != 0 {
		t.Errorf("second recovery: %d, %v; want 0", n, err)
	}
}

func TestStore_DueInDoubtAttempts(t *testing.T) {
	c := newClock()
	s := openAttemptStore(t, c)
	begin := func(na store.NewAttempt, state store.AttemptState) store.Attempt {
		t.Helper()
		a, _, err := s.BeginAttempt(t.Context(), na)
		if err != nil {
			t.Fatal(err)
		}
		if state != store.AttemptPending {
			if a, err = s.FinishAttempt(t.Context(), a.ID, store.AttemptOutcome{State: state}); err != nil {
				t.Fatal(err)
			}
		}
		return a
	}
	old := begin(payinAttempt("old", "a"), store.AttemptInDoubt)
	oldPending := begin(payinAttempt("old-pending", "a"), store.AttemptPending)
	refund := payinAttempt("refund", "a")
	refund.Kind, refund.IdempotencyKey = store.AttemptRefund, "refund:x"
	begin(refund, store.AttemptInDoubt)
	postponed := begin(payinAttempt("postponed", "a"), store.AttemptInDoubt)
	begin(payinAttempt("rejected", "a"), store.AttemptRejected)
	c.Add(2 * time.Minute)
	begin(payinAttempt("young", "a"), store.AttemptInDoubt)
	if err := s.PostponeAttempt(t.Context(), postponed.ID, c.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}

	due, err := s.DueInDoubtAttempts(t.Context(), c.Now().Add(-time.Minute), c.Now(), 10)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, a := range due {
		ids = append(ids, a.MerchantOrderID)
	}
	if want := []string{"old", "old-pending"}; !slices.Equal(ids, want) {
		t.Errorf("due = %v, want %v", ids, want)
	}
	if due, _ := s.DueInDoubtAttempts(t.Context(), c.Now().Add(-time.Minute), c.Now(), 1); len(due) != 1 || due[0].ID != old.ID {
		t.Errorf("limit 1 gave %d attempts, want the most overdue (%d)", len(due), old.ID)
	}
	c.Add(2 * time.Hour)
	due, _ = s.DueInDoubtAttempts(t.Context(), c.Now().Add(-time.Minute), c.Now(), 10)
	ids = ids[:0]
	for _, a := range due {
		ids = append(ids, a.MerchantOrderID)
	}
	if want := []string{"old", "old-pending", "young", "postponed"}; !slices.Equal(ids, want) {
		t.Errorf("due later = %v, want %v", ids, want)
	}
	_ = oldPending
}

func TestStore_SettleAttemptNotCreated(t *testing.T) {
	c := newClock()
	s := openAttemptStore(t, c)
	na := payinAttempt("m1", "a")
	na.Kind = store.AttemptPayout
	a, _, _ := s.BeginAttempt(t.Context(), na)
	if _, err := s.FinishAttempt(t.Context(), a.ID, store.AttemptOutcome{State: store.AttemptInDoubt}); err != nil {
		t.Fatal(err)
	}
	c.Add(90 * time.Second)
	for i := range 2 { // the second call changes nothing
		if err := s.SettleAttemptNotCreated(t.Context(), a.ID); err != nil {
			t.Fatalf("settle %d: %v", i, err)
		}
	}
	got, _ := s.AttemptByID(t.Context(), a.ID)
	if got.State != store.AttemptNotCreated || !got.SettledAt.Equal(c.Now()) {
		t.Errorf("attempt = %s settled %v", got.State, got.SettledAt)
	}
	evs, err := s.PendingEvents(t.Context(), 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 {
		t.Fatalf("%d events, want 1", len(evs))
	}
	ev := evs[0]
	if ev.ID != store.EventID("m1", "order.not_created") || ev.Type != "order.not_created" ||
		ev.Subject != "orders.payout.not_created" || ev.EventSubject != "m1" || ev.MerchantOrderID != "m1" {
		t.Errorf("event = %+v", ev)
	}
	var data struct {
		Kind            string          `json:"kind"`
		MerchantOrderID string          `json:"merchantOrderId"`
		Request         json.RawMessage `json:"request"`
		CreatedAt       time.Time       `json:"createdAt"`
		SettledAt       time.Time       `json:"settledAt"`
	}
	if err := json.Unmarshal(ev.Data, &data); err != nil {
		t.Fatal(err)
	}
	if data.Kind != "payout" || data.MerchantOrderID != "m1" || string(data.Request) != string(na.Request) ||
		!data.CreatedAt.Equal(a.CreatedAt) || !data.SettledAt.Equal(c.Now()) {
		t.Errorf("event data = %s", ev.Data)
	}
}

func TestStore_SettleAttemptCreated(t *testing.T) {
	s := openAttemptStore(t, newClock())
	a, _, _ := s.BeginAttempt(t.Context(), payinAttempt("m1", "a"))
	if _, err := s.RecoverPendingAttempts(t.Context()); err != nil {
		t.Fatal(err)
	}
	other, oo := createdPayin("m2")
	if err := s.SettleAttemptCreated(t.Context(), a.ID, store.Observation{Source: store.SourcePoll, Order: oo, Raw: other}); err == nil {
		t.Fatal("settled with another order's state")
	}
	if _, err := s.OrderByMerchantID(t.Context(), "m2"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the other order was stored: %v", err)
	}
	raw, o := createdPayin("m1")
	if err := s.SettleAttemptCreated(t.Context(), a.ID, store.Observation{Source: store.SourcePoll, Order: o, Raw: raw}); err != nil {
		t.Fatal(err)
	}
	got, _ := s.AttemptByID(t.Context(), a.ID)
	if got.State != store.AttemptCreated || string(got.Response) != string(raw) {
		t.Errorf("attempt = %s %s", got.State, got.Response)
	}
	v, err := s.OrderByMerchantID(t.Context(), "m1")
	if err != nil || v.LearnedVia != store.SourcePoll {
		t.Errorf("order = %+v, %v", v, err)
	}
}

func TestStore_PostponeAttempt(t *testing.T) {
	c := newClock()
	s := openAttemptStore(t, c)
	a, _, _ := s.BeginAttempt(t.Context(), payinAttempt("m1", "a"))
	next := c.Now().Add(5 * time.Minute)
	for range 2 {
		if err := s.PostponeAttempt(t.Context(), a.ID, next); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := s.AttemptByID(t.Context(), a.ID)
	if got.CheckAttempts != 2 || !got.NextCheckAt.Equal(next) {
		t.Errorf("attempt checks %d next %v", got.CheckAttempts, got.NextCheckAt)
	}
	if err := s.PostponeAttempt(t.Context(), 999, next); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("postpone unknown: %v, want ErrNotFound", err)
	}
}

func TestStore_OrdersPage(t *testing.T) {
	c := newClock()
	s := openAttemptStore(t, c)
	const n = 23
	for i := range n {
		status := "processing"
		if i%3 == 0 {
			status = "completed"
		}
		raw := fmt.Appendf(nil, `{"id":"00000000-0000-4000-8000-%012d","merchantOrderId":"m%02d","type":"payin",`+
			`"createdAt":"2026-03-%02dT10:00:00Z","status":%q,"rejectReason":null,"transactions":[]}`, i, i, 1+i%5, status)
		o, err := provider.DecodeOrder(raw)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Apply(t.Context(), store.Observation{Source: store.SourcePoll, Order: o, Raw: raw}); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("keyset pages see every order once", func(t *testing.T) {
		seen := map[string]int{}
		var after int64
		for pages := 0; ; pages++ {
			if pages > n {
				t.Fatal("paging does not end")
			}
			page, err := s.OrdersPage(t.Context(), store.OrderQuery{AfterID: after, Limit: 5})
			if err != nil {
				t.Fatal(err)
			}
			rows := page.Orders
			if page.ScannedTo != 0 {
				t.Errorf("unfiltered page stopped at its bound: %+v", page)
			}
			if len(rows) == 0 {
				break
			}
			for _, r := range rows {
				seen[r.MerchantOrderID]++
				if !json.Valid(r.Order) || r.ProviderID == "" {
					t.Errorf("row %+v", r)
				}
			}
			after = rows[len(rows)-1].RowID
		}
		if len(seen) != n {
			t.Errorf("saw %d orders, want %d", len(seen), n)
		}
		for id, k := range seen {
			if k != 1 {
				t.Errorf("%s seen %d times", id, k)
			}
		}
	})
	tests := []struct {
		name string
		q    store.OrderQuery
		want int
	}{
		{"status", store.OrderQuery{Status: "completed"}, 8},
		{"type", store.OrderQuery{Type: "payout"}, 0},
		{"from inclusive to exclusive", store.OrderQuery{
			From: time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC), To: time.Date(2026, 3, 3, 10, 0, 0, 0, time.UTC)}, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			page, err := s.OrdersPage(t.Context(), tt.q)
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Orders) != tt.want || page.ScannedTo != 0 {
				t.Errorf("%d orders, stopped at %d; want %d, none", len(page.Orders), page.ScannedTo, tt.want)
			}
		})
	}

	// A filtered page walks at most OrderScan orders: a filter few orders
	// match gives short pages that say where the walk stopped, and the
	// listing that follows them lists every match once.
	bounded, err := store.Open(t.Context(), s.Path(), store.Options{ReadOnly: true, OrderScan: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer bounded.Close(t.Context())
	for _, tt := range tests {
		t.Run(tt.name+", walking 4 orders a page", func(t *testing.T) {
			var (
				after int64
				got   int
			)
			for pages := 0; ; pages++ {
				if pages > n {
					t.Fatal("paging does not end")
				}
				q := tt.q
				q.AfterID, q.Limit = after, 5
				page, err := bounded.OrdersPage(t.Context(), q)
				if err != nil {
					t.Fatal(err)
				}
				got += len(page.Orders)
				if len(page.Orders) > 0 && page.Orders[0].RowID > after+4 {
					t.Fatalf("page after %d begins at %d: it walked more than 4 orders", after, page.Orders[0].RowID)
				}
				switch {
				case page.ScannedTo != 0:
					if page.ScannedTo != after+4 {
						t.Fatalf("page after %d stopped at %d, want %d", after, page.ScannedTo, after+4)
					}
					after = page.ScannedTo
				case len(page.Orders) == 5:
					after = page.Orders[4].RowID
				default:
					if pages < (n-1)/4 {
						t.Fatalf("listing ended after %d pages at %d, before the last orders", pages+1, after)
					}
					if got != tt.want {
						t.Errorf("listed %d orders, want %d", got, tt.want)
					}
					return
				}
			}
		})
	}
}

// TestStore_HasOddOrderWord: whether a stored order has a status or type
// the provider does not document.
func TestStore_HasOddOrderWord(t *testing.T) {
	s := openAttemptStore(t, newClock())
	raw := []byte(`{"id":"00000000-0000-4000-8000-000000000001","merchantOrderId":"m1","type":"payin",` +
		`"createdAt":"2026-03-01T10:00:00Z","status":"on_hold","rejectReason":null,"transactions":[]}`)
	o, err := provider.DecodeOrder(raw)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(t.Context(), store.Observation{Source: store.SourcePoll, Order: o, Raw: raw}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		field, value string
		want         bool
	}{
		{"status", "on_hold", true},
		{"status", "refunded", false},
		{"status", "completed", false}, // documented: never odd
		{"type", "payin", false},
		{"type", "transfer", false},
	} {
		got, err := s.HasOddOrderWord(t.Context(), tt.field, tt.value)
		if err != nil || got != tt.want {
			t.Errorf("HasOddOrderWord(%s, %s) = %v, %v; want %v", tt.field, tt.value, got, err, tt.want)
		}
	}
	if _, err := s.HasOddOrderWord(t.Context(), "currency", "brl"); err == nil {
		t.Error("HasOddOrderWord of an unknown field: no error")
	}
}

func TestStore_FindingsPage(t *testing.T) {
	s := openAttemptStore(t, newClock())
	err := s.Write(t.Context(), func(tx *store.Tx) error {
		for _, k := range []string{"a", "b", "c"} {
			if _, _, err := tx.OpenFinding(store.FindingStuckOrder, k, map[string]string{"order": k}); err != nil {
				return err
			}
		}
		if _, _, err := tx.OpenFinding(store.FindingBalanceDrift, "brl", nil); err != nil {
			return err
		}
		_, err := tx.ResolveFinding(store.FindingStuckOrder, "b")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		q    store.FindingQuery
		want []string
	}{
		{"all", store.FindingQuery{}, []string{"a", "b", "c", "brl"}},
		{"open", store.FindingQuery{State: "open"}, []string{"a", "c", "brl"}},
		{"resolved", store.FindingQuery{State: "resolved"}, []string{"b"}},
		{"kind", store.FindingQuery{Kind: store.FindingBalanceDrift}, []string{"brl"}},
		{"page", store.FindingQuery{Limit: 2, AfterID: 1}, []string{"b", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs, err := s.FindingsPage(t.Context(), tt.q)
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, f := range fs {
				keys = append(keys, f.Key)
				if (f.State == "resolved") != (f.ResolvedAt != nil) {
					t.Errorf("finding %d state %s resolvedAt %v", f.ID, f.State, f.ResolvedAt)
				}
			}
			if !slices.Equal(keys, tt.want) {
				t.Errorf("findings = %v, want %v", keys, tt.want)
			}
		})
	}
	if _, err := s.FindingsPage(t.Context(), store.FindingQuery{State: "closed"}); err == nil {
		t.Error("unknown state accepted")
	}
}

func TestStore_GatewayRequisites(t *testing.T) {
	s := openAttemptStore(t, newClock())
	create := func(id string) {
		t.Helper()
		a, _, err := s.BeginAttempt(t.Context(), store.NewAttempt{Kind: store.AttemptRequisite, IdempotencyKey: "requisite:" + id,
			Request: json.RawMessage(`{}`), RequestHash: id, State: store.AttemptPending})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.FinishAttempt(t.Context(), a.ID, store.AttemptOutcome{State: store.AttemptCreated,
			Response: json.RawMessage(`{"id":"` + id + `","requisite":{"clabe":"1","type":"clabe"}}`)}); err != nil {
			t.Fatal(err)
		}
	}
	create("r1")
	create("r2")
	d, _, err := s.BeginAttempt(t.Context(), store.NewAttempt{Kind: store.AttemptRequisiteDeactivate,
		IdempotencyKey: store.RequisiteDeactivateKey("r1"), Request: json.RawMessage(`{"id":"r1"}`), RequestHash: "d1",
		State: store.AttemptPending})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.FinishAttempt(t.Context(), d.ID, store.AttemptOutcome{State: store.AttemptCreated, Response: json.RawMessage(`null`)}); err != nil {
		t.Fatal(err)
	}
	ids, err := s.GatewayRequisites(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids, []string{"r2"}) {
		t.Errorf("active requisites = %v, want [r2]", ids)
	}
}
