package provider_test

import (
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"golang.org/x/time/rate"

	"orderd/provider"
	"orderd/provider/providertest"
)

// The client as the daemon builds it accepts the shared rate limiter.
var _ provider.Limiter = (*rate.Limiter)(nil)

// signingKeys are made once per test binary: RSA key generation is slow.
var signingKeys = sync.OnceValues(func() (map[string]crypto.Signer, error) {
	keys := map[string]crypto.Signer{}
	for _, kind := range []string{providertest.KeyRSA, providertest.KeyECDSA} {
		k, _, err := providertest.GenerateKey(kind)
		if err != nil {
			return nil, err
		}
		keys[kind] = k
	}
	return keys, nil
})

// fake starts a fake provider and a client for it.
func fake(t *testing.T, opts providertest.Options, copts ...func(*provider.Options)) (*providertest.Server, *provider.Client) {
	t.Helper()
	if opts.Key == nil {
		keys, err := signingKeys()
		if err != nil {
			t.Fatal(err)
		}
		opts.Key = keys[providertest.KeyECDSA]
	}
	if opts.WebhookBaseDelay == 0 {
		opts.WebhookBaseDelay = 5 * time.Millisecond
	}
	s := providertest.NewServer(opts)
	t.Cleanup(s.Close)
	o := provider.Options{BaseURL: s.URL(), APIKey: s.APIKey(), Timeout: 5 * time.Second}
	for _, f := range copts {
		f(&o)
	}
	c, err := provider.NewClient(o)
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

func wantCode(t *testing.T, err error, code provider.Code) *provider.Error {
	t.Helper()
	var perr *provider.Error
	if !errors.As(err, &perr) || perr.Code != code {
		t.Fatalf("error %v: want a definite %s", err, code)
	}
	if errors.Is(err, provider.ErrInDoubt) {
		t.Fatalf("definite error %v also matches ErrInDoubt", err)
	}
	return perr
}

func hasField(perr *provider.Error, field string) bool {
	for _, v := range perr.ValidationErrors {
		if v.Field == field && v.Message != "" {
			return true
		}
	}
	return false
}

func TestClient_FakePayin(t *testing.T) {
	s, c := fake(t, providertest.Options{})
	ctx := t.Context()

	o, raw, err := c.CreatePayment(ctx, provider.PaymentRequest{
		MerchantOrderID: "pay-1", Invoice: provider.MustMoney("100.00", "brl"),
		ReturnURL: "https://shop.example/back",
	})
	if err != nil {
		t.Fatalf("CreatePayment: %v", err)
	}
	if o.Status != provider.StatusProcessing || o.Type != provider.TypePayin || o.Auth == nil || o.Auth.Type == "" || o.ID == "" {
		t.Errorf("created order %+v", o)
	}
	var rawOrder provider.Order
	if err := json.Unmarshal(raw, &rawOrder); err != nil || rawOrder.ID != o.ID {
		t.Errorf("raw data %s does not hold the created order", raw)
	}
	call := s.Calls(providertest.PathPaymentCreate)
	if len(call) != 1 {
		t.Fatalf("the fake saw %d create calls", len(call))
	}
	for k, want := range map[string]string{"Authorization": s.APIKey(), "Content-Type": "application/json", "Accept": "application/json; charset=utf-8"} {
		if got := call[0].Header.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	if !strings.Contains(string(call[0].Body), `"invoice":{"amount":"100.00","currency":"brl"}`) {
		t.Errorf("the amount did not travel as the exact string: %s", call[0].Body)
	}

	t.Run("duplicate merchantOrderId", func(t *testing.T) {
		_, _, err := c.CreatePayment(ctx, provider.PaymentRequest{MerchantOrderID: "pay-1", Invoice: provider.MustMoney("1", "brl")})
		wantCode(t, err, provider.CodeOrderAlreadyExists)
	})
	t.Run("validation names the fields", func(t *testing.T) {
		_, _, err := c.CreatePayment(ctx, provider.PaymentRequest{MerchantOrderID: "pay-bad", Invoice: provider.MustMoney("-5", "brlx"),
			WebhookURL: "not a url"})
		perr := wantCode(t, err, provider.CodeValidation)
		for _, f := range []string{"invoice.amount", "invoice.currency", "webhookUrl"} {
			if !hasField(perr, f) {
				t.Errorf("validation errors %+v do not name %s", perr.ValidationErrors, f)
			}
		}
		if _, _, err := c.GetStatus(ctx, "pay-bad"); provider.ErrorCode(err) != provider.CodeOrderNotFound {
			t.Errorf("a refused order exists: %v", err)
		}
	})
	t.Run("extended variant", func(t *testing.T) {
		o, _, err := c.CreatePayment(ctx, provider.PaymentRequest{
			MerchantOrderID: "pay-ext", Invoice: provider.MustMoney("10", "brl"),
			Client: &provider.PaymentClient{Name: "Ana Lima", Email: "ana@example.com", Phone: "+5511987654321",
				Taxpayer: &provider.Taxpayer{Number: "12345678909"}},
			Attributes: &provider.PaymentAttributes{RoutingKey: provider.RoutingKeyExtended},
		})
		if err != nil || o.MerchantOrderID != "pay-ext" {
			t.Fatalf("extended CreatePayment = %+v, %v", o, err)
		}
		_, _, err = c.CreatePayment(ctx, provider.PaymentRequest{MerchantOrderID: "pay-ext2", Invoice: provider.MustMoney("10", "brl"),
			Attributes: &provider.PaymentAttributes{RoutingKey: provider.RoutingKeyExtended}})
		perr := wantCode(t, err, provider.CodeValidation)
		if !hasField(perr, "client.email") {
			t.Errorf("extended variant without a client: %+v", perr.ValidationErrors)
		}
	})

	t.Run("completion and get-status", func(t *testing.T) {
		if err := s.Complete("pay-1"); err != nil {
			t.Fatal(err)
		}
		got, raw, err := c.GetStatus(ctx, "pay-1")
		if err != nil {
			t.Fatalf("GetStatus: %v", err)
		}
		if want, _ := s.OrderJSON("pay-1"); string(raw) != string(want) {
			t.Errorf("raw data is not the provider's exact JSON:\n got %s\nwant %s", raw, want)
		}
		if got.Status != provider.StatusCompleted || got.MerchantTargetWallet == nil ||
			!got.MerchantTargetWallet.Equal(provider.MustMoney("98", "brl")) || len(got.Transactions) != 1 ||
			got.Transactions[0].CompletedAt.IsZero() {
			t.Errorf("completed order %+v", got)
		}
		bs, err := c.Balances(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(bs) != 1 || bs[0].Currency != "brl" || bs[0].Amount != "98.00" {
			t.Errorf("balances %+v, want brl 98.00", bs)
		}
	})
	t.Run("unknown order", func(t *testing.T) {
		o, raw, err := c.GetStatus(ctx, "never-created")
		wantCode(t, err, provider.CodeOrderNotFound)
		if o != nil || raw != nil {
			t.Errorf("an order beside ORDER_NOT_FOUND: %+v %s", o, raw)
		}
	})
}

func TestClient_FakeRefund(t *testing.T) {
	s, c := fake(t, providertest.Options{FeePercent: "0"})
	ctx := t.Context()
	if _, _, err := c.CreatePayment(ctx, provider.PaymentRequest{MerchantOrderID: "r-1", Invoice: provider.MustMoney("100.00", "brl")}); err != nil {
		t.Fatal(err)
	}

	_, _, err := c.CreateRefund(ctx, provider.RefundRequest{Amount: decimal.RequireFromString("1"), MerchantOrderID: "r-1"})
	wantCode(t, err, provider.CodeOperationNotSupported) // not completed yet
	if err := s.Complete("r-1"); err != nil {
		t.Fatal(err)
	}

	o, raw, err := c.CreateRefund(ctx, provider.RefundRequest{Amount: decimal.RequireFromString("0.10"), RefundReason: "damaged", MerchantOrderID: "r-1"})
	if err != nil {
		t.Fatalf("CreateRefund: %v", err)
	}
	rt := o.RefundTransaction
	if rt == nil || rt.Status != provider.StatusNew || rt.Type != "refund" || provider.FormatAmount(rt.Amount.Amount) != "0.10" || o.Status != provider.StatusCompleted {
		t.Fatalf("refund answer %+v (%s)", o, raw)
	}
	if body := s.Calls(providertest.PathRefundCreate); !strings.Contains(string(body[len(body)-1].Body), `"amount":"0.10"`) {
		t.Errorf("refund amount not sent as the string 0.10: %s", body[len(body)-1].Body)
	}

	_, _, err = c.CreateRefund(ctx, provider.RefundRequest{Amount: decimal.RequireFromString("99.91"), ID: o.ID})
	if perr := wantCode(t, err, provider.CodeValidation); !hasField(perr, "amount") {
		t.Errorf("over-refund validation errors %+v", perr.ValidationErrors)
	}
	_, _, err = c.CreateRefund(ctx, provider.RefundRequest{Amount: decimal.RequireFromString("1"), MerchantOrderID: "ghost"})
	wantCode(t, err, provider.CodeOrderNotFound)

	if err := s.CompleteRefund("r-1", rt.ID, true); err != nil {
		t.Fatal(err)
	}
	got, _, err := c.GetStatus(ctx, "r-1")
	if err != nil {
		t.Fatal(err)
	}
	var refund *provider.Transaction
	for i := range got.Transactions {
		if got.Transactions[i].ID == rt.ID {
			refund = &got.Transactions[i]
		}
	}
	if refund == nil || refund.Status != provider.StatusCompleted || refund.Amount == nil || !refund.Amount.Equal(provider.MustMoney("0.1", "brl")) {
		t.Errorf("refund in get-status %+v", refund)
	}
	if bs, err := c.Balances(ctx); err != nil || len(bs) != 1 || bs[0].Amount != "99.90" {
		t.Errorf("balances after the refund %+v, %v; want brl 99.90", bs, err)
	}
}

func TestClient_FakeRequisite(t *testing.T) {
	s, c := fake(t, providertest.Options{})
	ctx := t.Context()
	r, raw, err := c.CreateRequisite(ctx, provider.RequisiteRequest{
		Client: provider.RequisiteClient{ID: "client-7"}, Currency: "mxn", MerchantOrderIDPrefix: "dep-",
		Type: provider.RequisiteLongTerm,
	})
	if err != nil {
		t.Fatalf("CreateRequisite: %v", err)
	}
	if r.Requisite.Clabe == "" || r.Requisite.Type != "clabe" || r.MinAmount != "10.00" || r.ExpiresAt.IsZero() || !json.Valid(raw) {
		t.Errorf("requisite %+v", r)
	}
	_, _, err = c.CreateRequisite(ctx, provider.RequisiteRequest{Currency: "MXN"})
	if perr := wantCode(t, err, provider.CodeValidation); !hasField(perr, "client.id") {
		t.Errorf("validation errors %+v do not name client.id", perr.ValidationErrors)
	}

	for _, amount := range []string{"20", "30.50", "5"} {
		if _, err := s.Deposit(r.ID, amount); err != nil {
			t.Fatal(err)
		}
	}
	all, err := c.RequisiteOrders(ctx, provider.RequisiteOrdersRequest{ID: r.ID})
	if err != nil {
		t.Fatalf("RequisiteOrders: %v", err)
	}
	if len(all) != 3 {
		t.Fatalf("%d orders, want 3", len(all))
	}
	for i, o := range all {
		if !strings.HasPrefix(o.Order.MerchantOrderID, "dep-") {
			t.Errorf("order %d merchantOrderId %q lacks the prefix", i, o.Order.MerchantOrderID)
		}
		if want, _ := s.OrderJSON(o.Order.MerchantOrderID); string(o.Raw) != string(want) {
			t.Errorf("order %d raw %s, want %s", i, o.Raw, want)
		}
	}
	if all[2].Order.Status != provider.StatusRejected {
		t.Errorf("the deposit below minAmount is %s, want rejected", all[2].Order.Status)
	}
	page, err := c.RequisiteOrders(ctx, provider.RequisiteOrdersRequest{ID: r.ID, Limit: 1, Offset: 1})
	if err != nil || len(page) != 1 || page[0].Order.ID != all[1].Order.ID {
		t.Errorf("page 2 of size 1 = %+v, %v; want the second order", page, err)
	}
	future := time.Now().Add(time.Hour)
	if none, err := c.RequisiteOrders(ctx, provider.RequisiteOrdersRequest{ID: r.ID, CreatedAtFrom: future}); err != nil || len(none) != 0 {
		t.Errorf("orders from the future = %+v, %v", none, err)
	}
	_, err = c.RequisiteOrders(ctx, provider.RequisiteOrdersRequest{ID: r.ID, Limit: 1000})
	if perr := wantCode(t, err, provider.CodeValidation); !hasField(perr, "limit") {
		t.Errorf("validation errors %+v do not name limit", perr.ValidationErrors)
	}

	data, err := c.DeactivateRequisite(ctx, r.ID)
	if err != nil || !json.Valid(data) {
		t.Fatalf("DeactivateRequisite = %s, %v", data, err)
	}
	if _, err := s.Deposit(r.ID, "50"); provider.ErrorCode(err) != provider.CodeWalletInactive {
		t.Errorf("deposit after deactivation: %v; want WALLET_INACTIVE", err)
	}
	_, err = c.DeactivateRequisite(ctx, "00000000-0000-4000-8000-000000000000")
	wantCode(t, err, provider.CodeWalletNotFound)
}

func TestClient_FakeWithdrawal(t *testing.T) {
	s, c := fake(t, providertest.Options{InitialBalances: map[string]string{"mxn": "500.00"}})
	ctx := t.Context()
	data, err := c.CreateWithdrawal(ctx, json.RawMessage(`{"merchantOrderId":"wd-1","amount":{"amount":"120.50","currency":"mxn"}}`))
	if err != nil {
		t.Fatalf("CreateWithdrawal: %v", err)
	}
	o, err := provider.DecodeOrder(data)
	if err != nil || o.Type != provider.TypePayout || o.MerchantOrderID != "wd-1" {
		t.Fatalf("withdrawal data %s: %v", data, err)
	}
	_, err = c.CreateWithdrawal(ctx, json.RawMessage(`{"merchantOrderId":"wd-2","amount":{"amount":"1000","currency":"mxn"}}`))
	wantCode(t, err, provider.CodeNotEnoughBalance)
	if err := s.Complete("wd-1"); err != nil {
		t.Fatal(err)
	}
	if bs, err := c.Balances(ctx); err != nil || len(bs) != 1 || bs[0].Amount != "379.50" {
		t.Errorf("balances after the payout %+v, %v; want mxn 379.50", bs, err)
	}
}

func TestClient_FakeAuthentication(t *testing.T) {
	s, _ := fake(t, providertest.Options{APIKey: "the-right-key"})
	c, err := provider.NewClient(provider.Options{BaseURL: s.URL(), APIKey: "a-wrong-key"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Balances(t.Context())
	wantCode(t, err, provider.CodeAuthenticationFailed)
	if strings.Contains(err.Error(), "a-wrong-key") {
		t.Errorf("error %q carries the API key", err)
	}
}

// TestClient_FakeFaults: each injected fault on a creation gives the outcome
// a caller must act on, and get-status then tells whether the order exists.
func TestClient_FakeFaults(t *testing.T) {
	tests := []struct {
		fault      providertest.Fault
		timeout    time.Duration
		inDoubt    bool
		wantCode   provider.Code // a definite error
		wantStatus int           // InDoubtError.StatusCode
		created    bool          // get-status finds the order afterwards
	}{
		{fault: providertest.Fault{Kind: providertest.FailBefore, Status: 503}, inDoubt: true, wantStatus: 503},
		{fault: providertest.Fault{Kind: providertest.FailAfter}, inDoubt: true, wantStatus: 500, created: true},
		{fault: providertest.Fault{Kind: providertest.Reset}, inDoubt: true},
		{fault: providertest.Fault{Kind: providertest.ResetAfter}, inDoubt: true, created: true},
		{fault: providertest.Fault{Kind: providertest.Slow, Delay: 400 * time.Millisecond}, timeout: 100 * time.Millisecond, inDoubt: true, created: true},
		{fault: providertest.Fault{Kind: providertest.ErrorAnswer, Code: provider.CodePayinDisabled}, wantCode: provider.CodePayinDisabled},
		{fault: providertest.Fault{Kind: providertest.ErrorAnswer, Code: "SOMETHING_NEW_42"}, wantCode: "SOMETHING_NEW_42"},
		{fault: providertest.Fault{Kind: providertest.RejectAtCreate, Reason: "payer ID mismatch"}, created: true},
	}
	for _, tt := range tests {
		name := string(tt.fault.Kind)
		if tt.fault.Code != "" {
			name += "/" + string(tt.fault.Code)
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, c := fake(t, providertest.Options{}, func(o *provider.Options) {
				if tt.timeout > 0 {
					o.Timeout = tt.timeout
				}
			})
			tt.fault.Endpoint = providertest.PathPaymentCreate
			if err := s.InjectFault(tt.fault); err != nil {
				t.Fatal(err)
			}
			o, _, err := c.CreatePayment(t.Context(), provider.PaymentRequest{MerchantOrderID: "f-1", Invoice: provider.MustMoney("10", "brl")})
			switch {
			case tt.inDoubt:
				var de *provider.InDoubtError
				if !errors.Is(err, provider.ErrInDoubt) || !errors.As(err, &de) {
					t.Fatalf("CreatePayment = %v; want ErrInDoubt", err)
				}
				if de.StatusCode != tt.wantStatus {
					t.Errorf("status %d, want %d (%v)", de.StatusCode, tt.wantStatus, err)
				}
				if tt.timeout > 0 && !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("a timeout does not unwrap to context.DeadlineExceeded: %v", err)
				}
			case tt.wantCode != "":
				wantCode(t, err, tt.wantCode)
			default:
				if err != nil {
					t.Fatalf("CreatePayment: %v", err)
				}
				if o.RejectReason == nil || *o.RejectReason != tt.fault.Reason {
					t.Errorf("order rejected at creation carries rejectReason %v", o.RejectReason)
				}
			}

			// Settle as the reconciler would. A slow create lands after the
			// client gave up, so poll for it.
			deadline := time.Now().Add(3 * time.Second)
			for {
				got, _, err := c.GetStatus(t.Context(), "f-1")
				switch {
				case tt.created && err == nil:
					if got.MerchantOrderID != "f-1" {
						t.Errorf("get-status answered %+v", got)
					}
					return
				case !tt.created && provider.ErrorCode(err) == provider.CodeOrderNotFound:
					return
				case !tt.created && err == nil:
					t.Fatalf("the order exists after a fault before the effect: %+v", got)
				case time.Now().After(deadline):
					t.Fatalf("get-status did not settle: %v", err)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// TestClient_FakeFaultsOnEveryEndpoint: a 5xx on any endpoint is in doubt.
func TestClient_FakeFaultsOnEveryEndpoint(t *testing.T) {
	s, c := fake(t, providertest.Options{})
	ctx := t.Context()
	calls := map[string]func() error{
		providertest.PathBalances: func() error { _, err := c.Balances(ctx); return err },
		providertest.PathPaymentCreate: func() error {
			_, _, err := c.CreatePayment(ctx, provider.PaymentRequest{MerchantOrderID: "e-1", Invoice: provider.MustMoney("1", "brl")})
			return err
		},
		providertest.PathGetStatus: func() error { _, _, err := c.GetStatus(ctx, "e-1"); return err },
		providertest.PathRefundCreate: func() error {
			_, _, err := c.CreateRefund(ctx, provider.RefundRequest{Amount: decimal.NewFromInt(1), MerchantOrderID: "e-1"})
			return err
		},
		providertest.PathWithdrawalCreate: func() error {
			_, err := c.CreateWithdrawal(ctx, json.RawMessage(`{"merchantOrderId":"e-2","amount":{"amount":"1","currency":"brl"}}`))
			return err
		},
		providertest.PathRequisiteCreate: func() error {
			_, _, err := c.CreateRequisite(ctx, provider.RequisiteRequest{Client: provider.RequisiteClient{ID: "k"}, Currency: "mxn"})
			return err
		},
		providertest.PathRequisiteDeactivate: func() error { _, err := c.DeactivateRequisite(ctx, "q"); return err },
		providertest.PathRequisiteOrders: func() error {
			_, err := c.RequisiteOrders(ctx, provider.RequisiteOrdersRequest{ID: "q"})
			return err
		},
	}
	for path, call := range calls {
		t.Run(path, func(t *testing.T) {
			if err := s.InjectFault(providertest.Fault{Endpoint: path, Kind: providertest.FailBefore, Status: 502}); err != nil {
				t.Fatal(err)
			}
			if err := call(); !errors.Is(err, provider.ErrInDoubt) || !strings.Contains(err.Error(), "502") {
				t.Errorf("call with a 502: %v; want ErrInDoubt naming the status", err)
			}
			if n := len(s.Calls(path)); n != 1 {
				t.Errorf("the fake saw %d calls, want 1 (no retry inside the client)", n)
			}
		})
	}
}

func TestClient_FakeRateLimit(t *testing.T) {
	s, c := fake(t, providertest.Options{}, func(o *provider.Options) {
		o.Limiter = rate.NewLimiter(rate.Limit(50), 1)
	})
	start := time.Now()
	for range 6 {
		if _, err := c.Balances(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	// Six calls at 50/s with a burst of one cannot take less than 100ms.
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("6 calls took %v; the limiter did not pace them", d)
	}
	if n := len(s.Calls(providertest.PathBalances)); n != 6 {
		t.Errorf("the fake saw %d calls, want 6", n)
	}
}

// TestVerifier_FakeWebhooks: a webhook the fake provider signs verifies
// with its published public key, and its body is the order get-status shows.
func TestVerifier_FakeWebhooks(t *testing.T) {
	keys, err := signingKeys()
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{providertest.KeyRSA, providertest.KeyECDSA} {
		t.Run(kind, func(t *testing.T) {
			type delivery struct {
				body []byte
				err  error
			}
			got := make(chan delivery, 4)
			var v *provider.Verifier
			recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				err := v.Verify(body, r.Header.Get("Signature"))
				got <- delivery{body, err}
				if err != nil {
					http.Error(w, "bad signature", http.StatusUnauthorized)
				}
			}))
			t.Cleanup(recv.Close)

			s, c := fake(t, providertest.Options{Key: keys[kind], MaxWebhookRetries: -1})
			pub, err := provider.ParsePublicKeys(s.PublicKeyPEM())
			if err != nil {
				t.Fatal(err)
			}
			if v, err = provider.NewVerifier(pub...); err != nil {
				t.Fatal(err)
			}
			if _, _, err := c.CreatePayment(t.Context(), provider.PaymentRequest{MerchantOrderID: "wh-1",
				Invoice: provider.MustMoney("10.00", "brl"), WebhookURL: recv.URL + "/webhooks/orders"}); err != nil {
				t.Fatal(err)
			}
			if err := s.Complete("wh-1"); err != nil {
				t.Fatal(err)
			}
			var d delivery
			select {
			case d = <-got:
			case <-time.After(5 * time.Second):
				t.Fatal("no webhook arrived")
			}
			if d.err != nil {
				t.Fatalf("the fake's webhook does not verify: %v", d.err)
			}
			wh, err := provider.DecodeOrder(d.body)
			if err != nil {
				t.Fatal(err)
			}
			polled, _, err := c.GetStatus(t.Context(), "wh-1")
			if err != nil {
				t.Fatal(err)
			}
			if wh.Status != provider.StatusCompleted || wh.Fingerprint() != polled.Fingerprint() {
				t.Errorf("webhook %+v and get-status %+v disagree", wh, polled)
			}
			if err := s.WaitIdle(t.Context()); err != nil {
				t.Fatal(err)
			}
			if a := s.Webhooks(); len(a) != 1 || !a[0].OK() {
				t.Errorf("webhook attempts %+v; want one accepted", a)
			}
		})
	}
}
