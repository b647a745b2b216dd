package providertest

import (
	"encoding/json"
	"time"

	"orderd/provider"
)

// The provider writes timestamps in two forms; the fake does too, per field,
// so that clients meet both: order-level times (createdAt, auth.expiresAt)
// with a "+00:00" offset, transaction and requisite times with "Z". Both
// carry microseconds, the precision every stored time is truncated to.
const (
	layoutOffset = "2006-01-02T15:04:05.000000+00:00"
	layoutZulu   = "2006-01-02T15:04:05.000000Z"
)

// tsOffset marshals as "+00:00" form, or null when zero.
type tsOffset provider.Time

func (t tsOffset) MarshalJSON() ([]byte, error) { return stamp(t.Time, layoutOffset) }

// tsZulu marshals as "Z" form, or null when zero.
type tsZulu provider.Time

func (t tsZulu) MarshalJSON() ([]byte, error) { return stamp(t.Time, layoutZulu) }

func stamp(t time.Time, layout string) ([]byte, error) {
	if t.IsZero() {
		return []byte("null"), nil
	}
	return json.Marshal(t.UTC().Format(layout))
}

// wireOrder is the data of get-status and the body of a webhook.
type wireOrder struct {
	ID                   string             `json:"id"`
	MerchantOrderID      string             `json:"merchantOrderId"`
	Type                 provider.OrderType `json:"type"`
	CreatedAt            tsOffset           `json:"createdAt"`
	Status               provider.Status    `json:"status"`
	RejectReason         *string            `json:"rejectReason"`
	MerchantSourceWallet *provider.Money    `json:"merchantSourceWallet"`
	MerchantTargetWallet *provider.Money    `json:"merchantTargetWallet"`
	Transactions         []wireTransaction  `json:"transactions"`
}

type wireTransaction struct {
	ID               string          `json:"id"`
	Type             string          `json:"type"`
	Status           provider.Status `json:"status"`
	Authorized       *provider.Money `json:"authorized,omitempty"`
	MerchantWallet   *provider.Money `json:"merchantWallet,omitempty"`
	Amount           *provider.Money `json:"amount,omitempty"`
	CounterpartyInfo json.RawMessage `json:"counterpartyInfo"`
	PaymentInfo      json.RawMessage `json:"paymentInfo"`
	CreatedAt        tsZulu          `json:"createdAt"`
	CompletedAt      tsZulu          `json:"completedAt"`
	RejectReason     *string         `json:"rejectReason"`
}

// wireCreated is the data of payment-form/create: the fields the spec lists
// for it and no others.
type wireCreated struct {
	ID              string             `json:"id"`
	MerchantOrderID string             `json:"merchantOrderId"`
	Type            provider.OrderType `json:"type"`
	CreatedAt       tsOffset           `json:"createdAt"`
	Auth            *wireAuth          `json:"auth"`
	Status          provider.Status    `json:"status"`
	RejectReason    *string            `json:"rejectReason"`
}

type wireAuth struct {
	Type        string   `json:"type"`
	RedirectURL string   `json:"redirectUrl"`
	Code        string   `json:"code"`
	ExpiresAt   tsOffset `json:"expiresAt"`
}

// wireRefundCreated is the data of refund/create.
type wireRefundCreated struct {
	ID                string             `json:"id"`
	MerchantOrderID   string             `json:"merchantOrderId"`
	Type              provider.OrderType `json:"type"`
	CreatedAt         tsOffset           `json:"createdAt"`
	Status            provider.Status    `json:"status"`
	RefundTransaction wireRefund         `json:"refundTransaction"`
}

type wireRefund struct {
	ID        string          `json:"id"`
	Status    provider.Status `json:"status"`
	Type      string          `json:"type"`
	Amount    provider.Money  `json:"amount"`
	CreatedAt tsZulu          `json:"createdAt"`
}

type wireRequisite struct {
	ID        string                  `json:"id"`
	Requisite provider.RequisiteValue `json:"requisite"`
	ExpiresAt tsZulu                  `json:"expiresAt"`
	MinAmount string                  `json:"minAmount"`
}

// wireOrdersList is the data of client-requisite/get-orders-list, whose
// shape the spec does not show.
type wireOrdersList struct {
	Orders []json.RawMessage `json:"orders"`
	Total  int               `json:"total"`
}

func toWireOrder(o *provider.Order) wireOrder {
	w := wireOrder{
		ID:                   o.ID,
		MerchantOrderID:      o.MerchantOrderID,
		Type:                 o.Type,
		CreatedAt:            tsOffset(o.CreatedAt),
		Status:               o.Status,
		RejectReason:         o.RejectReason,
		MerchantSourceWallet: o.MerchantSourceWallet,
		MerchantTargetWallet: o.MerchantTargetWallet,
		Transactions:         make([]wireTransaction, 0, len(o.Transactions)),
	}
	for _, t := range o.Transactions {
		w.Transactions = append(w.Transactions, wireTransaction{
			ID:               t.ID,
			Type:             t.Type,
			Status:           t.Status,
			Authorized:       t.Authorized,
			MerchantWallet:   t.MerchantWallet,
			Amount:           t.Amount,
			CounterpartyInfo: t.CounterpartyInfo,
			PaymentInfo:      t.PaymentInfo,
			CreatedAt:        tsZulu(t.CreatedAt),
			CompletedAt:      tsZulu(t.CompletedAt),
			RejectReason:     t.RejectReason,
		})
	}
	return w
}

// renderOrder writes the order exactly as get-status data and webhooks
// carry it.
func renderOrder(o *provider.Order) []byte {
	// Marshalling these plain structs cannot fail.
	b, _ := json.Marshal(toWireOrder(o))
	return b
}

func toWireRequisite(r *provider.Requisite) wireRequisite {
	return wireRequisite{ID: r.ID, Requisite: r.Requisite, ExpiresAt: tsZulu(r.ExpiresAt), MinAmount: r.MinAmount}
}
