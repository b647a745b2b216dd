package providertest_test

import (
	"encoding/json"
	"errors"
	"testing"

	"orderd/provider"
	"orderd/provider/providertest"
)

// completedPayin creates and completes a payin of amount brl.
func completedPayin(t *testing.T, s *providertest.Server, moid, amount string) *provider.Order {
	t.Helper()
	o := createPayin(t, s, moid, amount, "")
	if err := s.Complete(moid); err != nil {
		t.Fatal(err)
	}
	return o
}

type refundAnswer struct {
	ID                string          `json:"id"`
	MerchantOrderID   string          `json:"merchantOrderId"`
	Type              string          `json:"type"`
	CreatedAt         provider.Time   `json:"createdAt"`
	Status            provider.Status `json:"status"`
	RefundTransaction *struct {
		ID        string          `json:"id"`
		Status    provider.Status `json:"status"`
		Type      string          `json:"type"`
		Amount    provider.Money  `json:"amount"`
		CreatedAt provider.Time   `json:"createdAt"`
	} `json:"refundTransaction"`
}

func refund(t *testing.T, s *providertest.Server, moid, amount string) refundAnswer {
	t.Helper()
	data := mustOK(t, s, providertest.PathRefundCreate,
		`{"merchantOrderId":"`+moid+`","amount":"`+amount+`","refundReason":"customer asked"}`)
	var a refundAnswer
	if err := json.Unmarshal(data, &a); err != nil {
		t.Fatal(err)
	}
	if a.RefundTransaction == nil {
		t.Fatalf("no refundTransaction in %s", data)
	}
	return a
}

func refundTx(t *testing.T, s *providertest.Server, moid, id string) provider.Transaction {
	t.Helper()
	o, _ := getStatus(t, s, moid)
	for _, tx := range o.Transactions {
		if tx.ID == id {
			return tx
		}
	}
	t.Fatalf("order %s has no transaction %s", moid, id)
	return provider.Transaction{}
}

func TestServer_RefundCreate(t *testing.T) {
	s := start(t, providertest.Options{InitialBalances: map[string]string{"brl": "1000"}})
	orig := completedPayin(t, s, "paid", "100")

	a := refund(t, s, "paid", "30")
	if a.ID != orig.ID || a.MerchantOrderID != "paid" || a.Type != "payin" || a.Status != provider.StatusCompleted {
		t.Errorf("refund answer = %+v", a)
	}
	rt := a.RefundTransaction
	if !uuidRE.MatchString(rt.ID) || rt.Status != provider.StatusNew || rt.Type != "refund" ||
		!rt.Amount.Equal(provider.MustMoney("30", "brl")) || rt.CreatedAt.IsZero() {
		t.Errorf("refundTransaction = %+v", rt)
	}
	tx := refundTx(t, s, "paid", rt.ID)
	if tx.Type != "refund" || tx.Status != provider.StatusNew || !tx.Amount.Equal(rt.Amount) {
		t.Errorf("refund in transactions = %+v", tx)
	}

	mustOK(t, s, providertest.PathPaymentCreate, `{"merchantOrderId":"open","invoice":{"amount":"10","currency":"brl"}}`)
	mustOK(t, s, providertest.PathPaymentCreate, `{"merchantOrderId":"refused","invoice":{"amount":"10","currency":"brl"}}`)
	if err := s.Reject("refused", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateOrder(providertest.NewOrder{MerchantOrderID: "out", Type: provider.TypePayout, Amount: "5", Currency: "brl"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete("out"); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name  string
		body  string
		want  provider.Code
		field string
	}{
		{"payin still processing", `{"merchantOrderId":"open","amount":"1"}`, provider.CodeOperationNotSupported, ""},
		{"rejected payin", `{"merchantOrderId":"refused","amount":"1"}`, provider.CodeOperationNotSupported, ""},
		{"completed payout", `{"merchantOrderId":"out","amount":"1"}`, provider.CodeOperationNotSupported, ""},
		{"unknown order", `{"merchantOrderId":"ghost","amount":"1"}`, provider.CodeOrderNotFound, ""},
		{"unknown id", `{"id":"00000000-0000-4000-8000-000000000000","amount":"1"}`, provider.CodeOrderNotFound, ""},
		{"id and merchantOrderId disagree", `{"id":"` + orig.ID + `","merchantOrderId":"open","amount":"1"}`, provider.CodeOrderNotFound, ""},
		{"above what is left", `{"merchantOrderId":"paid","amount":"70.01"}`, provider.CodeValidation, "amount"},
		{"zero", `{"merchantOrderId":"paid","amount":"0"}`, provider.CodeValidation, "amount"},
		{"no amount", `{"merchantOrderId":"paid"}`, provider.CodeValidation, "amount"},
		{"no order named", `{"amount":"1"}`, provider.CodeValidation, "id"},
		{"id not a uuid", `{"id":"paid","amount":"1"}`, provider.CodeValidation, "id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			perr := mustCode(t, s, providertest.PathRefundCreate, tt.body, tt.want)
			if tt.field != "" && (len(perr.ValidationErrors) == 0 || perr.ValidationErrors[0].Field != tt.field) {
				t.Errorf("validation errors %+v, want field %s", perr.ValidationErrors, tt.field)
			}
		})
	}
	o, _ := s.Order("paid")
	if len(o.Transactions) != 2 {
		t.Errorf("refused refunds left transactions behind: %d", len(o.Transactions))
	}

	t.Run("by id alone", func(t *testing.T) {
		mustOK(t, s, providertest.PathRefundCreate, `{"id":"`+orig.ID+`","amount":"70"}`)
	})
	t.Run("nothing left", func(t *testing.T) {
		mustCode(t, s, providertest.PathRefundCreate, `{"merchantOrderId":"paid","amount":"0.01"}`, provider.CodeValidation)
	})
}

func TestServer_RefundCumulative(t *testing.T) {
	s := start(t, providertest.Options{InitialBalances: map[string]string{"brl": "1000"}})
	completedPayin(t, s, "p", "100")

	r1 := refund(t, s, "p", "40").RefundTransaction.ID
	r2 := refund(t, s, "p", "35.50").RefundTransaction.ID
	// 24.50 left: 24.51 is too much even though each refund alone is below 100.
	mustCode(t, s, providertest.PathRefundCreate, `{"merchantOrderId":"p","amount":"24.51"}`, provider.CodeValidation)

	// A rejected refund gives its amount back to what can be refunded.
	if err := s.CompleteRefund("p", r2, false); err != nil {
		t.Fatal(err)
	}
	r3 := refund(t, s, "p", "60").RefundTransaction.ID
	mustCode(t, s, providertest.PathRefundCreate, `{"merchantOrderId":"p","amount":"0.01"}`, provider.CodeValidation)

	for _, id := range []string{r1, r3} {
		if err := s.CompleteRefund("p", id, true); err != nil {
			t.Fatal(err)
		}
	}
	// 1000 + 98.00 (100 minus the 2% fee) − 40 − 60.
	if got := balance(t, s, "brl"); got != "998.00" {
		t.Errorf("balance %q, want 998.00", got)
	}
}

func TestServer_RefundStateMachine(t *testing.T) {
	tests := []struct {
		name   string
		amount string // of a refund of a 100 brl payin
		steps  func(s *providertest.Server, id string) error
		want   provider.Status
		// balance after, starting from 1000 + 98.00
		balance string
	}{
		{"full completed", "100", func(s *providertest.Server, id string) error {
			return s.CompleteRefund("p", id, true)
		}, provider.StatusCompleted, "998.00"},
		{"full rejected", "100.00", func(s *providertest.Server, id string) error {
			return s.CompleteRefund("p", id, false)
		}, provider.StatusRejected, "1098.00"},
		{"partial through processing", "25", func(s *providertest.Server, id string) error {
			if err := s.AdvanceRefund("p", id); err != nil {
				return err
			}
			return s.CompleteRefund("p", id, true)
		}, provider.StatusCompleted, "1073.00"},
		{"partial rejected", "25", func(s *providertest.Server, id string) error {
			if err := s.AdvanceRefund("p", id); err != nil {
				return err
			}
			return s.CompleteRefund("p", id, false)
		}, provider.StatusRejected, "1098.00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := start(t, providertest.Options{InitialBalances: map[string]string{"brl": "1000"}})
			completedPayin(t, s, "p", "100")
			id := refund(t, s, "p", tt.amount).RefundTransaction.ID
			if got := balance(t, s, "brl"); got != "1098.00" {
				t.Errorf("balance %q while the refund is new, want 1098.00", got)
			}
			if err := tt.steps(s, id); err != nil {
				t.Fatal(err)
			}
			tx := refundTx(t, s, "p", id)
			if tx.Status != tt.want {
				t.Errorf("refund status %s, want %s", tx.Status, tt.want)
			}
			if (tt.want == provider.StatusCompleted) == tx.CompletedAt.IsZero() {
				t.Errorf("completedAt = %v for a %s refund", tx.CompletedAt, tt.want)
			}
			if (tt.want == provider.StatusRejected) != (tx.RejectReason != nil) {
				t.Errorf("rejectReason = %v for a %s refund", tx.RejectReason, tt.want)
			}
			if got := balance(t, s, "brl"); got != tt.balance {
				t.Errorf("balance %q, want %s", got, tt.balance)
			}
			o, _ := getStatus(t, s, "p")
			if o.Status != provider.StatusCompleted {
				t.Errorf("order status %s after a refund, want completed", o.Status)
			}
			// A final refund does not move again.
			if err := s.CompleteRefund("p", id, true); !errors.Is(err, providertest.ErrConflict) {
				t.Errorf("second completion: %v, want ErrConflict", err)
			}
		})
	}

	t.Run("illegal steps", func(t *testing.T) {
		s := start(t, providertest.Options{InitialBalances: map[string]string{"brl": "1000"}})
		completedPayin(t, s, "p", "100")
		full := refund(t, s, "p", "100").RefundTransaction.ID
		if err := s.AdvanceRefund("p", full); !errors.Is(err, providertest.ErrConflict) {
			t.Errorf("a full refund went to processing: %v", err)
		}
		if tx := refundTx(t, s, "p", full); tx.Status != provider.StatusNew {
			t.Errorf("full refund status %s after a refused step", tx.Status)
		}
		if err := s.CompleteRefund("p", "00000000-0000-4000-8000-000000000000", true); !errors.Is(err, providertest.ErrNotFound) {
			t.Errorf("unknown refund: %v", err)
		}
	})

	t.Run("partial from new completes through processing", func(t *testing.T) {
		s := start(t, providertest.Options{InitialBalances: map[string]string{"brl": "1000"}})
		completedPayin(t, s, "p", "100")
		id := refund(t, s, "p", "1").RefundTransaction.ID
		if err := s.CompleteRefund("p", id, true); err != nil {
			t.Fatal(err)
		}
		if tx := refundTx(t, s, "p", id); tx.Status != provider.StatusCompleted {
			t.Errorf("status %s", tx.Status)
		}
	})
}

func TestServer_RefundNeedsBalance(t *testing.T) {
	s := start(t, providertest.Options{})
	completedPayin(t, s, "p", "100") // balance 98.00
	if err := s.AdjustBalance("brl", "-90"); err != nil {
		t.Fatal(err)
	}
	mustCode(t, s, providertest.PathRefundCreate, `{"merchantOrderId":"p","amount":"8.01"}`, provider.CodeNotEnoughBalance)
	refund(t, s, "p", "8")
	// The pending refund holds the 8.00 that is left.
	mustCode(t, s, providertest.PathRefundCreate, `{"merchantOrderId":"p","amount":"0.01"}`, provider.CodeNotEnoughBalance)
}

func TestServer_RefundWebhooks(t *testing.T) {
	rcv := newReceiver(t)
	s := start(t, providertest.Options{RefundWebhooks: true, InitialBalances: map[string]string{"brl": "10"}})
	createPayin(t, s, "p", "100", rcv.URL())
	if err := s.Complete("p"); err != nil {
		t.Fatal(err)
	}
	id := refund(t, s, "p", "100").RefundTransaction.ID
	if err := s.CompleteRefund("p", id, true); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, s)
	hits := rcv.Hits()
	if len(hits) != 2 {
		t.Fatalf("%d webhooks, want the final one and the refund's", len(hits))
	}
	o := decodeOrder(t, hits[1].body)
	if len(o.Transactions) != 2 || o.Transactions[1].Status != provider.StatusCompleted {
		t.Errorf("refund webhook = %s", hits[1].body)
	}
	if got := s.Webhooks()[1].Kind; got != providertest.WebhookRefund {
		t.Errorf("kind %s, want %s", got, providertest.WebhookRefund)
	}
}
