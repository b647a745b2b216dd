package providertest_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"orderd/provider"
	"orderd/provider/providertest"
)

const payinBody = `{"merchantOrderId":"m-1","invoice":{"amount":"10","currency":"brl"}}`

// rawPost posts body and returns the HTTP status and body, or the
// transport error.
func rawPost(t *testing.T, s *providertest.Server, path, body string) (int, string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.URL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", s.APIKey())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

func TestServer_InjectFault(t *testing.T) {
	tests := []struct {
		name        string
		fault       providertest.Fault
		wantStatus  int  // 0: connection dropped
		wantCreated bool // the order exists afterwards
	}{
		{"fail before", providertest.Fault{Endpoint: providertest.PathPaymentCreate, Kind: providertest.FailBefore}, 500, false},
		{"fail before with 503", providertest.Fault{Kind: providertest.FailBefore, Status: 503}, 503, false},
		{"fail after", providertest.Fault{Endpoint: "order/payment-form/create", Kind: providertest.FailAfter, Status: 502}, 502, true},
		{"reset", providertest.Fault{Endpoint: providertest.PathPaymentCreate, Kind: providertest.Reset}, 0, false},
		{"reset after", providertest.Fault{Endpoint: providertest.PathPaymentCreate, Kind: providertest.ResetAfter}, 0, true},
		{"error answer", providertest.Fault{Kind: providertest.ErrorAnswer, Code: provider.CodePayinDisabled}, 200, false},
		{"slow", providertest.Fault{Kind: providertest.Slow, Delay: 80 * time.Millisecond}, 200, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := start(t, providertest.Options{})
			if err := s.InjectFault(tt.fault); err != nil {
				t.Fatal(err)
			}
			begin := time.Now()
			status, body, err := rawPost(t, s, providertest.PathPaymentCreate, payinBody)
			elapsed := time.Since(begin)
			if tt.wantStatus == 0 {
				if err == nil {
					t.Fatalf("got HTTP %d, want a dropped connection", status)
				}
			} else if status != tt.wantStatus {
				t.Fatalf("HTTP %d (%v), want %d", status, err, tt.wantStatus)
			}
			if status >= 500 && strings.HasPrefix(body, "{") {
				t.Errorf("a 5xx answered an envelope: %s", body)
			}
			if tt.fault.Kind == providertest.ErrorAnswer && !strings.Contains(body, `"PAYIN_DISABLED"`) {
				t.Errorf("error answer body %s", body)
			}
			if tt.fault.Kind == providertest.Slow && elapsed < tt.fault.Delay {
				t.Errorf("slow answer took %v, want at least %v", elapsed, tt.fault.Delay)
			}
			_, perr := call(t, s, providertest.PathGetStatus, `{"merchantOrderId":"m-1"}`)
			if created := perr == nil; created != tt.wantCreated {
				t.Errorf("order created = %v, want %v (get-status: %v)", created, tt.wantCreated, perr)
			}
			// The fault is used up: the same call now behaves normally.
			_, perr = call(t, s, providertest.PathPaymentCreate, payinBody)
			if tt.wantCreated && (perr == nil || perr.Code != provider.CodeOrderAlreadyExists) {
				t.Errorf("repeat after the fault: %v, want ORDER_ALREADY_EXISTS", perr)
			}
			if !tt.wantCreated && perr != nil {
				t.Errorf("repeat after the fault: %v", perr)
			}
			calls := s.Calls(providertest.PathPaymentCreate)
			if len(calls) != 2 || calls[0].Fault != tt.fault.Kind || calls[1].Fault != "" || calls[0].Status != tt.wantStatus {
				t.Errorf("calls = %+v", calls)
			}
		})
	}
}

func TestServer_InjectFaultMatching(t *testing.T) {
	s := start(t, providertest.Options{})
	createPayin(t, s, "m-1", "10", "")
	if err := s.InjectFault(providertest.Fault{Endpoint: providertest.PathGetStatus, Kind: providertest.FailBefore, Count: 2}); err != nil {
		t.Fatal(err)
	}
	// Other endpoints are not disturbed.
	mustOK(t, s, providertest.PathBalances, `{}`)
	for i := range 2 {
		if status, _, _ := rawPost(t, s, providertest.PathGetStatus, `{"merchantOrderId":"m-1"}`); status != 500 {
			t.Errorf("call %d: HTTP %d, want 500", i, status)
		}
	}
	getStatus(t, s, "m-1")

	t.Run("faults queue in order", func(t *testing.T) {
		_ = s.InjectFault(providertest.Fault{Kind: providertest.FailBefore, Status: 502})
		_ = s.InjectFault(providertest.Fault{Kind: providertest.FailBefore, Status: 504})
		for _, want := range []int{502, 504, 200} {
			if status, _, _ := rawPost(t, s, providertest.PathBalances, `{}`); status != want {
				t.Errorf("HTTP %d, want %d", status, want)
			}
		}
	})
	t.Run("clear", func(t *testing.T) {
		_ = s.InjectFault(providertest.Fault{Kind: providertest.FailBefore, Count: 5})
		s.ClearFaults()
		mustOK(t, s, providertest.PathBalances, `{}`)
	})
	t.Run("bad faults", func(t *testing.T) {
		for name, f := range map[string]providertest.Fault{
			"unknown kind":        {Kind: "explode"},
			"unknown endpoint":    {Endpoint: "/api/v3/nothing", Kind: providertest.FailBefore},
			"not a 5xx":           {Kind: providertest.FailBefore, Status: 404},
			"reject on get-state": {Endpoint: providertest.PathGetStatus, Kind: providertest.RejectAtCreate},
		} {
			if err := s.InjectFault(f); err == nil {
				t.Errorf("%s: accepted", name)
			}
		}
	})
}

func TestServer_RejectAtCreate(t *testing.T) {
	rcv := newReceiver(t)
	s := start(t, providertest.Options{InitialBalances: map[string]string{"brl": "100"}})
	if err := s.InjectFault(providertest.Fault{Kind: providertest.RejectAtCreate, Reason: "taxpayer mismatch", Count: 2}); err != nil {
		t.Fatal(err)
	}
	// Not consumed by an endpoint that creates nothing.
	mustOK(t, s, providertest.PathBalances, `{}`)

	data := mustOK(t, s, providertest.PathPaymentCreate,
		`{"merchantOrderId":"m-1","invoice":{"amount":"10","currency":"brl"},"webhookUrl":"`+rcv.URL()+`"}`)
	o := decodeOrder(t, data)
	if o.RejectReason == nil || *o.RejectReason != "taxpayer mismatch" || o.Status != provider.StatusRejected || o.Auth != nil {
		t.Errorf("create answer = %s", data)
	}
	got, _ := getStatus(t, s, "m-1")
	if got.Status != provider.StatusRejected {
		t.Errorf("get-status = %+v", got)
	}
	hits := rcv.waitHits(t, 1, 5*time.Second)
	if decodeOrder(t, hits[0].body).Status != provider.StatusRejected {
		t.Errorf("webhook = %s", hits[0].body)
	}

	payout := decodeOrder(t, mustOK(t, s, providertest.PathWithdrawalCreate,
		`{"merchantOrderId":"w-1","amount":{"amount":"10","currency":"brl"}}`))
	if payout.Status != provider.StatusRejected {
		t.Errorf("payout = %+v", payout)
	}
	if b := balance(t, s, "brl"); b != "100.00" {
		t.Errorf("balance %s after rejected creations", b)
	}
}

func TestServer_SlowFaultAndClientTimeout(t *testing.T) {
	s := start(t, providertest.Options{})
	if err := s.InjectFault(providertest.Fault{Endpoint: providertest.PathPaymentCreate, Kind: providertest.Slow, Delay: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 50 * time.Millisecond}
	req, _ := http.NewRequest(http.MethodPost, s.URL()+providertest.PathPaymentCreate, strings.NewReader(payinBody))
	req.Header.Set("Authorization", s.APIKey())
	if resp, err := client.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("the client did not time out")
	}
	// The provider still did what it was asked: the creation is in doubt
	// from the client's side, and get-status settles it.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, ok := s.Order("m-1"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the slow creation never happened")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
