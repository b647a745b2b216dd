package providertest_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"orderd/provider"
	"orderd/provider/providertest"
)

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestServer_Envelope(t *testing.T) {
	s := start(t, providertest.Options{APIKey: "k-123"})
	tests := []struct {
		name   string
		method string
		path   string
		key    string
		body   string
		want   provider.Code
	}{
		{"GET is refused", http.MethodGet, providertest.PathBalances, "k-123", "", provider.CodeInvalidHTTPMethod},
		{"PUT is refused", http.MethodPut, providertest.PathGetStatus, "k-123", `{}`, provider.CodeInvalidHTTPMethod},
		{"missing key", http.MethodPost, providertest.PathBalances, "", `{}`, provider.CodeAuthenticationFailed},
		{"wrong key", http.MethodPost, providertest.PathBalances, "k-124", `{}`, provider.CodeAuthenticationFailed},
		{"bearer form is not the key", http.MethodPost, providertest.PathBalances, "Bearer k-123", `{}`, provider.CodeAuthenticationFailed},
		{"unknown path", http.MethodPost, "/api/v3/order/cancel", "k-123", `{}`, provider.CodeMethodNotFound},
		{"other version", http.MethodPost, "/api/v2/balances", "k-123", `{}`, provider.CodeMethodNotFound},
		{"root", http.MethodPost, "/", "k-123", `{}`, provider.CodeMethodNotFound},
		{"broken JSON", http.MethodPost, providertest.PathGetStatus, "k-123", `{"merchantOrderId":`, provider.CodeInvalidData},
		{"empty body", http.MethodPost, providertest.PathBalances, "k-123", ``, provider.CodeInvalidData},
		{"array body", http.MethodPost, providertest.PathBalances, "k-123", `[]`, provider.CodeInvalidData},
		{"trailing data", http.MethodPost, providertest.PathBalances, "k-123", `{} {}`, provider.CodeInvalidData},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := send(t, tt.method, s.URL()+tt.path, tt.key, tt.body)
			data, perr := envelope(t, resp, b)
			if perr == nil || perr.Code != tt.want {
				t.Fatalf("answer %s, want code %s", b, tt.want)
			}
			if string(data) != "null" {
				t.Errorf("data = %s, want null", data)
			}
		})
	}
	// None of the refused calls created anything.
	if n := len(s.Orders()); n != 0 {
		t.Errorf("%d orders after refused calls", n)
	}
}

func TestServer_UntrustedSource(t *testing.T) {
	t.Run("ip not allowed", func(t *testing.T) {
		s := start(t, providertest.Options{AllowedIPs: []string{"192.0.2.1"}})
		mustCode(t, s, providertest.PathBalances, `{}`, provider.CodeRequestFromUntrustedSource)
	})
	t.Run("ip allowed", func(t *testing.T) {
		s := start(t, providertest.Options{AllowedIPs: []string{"127.0.0.1"}})
		mustOK(t, s, providertest.PathBalances, `{}`)
	})
	t.Run("referer not allowed", func(t *testing.T) {
		s := start(t, providertest.Options{AllowedReferers: []string{"shop.example"}})
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, s.URL()+providertest.PathBalances, strings.NewReader(`{}`))
		req.Header.Set("Authorization", s.APIKey())
		req.Header.Set("Referer", "https://evil.example/page")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var env provider.Envelope
		if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
			t.Fatal(err)
		}
		if env.Error == nil || env.Error.Code != provider.CodeRefererDoesNotMatch {
			t.Fatalf("error = %v, want %s", env.Error, provider.CodeRefererDoesNotMatch)
		}
	})
}

func TestServer_CreatePayment(t *testing.T) {
	s := start(t, providertest.Options{})
	data := mustOK(t, s, providertest.PathPaymentCreate,
		`{"merchantOrderId":"m-1","invoice":{"amount":"100.50","currency":"brl"},"returnUrl":"https://shop.example/back","webhookUrl":"https://shop.example/hook"}`)

	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{"auth", "createdAt", "id", "merchantOrderId", "rejectReason", "status", "type"}; !slices.Equal(keys, want) {
		t.Errorf("create answer fields %v, want %v", keys, want)
	}
	o := decodeOrder(t, data)
	if !uuidRE.MatchString(o.ID) {
		t.Errorf("id %q is not a UUID", o.ID)
	}
	if o.MerchantOrderID != "m-1" || o.Type != provider.TypePayin || o.Status != provider.StatusProcessing || o.RejectReason != nil {
		t.Errorf("order = %+v", o)
	}
	if o.Auth == nil || o.Auth.Type != "pixDynamicQrCode" || !strings.HasPrefix(o.Auth.RedirectURL, s.URL()+"/") ||
		o.Auth.Code == "" || !o.Auth.ExpiresAt.After(o.CreatedAt.Time) {
		t.Errorf("auth = %+v", o.Auth)
	}
	if !strings.HasSuffix(string(fields["createdAt"]), `+00:00"`) {
		t.Errorf("createdAt %s: want the +00:00 form", fields["createdAt"])
	}

	got, raw := getStatus(t, s, "m-1")
	if got.ID != o.ID || got.Status != provider.StatusProcessing || got.MerchantTargetWallet != nil {
		t.Errorf("get-status = %+v", got)
	}
	if len(got.Transactions) != 1 || got.Transactions[0].Type != "payin" ||
		!got.Transactions[0].Authorized.Equal(provider.MustMoney("100.50", "brl")) ||
		!got.Transactions[0].CompletedAt.IsZero() {
		t.Errorf("transactions = %+v", got.Transactions)
	}
	if !strings.Contains(string(raw), `"completedAt":null`) || !regexp.MustCompile(`"createdAt":"[^"]+Z"`).Match(raw) {
		t.Errorf("get-status should mix timestamp forms and show completedAt null: %s", raw)
	}
}

func TestServer_CreatePaymentValidation(t *testing.T) {
	s := start(t, providertest.Options{})
	extended := func(client string) string {
		return `{"merchantOrderId":"x","invoice":{"amount":"10","currency":"brl"},"attributes":{"routingKey":"EXTENDED"},"client":` + client + `}`
	}
	tests := []struct {
		name   string
		body   string
		fields []string
	}{
		{"nothing", `{}`, []string{"merchantOrderId", "invoice.amount", "invoice.currency"}},
		{"blank merchantOrderId", `{"merchantOrderId":"  ","invoice":{"amount":"1","currency":"brl"}}`, []string{"merchantOrderId"}},
		{"long merchantOrderId", `{"merchantOrderId":"` + strings.Repeat("a", 256) + `","invoice":{"amount":"1","currency":"brl"}}`, []string{"merchantOrderId"}},
		{"amount not numeric", `{"merchantOrderId":"x","invoice":{"amount":"ten","currency":"brl"}}`, []string{"invoice.amount"}},
		{"amount exponent", `{"merchantOrderId":"x","invoice":{"amount":"1e3","currency":"brl"}}`, []string{"invoice.amount"}},
		{"amount zero", `{"merchantOrderId":"x","invoice":{"amount":"0.00","currency":"brl"}}`, []string{"invoice.amount"}},
		{"amount negative", `{"merchantOrderId":"x","invoice":{"amount":"-5","currency":"brl"}}`, []string{"invoice.amount"}},
		{"amount as JSON number", `{"merchantOrderId":"x","invoice":{"amount":10,"currency":"brl"}}`, []string{"invoice.amount"}},
		{"currency uppercase", `{"merchantOrderId":"x","invoice":{"amount":"1","currency":"BRL"}}`, []string{"invoice.currency"}},
		{"currency too long", `{"merchantOrderId":"x","invoice":{"amount":"1","currency":"brlx"}}`, []string{"invoice.currency"}},
		{"bad webhookUrl", `{"merchantOrderId":"x","invoice":{"amount":"1","currency":"brl"},"webhookUrl":"not a url"}`, []string{"webhookUrl"}},
		{"relative returnUrl", `{"merchantOrderId":"x","invoice":{"amount":"1","currency":"brl"},"returnUrl":"/back"}`, []string{"returnUrl"}},
		{"ftp webhookUrl", `{"merchantOrderId":"x","invoice":{"amount":"1","currency":"brl"},"webhookUrl":"ftp://h/x"}`, []string{"webhookUrl"}},
		{"extended without client", extended(`null`), []string{"client.name", "client.email", "client.phone", "client.taxpayer.number"}},
		{"extended missing taxpayer", extended(`{"name":"Ana","email":"ana@example.com","phone":"+5511987654321"}`), []string{"client.taxpayer.number"}},
		{"extended bad email and phone", extended(`{"name":"Ana","email":"ana","phone":"12ab","taxpayer":{"number":"123"}}`), []string{"client.email", "client.phone"}},
		{"regular bad email", `{"merchantOrderId":"x","invoice":{"amount":"1","currency":"brl"},"client":{"email":"@"}}`, []string{"client.email"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			perr := mustCode(t, s, providertest.PathPaymentCreate, tt.body, provider.CodeValidation)
			var got []string
			for _, v := range perr.ValidationErrors {
				if v.Message == "" {
					t.Errorf("field %s has no message", v.Field)
				}
				got = append(got, v.Field)
			}
			if !slices.Equal(got, tt.fields) {
				t.Errorf("fields %v, want %v", got, tt.fields)
			}
		})
	}
	if n := len(s.Orders()); n != 0 {
		t.Errorf("%d orders after refused creations", n)
	}

	t.Run("extended complete", func(t *testing.T) {
		mustOK(t, s, providertest.PathPaymentCreate,
			extended(`{"name":"Ana","email":"ana@example.com","phone":"+5511987654321","taxpayer":{"number":"12345678909"}}`))
	})
}

func TestServer_CreatePaymentRules(t *testing.T) {
	s := start(t, providertest.Options{MinAmount: "5", MaxAmount: "1000"})
	create := func(moid, amount string) string {
		return `{"merchantOrderId":"` + moid + `","invoice":{"amount":"` + amount + `","currency":"brl"}}`
	}
	mustOK(t, s, providertest.PathPaymentCreate, create("dup", "10"))
	tests := []struct {
		name string
		body string
		want provider.Code
	}{
		{"reused merchantOrderId", create("dup", "20"), provider.CodeOrderAlreadyExists},
		{"below minimum", create("low", "4.99"), provider.CodeAmountLessThanAllowed},
		{"above maximum", create("high", "1000.01"), provider.CodeAmountGreaterThanAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mustCode(t, s, providertest.PathPaymentCreate, tt.body, tt.want)
		})
	}
	o, _ := s.Order("dup")
	if !o.Transactions[0].Authorized.Amount.Equal(provider.MustMoney("10", "brl").Amount) {
		t.Errorf("the reused id changed the first order: %+v", o.Transactions[0].Authorized)
	}
	for _, moid := range []string{"low", "high"} {
		if _, ok := s.Order(moid); ok {
			t.Errorf("refused order %s exists", moid)
		}
		mustCode(t, s, providertest.PathGetStatus, `{"merchantOrderId":"`+moid+`"}`, provider.CodeOrderNotFound)
	}
	t.Run("bounds are inclusive", func(t *testing.T) {
		mustOK(t, s, providertest.PathPaymentCreate, create("min", "5"))
		mustOK(t, s, providertest.PathPaymentCreate, create("max", "1000.00"))
	})
}

func TestServer_GetStatus(t *testing.T) {
	s := start(t, providertest.Options{})
	mustCode(t, s, providertest.PathGetStatus, `{"merchantOrderId":"nope"}`, provider.CodeOrderNotFound)
	perr := mustCode(t, s, providertest.PathGetStatus, `{}`, provider.CodeValidation)
	if perr.ValidationErrors[0].Field != "merchantOrderId" {
		t.Errorf("validation = %+v", perr.ValidationErrors)
	}

	created := createPayin(t, s, "m-1", "200", "")
	if err := s.Complete("m-1"); err != nil {
		t.Fatal(err)
	}
	o, raw := getStatus(t, s, "m-1")
	if o.ID != created.ID || o.Status != provider.StatusCompleted {
		t.Fatalf("order = %+v", o)
	}
	// 2% of 200.00 is 4.00: the merchant receives 196.00.
	want := provider.MustMoney("196.00", "brl")
	if o.MerchantTargetWallet == nil || !o.MerchantTargetWallet.Equal(want) {
		t.Errorf("merchantTargetWallet = %v, want %v", o.MerchantTargetWallet, want)
	}
	tx := o.Transactions[0]
	if tx.Status != provider.StatusCompleted || tx.CompletedAt.IsZero() || !tx.MerchantWallet.Equal(want) {
		t.Errorf("transaction = %+v", tx)
	}
	if o.MerchantSourceWallet != nil {
		t.Errorf("merchantSourceWallet = %v, want null for a payin", o.MerchantSourceWallet)
	}
	for _, f := range []string{`"merchantSourceWallet":null`, `"amount":"196.00"`, `"amount":"200.00"`, `"counterpartyInfo":null`} {
		if !strings.Contains(string(raw), f) {
			t.Errorf("get-status data lacks %s: %s", f, raw)
		}
	}
	exact, _ := s.OrderJSON("m-1")
	if string(exact) != string(raw) {
		t.Errorf("OrderJSON differs from get-status:\n%s\n%s", exact, raw)
	}
	if ctrl, _ := s.Order("m-1"); ctrl.Fingerprint() != o.Fingerprint() {
		t.Errorf("Order() and get-status describe different states")
	}
}

func TestServer_CompleteReject(t *testing.T) {
	s := start(t, providertest.Options{FeePercent: "3.5"})
	createPayin(t, s, "ok", "99.99", "")
	createPayin(t, s, "no", "50", "")
	if err := s.Complete("ok"); err != nil {
		t.Fatal(err)
	}
	if err := s.Reject("no", "payer document mismatch"); err != nil {
		t.Fatal(err)
	}
	ok, _ := getStatus(t, s, "ok")
	// 3.5% of 99.99 = 3.49965, rounded to 3.50; net 96.49.
	if !ok.MerchantTargetWallet.Equal(provider.MustMoney("96.49", "brl")) {
		t.Errorf("net = %v, want 96.49 brl", ok.MerchantTargetWallet)
	}
	no, _ := getStatus(t, s, "no")
	if no.Status != provider.StatusRejected || no.RejectReason == nil || *no.RejectReason != "payer document mismatch" ||
		no.Transactions[0].Status != provider.StatusRejected || no.MerchantTargetWallet != nil {
		t.Errorf("rejected order = %+v", no)
	}
	if got := balance(t, s, "brl"); got != "96.49" {
		t.Errorf("balance %q, want 96.49 (the rejected order moves nothing)", got)
	}

	tests := []struct {
		name string
		err  error
		want error
	}{
		{"complete a completed order", s.Complete("ok"), providertest.ErrConflict},
		{"reject a completed order", s.Reject("ok", ""), providertest.ErrConflict},
		{"complete a rejected order", s.Complete("no"), providertest.ErrConflict},
		{"complete an unknown order", s.Complete("ghost"), providertest.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !errors.Is(tt.err, tt.want) {
				t.Errorf("err = %v, want %v", tt.err, tt.want)
			}
		})
	}
	if got := balance(t, s, "brl"); got != "96.49" {
		t.Errorf("balance %q after refused transitions, want 96.49", got)
	}
}

func TestServer_Balances(t *testing.T) {
	s := start(t, providertest.Options{InitialBalances: map[string]string{"brl": "1000", "mxn": "5.5"}})
	data := mustOK(t, s, providertest.PathBalances, `{}`)
	var bs []provider.Balance
	if err := json.Unmarshal(data, &bs); err != nil {
		t.Fatal(err)
	}
	want := []provider.Balance{{Currency: "brl", Amount: "1000.00"}, {Currency: "mxn", Amount: "5.50"}}
	if !slices.Equal(bs, want) {
		t.Errorf("balances = %+v, want %+v", bs, want)
	}
	createPayin(t, s, "p", "10", "")
	if err := s.Complete("p"); err != nil {
		t.Fatal(err)
	}
	if err := s.AdjustBalance("mxn", "-0.50"); err != nil {
		t.Fatal(err)
	}
	if err := s.AdjustBalance("usd", "3"); err != nil {
		t.Fatal(err)
	}
	for ccy, want := range map[string]string{"brl": "1009.80", "mxn": "5.00", "usd": "3.00"} {
		if got := balance(t, s, ccy); got != want {
			t.Errorf("%s balance %q, want %q", ccy, got, want)
		}
	}
	if err := s.AdjustBalance("USD", "1"); err == nil {
		t.Error("AdjustBalance accepted an uppercase currency")
	}
	if err := s.AdjustBalance("usd", "1e2"); err == nil {
		t.Error("AdjustBalance accepted an exponent")
	}
}

func TestServer_Withdrawal(t *testing.T) {
	s := start(t, providertest.Options{InitialBalances: map[string]string{"mxn": "100"}})
	create := func(moid, amount string) string {
		return `{"merchantOrderId":"` + moid + `","amount":{"amount":"` + amount + `","currency":"mxn"},"recipient":{"clabe":"646180000000000000"}}`
	}

	t.Run("validation", func(t *testing.T) {
		for name, body := range map[string]string{
			"no amount":   `{"merchantOrderId":"w"}`,
			"bad amount":  `{"merchantOrderId":"w","amount":{"amount":"x","currency":"mxn"}}`,
			"amount type": `{"merchantOrderId":"w","amount":"10"}`,
		} {
			t.Run(name, func(t *testing.T) {
				mustCode(t, s, providertest.PathWithdrawalCreate, body, provider.CodeValidation)
			})
		}
	})
	t.Run("more than the balance", func(t *testing.T) {
		mustCode(t, s, providertest.PathWithdrawalCreate, create("big", "100.01"), provider.CodeNotEnoughBalance)
		mustCode(t, s, providertest.PathGetStatus, `{"merchantOrderId":"big"}`, provider.CodeOrderNotFound)
	})

	o := decodeOrder(t, mustOK(t, s, providertest.PathWithdrawalCreate, create("w-1", "60")))
	if o.Type != provider.TypePayout || o.Status != provider.StatusProcessing || o.MerchantSourceWallet != nil {
		t.Fatalf("payout = %+v", o)
	}
	t.Run("pending payouts hold the money", func(t *testing.T) {
		mustCode(t, s, providertest.PathWithdrawalCreate, create("w-2", "40.01"), provider.CodeNotEnoughBalance)
		if got := balance(t, s, "mxn"); got != "100.00" {
			t.Errorf("balance %q before completion, want 100.00", got)
		}
	})
	t.Run("invoice form", func(t *testing.T) {
		mustOK(t, s, providertest.PathWithdrawalCreate, `{"merchantOrderId":"w-3","invoice":{"amount":"40","currency":"mxn"}}`)
		if err := s.Reject("w-3", "bank refused"); err != nil {
			t.Fatal(err)
		}
	})

	if err := s.Complete("w-1"); err != nil {
		t.Fatal(err)
	}
	done, _ := getStatus(t, s, "w-1")
	if done.MerchantSourceWallet == nil || !done.MerchantSourceWallet.Equal(provider.MustMoney("60", "mxn")) ||
		done.MerchantTargetWallet != nil || done.Transactions[0].Type != "payout" {
		t.Errorf("completed payout = %+v", done)
	}
	if got := balance(t, s, "mxn"); got != "40.00" {
		t.Errorf("balance %q after the payout, want 40.00", got)
	}
	mustOK(t, s, providertest.PathWithdrawalCreate, create("w-4", "40"))
	mustCode(t, s, providertest.PathWithdrawalCreate, create("w-1", "1"), provider.CodeOrderAlreadyExists)
}

func TestServer_CreateOrder(t *testing.T) {
	s := start(t, providertest.Options{})
	o, err := s.CreateOrder(providertest.NewOrder{MerchantOrderID: "direct", Amount: "12.34", Currency: "brl"})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := getStatus(t, s, "direct")
	if got.ID != o.ID || got.Type != provider.TypePayin || got.Status != provider.StatusProcessing {
		t.Errorf("get-status = %+v", got)
	}
	_, err = s.CreateOrder(providertest.NewOrder{MerchantOrderID: "direct", Amount: "1", Currency: "brl"})
	if provider.ErrorCode(err) != provider.CodeOrderAlreadyExists {
		t.Errorf("reuse: %v", err)
	}
	_, err = s.CreateOrder(providertest.NewOrder{MerchantOrderID: "x", Amount: "-1", Currency: "BRL"})
	if provider.ErrorCode(err) != provider.CodeValidation {
		t.Errorf("bad order: %v", err)
	}
	_, err = s.CreateOrder(providertest.NewOrder{MerchantOrderID: "p", Type: provider.TypePayout, Amount: "1", Currency: "brl"})
	if provider.ErrorCode(err) != provider.CodeNotEnoughBalance {
		t.Errorf("payout without balance: %v", err)
	}
}
