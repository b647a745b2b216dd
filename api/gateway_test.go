package api_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"orderd/provider"
	"orderd/provider/providertest"
	"orderd/store"
)

func TestAPI_Payins_created(t *testing.T) {
	e := newEnv(t, setup{})
	r := e.post("/v1/payins", payinBody("m-created", "10.50"))
	wantStatus(t, r, http.StatusCreated)
	m := r.json(t)
	if m["state"] != "created" {
		t.Errorf("state = %v", m["state"])
	}
	if field(m, "order.merchantOrderId") != "m-created" || field(m, "order.status") != "processing" {
		t.Errorf("order = %v", m["order"])
	}
	if field(m, "order.auth.type") == nil || field(m, "order.auth.redirectUrl") == nil && field(m, "order.auth.code") == nil {
		t.Errorf("the answer lacks the provider's auth object: %s", r.body)
	}

	// The provider got the receiver as webhookUrl and the amount as written.
	calls := e.fake.Calls(providertest.PathPaymentCreate)
	if len(calls) != 1 {
		t.Fatalf("%d create calls, want 1", len(calls))
	}
	var sent map[string]any
	if err := json.Unmarshal(calls[0].Body, &sent); err != nil {
		t.Fatal(err)
	}
	if sent["webhookUrl"] != testPublicURL || field(sent, "invoice.amount") != "10.50" {
		t.Errorf("provider got %s", calls[0].Body)
	}

	// The order is stored through the one write path, learned via gateway.
	o := e.get("/v1/orders/m-created")
	wantStatus(t, o, http.StatusOK)
	om := o.json(t)
	if om["learnedVia"] != "gateway" || field(om, "order.id") != field(m, "order.id") {
		t.Errorf("stored order = %s", o.body)
	}
	if h, _ := om["history"].([]any); len(h) != 1 {
		t.Errorf("history = %v, want one entry", om["history"])
	}
	if as, _ := om["attempts"].([]any); len(as) != 1 || field(as[0].(map[string]any), "state") != "created" {
		t.Errorf("attempts = %v, want one created", om["attempts"])
	}
	evs, err := e.store.PendingEvents(t.Context(), 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Type != "order.processing" || evs[0].MerchantOrderID != "m-created" ||
		evs[0].LearnedVia != store.SourceGateway {
		t.Errorf("outbox = %+v, want one order.processing event learned via gateway", evs)
	}
}

func TestAPI_Payins_inDoubt(t *testing.T) {
	tests := []struct {
		name    string
		fault   providertest.Fault
		timeout time.Duration
		// created says whether the fake did create the order.
		created bool
	}{
		{name: "5xx after the provider created it", fault: providertest.Fault{Kind: providertest.FailAfter, Status: 502}, created: true},
		{name: "5xx before the provider acted", fault: providertest.Fault{Kind: providertest.FailBefore, Status: 503}},
		{name: "timeout", fault: providertest.Fault{Kind: providertest.Slow, Delay: 800 * time.Millisecond},
			timeout: 150 * time.Millisecond, created: true},
		{name: "connection reset", fault: providertest.Fault{Kind: providertest.Reset}},
		{name: "connection reset after creating", fault: providertest.Fault{Kind: providertest.ResetAfter}, created: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, setup{timeout: tt.timeout})
			tt.fault.Endpoint = providertest.PathPaymentCreate
			if err := e.fake.InjectFault(tt.fault); err != nil {
				t.Fatal(err)
			}
			r := e.post("/v1/payins", payinBody("m-doubt", "20.00"))
			wantStatus(t, r, http.StatusAccepted)
			m := r.json(t)
			if m["state"] != "in_doubt" || field(m, "attempt.state") != "in_doubt" ||
				field(m, "attempt.merchantOrderId") != "m-doubt" {
				t.Errorf("answer = %s", r.body)
			}
			as := e.attempts()
			if len(as) != 1 || as[0].State != store.AttemptInDoubt || as[0].Detail == "" {
				t.Fatalf("attempts = %+v, want one in doubt with a reason", as)
			}
			if _, err := e.store.OrderByMerchantID(t.Context(), "m-doubt"); err == nil {
				t.Error("an in-doubt creation stored an order")
			}
			if tt.timeout > 0 {
				time.Sleep(tt.fault.Delay) // let the slow call finish at the fake
			}
			if _, ok := e.fake.Order("m-doubt"); ok != tt.created {
				t.Errorf("fake has the order: %v, want %v", ok, tt.created)
			}

			// Never retried blindly: the repeat reports the doubt.
			r2 := e.post("/v1/payins", payinBody("m-doubt", "20.00"))
			wantStatus(t, r2, http.StatusOK)
			if r2.json(t)["state"] != "in_doubt" {
				t.Errorf("repeat = %s", r2.body)
			}
			if n := e.creates.Load(); n != 1 {
				t.Errorf("the client sent %d creates, want 1", n)
			}
			o := e.get("/v1/orders/m-doubt")
			wantStatus(t, o, http.StatusNotFound)
			if as, _ := o.json(t)["attempts"].([]any); len(as) != 1 {
				t.Errorf("404 lists %d attempts, want the in-doubt one: %s", len(as), o.body)
			}
		})
	}
}

func TestAPI_Payins_rejected(t *testing.T) {
	tests := []struct {
		name   string
		fake   providertest.Options
		fault  *providertest.Fault
		before func(e *env)
		body   string
		status int
		code   string
		fields []string
	}{
		{name: "provider validation names its fields", status: 422, code: "VALIDATION", fields: []string{"client.phone"},
			body: `{"merchantOrderId":"m-r","invoice":{"amount":"10.00","currency":"brl"},"client":{"phone":"12"}}`},
		{name: "amount below the minimum", fake: providertest.Options{MinAmount: "5.00"}, status: 422,
			code: "AMOUNT_LESS_THAN_ALLOWED", body: payinBody("m-r", "1.00")},
		{name: "order already exists", status: 409, code: "ORDER_ALREADY_EXISTS", body: payinBody("m-r", "10.00"),
			before: func(e *env) {
				if _, err := e.fake.CreateOrder(providertest.NewOrder{MerchantOrderID: "m-r", Amount: "3.00", Currency: "brl"}); err != nil {
					e.t.Fatal(err)
				}
			}},
		{name: "payin disabled", status: 403, code: "PAYIN_DISABLED", body: payinBody("m-r", "10.00"),
			fault: &providertest.Fault{Kind: providertest.ErrorAnswer, Code: provider.CodePayinDisabled}},
		{name: "technical issue", status: 503, code: "REJECTED_DUE_TO_TECHNICAL_ISSUE", body: payinBody("m-r", "10.00"),
			fault: &providertest.Fault{Kind: providertest.ErrorAnswer, Code: provider.CodeRejectedDueToTechnicalIssue}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, setup{fake: tt.fake})
			if tt.before != nil {
				tt.before(e)
			}
			if tt.fault != nil {
				tt.fault.Endpoint = providertest.PathPaymentCreate
				if err := e.fake.InjectFault(*tt.fault); err != nil {
					t.Fatal(err)
				}
			}
			r := e.post("/v1/payins", tt.body)
			wantStatus(t, r, tt.status)
			m := r.json(t)
			if m["state"] != "rejected" || field(m, "error.code") != tt.code {
				t.Errorf("answer = %s, want rejected %s", r.body, tt.code)
			}
			var got []string
			ves, _ := field(m, "error.validationErrors").([]any)
			for _, ve := range ves {
				got = append(got, field(ve.(map[string]any), "field").(string))
			}
			if !slices.Equal(got, tt.fields) {
				t.Errorf("validation fields = %v, want %v", got, tt.fields)
			}
			as := e.attempts()
			if len(as) != 1 || as[0].State != store.AttemptRejected || as[0].ErrorCode != tt.code {
				t.Errorf("attempts = %+v, want one rejected %s", as, tt.code)
			}
			if tt.code != "ORDER_ALREADY_EXISTS" {
				if _, err := e.store.OrderByMerchantID(t.Context(), "m-r"); err == nil {
					t.Error("a rejected creation stored an order")
				}
			}
		})
	}
}

func TestAPI_Payins_localValidation(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		status int
		fields []string // 422: the fields named; 400: the field in "field"
	}{
		{"everything missing", `{}`, 422, []string{"merchantOrderId", "invoice.amount", "invoice.currency"}},
		{"amount zero", payinBody("m", "0"), 422, []string{"invoice.amount"}},
		{"amount negative", payinBody("m", "-5.00"), 422, []string{"invoice.amount"}},
		{"amount with a plus sign", payinBody("m", "+5.00"), 422, []string{"invoice.amount"}},
		{"amount not a number", payinBody("m", "ten"), 422, []string{"invoice.amount"}},
		{"amount with exponent", payinBody("m", "1e3"), 422, []string{"invoice.amount"}},
		{"amount of 33 characters", payinBody("m", "1"+strings.Repeat("0", 29)+".00"), 422, []string{"invoice.amount"}},
		{"amount of 64 characters", payinBody("m", "0."+strings.Repeat("0", 61)+"1"), 422, []string{"invoice.amount"}},
		{"amount as a JSON number", `{"merchantOrderId":"m","invoice":{"amount":10.5,"currency":"brl"}}`, 422, []string{"invoice.amount"}},
		{"currency uppercase", `{"merchantOrderId":"m","invoice":{"amount":"1","currency":"BRL"}}`, 422, []string{"invoice.currency"}},
		{"currency too long", `{"merchantOrderId":"m","invoice":{"amount":"1","currency":"brla"}}`, 422, []string{"invoice.currency"}},
		{"relative webhook URL", `{"merchantOrderId":"m","invoice":{"amount":"1","currency":"brl"},"webhookUrl":"/hook"}`, 422, []string{"webhookUrl"}},
		{"ftp return URL", `{"merchantOrderId":"m","invoice":{"amount":"1","currency":"brl"},"returnUrl":"ftp://x.example/"}`, 422, []string{"returnUrl"}},
		{"extended variant without the customer", `{"merchantOrderId":"m","invoice":{"amount":"1","currency":"brl"},"attributes":{"routingKey":"EXTENDED"}}`,
			422, []string{"client.name", "client.email", "client.phone", "client.taxpayer.number"}},
		{"merchantOrderId too long", payinBody(strings.Repeat("x", 256), "1"), 422, []string{"merchantOrderId"}},
		{"unknown field", `{"merchantOrderId":"m","invoice":{"amount":"1","currency":"brl"},"colour":"red"}`, 400, []string{"colour"}},
		{"unknown nested field", `{"merchantOrderId":"m","invoice":{"amount":"1","currency":"brl","tip":"1"}}`, 400, []string{"tip"}},
		{"malformed JSON", `{"merchantOrderId":"m",`, 400, nil},
		{"not an object", `["m"]`, 400, nil},
		{"two objects", payinBody("m", "1") + payinBody("n", "1"), 400, nil},
		{"empty body", ``, 400, nil},
	}
	e := newEnv(t, setup{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.post("/v1/payins", tt.body)
			wantStatus(t, r, tt.status)
			m := r.json(t)
			switch tt.status {
			case 422:
				if m["state"] != "rejected" || field(m, "error.code") != "VALIDATION" {
					t.Errorf("answer = %s", r.body)
				}
				var got []string
				ves, _ := field(m, "error.validationErrors").([]any)
				for _, ve := range ves {
					vm := ve.(map[string]any)
					got = append(got, vm["field"].(string))
					if vm["message"] == "" {
						t.Errorf("validation error without a message: %v", vm)
					}
				}
				if !slices.Equal(got, tt.fields) {
					t.Errorf("fields = %v, want %v", got, tt.fields)
				}
			case 400:
				if m["error"] == "" {
					t.Errorf("answer = %s", r.body)
				}
				if len(tt.fields) > 0 && (m["field"] != tt.fields[0] || !strings.Contains(m["error"].(string), tt.fields[0])) {
					t.Errorf("answer = %s, want it to name %q", r.body, tt.fields[0])
				}
			}
		})
	}
	if as := e.attempts(); len(as) != 0 {
		t.Errorf("bad input created %d attempts", len(as))
	}
	if n := e.creates.Load(); n != 0 {
		t.Errorf("bad input reached the provider %d times", n)
	}
}

func TestAPI_Payins_idempotency(t *testing.T) {
	e := newEnv(t, setup{})
	first := e.post("/v1/payins", payinBody("m-idem", "10.00"))
	wantStatus(t, first, http.StatusCreated)

	t.Run("identical repeat gets the same body", func(t *testing.T) {
		// The same request in another formatting and key order.
		again := e.post("/v1/payins", `{ "returnUrl": "https://shop.example/back", "client": {"name": "Ana"},
			"invoice": {"currency": "brl", "amount": "10.00"}, "merchantOrderId": "m-idem" }`)
		wantStatus(t, again, http.StatusOK)
		if string(again.body) != string(first.body) {
			t.Errorf("repeat body\n%s\nwant\n%s", again.body, first.body)
		}
	})
	t.Run("different body conflicts", func(t *testing.T) {
		r := e.post("/v1/payins", payinBody("m-idem", "11.00"))
		wantStatus(t, r, http.StatusConflict)
		m := r.json(t)
		if field(m, "error.code") != "IDEMPOTENCY_CONFLICT" || field(m, "attempt.state") != "created" {
			t.Errorf("answer = %s", r.body)
		}
	})
	t.Run("a payout with the payin's merchantOrderId conflicts", func(t *testing.T) {
		r := e.post("/v1/payouts", `{"merchantOrderId":"m-idem","amount":{"amount":"1.00","currency":"brl"}}`)
		wantStatus(t, r, http.StatusConflict)
	})
	if n := len(e.fake.Calls(providertest.PathPaymentCreate)); n != 1 {
		t.Errorf("the provider got %d creates, want 1", n)
	}

	t.Run("corrected request after a rejection is a new attempt", func(t *testing.T) {
		bad := `{"merchantOrderId":"m-fix","invoice":{"amount":"10.00","currency":"brl"},"client":{"phone":"12"}}`
		r := e.post("/v1/payins", bad)
		wantStatus(t, r, http.StatusUnprocessableEntity)
		again := e.post("/v1/payins", bad)
		wantStatus(t, again, http.StatusOK)
		if string(again.body) != string(r.body) {
			t.Errorf("identical repeat of a rejection = %s, want the stored %s", again.body, r.body)
		}
		fixed := e.post("/v1/payins", payinBody("m-fix", "10.00"))
		wantStatus(t, fixed, http.StatusCreated)
		as, err := e.store.AttemptsByMerchantID(t.Context(), "m-fix")
		if err != nil {
			t.Fatal(err)
		}
		if len(as) != 2 || as[0].State != store.AttemptRejected || as[1].State != store.AttemptCreated {
			t.Errorf("attempts = %+v", as)
		}
	})
	t.Run("identical repeat after the provider's own trouble is a new attempt", func(t *testing.T) {
		if err := e.fake.InjectFault(providertest.Fault{Endpoint: providertest.PathPaymentCreate,
			Kind: providertest.ErrorAnswer, Code: provider.CodeRejectedDueToTechnicalIssue}); err != nil {
			t.Fatal(err)
		}
		wantStatus(t, e.post("/v1/payins", payinBody("m-tech", "10.00")), http.StatusServiceUnavailable)
		wantStatus(t, e.post("/v1/payins", payinBody("m-tech", "10.00")), http.StatusCreated)
	})
}

func TestAPI_Payouts(t *testing.T) {
	e := newEnv(t, setup{fake: providertest.Options{InitialBalances: map[string]string{"brl": "100.00"}}})
	body := `{"merchantOrderId":"p-1","amount":{"amount":"25.00","currency":"brl"},"destination":{"pix":"key-1"}}`
	r := e.post("/v1/payouts", body)
	wantStatus(t, r, http.StatusCreated)
	m := r.json(t)
	if m["state"] != "created" || field(m, "order.type") != "payout" {
		t.Errorf("answer = %s", r.body)
	}
	calls := e.fake.Calls(providertest.PathWithdrawalCreate)
	if len(calls) != 1 {
		t.Fatalf("%d withdrawal calls", len(calls))
	}
	var sent map[string]any
	if err := json.Unmarshal(calls[0].Body, &sent); err != nil {
		t.Fatal(err)
	}
	if field(sent, "destination.pix") != "key-1" || sent["webhookUrl"] != testPublicURL {
		t.Errorf("provider got %s, want the body passed through with webhookUrl", calls[0].Body)
	}
	o := e.get("/v1/orders/p-1")
	wantStatus(t, o, http.StatusOK)
	if o.json(t)["learnedVia"] != "gateway" {
		t.Errorf("order = %s", o.body)
	}

	t.Run("not enough balance", func(t *testing.T) {
		r := e.post("/v1/payouts", `{"merchantOrderId":"p-2","amount":{"amount":"1000.00","currency":"brl"}}`)
		wantStatus(t, r, http.StatusUnprocessableEntity)
		if field(r.json(t), "error.code") != "NOT_ENOUGH_BALANCE" {
			t.Errorf("answer = %s", r.body)
		}
	})
	for _, tt := range []struct {
		name, body string
		fields     []string
	}{
		{"merchantOrderId missing", `{"amount":{"amount":"1.00","currency":"brl"}}`, []string{"merchantOrderId"}},
		{"merchantOrderId not a string", `{"merchantOrderId":7}`, []string{"merchantOrderId"}},
		{"amount as a number", `{"merchantOrderId":"p-3","amount":5}`, []string{"amount"}},
		{"bad money object", `{"merchantOrderId":"p-3","amount":{"amount":"-1","currency":"BRL"}}`, []string{"amount.amount", "amount.currency"}},
		{"bad webhook URL", `{"merchantOrderId":"p-3","webhookUrl":"nope"}`, []string{"webhookUrl"}},
		{"amount of 33 characters", `{"merchantOrderId":"p-3","amount":"1` + strings.Repeat("0", 29) + `.00"}`, []string{"amount"}},
		{"money object's amount of 33 characters", `{"merchantOrderId":"p-3","amount":{"amount":"1` + strings.Repeat("0", 29) + `.00","currency":"brl"}}`, []string{"amount.amount"}},
		{"invoice amount of 33 characters", `{"merchantOrderId":"p-3","invoice":{"amount":"1` + strings.Repeat("0", 32) + `","currency":"brl"}}`, []string{"invoice.amount"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := e.post("/v1/payouts", tt.body)
			wantStatus(t, r, http.StatusUnprocessableEntity)
			var got []string
			ves, _ := field(r.json(t), "error.validationErrors").([]any)
			for _, ve := range ves {
				got = append(got, ve.(map[string]any)["field"].(string))
			}
			if !slices.Equal(got, tt.fields) {
				t.Errorf("fields = %v, want %v", got, tt.fields)
			}
		})
	}
	if n := len(e.fake.Calls(providertest.PathWithdrawalCreate)); n != 2 {
		t.Errorf("%d withdrawal calls, want the 2 made before the bad bodies", n)
	}
}

func TestAPI_Refunds(t *testing.T) {
	e := newEnv(t, setup{})
	e.paidOrder("paid", "50.00")
	refund := `{"merchantOrderId":"paid","amount":"10.00","refundReason":"customer asked"}`
	r := e.post("/v1/refunds", refund)
	wantStatus(t, r, http.StatusCreated)
	if field(r.json(t), "order.refundTransaction.status") != "new" {
		t.Errorf("answer = %s", r.body)
	}

	t.Run("identical refund without a key is the same refund", func(t *testing.T) {
		again := e.post("/v1/refunds", refund)
		wantStatus(t, again, http.StatusOK)
		if string(again.body) != string(r.body) {
			t.Errorf("repeat = %s", again.body)
		}
		if n := len(e.fake.Calls(providertest.PathRefundCreate)); n != 1 {
			t.Errorf("%d refund calls, want 1", n)
		}
	})
	t.Run("an Idempotency-Key makes a second equal refund possible", func(t *testing.T) {
		wantStatus(t, e.post("/v1/refunds", refund, "Idempotency-Key", "refund-2"), http.StatusCreated)
		wantStatus(t, e.post("/v1/refunds", refund, "Idempotency-Key", "refund-2"), http.StatusOK)
		other := e.post("/v1/refunds", `{"merchantOrderId":"paid","amount":"1.00"}`, "Idempotency-Key", "refund-2")
		wantStatus(t, other, http.StatusConflict)
		if n := len(e.fake.Calls(providertest.PathRefundCreate)); n != 2 {
			t.Errorf("%d refund calls, want 2", n)
		}
	})
	t.Run("more than refundable is the provider's validation error", func(t *testing.T) {
		over := e.post("/v1/refunds", `{"merchantOrderId":"paid","amount":"45.00"}`)
		wantStatus(t, over, http.StatusUnprocessableEntity)
		m := over.json(t)
		if field(m, "error.code") != "VALIDATION" {
			t.Errorf("answer = %s", over.body)
		}
		ves, _ := field(m, "error.validationErrors").([]any)
		if len(ves) != 1 || ves[0].(map[string]any)["field"] != "amount" {
			t.Errorf("validation errors = %v", ves)
		}
	})
	t.Run("the refunded order is watched", func(t *testing.T) {
		var n int
		if err := e.store.DB().QueryRowContext(t.Context(),
			`SELECT count(*) FROM watches WHERE merchant_order_id = 'paid' AND resolved_at IS NULL`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("%d open watches for the refunded order, want 1", n)
		}
	})
	t.Run("local validation", func(t *testing.T) {
		r := e.post("/v1/refunds", `{"amount":"0","id":"not-a-uuid"}`)
		wantStatus(t, r, http.StatusUnprocessableEntity)
		var got []string
		ves, _ := field(r.json(t), "error.validationErrors").([]any)
		for _, ve := range ves {
			got = append(got, ve.(map[string]any)["field"].(string))
		}
		if want := []string{"amount", "id"}; !slices.Equal(got, want) {
			t.Errorf("fields = %v, want %v", got, want)
		}
		long := e.post("/v1/refunds", `{"merchantOrderId":"paid","amount":"1`+strings.Repeat("0", 29)+`.00"}`)
		wantStatus(t, long, http.StatusUnprocessableEntity)
		if ves := asSlice(field(long.json(t), "error.validationErrors")); len(ves) != 1 ||
			ves[0].(map[string]any)["field"] != "amount" || !strings.Contains(ves[0].(map[string]any)["message"].(string), "32") {
			t.Errorf("answer to a 33-character amount = %s", long.body)
		}
		if n := len(e.fake.Calls(providertest.PathRefundCreate)); n != 3 {
			t.Errorf("%d refund calls, want the 3 made before", n)
		}
		bad := e.post("/v1/refunds", refund, "Idempotency-Key", "has space")
		wantStatus(t, bad, http.StatusBadRequest)
		if bad.json(t)["field"] != "Idempotency-Key" {
			t.Errorf("answer = %s", bad.body)
		}
	})
}

func TestAPI_Requisites(t *testing.T) {
	e := newEnv(t, setup{})
	body := `{"client":{"id":"client-7"},"currency":"mxn","type":"long_term","conversionCurrency":null}`
	r := e.post("/v1/requisites", body)
	wantStatus(t, r, http.StatusCreated)
	m := r.json(t)
	id, _ := field(m, "requisite.id").(string)
	if m["state"] != "created" || id == "" || field(m, "requisite.requisite.clabe") == nil {
		t.Fatalf("answer = %s", r.body)
	}
	var sent map[string]any
	if err := json.Unmarshal(e.fake.Calls(providertest.PathRequisiteCreate)[0].Body, &sent); err != nil {
		t.Fatal(err)
	}
	if sent["webhookUrl"] != testPublicURL {
		t.Errorf("provider got %v", sent)
	}
	reqs, err := e.store.Requisites(t.Context(), true)
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 1 || reqs[0].ID != id || reqs[0].Currency != "mxn" || reqs[0].Source != store.RequisiteFromGateway {
		t.Errorf("requisites for the sweep = %+v", reqs)
	}
	wantStatus(t, e.post("/v1/requisites", body), http.StatusOK)

	d := e.post("/v1/requisites/deactivate", `{"id":"`+strings.ToUpper(id)+`"}`)
	wantStatus(t, d, http.StatusOK)
	if d.json(t)["state"] != "created" {
		t.Errorf("deactivate answer = %s", d.body)
	}
	if rq, ok := e.fake.Requisite(id); !ok || rq.ExpiresAt.After(time.Now().Add(time.Minute)) {
		t.Errorf("the fake's requisite is still active: %+v", rq)
	}
	if reqs, _ := e.store.Requisites(t.Context(), true); len(reqs) != 0 {
		t.Errorf("active requisites after deactivation = %+v", reqs)
	}
	if ids, _ := e.store.GatewayRequisites(t.Context()); len(ids) != 0 {
		t.Errorf("gateway requisites after deactivation = %v", ids)
	}

	for _, tt := range []struct {
		name, path, body string
		fields           []string
	}{
		{"requisite without client or currency", "/v1/requisites", `{}`, []string{"client.id", "currency"}},
		{"requisite with a bad type", "/v1/requisites", `{"client":{"id":"c"},"currency":"mxn","type":"forever"}`, []string{"type"}},
		{"deactivate without id", "/v1/requisites/deactivate", `{}`, []string{"id"}},
		{"deactivate with a bad id", "/v1/requisites/deactivate", `{"id":"123"}`, []string{"id"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := e.post(tt.path, tt.body)
			wantStatus(t, r, http.StatusUnprocessableEntity)
			var got []string
			ves, _ := field(r.json(t), "error.validationErrors").([]any)
			for _, ve := range ves {
				got = append(got, ve.(map[string]any)["field"].(string))
			}
			if !slices.Equal(got, tt.fields) {
				t.Errorf("fields = %v, want %v", got, tt.fields)
			}
		})
	}
}

func TestAPI_Gateway_withoutProvider(t *testing.T) {
	e := newEnv(t, setup{noProvider: true})
	r := e.post("/v1/payins", payinBody("m", "1.00"))
	wantStatus(t, r, http.StatusServiceUnavailable)
	if len(e.attempts()) != 0 {
		t.Error("an attempt was recorded without a provider to call")
	}
}

func TestAPI_Gateway_bodyTooLarge(t *testing.T) {
	e := newEnv(t, setup{maxBodySize: 256})
	r := e.post("/v1/payins", `{"merchantOrderId":"m","client":{"name":"`+strings.Repeat("a", 400)+`"}}`)
	wantStatus(t, r, http.StatusRequestEntityTooLarge)
	if len(e.attempts()) != 0 {
		t.Error("an oversized body created an attempt")
	}
}

// A body that stops arriving is answered 408 once the server's read
// timeout passes, not 400 as if it were malformed; nothing is created.
func TestAPI_Gateway_bodyTooSlow(t *testing.T) {
	e := newEnv(t, setup{readTimeout: 300 * time.Millisecond})
	status, body := e.rawPayin(t, "Content-Length: 100\r\n\r\n{\"merchantOrderId\":", 10*time.Second)
	if status != http.StatusRequestTimeout || !strings.Contains(string(body), "did not arrive in time") {
		t.Errorf("status %d, body %s; want 408 saying the body did not arrive in time", status, body)
	}
	if len(e.attempts()) != 0 {
		t.Error("a body that never arrived created an attempt")
	}
}

func TestAPI_Gateway_bodyTooLargeAnnounced(t *testing.T) {
	e := newEnv(t, setup{maxBodySize: 256})
	chunked := func(body string) string {
		return fmt.Sprintf("Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(body), body)
	}
	big := `{"merchantOrderId":"m","client":{"name":"` + strings.Repeat("a", 400) + `"}}`
	tests := []struct{ name, rest string }{
		// The body never comes: the answer must not wait for it.
		{"Content-Length over the limit", "Content-Length: 99999999\r\n\r\n{\"merchantOrderId\":"},
		{"Content-Length a little over the limit", "Content-Length: 1000\r\n\r\n{\"merchantOrderId\":"},
		{"chunked body over the limit", chunked(big)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if status, body := e.rawPayin(t, tt.rest, 5*time.Second); status != http.StatusRequestEntityTooLarge {
				t.Errorf("status %d, want 413; body %s", status, body)
			}
		})
	}
	if len(e.attempts()) != 0 {
		t.Error("an oversized body created an attempt")
	}
}

func TestAPI_Payins_concurrentRepeats(t *testing.T) {
	e := newEnv(t, setup{})
	const n = 12
	statuses := make(chan int, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			statuses <- e.post("/v1/payins", payinBody("m-race", "9.99")).status
		})
	}
	wg.Wait()
	close(statuses)
	counts := map[int]int{}
	for s := range statuses {
		counts[s]++
	}
	if counts[http.StatusCreated] != 1 || counts[http.StatusOK] != n-1 {
		t.Errorf("statuses = %v, want one 201 and %d 200", counts, n-1)
	}
	if calls := len(e.fake.Calls(providertest.PathPaymentCreate)); calls != 1 {
		t.Errorf("the provider got %d creates, want 1", calls)
	}
	if as := e.attempts(); len(as) != 1 || as[0].State != store.AttemptCreated {
		t.Errorf("attempts = %+v, want one created", as)
	}
}

func TestAPI_Gateway_duplicateKeys(t *testing.T) {
	const reqID = "0f5e2a9c-3b1d-4c8e-9f7a-1234567890ab"
	tests := []struct {
		name, path, body string
		// field is the key the answer names, as the body spells it.
		field string
	}{
		{"refund amount in another case", "/v1/refunds",
			`{"merchantOrderId":"paid","amount":"0.01","AMOUNT":"0.50"}`, "AMOUNT"},
		{"refund amount twice", "/v1/refunds",
			`{"merchantOrderId":"paid","amount":"0.01","amount":"0.40"}`, "amount"},
		{"refund amount only in another case", "/v1/refunds",
			`{"merchantOrderId":"paid","Amount":"0.50"}`, "Amount"},
		{"payin merchantOrderId in another case", "/v1/payins",
			`{"merchantOrderId":"g-5","MerchantOrderId":"g-6","invoice":{"amount":"1.00","currency":"brl"}}`, "MerchantOrderId"},
		{"payin merchantOrderId twice, once escaped", "/v1/payins",
			`{"merchantOrderId":"g-5","\u006derchantOrderId":"g-6","invoice":{"amount":"1.00","currency":"brl"}}`, "merchantOrderId"},
		{"payin invoice amount twice", "/v1/payins",
			`{"merchantOrderId":"g-7","invoice":{"amount":"1.00","currency":"brl","amount":"900.00"}}`, "invoice.amount"},
		{"payin invoice currency in another case", "/v1/payins",
			`{"merchantOrderId":"g-8","invoice":{"amount":"1.00","Currency":"brl"}}`, "invoice.Currency"},
		{"payout merchantOrderId twice", "/v1/payouts",
			`{"merchantOrderId":"p-7","merchantOrderId":"p-8","amount":{"amount":"1.00","currency":"brl"}}`, "merchantOrderId"},
		{"payout merchantOrderId in another case", "/v1/payouts",
			`{"merchantOrderId":"p-7","MerchantOrderID":"p-8","amount":{"amount":"1.00","currency":"brl"}}`, "MerchantOrderID"},
		{"payout nested amount twice", "/v1/payouts",
			`{"merchantOrderId":"p-9","amount":{"amount":"1.00","currency":"brl","amount":"90.00"}}`, "amount.amount"},
		{"payout passed-through key twice", "/v1/payouts",
			`{"merchantOrderId":"p-10","amount":{"amount":"1.00","currency":"brl"},"destination":{"pix":"a","pix":"b"}}`, "destination.pix"},
		{"payout passed-through keys in an array", "/v1/payouts",
			`{"merchantOrderId":"p-11","amount":{"amount":"1.00","currency":"brl"},"items":[{"a":1},{"a":1,"A":2}]}`, "items[1].A"},
		{"requisite currency twice", "/v1/requisites",
			`{"client":{"id":"c-1"},"currency":"mxn","currency":"brl"}`, "currency"},
		{"deactivation id in another case", "/v1/requisites/deactivate",
			`{"id":"` + reqID + `","ID":"` + reqID + `"}`, "ID"},
		{"watch type twice", "/v1/watch",
			`{"merchantOrderId":"w-1","type":"payin","state":"in_doubt","type":"payout"}`, "type"},
		{"watch state with a long s", "/v1/watch",
			`{"merchantOrderId":"w-2","type":"payin","\u017Ftate":"in_doubt"}`, "\u017Ftate"},
	}
	e := newEnv(t, setup{fake: providertest.Options{InitialBalances: map[string]string{"brl": "100.00"}}})
	e.paidOrder("paid", "50.00")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.post(tt.path, tt.body)
			wantStatus(t, r, http.StatusBadRequest)
			m := r.json(t)
			msg, _ := m["error"].(string)
			if m["field"] != tt.field || !strings.Contains(msg, path.Base(strings.ReplaceAll(tt.field, ".", "/"))) {
				t.Errorf("answer = %s, want it to name %q", r.body, tt.field)
			}
		})
	}
	if as := e.attempts(); len(as) != 0 {
		t.Errorf("bodies with duplicate keys created %d attempts", len(as))
	}
	if n := e.creates.Load(); n != 0 {
		t.Errorf("bodies with duplicate keys reached the provider %d times", n)
	}
	for _, moid := range []string{"g-5", "g-6", "g-7", "g-8", "p-7", "p-8", "p-9", "p-10", "p-11"} {
		if _, ok := e.fake.Order(moid); ok {
			t.Errorf("the provider has order %s", moid)
		}
	}
}

func TestAPI_Gateway_invalidUTF8(t *testing.T) {
	tests := []struct{ name, path, body string }{
		{"payin merchantOrderId", "/v1/payins", payinBody("g-\xff", "1.00")},
		{"payin another invalid merchantOrderId", "/v1/payins", payinBody("g-\xfe", "1.00")},
		{"payin truncated sequence", "/v1/payins", payinBody("g-\xc3", "1.00")},
		{"payin key", "/v1/payins", `{"merchantOrderId":"g-1","invoice":{"amount":"1.00","currency":"brl"},"client":{"na` + "\xff" + `me":"a"}}`},
		{"payout passed-through value", "/v1/payouts", `{"merchantOrderId":"p-1","amount":{"amount":"1.00","currency":"brl"},"note":"` + "\xff" + `"}`},
		{"refund reason", "/v1/refunds", `{"merchantOrderId":"paid","amount":"1.00","refundReason":"` + "\xed\xa0\x80" + `"}`},
		{"watch", "/v1/watch", `{"merchantOrderId":"w-` + "\xff" + `","type":"payin","state":"in_doubt"}`},
		{"outside any string", "/v1/payins", payinBody("g-2", "1.00") + "\xff"},
		{"escaped lone surrogate", "/v1/payins", payinBody(`g-\ud800`, "1.00")},
		{"escaped surrogates in the wrong order", "/v1/refunds", `{"merchantOrderId":"paid","amount":"1.00","refundReason":"\udc00\ud800"}`},
	}
	e := newEnv(t, setup{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.post(tt.path, tt.body)
			wantStatus(t, r, http.StatusBadRequest)
			if msg, _ := r.json(t)["error"].(string); !strings.Contains(msg, "UTF-8") {
				t.Errorf("answer = %s, want it to say the body is not UTF-8", r.body)
			}
		})
	}
	if as := e.attempts(); len(as) != 0 {
		t.Errorf("bodies that are not UTF-8 created %d attempts", len(as))
	}
	if n := e.creates.Load(); n != 0 {
		t.Errorf("bodies that are not UTF-8 reached the provider %d times", n)
	}
}

func TestAPI_Gateway_idempotencyKeyTwice(t *testing.T) {
	e := newEnv(t, setup{})
	e.paidOrder("paid", "50.00")
	tests := []struct {
		name, path, body string
		keys             []string
	}{
		{"refund, two keys", "/v1/refunds", `{"merchantOrderId":"paid","amount":"1.00"}`, []string{"refund-a", "refund-b"}},
		{"refund, the same key twice", "/v1/refunds", `{"merchantOrderId":"paid","amount":"1.00"}`, []string{"refund-a", "refund-a"}},
		{"requisite, two keys", "/v1/requisites", `{"client":{"id":"c-1"},"currency":"mxn"}`, []string{"req-a", "req-b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, e.url+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range tt.keys {
				req.Header.Add("Idempotency-Key", k)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var m map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusBadRequest || m["field"] != "Idempotency-Key" {
				t.Errorf("status %d, answer %v; want 400 naming Idempotency-Key", resp.StatusCode, m)
			}
		})
	}
	if as := e.attempts(); len(as) != 0 {
		t.Errorf("requests with two Idempotency-Keys created %d attempts", len(as))
	}
	if n := e.creates.Load(); n != 0 {
		t.Errorf("requests with two Idempotency-Keys reached the provider %d times", n)
	}
}

// rawPayin sends POST /v1/payins over a plain connection, its headers
// ending with rest (the remaining headers, the blank line and as much body
// as the test wants sent), and returns the answer's status and body; the
// whole exchange is bounded by within.
func (e *env) rawPayin(t *testing.T, rest string, within time.Duration) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(within)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, "POST /v1/payins HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+rest); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
