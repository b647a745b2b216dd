package providertest_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"orderd/provider"
	"orderd/provider/providertest"
)

// control calls the HTTP controls and decodes {"data": …} or {"error": …}.
func control(t *testing.T, s *providertest.Server, method, path, body string) (int, json.RawMessage, string) {
	t.Helper()
	resp, b := send(t, method, s.URL()+"/_control/"+path, s.APIKey(), body)
	var out struct {
		Data  json.RawMessage `json:"data"`
		Error *struct {
			Message string        `json:"message"`
			Code    provider.Code `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("control %s: %v: %s", path, err, b)
	}
	if out.Error != nil {
		return resp.StatusCode, nil, string(out.Error.Code) + " " + out.Error.Message
	}
	return resp.StatusCode, out.Data, ""
}

func TestServer_ControlHandler(t *testing.T) {
	rcv := newReceiver(t)
	s := start(t, providertest.Options{ControlAPI: true, WebhookBaseDelay: time.Millisecond})

	status, data, _ := control(t, s, http.MethodPost, "create-order",
		`{"merchantOrderId":"c-1","amount":"50","currency":"brl","webhookUrl":"`+rcv.URL()+`"}`)
	if status != 200 || decodeOrder(t, data).Status != provider.StatusProcessing {
		t.Fatalf("create-order: %d %s", status, data)
	}
	status, data, _ = control(t, s, http.MethodPost, "complete", `{"merchantOrderId":"c-1"}`)
	if status != 200 || decodeOrder(t, data).Status != provider.StatusCompleted {
		t.Fatalf("complete: %d %s", status, data)
	}
	rcv.waitHits(t, 1, 5*time.Second)

	tests := []struct {
		name   string
		method string
		path   string
		body   string
		status int
	}{
		{"complete twice", http.MethodPost, "complete", `{"merchantOrderId":"c-1"}`, 409},
		{"reject unknown", http.MethodPost, "reject", `{"merchantOrderId":"ghost"}`, 404},
		{"create invalid", http.MethodPost, "create-order", `{"merchantOrderId":"c-2","amount":"x","currency":"brl"}`, 422},
		{"create duplicate", http.MethodPost, "create-order", `{"merchantOrderId":"c-1","amount":"1","currency":"brl"}`, 422},
		{"bad JSON", http.MethodPost, "complete", `{`, 400},
		{"bad fault", http.MethodPost, "fault", `{"kind":"boom"}`, 400},
		{"bad delay", http.MethodPost, "fault", `{"kind":"slow","delay":"soon"}`, 400},
		{"bad balance", http.MethodPost, "adjust-balance", `{"currency":"brl","delta":"x"}`, 400},
		{"wrong method", http.MethodGet, "complete", ``, 405},
		{"deposit to nothing", http.MethodPost, "deposit", `{"requisiteId":"00000000-0000-4000-8000-000000000000","amount":"1"}`, 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := send(t, tt.method, s.URL()+"/_control/"+tt.path, s.APIKey(), tt.body)
			if resp.StatusCode != tt.status {
				t.Errorf("HTTP %d, want %d: %s", resp.StatusCode, tt.status, b)
			}
		})
	}

	t.Run("needs the key", func(t *testing.T) {
		resp, _ := send(t, http.MethodPost, s.URL()+"/_control/complete", "", `{"merchantOrderId":"c-1"}`)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("HTTP %d, want 401", resp.StatusCode)
		}
	})

	t.Run("balances and adjust", func(t *testing.T) {
		status, data, msg := control(t, s, http.MethodPost, "adjust-balance", `{"currency":"brl","delta":"-9"}`)
		if status != 200 {
			t.Fatalf("%d %s", status, msg)
		}
		var bs []provider.Balance
		_ = json.Unmarshal(data, &bs)
		if len(bs) != 1 || bs[0].Amount != "40.00" {
			t.Errorf("balances %s, want brl 40.00 (49.00 net − 9)", data)
		}
	})

	t.Run("fault", func(t *testing.T) {
		status, _, msg := control(t, s, http.MethodPost, "fault", `{"endpoint":"order/get-status","kind":"fail_before","status":503}`)
		if status != 200 {
			t.Fatalf("%d %s", status, msg)
		}
		if code, _, _ := rawPost(t, s, providertest.PathGetStatus, `{"merchantOrderId":"c-1"}`); code != 503 {
			t.Errorf("HTTP %d, want the injected 503", code)
		}
		control(t, s, http.MethodPost, "fault", `{"kind":"slow","delay":"1ms","count":3}`)
		control(t, s, http.MethodPost, "clear-faults", ``)
		getStatus(t, s, "c-1")
	})

	t.Run("requisite deposit", func(t *testing.T) {
		r, _ := createRequisite(t, s, `{"client":{"id":"k"},"currency":"mxn","webhookUrl":"`+rcv.URL()+`"}`)
		status, data, msg := control(t, s, http.MethodPost, "deposit", `{"requisiteId":"`+r.ID+`","amount":"100"}`)
		if status != 200 {
			t.Fatalf("%d %s", status, msg)
		}
		dep := decodeOrder(t, data)
		if status, _, msg := control(t, s, http.MethodPost, "reject", `{"merchantOrderId":"`+dep.MerchantOrderID+`","reason":"returned"}`); status != 200 {
			t.Fatalf("%d %s", status, msg)
		}
		if got, _ := s.Order(dep.MerchantOrderID); got.Status != provider.StatusRejected {
			t.Errorf("deposit status %s", got.Status)
		}
	})

	t.Run("refund", func(t *testing.T) {
		rt := refund(t, s, "c-1", "10").RefundTransaction.ID
		body := fmt.Sprintf(`{"merchantOrderId":"c-1","refundId":%q}`, rt)
		if status, _, msg := control(t, s, http.MethodPost, "advance-refund", body); status != 200 {
			t.Fatalf("%d %s", status, msg)
		}
		body = fmt.Sprintf(`{"merchantOrderId":"c-1","refundId":%q,"ok":false}`, rt)
		status, data, msg := control(t, s, http.MethodPost, "complete-refund", body)
		if status != 200 {
			t.Fatalf("%d %s", status, msg)
		}
		if o := decodeOrder(t, data); o.Transactions[1].Status != provider.StatusRejected {
			t.Errorf("refund = %+v", o.Transactions[1])
		}
	})

	t.Run("webhook url override", func(t *testing.T) {
		other := newReceiver(t)
		control(t, s, http.MethodPost, "webhook-url", `{"url":"`+other.URL()+`"}`)
		control(t, s, http.MethodPost, "create-order", `{"merchantOrderId":"c-9","amount":"5","currency":"brl","webhookUrl":"`+rcv.URL()+`"}`)
		control(t, s, http.MethodPost, "complete", `{"merchantOrderId":"c-9"}`)
		other.waitHits(t, 1, 5*time.Second)
	})

	t.Run("reads", func(t *testing.T) {
		waitIdle(t, s)
		_, data, _ := control(t, s, http.MethodGet, "order?merchantOrderId=c-1", ``)
		if want, _ := s.OrderJSON("c-1"); string(data) != string(want) {
			t.Errorf("order = %s", data)
		}
		_, data, _ = control(t, s, http.MethodGet, "orders", ``)
		var orders []json.RawMessage
		_ = json.Unmarshal(data, &orders)
		if len(orders) != len(s.Orders()) || len(orders) < 3 {
			t.Errorf("%d orders listed", len(orders))
		}
		_, data, _ = control(t, s, http.MethodGet, "webhooks", ``)
		var hooks []struct {
			MerchantOrderID string          `json:"merchantOrderId"`
			Body            json.RawMessage `json:"body"`
			Status          int             `json:"status"`
		}
		_ = json.Unmarshal(data, &hooks)
		if len(hooks) != len(s.Webhooks()) || hooks[0].MerchantOrderID != "c-1" || decodeOrder(t, hooks[0].Body).MerchantOrderID != "c-1" {
			t.Errorf("webhooks = %s", data)
		}
		_, data, _ = control(t, s, http.MethodGet, "calls?endpoint=order/get-status", ``)
		var calls []struct {
			Endpoint string `json:"endpoint"`
			Status   int    `json:"status"`
			Remote   string `json:"remote"`
		}
		_ = json.Unmarshal(data, &calls)
		if len(calls) == 0 || calls[0].Endpoint != providertest.PathGetStatus || calls[0].Status != 503 {
			t.Errorf("calls = %s", data)
		}
		// The caller's address tells apart callers that run on addresses
		// of their own (the chaos suite's instances).
		if len(calls) > 0 {
			if host, _, err := net.SplitHostPort(calls[0].Remote); err != nil || host != "127.0.0.1" {
				t.Errorf("call remote = %q; want 127.0.0.1:port", calls[0].Remote)
			}
		}
	})

	t.Run("API unaffected", func(t *testing.T) {
		mustCode(t, s, "/_controlx", `{}`, provider.CodeMethodNotFound)
	})
}

func TestServer_ControlOff(t *testing.T) {
	s := start(t, providertest.Options{})
	mustCode(t, s, "/_control/complete", `{"merchantOrderId":"x"}`, provider.CodeMethodNotFound)
}

func TestServer_Calls(t *testing.T) {
	s := start(t, providertest.Options{MaxRecords: 3})
	for range 2 {
		mustOK(t, s, providertest.PathBalances, `{}`)
	}
	mustCode(t, s, providertest.PathGetStatus, `{"merchantOrderId":"x"}`, provider.CodeOrderNotFound)
	all := s.Calls("")
	if len(all) != 3 {
		t.Fatalf("%d calls", len(all))
	}
	c := all[2]
	if c.Endpoint != providertest.PathGetStatus || c.Method != http.MethodPost || c.Status != 200 ||
		c.Code != provider.CodeOrderNotFound || string(c.Body) != `{"merchantOrderId":"x"}` ||
		c.Header.Get("Accept") != "application/json; charset=utf-8" || c.At.IsZero() {
		t.Errorf("call = %+v", c)
	}
	if !all[0].At.Before(all[2].At) {
		t.Error("calls are not in order")
	}
	mustOK(t, s, providertest.PathBalances, `{}`)
	if got := s.Calls(providertest.PathBalances); len(got) != 2 {
		t.Errorf("%d balance calls kept, want 2 of the last 3 records", len(got))
	}
	if got := s.Calls("balances"); len(got) != 2 {
		t.Errorf("short endpoint name: %d calls", len(got))
	}
}

func TestServer_AutoComplete(t *testing.T) {
	rcv := newReceiver(t)
	s := start(t, providertest.Options{AutoComplete: 20 * time.Millisecond, InitialBalances: map[string]string{"brl": "100"}})
	createPayin(t, s, "auto", "10", rcv.URL())
	if o, _ := s.Order("auto"); o.Status != provider.StatusProcessing {
		t.Fatalf("status %s right after creation", o.Status)
	}
	hits := rcv.waitHits(t, 1, 5*time.Second)
	if decodeOrder(t, hits[0].body).Status != provider.StatusCompleted {
		t.Errorf("webhook = %s", hits[0].body)
	}
	id := refund(t, s, "auto", "5").RefundTransaction.ID
	deadline := time.Now().Add(5 * time.Second)
	for refundTx(t, s, "auto", id).Status != provider.StatusCompleted {
		if time.Now().After(deadline) {
			t.Fatal("the refund was not completed automatically")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestServer_AutoComplete_inDoubtCreation: a creation the fake makes and
// then answers 500 (FailAfter, the in-doubt creation) leaves an order that
// AutoComplete finishes like any other, with its webhook and its money in
// the balance; the client was told nothing, but the order does not stay
// processing for good.
func TestServer_AutoComplete_inDoubtCreation(t *testing.T) {
	rcv := newReceiver(t)
	s := start(t, providertest.Options{AutoComplete: 20 * time.Millisecond, FeePercent: "0"})
	if err := s.InjectFault(providertest.Fault{Endpoint: providertest.PathPaymentCreate, Kind: providertest.FailAfter}); err != nil {
		t.Fatal(err)
	}
	body := `{"merchantOrderId":"doubt","invoice":{"amount":"10.00","currency":"brl"},"webhookUrl":"` + rcv.URL() + `"}`
	if status, answer, err := rawPost(t, s, providertest.PathPaymentCreate, body); err != nil || status != http.StatusInternalServerError {
		t.Fatalf("creation behind the fault: %v %d %s, want 500", err, status, answer)
	}
	hits := rcv.waitHits(t, 1, 5*time.Second)
	if o := decodeOrder(t, hits[0].body); o.MerchantOrderID != "doubt" || o.Status != provider.StatusCompleted {
		t.Errorf("webhook = %s, want doubt completed", hits[0].body)
	}
	if o, _ := s.Order("doubt"); o.Status != provider.StatusCompleted {
		t.Errorf("the fake's order is %s, want completed", o.Status)
	}
	waitIdle(t, s)
	if got := balance(t, s, "brl"); got != "10.00" {
		t.Errorf("balance %s, want the completed payin's 10.00", got)
	}
}

// TestServer_Concurrent hits the fake from many goroutines; run with -race.
// The balance must equal the sum of what completed.
func TestServer_Concurrent(t *testing.T) {
	rcv := newReceiver(t)
	s := start(t, providertest.Options{FeePercent: "0", KeyType: providertest.KeyECDSA})
	const workers, each = 8, 25
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				moid := fmt.Sprintf("w%d-%d", w, i)
				body := `{"merchantOrderId":"` + moid + `","invoice":{"amount":"1.01","currency":"brl"},"webhookUrl":"` + rcv.URL() + `"}`
				status, answer, err := rawPost(t, s, providertest.PathPaymentCreate, body)
				if err != nil || status != 200 || !strings.Contains(answer, `"error":null`) {
					t.Errorf("create %s: %v %d %s", moid, err, status, answer)
					return
				}
				if i%2 == 0 {
					err = s.Complete(moid)
				} else {
					err = s.Reject(moid, "")
				}
				if err != nil {
					t.Error(err)
				}
				_, _, _ = rawPost(t, s, providertest.PathGetStatus, `{"merchantOrderId":"`+moid+`"}`)
			}
		})
	}
	wg.Wait()
	waitIdle(t, s)
	// 13 of every 25 are completed (even i): 8 × 13 × 1.01.
	if got := balance(t, s, "brl"); got != "105.04" {
		t.Errorf("balance %s, want 105.04", got)
	}
	if n := len(rcv.Hits()); n != workers*each {
		t.Errorf("%d webhooks, want %d", n, workers*each)
	}
	ids := map[string]bool{}
	for _, o := range s.Orders() {
		if ids[o.ID] {
			t.Fatalf("id %s given twice", o.ID)
		}
		ids[o.ID] = true
	}
}

func TestServer_Deterministic(t *testing.T) {
	clock := newClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	run := func() []byte {
		s := start(t, providertest.Options{Seed: 7, Now: clock.Now})
		createPayin(t, s, "a", "10", "")
		if err := s.Complete("a"); err != nil {
			t.Fatal(err)
		}
		b, _ := s.OrderJSON("a")
		return b
	}
	if a, b := run(), run(); string(a) != string(b) {
		t.Errorf("same seed and clock, different orders:\n%s\n%s", a, b)
	}
}
