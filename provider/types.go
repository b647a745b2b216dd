package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
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
	// Most orders have no unknown field anywhere: decodeOrderFast reads them
	// in one strict pass. Whatever it refuses goes through the general path,
	// which keeps unknown fields in Extra and gives the errors.
	if !decodeOrderFast(data, &o) {
		if err := decodeOrderSlow(data, &o); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidOrder, err)
		}
	}
	if err := checkOrderKeys(data); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOrder, err)
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

// fastOrder is an order none of whose levels has an UnmarshalJSON that
// decodes its bytes again (Money and Time still have theirs). Its
// Transactions hides the embedded plainOrder's: encoding/json uses the
// shallower of two fields with one name.
type fastOrder struct {
	plainOrder
	Transactions []plainTransaction `json:"transactions"`
}

// decodeOrderFast decodes data into o in one strict pass and reports
// whether it could. When it reports true, o is exactly what decodeOrderSlow
// would give: data is one well-formed JSON value (only whitespace after
// it), no object in it has a field that Extra would have to keep, and the
// transactions are decoded once each. When it reports false, o is left as
// it was and the caller decodes again with decodeOrderSlow.
func decodeOrderFast(data []byte, o *Order) bool {
	var f fastOrder
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if dec.Decode(&f) != nil {
		return false
	}
	// json.Unmarshal refuses anything but whitespace after the value.
	if off := dec.InputOffset(); off < 0 || off > int64(len(data)) || !isJSONSpace(data[off:]) {
		return false
	}
	// Transaction.UnmarshalJSON replaces the whole transaction, while this
	// decode merges into it: the two differ when a "transactions" key comes
	// again and reuses the elements the first one filled.
	if !transactionsKeyAtMostOnce(data) {
		return false
	}
	*o = Order(f.plainOrder)
	if f.Transactions != nil {
		o.Transactions = make([]Transaction, len(f.Transactions))
		for i := range f.Transactions {
			o.Transactions[i] = Transaction(f.Transactions[i])
		}
	}
	return true
}

func isJSONSpace(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}

// transactionsKeyAtMostOnce reports whether the top-level object of data,
// which must be well-formed JSON, has at most one key that encoding/json
// would match to "transactions". It answers false, to be safe, when a
// top-level key has an escape or a non-ASCII byte (encoding/json folds some
// of those to ASCII letters: "ſ" matches "s").
func transactionsKeyAtMostOnce(data []byte) bool {
	i := skipJSONSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return true // not an object: no keys
	}
	i++
	seen := false
	for {
		i = skipJSONSpace(data, i)
		if i >= len(data) {
			return false
		}
		switch data[i] {
		case '}':
			return true
		case ',':
			i++
			continue
		case '"':
		default:
			return false
		}
		start := i + 1
		end := start
		for ; end < len(data) && data[end] != '"'; end++ {
			if c := data[end]; c == '\\' || c >= utf8.RuneSelf {
				return false
			}
		}
		if end >= len(data) {
			return false
		}
		if end-start == len("transactions") && strings.EqualFold(string(data[start:end]), "transactions") {
			if seen {
				return false
			}
			seen = true
		}
		i = skipJSONSpace(data, end+1)
		if i >= len(data) || data[i] != ':' {
			return false
		}
		if i = skipJSONValue(data, skipJSONSpace(data, i+1)); i < 0 {
			return false
		}
	}
}

func skipJSONSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// skipJSONValue returns the index just past the well-formed JSON value that
// starts at data[i], or -1 when data ends first.
func skipJSONValue(data []byte, i int) int {
	if i >= len(data) {
		return -1
	}
	switch data[i] {
	case '"':
		return skipJSONString(data, i)
	case '{', '[':
		depth := 0
		for i < len(data) {
			switch data[i] {
			case '"':
				if i = skipJSONString(data, i); i < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	default: // number, true, false, null
		for i < len(data) {
			switch data[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
}

// skipJSONString returns the index just past the string whose opening quote
// is data[i], or -1 when data ends first.
func skipJSONString(data []byte, i int) int {
	for j := i + 1; j < len(data); {
		k := bytes.IndexByte(data[j:], '"')
		if k < 0 {
			return -1
		}
		j += k
		// The quote closes the string unless an odd number of
		// backslashes escapes it.
		n := 0
		for b := j - 1; b > i && data[b] == '\\'; b-- {
			n++
		}
		if n%2 == 0 {
			return j + 1
		}
		j++
	}
	return -1
}
