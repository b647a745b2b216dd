package provider

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"

	"github.com/shopspring/decimal"
)

// PaymentRequest is the body of payment-form/create. The regular variant
// needs only MerchantOrderID and Invoice; the extended variant also fills
// Client completely and sets Attributes.RoutingKey to RoutingKeyExtended.
type PaymentRequest struct {
	MerchantOrderID string             `json:"merchantOrderId"`
	Invoice         Money              `json:"invoice"`
	Client          *PaymentClient     `json:"client,omitempty"`
	ReturnURL       string             `json:"returnUrl,omitempty"`
	WebhookURL      string             `json:"webhookUrl,omitempty"`
	Attributes      *PaymentAttributes `json:"attributes,omitempty"`
}

// PaymentClient is the paying customer. Every field is optional in the
// regular variant and required in the extended one.
type PaymentClient struct {
	Name     string    `json:"name,omitempty"`
	Email    string    `json:"email,omitempty"`
	Phone    string    `json:"phone,omitempty"`
	Taxpayer *Taxpayer `json:"taxpayer,omitempty"`
}

// Taxpayer carries the customer's personal tax ID. When it is given and the
// payer's ID does not match, the provider rejects the payment.
type Taxpayer struct {
	Number string `json:"number"`
}

// PaymentAttributes selects a variant of payment-form/create.
type PaymentAttributes struct {
	RoutingKey string `json:"routingKey,omitempty"`
}

// RoutingKeyExtended is the routing key of the extended payment variant.
const RoutingKeyExtended = "EXTENDED"

// RefundRequest is the body of refund/create. The spec does not say which of
// ID and MerchantOrderID is required, so each is sent when set.
type RefundRequest struct {
	// Amount is written as a numeric string with FormatAmount.
	Amount          decimal.Decimal
	RefundReason    string
	ID              string
	MerchantOrderID string
}

// MarshalJSON writes the refund request with its amount as a numeric string.
func (r RefundRequest) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Amount          string `json:"amount"`
		RefundReason    string `json:"refundReason,omitempty"`
		ID              string `json:"id,omitempty"`
		MerchantOrderID string `json:"merchantOrderId,omitempty"`
	}{FormatAmount(r.Amount), r.RefundReason, r.ID, r.MerchantOrderID})
}

// Requisite types.
const (
	RequisiteLongTerm  = "long_term"
	RequisiteShortTerm = "short_term"
)

// RequisiteRequest is the body of client-requisite/create.
type RequisiteRequest struct {
	Client                RequisiteClient      `json:"client"`
	Currency              string               `json:"currency"`
	ConversionCurrency    string               `json:"conversionCurrency,omitempty"`
	MerchantOrderIDPrefix string               `json:"merchantOrderIdPrefix,omitempty"`
	Type                  string               `json:"type,omitempty"`
	Attributes            *RequisiteAttributes `json:"attributes,omitempty"`
	WebhookURL            string               `json:"webhookUrl,omitempty"`
}

// RequisiteClient names the merchant-side client a requisite belongs to.
type RequisiteClient struct {
	ID string `json:"id"`
}

// RequisiteAttributes are the optional attributes of a requisite.
type RequisiteAttributes struct {
	BlockchainNetwork string `json:"blockchainNetwork,omitempty"`
	RoutingKey        string `json:"routingKey,omitempty"`
}

// RequisiteOrdersRequest is the body of client-requisite/get-orders-list.
// Zero times are left out; Limit is sent when positive, Offset always.
type RequisiteOrdersRequest struct {
	ID            string
	CreatedAtFrom time.Time
	CreatedAtTo   time.Time
	Limit         int
	Offset        int
}

// MarshalJSON writes the request with timestamps in RFC 3339 UTC.
func (r RequisiteOrdersRequest) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"id":`)
	id, err := json.Marshal(r.ID)
	if err != nil {
		return nil, err
	}
	b.Write(id)
	for _, f := range []struct {
		key string
		t   time.Time
	}{{"createdAtFrom", r.CreatedAtFrom}, {"createdAtTo", r.CreatedAtTo}} {
		if f.t.IsZero() {
			continue
		}
		b.WriteString(`,"` + f.key + `":"`)
		b.WriteString(f.t.UTC().Format(time.RFC3339Nano))
		b.WriteByte('"')
	}
	out := b.Bytes()
	if r.Limit > 0 {
		out = strconv.AppendInt(append(out, `,"limit":`...), int64(r.Limit), 10)
	}
	out = strconv.AppendInt(append(out, `,"offset":`...), int64(r.Offset), 10)
	return append(out, '}'), nil
}

// RawOrder is one order of a list answer: decoded, and the provider's exact
// JSON beside it, because events carry the provider's own shape.
type RawOrder struct {
	Order *Order
	Raw   json.RawMessage
}

// RequestedAmount reads the amount a creation request body asks for: its
// invoice (payment-form/create, and withdrawals that state one), else a
// withdrawal's amount, as an {amount, currency} object or as an amount
// beside a currency (the withdrawal body's shape is not documented; these
// are the shapes orderd's gateway accepts). ok is false when the body
// states no readable amount.
func RequestedAmount(body []byte) (m Money, ok bool) {
	var b struct {
		Invoice  *struct{ Amount, Currency string } `json:"invoice"`
		Amount   json.RawMessage                    `json:"amount"`
		Currency string                             `json:"currency"`
	}
	if len(body) == 0 || json.Unmarshal(body, &b) != nil {
		return Money{}, false
	}
	amount, currency := "", ""
	var obj struct{ Amount, Currency string }
	switch {
	case b.Invoice != nil:
		amount, currency = b.Invoice.Amount, b.Invoice.Currency
	case len(b.Amount) == 0:
		return Money{}, false
	case json.Unmarshal(b.Amount, &obj) == nil:
		amount, currency = obj.Amount, obj.Currency
	case json.Unmarshal(b.Amount, &amount) == nil:
		currency = b.Currency
	}
	if amount == "" || currency == "" {
		return Money{}, false
	}
	m, err := NewMoney(amount, currency)
	return m, err == nil
}
