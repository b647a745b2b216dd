//go:build e2e

package e2e_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"orderd/provider/providertest"
)

// adminPost posts a JSON body to orderd's admin API and returns the status
// and body.
func adminPost(t *testing.T, o *orderd, path, body string) (int, []byte) {
	t.Helper()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Post("http://"+o.admin+path, "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// payinBody is a gateway payin request.
func payinBody(moid, amount string) string {
	return `{"merchantOrderId":"` + moid + `","invoice":{"amount":"` + amount + `","currency":"brl"},` +
		`"client":{"name":"Ana"},"returnUrl":"https://shop.example/back"}`
}

// callRecord is one call the fake recorded.
type callRecord struct {
	Endpoint string `json:"endpoint"`
	Status   int    `json:"status"`
	Code     string `json:"code"`
	Fault    string `json:"fault"`
}

func (f *fakeProvider) calls(endpoint string) []callRecord {
	f.t.Helper()
	var out []callRecord
	f.control(http.MethodGet, "calls?endpoint="+endpoint, nil, &out)
	return out
}

// fakeOrders maps merchantOrderId to status for every order at the fake.
func (f *fakeProvider) orders() map[string]string {
	f.t.Helper()
	var list []struct {
		MerchantOrderID string `json:"merchantOrderId"`
		Status          string `json:"status"`
	}
	f.control(http.MethodGet, "orders", nil, &list)
	m := map[string]string{}
	for _, o := range list {
		if _, dup := m[o.MerchantOrderID]; dup {
			f.t.Errorf("the fake holds order %s twice", o.MerchantOrderID)
		}
		m[o.MerchantOrderID] = o.Status
	}
	return m
}

// fault is a fault request for the fake's control API.
type fault struct {
	Endpoint string `json:"endpoint"`
	Kind     string `json:"kind"`
	Count    int    `json:"count,omitempty"`
	Delay    string `json:"delay,omitempty"`
	Status   int    `json:"status,omitempty"`
}

// summaryCount reads one count ("errors=3") of a reconcile summary line.
func summaryCount(t *testing.T, summary, key string) int {
	t.Helper()
	m := regexp.MustCompile(`\b` + key + `=(\d+)`).FindStringSubmatch(summary)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// TestProvider_FaultsDuringStalePolling leaves orders processing in orderd
// while the provider finishes them without webhooks, then polls them with
// "orderd reconcile -job stale" while get-status answers 5xx, times out
// and resets connections. Failed polls back off; later runs complete
// every order, each final state exactly once in the stream.
func TestProvider_FaultsDuringStalePolling(t *testing.T) {
	const orders = 12
	e := newEnv(t, envOptions{reconcile: `reconcile:
  stale_after: 1s
  give_up_after: 1h
  backoff_base: 3s
  schedules: {stale: "off", doubt: "off", balances: "off", requisites: "off", report: "off"}
`})
	e.od.startReady()
	ns := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)

	// Orders created through the gateway, without a webhookUrl: orderd
	// knows them as processing and will never hear of them again.
	want := map[string]string{}
	for i := range orders {
		moid := fmt.Sprintf("stale-%s-%d", ns, i)
		code, body := adminPost(t, e.od, "/v1/payins", payinBody(moid, fmt.Sprintf("%d.00", 10+i)))
		if code != http.StatusCreated {
			t.Fatalf("create %s: %d %s", moid, code, body)
		}
		if i%3 == 2 {
			e.fake.control(http.MethodPost, "reject", map[string]string{"merchantOrderId": moid, "reason": "declined"}, nil)
			want[moid] = "rejected"
		} else {
			e.fake.control(http.MethodPost, "complete", map[string]string{"merchantOrderId": moid}, nil)
			want[moid] = "completed"
		}
	}
	faults := []fault{
		{Endpoint: providertest.PathGetStatus, Kind: "fail_before", Count: 2, Status: 502},
		{Endpoint: providertest.PathGetStatus, Kind: "fail_before", Count: 1, Status: 500},
		{Endpoint: providertest.PathGetStatus, Kind: "slow", Count: 2, Delay: "1500ms"}, // provider.timeout is 1s
		{Endpoint: providertest.PathGetStatus, Kind: "reset", Count: 2},
	}
	faulted := 0
	for _, f := range faults {
		e.fake.control(http.MethodPost, "fault", f, nil)
		faulted += f.Count
	}
	time.Sleep(1100 * time.Millisecond) // stale_after

	// The orders whose poll failed make the run partial: exit status 1,
	// and its line says so.
	first, err := e.od.reconcileOnce(t.Context(), "stale")
	if err == nil || !strings.Contains(err.Error(), "exited 1") || !strings.Contains(first, " partial ") {
		t.Fatalf("first stale run: %v, want exit 1 and a partial run\n%s", err, first)
	}
	if got := summaryCount(t, first, "errors"); got != faulted {
		t.Errorf("first stale run: errors=%d, want %d (one per injected fault): %s", got, faulted, first)
	}
	if got := summaryCount(t, first, "changed"); got != orders-faulted {
		t.Errorf("first stale run: changed=%d, want %d: %s", got, orders-faulted, first)
	}
	// A slow answer is recorded when the fake finally answers, after the
	// client gave up.
	hit := 0
	waitFor(5*time.Second, 100*time.Millisecond, func() bool {
		hit = 0
		for _, c := range e.fake.calls(providertest.PathGetStatus) {
			if c.Fault != "" {
				hit++
			}
		}
		return hit == faulted
	})
	if hit != faulted {
		t.Errorf("get-status calls with a fault: %d, want %d", hit, faulted)
	}

	// The failed orders are polled again once their backoff
	// (reconcile.backoff_base, 3s) has passed; run the job every second
	// until every order is final.
	var runs int
	final := func() int {
		n := 0
		count, err := streamCount(t.Context(), e.nats.URL())
		if err != nil || count < uint64(orders) {
			return 0
		}
		evs := readStream(t, e.nats.URL())
		for _, ev := range evs {
			if ev.Type == "order.completed" || ev.Type == "order.rejected" {
				n++
			}
		}
		return n
	}
	began := time.Now()
	ok := waitFor(150*time.Second, time.Second, func() bool {
		if final() == orders {
			return true
		}
		runs++
		if out, err := e.od.reconcileOnce(t.Context(), "stale"); err != nil {
			t.Errorf("stale run: %v\n%s", err, out)
		}
		return false
	})
	if !ok {
		t.Fatalf("only %d of %d orders final in the stream after %s", final(), orders, time.Since(began).Round(time.Second))
	}
	total := waitDrained(t, e.od.dbPath, e.nats.URL(), 30*time.Second)
	events := readStream(t, e.nats.URL())
	byOrder := checkStreamUnique(t, events)
	for moid, st := range want {
		evs := byOrder[moid]
		if len(evs) != 2 || evs[0].Type != "order.processing" || evs[1].Type != "order."+st ||
			evs[1].status() != st || evs[1].LearnedVia != "poll" {
			t.Errorf("order %s: events %v (learnedvia %v); want [order.processing order.%s] with the final one by poll",
				moid, eventTypes(evs), learnedVia(evs), st)
		}
	}
	if len(events) != total || len(events) != 2*orders {
		t.Errorf("stream has %d events, outbox %d rows; want %d", len(events), total, 2*orders)
	}
	t.Logf("%d orders, %d faulted polls (5xx, timeout, reset); every order final after %d more stale runs (%s); %d get-status calls; stream events %d",
		orders, faulted, runs, time.Since(began).Round(time.Second), len(e.fake.calls(providertest.PathGetStatus)), len(events))
	e.od.stop()
}

func learnedVia(evs []event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.LearnedVia
	}
	return out
}

// TestGateway_FaultsDuringCreation creates payins through orderd's gateway
// while the provider's create endpoint fails before or after its effect,
// answers too late, or resets the connection. Each such creation is
// answered 202 in_doubt; the doubt job settles it as created (the order
// exists at the provider) or not_created (it does not), with one event
// each, and no order is ever created twice at the provider.
func TestGateway_FaultsDuringCreation(t *testing.T) {
	e := newEnv(t, envOptions{reconcile: `reconcile:
  doubt_min_age: 2s
  schedules: {stale: "off", doubt: "@every 1s", balances: "off", requisites: "off", report: "off"}
`})
	e.od.startReady()
	ns := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)

	cases := []struct {
		name    string
		fault   *fault
		code    int    // the gateway's first answer
		settled string // "created" or "not_created"
	}{
		{name: "no fault", code: http.StatusCreated, settled: "created"},
		{name: "5xx before", fault: &fault{Kind: "fail_before", Status: 503}, code: http.StatusAccepted, settled: "not_created"},
		{name: "5xx after", fault: &fault{Kind: "fail_after", Status: 500}, code: http.StatusAccepted, settled: "created"},
		{name: "timeout", fault: &fault{Kind: "slow", Delay: "1500ms"}, code: http.StatusAccepted, settled: "created"},
		{name: "reset before", fault: &fault{Kind: "reset"}, code: http.StatusAccepted, settled: "not_created"},
		{name: "reset after", fault: &fault{Kind: "reset_after"}, code: http.StatusAccepted, settled: "created"},
	}
	moids := make([]string, len(cases))
	for i, tc := range cases {
		moids[i] = fmt.Sprintf("gw-%s-%d", ns, i)
		if tc.fault != nil {
			f := *tc.fault
			f.Endpoint = providertest.PathPaymentCreate
			e.fake.control(http.MethodPost, "fault", f, nil)
		}
		code, body := adminPost(t, e.od, "/v1/payins", payinBody(moids[i], fmt.Sprintf("%d.50", 20+i)))
		var ans struct {
			State string `json:"state"`
		}
		_ = json.Unmarshal(body, &ans)
		wantState := "in_doubt"
		if tc.code == http.StatusCreated {
			wantState = "created"
		}
		if code != tc.code || ans.State != wantState {
			t.Errorf("%s: gateway answered %d %s; want %d with state %s", tc.name, code, body, tc.code, wantState)
		}
	}

	// The doubt job settles every attempt once it is 2s old; each outcome
	// is one event.
	var byOrder map[string][]event
	ok := waitFor(60*time.Second, 500*time.Millisecond, func() bool {
		n, err := streamCount(t.Context(), e.nats.URL())
		if err != nil || n < uint64(len(cases)) {
			return false
		}
		byOrder = map[string][]event{}
		for _, ev := range readStream(t, e.nats.URL()) {
			byOrder[ev.MerchantOrderID] = append(byOrder[ev.MerchantOrderID], ev)
		}
		return len(byOrder) == len(cases)
	})
	if !ok {
		t.Fatalf("not every creation settled within 60s: events for %d of %d", len(byOrder), len(cases))
	}
	// Give a wrongly repeated settlement the time to show.
	time.Sleep(2 * time.Second)
	total := waitDrained(t, e.od.dbPath, e.nats.URL(), 30*time.Second)
	events := readStream(t, e.nats.URL())
	byOrder = checkStreamUnique(t, events)
	atFake := e.fake.orders()
	for i, tc := range cases {
		moid := moids[i]
		evs := byOrder[moid]
		switch tc.settled {
		case "created":
			if len(evs) != 1 || evs[0].Type != "order.processing" || evs[0].Subject != "orderd.orders.payin.processing" {
				t.Errorf("%s: events %v; want one order.processing", tc.name, eventTypes(evs))
			}
			if atFake[moid] == "" {
				t.Errorf("%s: the fake has no order %s", tc.name, moid)
			}
		case "not_created":
			if len(evs) != 1 || evs[0].Type != "order.not_created" || evs[0].Subject != "orderd.orders.payin.not_created" ||
				evs[0].CESubject != moid {
				t.Errorf("%s: events %v; want one order.not_created with subject %s", tc.name, eventTypes(evs), moid)
			}
			if atFake[moid] != "" {
				t.Errorf("%s: the fake has order %s although it was settled not_created", tc.name, moid)
			}
		}
		code, body := httpStatus("http://" + e.od.admin + "/v1/orders/" + moid)
		if tc.settled == "created" && code != http.StatusOK {
			t.Errorf("%s: GET /v1/orders/%s: %d %s", tc.name, moid, code, body)
		}
	}
	if len(events) != total {
		t.Errorf("stream has %d events, outbox %d rows", len(events), total)
	}

	// A repeat of a settled creation gets its stored outcome and never
	// calls the provider again.
	before := len(e.fake.calls(providertest.PathPaymentCreate))
	for i, tc := range cases {
		if tc.settled != "created" {
			continue
		}
		code, body := adminPost(t, e.od, "/v1/payins", payinBody(moids[i], fmt.Sprintf("%d.50", 20+i)))
		if code != http.StatusOK || !bytes.Contains(body, []byte(`"created"`)) {
			t.Errorf("%s: repeat answered %d %s; want 200 with the stored created outcome", tc.name, code, body)
		}
	}
	creates := e.fake.calls(providertest.PathPaymentCreate)
	if len(creates) != len(cases) || before != len(cases) {
		t.Errorf("the fake saw %d create calls (%d before the repeats); want exactly %d, one per creation", len(creates), before, len(cases))
	}
	settled := map[string]int{}
	for _, tc := range cases {
		settled[tc.settled]++
	}
	t.Logf("%d creations, %d in doubt; settled created %d, not_created %d; create calls at the provider %d; stream events %d",
		len(cases), len(cases)-1, settled["created"], settled["not_created"], len(creates), len(events))
	e.od.stop()
}
