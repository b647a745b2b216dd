package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Status is an order or transaction status. The spec lists the values it has
// seen; any other value is kept verbatim rather than rejected.
type Status string

// Statuses the spec shows.
const (
	StatusNew        Status = "new"
	StatusProcessing Status = "processing"
	StatusCompleted  Status = "completed"
	StatusRejected   Status = "rejected"
)

// IsFinal reports whether s is a final status: completed or rejected.
func (s Status) IsFinal() bool { return s == StatusCompleted || s == StatusRejected }

// OrderType is an order's type. Values seen: payin, payout.
type OrderType string

// Order types the spec shows.
const (
	TypePayin  OrderType = "payin"
	TypePayout OrderType = "payout"
)

// Order is the provider's order resource: the data of get-status, the body
// of a webhook, and (partly filled) the data of a create response.
//
// Fields the spec does not name are kept in Extra and written back by
// MarshalJSON, so nothing the provider sends is dropped.
type Order struct {
	ID                   string             `json:"id"`
	MerchantOrderID      string             `json:"merchantOrderId"`
	Type                 OrderType          `json:"type"`
	CreatedAt            Time               `json:"createdAt"`
	Status               Status             `json:"status"`
	RejectReason         *string            `json:"rejectReason"`
	MerchantSourceWallet *Money             `json:"merchantSourceWallet"`
	MerchantTargetWallet *Money             `json:"merchantTargetWallet"`
	Transactions         []Transaction      `json:"transactions"`
	Auth                 *Auth              `json:"auth,omitempty"`
	RefundTransaction    *RefundTransaction `json:"refundTransaction,omitempty"`

	// Extra holds the fields this package does not know, verbatim.
	Extra map[string]json.RawMessage `json:"-"`
}

// Transaction is one movement inside an order. Refund transactions appear
// here too, with Amount instead of Authorized/MerchantWallet.
type Transaction struct {
	ID               string          `json:"id"`
	Type             string          `json:"type"`
	Status           Status          `json:"status"`
	Authorized       *Money          `json:"authorized,omitempty"`
	MerchantWallet   *Money          `json:"merchantWallet,omitempty"`
	Amount           *Money          `json:"amount,omitempty"`
	CounterpartyInfo json.RawMessage `json:"counterpartyInfo,omitempty"`
	PaymentInfo      json.RawMessage `json:"paymentInfo,omitempty"`
	CreatedAt        Time            `json:"createdAt"`
	CompletedAt      Time            `json:"completedAt"`
	RejectReason     *string         `json:"rejectReason"`

	// Extra holds the fields this package does not know, verbatim.
	Extra map[string]json.RawMessage `json:"-"`
}

// RefundTransaction is the refund created by refund/create.
type RefundTransaction struct {
	ID        string `json:"id"`
	Status    Status `json:"status"`
	Type      string `json:"type"`
	Amount    Money  `json:"amount"`
	CreatedAt Time   `json:"createdAt"`
}

// Auth tells what the customer must do to pay.
type Auth struct {
	Type        string `json:"type"`
	RedirectURL string `json:"redirectUrl,omitempty"`
	Code        string `json:"code,omitempty"`
	ExpiresAt   Time   `json:"expiresAt"`
}

// Requisite is a long-lived deposit destination for one client.
type Requisite struct {
	ID        string         `json:"id"`
	Requisite RequisiteValue `json:"requisite"`
	ExpiresAt Time           `json:"expiresAt"`
	MinAmount string         `json:"minAmount"`
}

// RequisiteValue is the destination the merchant shows to the client.
type RequisiteValue struct {
	Clabe     string  `json:"clabe"`
	Reference *string `json:"reference"`
	Type      string  `json:"type"`
}

// Balance is the available amount in one currency.
type Balance struct {
	Currency string `json:"currency"`
	Amount   string `json:"amount"`
}

// Money returns the balance as Money.
func (b Balance) Money() (Money, error) { return NewMoney(b.Amount, b.Currency) }

// Envelope is the shape of every provider response.
type Envelope struct {
	Data  json.RawMessage `json:"data"`
	Error *Error          `json:"error"`
}

// ValidationError names one field the provider refused and why.
type ValidationError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Error is a definite error answer from the provider: HTTP 200 with an
// envelope whose error is set. The request had no effect beyond what the
// code says.
type Error struct {
	Code             Code              `json:"code"`
	ValidationErrors []ValidationError `json:"validationErrors"`
}

func (e *Error) Error() string {
	if len(e.ValidationErrors) == 0 {
		return "provider: " + string(e.Code)
	}
	var b bytes.Buffer
	b.WriteString("provider: ")
	b.WriteString(string(e.Code))
	for i, v := range e.ValidationErrors {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %s", v.Field, v.Message)
	}
	return b.String()
}

// Is makes errors.Is(err, &Error{Code: X}) match any *Error with code X.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// ErrorCode returns the provider code carried by err, or "" when err is not a
// definite provider error.
func ErrorCode(err error) Code {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// orderKnown lists the JSON keys Order decodes itself.
var orderKnown = []string{"id", "merchantOrderId", "type", "createdAt", "status", "rejectReason",
	"merchantSourceWallet", "merchantTargetWallet", "transactions", "auth", "refundTransaction"}

var transactionKnown = []string{"id", "type", "status", "authorized", "merchantWallet", "amount",
	"counterpartyInfo", "paymentInfo", "createdAt", "completedAt", "rejectReason"}

// UnmarshalJSON decodes an order and keeps unknown fields in Extra.
func (o *Order) UnmarshalJSON(data []byte) error {
	type plain Order
	var p plain
	// Most orders have no unknown field: one strict pass decodes them. Only
	// when it refuses (an unknown field, or any other error) is the order
	// decoded again and scanned for what it does not know.
	if decodeKnown(data, &p) {
		*o = Order(p)
		return nil
	}
	p = plain{}
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	extra, err := extraFields(data, orderKnown)
	if err != nil {
		return err
	}
	p.Extra = extra
	*o = Order(p)
	return nil
}

// MarshalJSON encodes the order with its unknown fields.
func (o Order) MarshalJSON() ([]byte, error) {
	type plain Order
	return withExtra(plain(o), o.Extra)
}

// UnmarshalJSON decodes a transaction and keeps unknown fields in Extra.
func (t *Transaction) UnmarshalJSON(data []byte) error {
	type plain Transaction
	var p plain
	if decodeKnown(data, &p) {
		*t = Transaction(p)
		return nil
	}
	p = plain{}
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	extra, err := extraFields(data, transactionKnown)
	if err != nil {
		return err
	}
	p.Extra = extra
	*t = Transaction(p)
	return nil
}

// MarshalJSON encodes the transaction with its unknown fields.
func (t Transaction) MarshalJSON() ([]byte, error) {
	type plain Transaction
	return withExtra(plain(t), t.Extra)
}

// decodeKnown decodes data into v in one pass, refusing unknown fields. It
// reports whether that worked; when it did, data has no field that Extra
// would have to keep.
func decodeKnown(data []byte, v any) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v) == nil
}

func extraFields(data []byte, known []string) (map[string]json.RawMessage, error) {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(data, &all); err != nil {
		return nil, err
	}
	// encoding/json matches keys case-insensitively, so a key that folds to
	// a known one ("Status", "merchantorderId") has already been decoded
	// into that field. Keeping it as unknown too would let it override the
	// field after a round trip.
	for k := range all {
		for _, kn := range known {
			if strings.EqualFold(k, kn) {
				delete(all, k)
				break
			}
		}
	}
	if len(all) == 0 {
		return nil, nil
	}
	return all, nil
}

func withExtra(v any, extra map[string]json.RawMessage) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil || len(extra) == 0 {
		return b, err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return nil, err
	}
	for k, v := range extra {
		if _, ok := all[k]; !ok {
			all[k] = v
		}
	}
	return json.Marshal(all)
}

// ErrInvalidOrder is returned by DecodeOrder for JSON that is well formed but
// is not an order (a required field missing).
var ErrInvalidOrder = errors.New("invalid order")

// DecodeOrder decodes an order and checks the fields every order must have:
// id, merchantOrderId, type and status. Every field it reads must be named
// exactly, once: a duplicate key or a key in another case ("Status") is an
// error, as encoding/json would otherwise pick one version silently. Errors
// name the field.
func DecodeOrder(data []byte) (*Order, error) {
	var o Order
	// Most orders have no unknown field, no duplicate and no key in another
	// case anywhere: decodeOrderFast reads them in one strict pass, and what
	// it takes passes checkOrderKeys by construction. Whatever it refuses
	// goes through the general path, which keeps unknown fields in Extra,
	// checks the keys and gives the errors.
	if !decodeOrderFast(data, &o) {
		if err := decodeOrderSlow(data, &o); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidOrder, explainOrder(data, err))
		}
		if err := checkOrderKeys(data); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidOrder, err)
		}
	}
	if err := checkRequired(&o); err != nil {
		return nil, err
	}
	return &o, nil
}

// checkRequired checks the fields every order must have.
func checkRequired(o *Order) error {
	switch {
	case o.ID == "":
		return fmt.Errorf("%w: id is missing", ErrInvalidOrder)
	case o.MerchantOrderID == "":
		return fmt.Errorf("%w: merchantOrderId is missing", ErrInvalidOrder)
	case o.Type == "":
		return fmt.Errorf("%w: type is missing", ErrInvalidOrder)
	case o.Status == "":
		return fmt.Errorf("%w: status is missing", ErrInvalidOrder)
	}
	return nil
}

// decodeOrderSlow is the general decode: json.Unmarshal through
// Order.UnmarshalJSON and Transaction.UnmarshalJSON, which scan each
// transaction several times but keep unknown fields in Extra.
func decodeOrderSlow(data []byte, o *Order) error {
	return json.Unmarshal(data, o)
}

// plainOrder and plainTransaction are Order and Transaction without their
// UnmarshalJSON methods.
type (
	plainOrder       Order
	plainTransaction Transaction
)

// fastOptions make the JSON v2 decoder (the code of encoding/json/v2)
// refuse, rather than settle, everything on which an order's meaning could
// be in doubt. By default it matches names case-sensitively, refuses a name
// that appears twice in any object and refuses invalid UTF-8; on top of
// that it refuses unknown members, decodes each transaction once without
// Transaction.UnmarshalJSON, and reads money only in the spec's exact form
// (fastMoney).
var fastOptions = jsonv2.JoinOptions(
	jsonv2.RejectUnknownMembers(true),
	jsonv2.WithUnmarshalers(jsonv2.JoinUnmarshalers(
		jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, t *Transaction) error {
			return jsonv2.UnmarshalDecode(dec, (*plainTransaction)(t))
		}),
		jsonv2.UnmarshalFunc(fastMoney),
	)),
)

// errNotFast is what fastMoney answers for money it leaves to the general
// path; nobody sees it.
var errNotFast = errors.New("not in the fast path's form")

// fastMoney reads money the way Money.UnmarshalJSON does, but only in the
// form the provider writes and checkOrderKeys accepts:
// {"amount":"<a>","currency":"<c>"} with both keys spelled so, once each,
// in either order, no whitespace or escape, the amount unsigned and the
// currency three lowercase ASCII letters. For that form the two give the
// same Money; anything else is refused and decoded by the general path.
func fastMoney(data []byte, m *Money) error {
	if string(data) == "null" {
		return nil // as Money.UnmarshalJSON does
	}
	amount, currency, ok := plainMoney(data)
	if !ok || len(currency) != 3 || !isLowerASCII([]byte(currency)) ||
		amount == "" || amount[0] == '-' || amount[0] == '+' {
		return errNotFast
	}
	d, err := ParseAmount(amount)
	if err != nil {
		return errNotFast
	}
	m.Amount = d
	m.Currency = currency
	return nil
}

// UnmarshalOrder decodes an order exactly as json.Unmarshal into an Order
// does (unknown fields kept in Extra, no field required, no check of the
// keys' spelling), reading the usual order in one strict pass first, as
// DecodeOrder does. It is for JSON this package wrote (Order.MarshalJSON),
// read again many times: the replicated log's copy of an order.
func UnmarshalOrder(data []byte) (*Order, error) {
	var o Order
	if decodeOrderFast(data, &o) {
		return &o, nil
	}
	if err := decodeOrderSlow(data, &o); err != nil {
		return nil, err
	}
	return &o, nil
}

// decodeOrderFast decodes data into o, which must be the zero Order, in one
// strict pass and reports whether it could. When it reports true, o is
// exactly what decodeOrderSlow would give and checkOrderKeys accepts data:
// data is one well-formed JSON value (only whitespace after it) in valid
// UTF-8; every object decoded into a struct has only the keys of its
// fields, each spelled exactly and once (so Extra has nothing to keep, no
// key folds to a known one, and no value is chosen among duplicates); every
// Money is in the form fastMoney takes. When it reports false, o is the
// zero Order again and the caller decodes with decodeOrderSlow.
func decodeOrderFast(data []byte, o *Order) bool {
	// Into o itself rather than a copy: the order would otherwise be
	// allocated twice.
	if jsonv2.Unmarshal(data, (*plainOrder)(o), fastOptions) != nil {
		*o = Order{}
		return false
	}
	return true
}
