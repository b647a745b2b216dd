package providertest_test

import (
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"orderd/provider"
	"orderd/provider/providertest"
)

var clabeRE = regexp.MustCompile(`^[0-9]{18}$`)

func createRequisite(t *testing.T, s *providertest.Server, body string) (provider.Requisite, []byte) {
	t.Helper()
	data := mustOK(t, s, providertest.PathRequisiteCreate, body)
	var r provider.Requisite
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	return r, data
}

// validClabe checks the CLABE check digit (weights 3, 7, 1).
func validClabe(c string) bool {
	if !clabeRE.MatchString(c) {
		return false
	}
	w := [3]int{3, 7, 1}
	sum := 0
	for i := range 17 {
		sum += (int(c[i]-'0') * w[i%3]) % 10
	}
	return int(c[17]-'0') == (10-sum%10)%10
}

// fakeClock is a settable clock for Options.Now.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock(t time.Time) *fakeClock { return &fakeClock{now: t} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestServer_RequisiteCreate(t *testing.T) {
	clock := newClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := start(t, providertest.Options{Now: clock.Now, RequisiteMinAmount: "25"})
	r, raw := createRequisite(t, s, `{"client":{"id":"c-1"},"currency":"mxn","webhookUrl":"https://shop.example/hook"}`)
	if !uuidRE.MatchString(r.ID) || !validClabe(r.Requisite.Clabe) || r.Requisite.Type != "clabe" ||
		r.Requisite.Reference != nil || r.MinAmount != "25.00" {
		t.Errorf("requisite = %+v", r)
	}
	if want := clock.Now().AddDate(1, 0, 0); !r.ExpiresAt.Equal(want) {
		t.Errorf("expiresAt %v, want %v", r.ExpiresAt, want)
	}
	if !strings.Contains(string(raw), `"reference":null`) || !strings.Contains(string(raw), `Z"`) {
		t.Errorf("requisite JSON = %s", raw)
	}

	again, _ := createRequisite(t, s, `{"client":{"id":"c-1"},"currency":"mxn"}`)
	if again.ID != r.ID {
		t.Errorf("a second create for the same client and currency made requisite %s, want %s", again.ID, r.ID)
	}
	short, _ := createRequisite(t, s, `{"client":{"id":"c-1"},"currency":"mxn","type":"short_term"}`)
	if short.ID == r.ID || !short.ExpiresAt.Equal(clock.Now().Add(24*time.Hour)) {
		t.Errorf("short-term requisite = %+v", short)
	}

	tests := []struct {
		name   string
		body   string
		fields []string
	}{
		{"nothing", `{}`, []string{"client.id", "currency"}},
		{"bad currency", `{"client":{"id":"c"},"currency":"MXN"}`, []string{"currency"}},
		{"bad conversion currency", `{"client":{"id":"c"},"currency":"mxn","conversionCurrency":"usdt"}`, []string{"conversionCurrency"}},
		{"bad type", `{"client":{"id":"c"},"currency":"mxn","type":"forever"}`, []string{"type"}},
		{"bad webhookUrl", `{"client":{"id":"c"},"currency":"mxn","webhookUrl":"hook"}`, []string{"webhookUrl"}},
		{"client id as number", `{"client":{"id":7},"currency":"mxn"}`, []string{"client.id"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			perr := mustCode(t, s, providertest.PathRequisiteCreate, tt.body, provider.CodeValidation)
			var got []string
			for _, v := range perr.ValidationErrors {
				got = append(got, v.Field)
			}
			if !slices.Equal(got, tt.fields) {
				t.Errorf("fields %v, want %v", got, tt.fields)
			}
		})
	}
	t.Run("optional fields", func(t *testing.T) {
		createRequisite(t, s, `{"client":{"id":"c-2"},"currency":"mxn","conversionCurrency":null,"merchantOrderIdPrefix":"dep-","attributes":{"blockchainNetwork":null,"routingKey":null}}`)
	})
}

func TestServer_Deposit(t *testing.T) {
	rcv := newReceiver(t)
	s := start(t, providertest.Options{WebhookBaseDelay: time.Millisecond})
	r, _ := createRequisite(t, s, `{"client":{"id":"c-1"},"currency":"mxn","merchantOrderIdPrefix":"shop-","webhookUrl":"`+rcv.URL()+`"}`)

	t.Run("below minAmount is cancelled", func(t *testing.T) {
		o, err := s.Deposit(r.ID, "9.99")
		if err != nil {
			t.Fatal(err)
		}
		if o.Status != provider.StatusRejected || o.RejectReason == nil || !strings.HasPrefix(o.MerchantOrderID, "shop-") {
			t.Errorf("small deposit = %+v", o)
		}
		hits := rcv.waitHits(t, 1, 5*time.Second)
		got := decodeOrder(t, hits[0].body)
		if got.MerchantOrderID != o.MerchantOrderID || got.Status != provider.StatusRejected {
			t.Errorf("webhook = %s", hits[0].body)
		}
	})

	before, _ := s.Requisite(r.ID)
	t.Run("completed deposit", func(t *testing.T) {
		o, err := s.Deposit(r.ID, "500")
		if err != nil {
			t.Fatal(err)
		}
		if o.Status != provider.StatusProcessing || o.Type != provider.TypePayin {
			t.Fatalf("deposit = %+v", o)
		}
		if len(rcv.Hits()) != 1 {
			t.Errorf("webhook before the deposit is final")
		}
		if err := s.Complete(o.MerchantOrderID); err != nil {
			t.Fatal(err)
		}
		hits := rcv.waitHits(t, 2, 5*time.Second)
		got := decodeOrder(t, hits[1].body)
		if got.MerchantOrderID != o.MerchantOrderID || got.Status != provider.StatusCompleted ||
			!got.MerchantTargetWallet.Equal(provider.MustMoney("490", "mxn")) {
			t.Errorf("webhook = %s", hits[1].body)
		}
		if got := balance(t, s, "mxn"); got != "490.00" {
			t.Errorf("balance %q, want 490.00", got)
		}
		after, _ := s.Requisite(r.ID)
		if !after.ExpiresAt.After(before.ExpiresAt.Time) {
			t.Errorf("expiresAt %v not renewed from %v", after.ExpiresAt, before.ExpiresAt)
		}
	})

	t.Run("deactivated", func(t *testing.T) {
		data := mustOK(t, s, providertest.PathRequisiteDeactivate, `{"id":"`+r.ID+`"}`)
		var dr provider.Requisite
		if err := json.Unmarshal(data, &dr); err != nil {
			t.Fatal(err)
		}
		if dr.ID != r.ID || dr.ExpiresAt.After(time.Now()) {
			t.Errorf("deactivated requisite = %+v", dr)
		}
		_, err := s.Deposit(r.ID, "100")
		if provider.ErrorCode(err) != provider.CodeWalletInactive {
			t.Errorf("deposit to a deactivated requisite: %v", err)
		}
		mustOK(t, s, providertest.PathRequisiteDeactivate, `{"id":"`+r.ID+`"}`)
		next, _ := createRequisite(t, s, `{"client":{"id":"c-1"},"currency":"mxn"}`)
		if next.ID == r.ID {
			t.Error("create returned the deactivated requisite")
		}
	})

	t.Run("errors", func(t *testing.T) {
		if _, err := s.Deposit("00000000-0000-4000-8000-000000000000", "100"); !errors.Is(err, providertest.ErrNotFound) {
			t.Errorf("unknown requisite: %v", err)
		}
		if _, err := s.Deposit(r.ID, "lots"); provider.ErrorCode(err) != provider.CodeValidation {
			t.Errorf("bad amount: %v", err)
		}
		mustCode(t, s, providertest.PathRequisiteDeactivate, `{"id":"00000000-0000-4000-8000-000000000000"}`, provider.CodeWalletNotFound)
		mustCode(t, s, providertest.PathRequisiteDeactivate, `{}`, provider.CodeValidation)
	})
}

func TestServer_RequisiteExpiry(t *testing.T) {
	clock := newClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := start(t, providertest.Options{Now: clock.Now})
	r, _ := createRequisite(t, s, `{"client":{"id":"c"},"currency":"mxn","type":"short_term"}`)
	clock.Add(23 * time.Hour)
	o, err := s.Deposit(r.ID, "50")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(o.MerchantOrderID); err != nil {
		t.Fatal(err)
	}
	// The completed deposit renewed the requisite for another day.
	clock.Add(23 * time.Hour)
	if _, err := s.Deposit(r.ID, "50"); err != nil {
		t.Fatalf("deposit within the renewed day: %v", err)
	}
	clock.Add(2 * time.Hour)
	if _, err := s.Deposit(r.ID, "50"); provider.ErrorCode(err) != provider.CodeWalletInactive {
		t.Fatalf("deposit after expiry: %v", err)
	}
}

func TestServer_RequisiteOrders(t *testing.T) {
	clock := newClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := start(t, providertest.Options{Now: clock.Now})
	r, _ := createRequisite(t, s, `{"client":{"id":"c"},"currency":"mxn"}`)
	other, _ := createRequisite(t, s, `{"client":{"id":"d"},"currency":"mxn"}`)
	var ids []string
	for i := range 7 {
		o, err := s.Deposit(r.ID, strconv.Itoa(100+i))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, o.MerchantOrderID)
		clock.Add(time.Hour)
	}
	if _, err := s.Deposit(other.ID, "100"); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ids[0]); err != nil {
		t.Fatal(err)
	}

	type page struct {
		Orders []json.RawMessage `json:"orders"`
		Total  int               `json:"total"`
	}
	list := func(t *testing.T, body string) ([]string, int) {
		t.Helper()
		var p page
		if err := json.Unmarshal(mustOK(t, s, providertest.PathRequisiteOrders, body), &p); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, raw := range p.Orders {
			got = append(got, decodeOrder(t, raw).MerchantOrderID)
		}
		return got, p.Total
	}
	id := `"id":"` + r.ID + `"`
	tests := []struct {
		name  string
		body  string
		want  []string
		total int
	}{
		{"everything", `{` + id + `}`, ids, 7},
		{"first page", `{` + id + `,"limit":3,"offset":0}`, ids[:3], 7},
		{"second page", `{` + id + `,"limit":3,"offset":3}`, ids[3:6], 7},
		{"last page", `{` + id + `,"limit":3,"offset":6}`, ids[6:], 7},
		{"past the end", `{` + id + `,"limit":3,"offset":9}`, nil, 7},
		{"from inclusive, to exclusive", `{` + id + `,"createdAtFrom":"2026-03-01T13:00:00Z","createdAtTo":"2026-03-01T15:00:00+00:00"}`, ids[1:3], 2},
		{"open end", `{` + id + `,"createdAtFrom":"2026-03-01T17:00:00Z"}`, ids[5:], 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, total := list(t, tt.body)
			if !slices.Equal(got, tt.want) || total != tt.total {
				t.Errorf("orders %v total %d, want %v total %d", got, total, tt.want, tt.total)
			}
		})
	}
	t.Run("orders show their current state", func(t *testing.T) {
		data := mustOK(t, s, providertest.PathRequisiteOrders, `{`+id+`,"limit":1}`)
		want, _ := s.OrderJSON(ids[0])
		if !strings.Contains(string(data), string(want)) {
			t.Errorf("list %s does not hold get-status data %s", data, want)
		}
	})

	bad := []struct {
		name  string
		body  string
		field string
	}{
		{"no id", `{}`, "id"},
		{"limit zero", `{` + id + `,"limit":0}`, "limit"},
		{"limit too big", `{` + id + `,"limit":101}`, "limit"},
		{"negative offset", `{` + id + `,"offset":-1}`, "offset"},
		{"limit as string", `{` + id + `,"limit":"10"}`, "limit"},
		{"bad timestamp", `{` + id + `,"createdAtFrom":"yesterday"}`, "createdAtFrom"},
		{"reversed range", `{` + id + `,"createdAtFrom":"2026-03-02T00:00:00Z","createdAtTo":"2026-03-01T00:00:00Z"}`, "createdAtTo"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			perr := mustCode(t, s, providertest.PathRequisiteOrders, tt.body, provider.CodeValidation)
			if perr.ValidationErrors[0].Field != tt.field {
				t.Errorf("field %s, want %s", perr.ValidationErrors[0].Field, tt.field)
			}
		})
	}
	mustCode(t, s, providertest.PathRequisiteOrders, `{"id":"00000000-0000-4000-8000-000000000000"}`, provider.CodeWalletNotFound)
}
