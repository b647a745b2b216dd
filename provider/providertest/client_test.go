package providertest_test

import (
	"errors"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"orderd/provider"
	"orderd/provider/providertest"
)

// TestServer_WithClient drives every endpoint through provider.Client, so
// the fake's answers are proven to decode the way orderd reads them.
func TestServer_WithClient(t *testing.T) {
	s := start(t, providertest.Options{InitialBalances: map[string]string{"mxn": "500"}})
	c, err := provider.NewClient(provider.Options{BaseURL: s.URL(), APIKey: s.APIKey(), Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	o, raw, err := c.CreatePayment(ctx, provider.PaymentRequest{
		MerchantOrderID: "cl-1",
		Invoice:         provider.MustMoney("100", "brl"),
		Client: &provider.PaymentClient{Name: "Ana", Email: "ana@example.com", Phone: "+5511987654321",
			Taxpayer: &provider.Taxpayer{Number: "12345678909"}},
		Attributes: &provider.PaymentAttributes{RoutingKey: provider.RoutingKeyExtended},
	})
	if err != nil {
		t.Fatalf("CreatePayment: %v", err)
	}
	if o.Status != provider.StatusProcessing || o.Auth == nil || len(raw) == 0 {
		t.Errorf("created = %+v", o)
	}
	_, _, err = c.CreatePayment(ctx, provider.PaymentRequest{MerchantOrderID: "cl-1", Invoice: provider.MustMoney("1", "brl")})
	if provider.ErrorCode(err) != provider.CodeOrderAlreadyExists {
		t.Errorf("duplicate: %v", err)
	}
	_, _, err = c.CreatePayment(ctx, provider.PaymentRequest{MerchantOrderID: "cl-x", Invoice: provider.MustMoney("1", "BRL"),
		Attributes: &provider.PaymentAttributes{RoutingKey: provider.RoutingKeyExtended}})
	var perr *provider.Error
	if !errors.As(err, &perr) || perr.Code != provider.CodeValidation || len(perr.ValidationErrors) != 4 {
		t.Errorf("extended without client: %v", err)
	}

	if err := s.Complete("cl-1"); err != nil {
		t.Fatal(err)
	}
	got, raw, err := c.GetStatus(ctx, "cl-1")
	if err != nil {
		t.Fatalf("GetStatus: %v", err)
	}
	if want, _ := s.OrderJSON("cl-1"); string(raw) != string(want) || got.Status != provider.StatusCompleted {
		t.Errorf("get-status raw %s", raw)
	}
	if _, _, err := c.GetStatus(ctx, "ghost"); provider.ErrorCode(err) != provider.CodeOrderNotFound {
		t.Errorf("ghost: %v", err)
	}

	ref, _, err := c.CreateRefund(ctx, provider.RefundRequest{Amount: decimal.RequireFromString("40"), MerchantOrderID: "cl-1", RefundReason: "r"})
	if err != nil {
		t.Fatalf("CreateRefund: %v", err)
	}
	if ref.RefundTransaction == nil || ref.RefundTransaction.Status != provider.StatusNew {
		t.Errorf("refund = %+v", ref)
	}

	bs, err := c.Balances(ctx)
	if err != nil || len(bs) != 2 {
		t.Fatalf("Balances: %v %+v", err, bs)
	}

	req, _, err := c.CreateRequisite(ctx, provider.RequisiteRequest{Client: provider.RequisiteClient{ID: "k"}, Currency: "mxn"})
	if err != nil {
		t.Fatalf("CreateRequisite: %v", err)
	}
	for _, amount := range []string{"20", "30", "5"} {
		if _, err := s.Deposit(req.ID, amount); err != nil {
			t.Fatal(err)
		}
	}
	list, err := c.RequisiteOrders(ctx, provider.RequisiteOrdersRequest{ID: req.ID, Limit: 2, Offset: 1})
	if err != nil {
		t.Fatalf("RequisiteOrders: %v", err)
	}
	if len(list) != 2 || list[1].Order.Status != provider.StatusRejected {
		t.Errorf("orders = %+v", list)
	}
	if _, err := c.DeactivateRequisite(ctx, req.ID); err != nil {
		t.Fatalf("DeactivateRequisite: %v", err)
	}

	data, err := c.CreateWithdrawal(ctx, []byte(`{"merchantOrderId":"wd-1","amount":{"amount":"100","currency":"mxn"}}`))
	if err != nil {
		t.Fatalf("CreateWithdrawal: %v", err)
	}
	if wd := decodeOrder(t, data); wd.Type != provider.TypePayout {
		t.Errorf("withdrawal = %s", data)
	}

	t.Run("in doubt", func(t *testing.T) {
		for _, kind := range []providertest.FaultKind{providertest.FailAfter, providertest.ResetAfter} {
			moid := "doubt-" + string(kind)
			if err := s.InjectFault(providertest.Fault{Endpoint: providertest.PathPaymentCreate, Kind: kind}); err != nil {
				t.Fatal(err)
			}
			_, _, err := c.CreatePayment(ctx, provider.PaymentRequest{MerchantOrderID: moid, Invoice: provider.MustMoney("1", "brl")})
			if !errors.Is(err, provider.ErrInDoubt) {
				t.Errorf("%s: %v, want ErrInDoubt", kind, err)
			}
			if _, _, err := c.GetStatus(ctx, moid); err != nil {
				t.Errorf("%s: get-status settles the doubt: %v", kind, err)
			}
		}
	})
}
