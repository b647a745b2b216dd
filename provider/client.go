package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"
)

// DefaultTimeout bounds one call when Options.Timeout is zero.
const DefaultTimeout = 10 * time.Second

// MaxResponseBytes bounds how much of a response body the client reads. A
// longer body is treated as a fault (ErrInDoubt).
const MaxResponseBytes = 8 << 20

// Endpoints, as paths under {base}/api/v3/. They are also the endpoint names
// passed to Options.Observe.
const (
	EndpointBalances            = "balances"
	EndpointPaymentCreate       = "order/payment-form/create"
	EndpointGetStatus           = "order/get-status"
	EndpointRefundCreate        = "order/refund/create"
	EndpointWithdrawalCreate    = "order/withdrawal/create"
	EndpointRequisiteCreate     = "client-requisite/create"
	EndpointRequisiteDeactivate = "client-requisite/deactivate"
	EndpointRequisiteOrders     = "client-requisite/get-orders-list"
)

// Outcomes passed to Options.Observe.
const (
	// OutcomeOK: a success envelope whose data decoded.
	OutcomeOK = "ok"
	// OutcomeError: a definite error envelope (*Error).
	OutcomeError = "error"
	// OutcomeInDoubt: anything else once the request was handed to the
	// transport (ErrInDoubt).
	OutcomeInDoubt = "in_doubt"
)

// ErrInDoubt is wrapped by every error where the provider may or may not have
// acted on the request: a transport fault, a timeout or cancellation after
// the request was handed to the transport, a non-200 status, a body that is
// not an envelope, or a success envelope whose data does not decode. For a
// create call it means "maybe created": settle it with GetStatus, whose
// ORDER_NOT_FOUND proves the order does not exist.
var ErrInDoubt = errors.New("provider: outcome in doubt")

// ErrNotSent is wrapped when the request never left orderd: the rate
// limiter's wait failed, the context ended before sending, or the request
// itself could not be built. The provider saw nothing.
var ErrNotSent = errors.New("provider: request not sent")

// InDoubtError describes an in-doubt outcome. It matches ErrInDoubt with
// errors.Is, and unwraps to its cause (for example context.DeadlineExceeded).
// Its message never contains the API key or more than a short prefix of the
// response body.
type InDoubtError struct {
	// Endpoint is the path under /api/v3/ that was called.
	Endpoint string
	// StatusCode is the HTTP status, or 0 when no response arrived.
	StatusCode int
	// Reason says what went wrong, in a few words.
	Reason string
	// Err is the underlying error, if any.
	Err error
}

func (e *InDoubtError) Error() string {
	return e.Endpoint + ": " + ErrInDoubt.Error() + ": " + e.Reason
}

// Unwrap returns ErrInDoubt and the cause.
func (e *InDoubtError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrInDoubt}
	}
	return []error{ErrInDoubt, e.Err}
}

// Limiter paces calls to the provider. It is shared by every caller of one
// Client; golang.org/x/time/rate's *rate.Limiter satisfies it.
type Limiter interface {
	Wait(ctx context.Context) error
}

// Options configure a Client. BaseURL and APIKey are required.
type Options struct {
	// BaseURL is the provider's base URL, e.g. "https://pay.example.com";
	// calls go to BaseURL + "/api/v3/...".
	BaseURL string
	// APIKey is sent verbatim in the Authorization header. It never appears
	// in errors or in the Client's String form.
	APIKey string
	// HTTPClient sends the requests; nil means http.DefaultClient.
	HTTPClient *http.Client
	// Timeout bounds each call from sending the request to reading the whole
	// answer, not counting the wait for Limiter. Zero means DefaultTimeout;
	// a negative value leaves only the caller's context.
	Timeout time.Duration
	// Limiter, when set, is waited on before every request, with the
	// caller's context.
	Limiter Limiter
	// Observe, when set, is called once per request that was handed to the
	// transport, with the endpoint (one of the Endpoint constants), the
	// outcome (OutcomeOK, OutcomeError or OutcomeInDoubt) and the time from
	// sending to the end of the answer. Requests not sent are not observed.
	Observe func(endpoint, outcome string, d time.Duration)
}

// Client calls the provider's API. It is safe for concurrent use.
//
// Every method classifies its outcome: nil; a definite provider error, which
// errors.As finds as *Error; an error wrapping ErrInDoubt; or an error
// wrapping ErrNotSent.
type Client struct {
	base    string
	display string
	key     string
	hc      *http.Client
	timeout time.Duration
	limiter Limiter
	observe func(endpoint, outcome string, d time.Duration)
}

// NewClient checks o and returns a Client. Errors name the option at fault.
func NewClient(o Options) (*Client, error) {
	u, err := url.Parse(o.BaseURL)
	switch {
	case o.BaseURL == "":
		return nil, errors.New("provider: base URL is empty")
	case err != nil:
		return nil, errors.New("provider: base URL is not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("provider: base URL %q: scheme must be http or https", u.Redacted())
	case u.Host == "":
		return nil, fmt.Errorf("provider: base URL %q: host is missing", u.Redacted())
	case u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("provider: base URL %q: must not have a query or fragment", u.Redacted())
	}
	if o.APIKey == "" {
		return nil, errors.New("provider: API key is empty")
	}
	if !validHeaderValue(o.APIKey) {
		return nil, errors.New("provider: API key contains characters not allowed in an HTTP header")
	}
	c := &Client{
		base:    strings.TrimRight(u.String(), "/") + "/api/v3/",
		display: strings.TrimRight(u.Redacted(), "/"),
		key:     o.APIKey,
		hc:      o.HTTPClient,
		timeout: o.Timeout,
		limiter: o.Limiter,
		observe: o.Observe,
	}
	if c.hc == nil {
		c.hc = http.DefaultClient
	}
	if c.timeout == 0 {
		c.timeout = DefaultTimeout
	}
	return c, nil
}

func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if b := s[i]; b < 0x20 && b != '\t' || b == 0x7f {
			return false
		}
	}
	return strings.TrimSpace(s) == s
}

// String describes the client without its API key.
func (c *Client) String() string {
	return "provider.Client(" + c.display + ")"
}

// Balances returns the merchant's available balance per currency.
func (c *Client) Balances(ctx context.Context) ([]Balance, error) {
	data, err := c.call(ctx, EndpointBalances, []byte("{}"))
	if err != nil {
		return nil, err
	}
	if firstByte(data) != '[' {
		return nil, c.badData(EndpointBalances, "data is not a list", nil)
	}
	var bs []Balance
	if err := json.Unmarshal(data, &bs); err != nil {
		return nil, c.badData(EndpointBalances, "data is not a list of balances", err)
	}
	for i, b := range bs {
		if _, err := b.Money(); err != nil || b.Currency == "" {
			return nil, c.badData(EndpointBalances, fmt.Sprintf("balance %d is not an amount with a currency", i), err)
		}
	}
	return bs, nil
}

// CreatePayment creates a payin order (payment-form/create) and returns the
// order with the provider's exact data JSON. Use RoutingKeyExtended in
// req.Attributes for the extended variant.
func (c *Client) CreatePayment(ctx context.Context, req PaymentRequest) (*Order, json.RawMessage, error) {
	return c.orderCall(ctx, EndpointPaymentCreate, req, "", req.MerchantOrderID)
}

// GetStatus returns the order with merchantOrderID. A *Error with
// CodeOrderNotFound proves the order was never created.
func (c *Client) GetStatus(ctx context.Context, merchantOrderID string) (*Order, json.RawMessage, error) {
	req := struct {
		MerchantOrderID string `json:"merchantOrderId"`
	}{merchantOrderID}
	return c.orderCall(ctx, EndpointGetStatus, req, "", merchantOrderID)
}

// CreateRefund refunds a completed payin fully or partly. The answer is the
// original order with its new RefundTransaction.
func (c *Client) CreateRefund(ctx context.Context, req RefundRequest) (*Order, json.RawMessage, error) {
	return c.orderCall(ctx, EndpointRefundCreate, req, req.ID, req.MerchantOrderID)
}

// CreateRequisite creates a long-lived deposit requisite for one client.
func (c *Client) CreateRequisite(ctx context.Context, req RequisiteRequest) (*Requisite, json.RawMessage, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, nil, notSent(EndpointRequisiteCreate, err)
	}
	data, err := c.call(ctx, EndpointRequisiteCreate, body)
	if err != nil {
		return nil, nil, err
	}
	var r Requisite
	if isNull(data) {
		return nil, nil, c.badData(EndpointRequisiteCreate, "data is null", nil)
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, nil, c.badData(EndpointRequisiteCreate, "data is not a requisite", err)
	}
	if r.ID == "" {
		return nil, nil, c.badData(EndpointRequisiteCreate, "requisite id is missing", nil)
	}
	return &r, data, nil
}

// DeactivateRequisite force-expires the requisite with id. The spec does not
// show the answer's data, so it is returned raw (possibly null).
func (c *Client) DeactivateRequisite(ctx context.Context, id string) (json.RawMessage, error) {
	body, err := json.Marshal(struct {
		ID string `json:"id"`
	}{id})
	if err != nil {
		return nil, notSent(EndpointRequisiteDeactivate, err)
	}
	return c.call(ctx, EndpointRequisiteDeactivate, body)
}

// RequisiteOrders lists orders created through a requisite. The spec does not
// show the answer's shape; data may be an array of orders or an object
// holding the array under "orders" or "items".
func (c *Client) RequisiteOrders(ctx context.Context, req RequisiteOrdersRequest) ([]RawOrder, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, notSent(EndpointRequisiteOrders, err)
	}
	data, err := c.call(ctx, EndpointRequisiteOrders, body)
	if err != nil {
		return nil, err
	}
	list, err := orderList(data)
	if err != nil {
		return nil, c.badData(EndpointRequisiteOrders, "data is not a list of orders", err)
	}
	out := make([]RawOrder, 0, len(list))
	for i, raw := range list {
		o, err := DecodeOrder(raw)
		if err != nil {
			return nil, c.badData(EndpointRequisiteOrders, fmt.Sprintf("order %d", i), err)
		}
		out = append(out, RawOrder{Order: o, Raw: raw})
	}
	return out, nil
}

func orderList(data json.RawMessage) ([]json.RawMessage, error) {
	var list []json.RawMessage
	switch firstByte(data) {
	case '[':
		if err := json.Unmarshal(data, &list); err != nil {
			return nil, err
		}
		return list, nil
	case '{':
		var obj struct {
			Orders json.RawMessage `json:"orders"`
			Items  json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(data, &obj); err != nil {
			return nil, err
		}
		for _, arr := range []json.RawMessage{obj.Orders, obj.Items} {
			if firstByte(arr) == '[' {
				if err := json.Unmarshal(arr, &list); err != nil {
					return nil, err
				}
				return list, nil
			}
		}
		return nil, errors.New(`object has no "orders" or "items" array`)
	}
	return nil, errors.New("neither an array nor an object")
}

// CreateWithdrawal creates a payout. The spec does not show the request or
// the answer, so req (a JSON object) is sent as it is and the answer's data
// is returned raw.
func (c *Client) CreateWithdrawal(ctx context.Context, req json.RawMessage) (json.RawMessage, error) {
	if firstByte(req) != '{' || !json.Valid(req) {
		return nil, notSent(EndpointWithdrawalCreate, errors.New("request must be a JSON object"))
	}
	return c.call(ctx, EndpointWithdrawalCreate, req)
}

// orderCall sends req and decodes the data as an order. When wantID or
// wantMerchantID is set, an answer about another order is in doubt.
func (c *Client) orderCall(ctx context.Context, endpoint string, req any, wantID, wantMerchantID string) (*Order, json.RawMessage, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, nil, notSent(endpoint, err)
	}
	data, err := c.call(ctx, endpoint, body)
	if err != nil {
		return nil, nil, err
	}
	if isNull(data) {
		return nil, nil, c.badData(endpoint, "data is null", nil)
	}
	o, err := DecodeOrder(data)
	switch {
	case err != nil:
		return nil, nil, c.badData(endpoint, "data is not an order", err)
	case wantID != "" && o.ID != wantID:
		return nil, nil, c.badData(endpoint, fmt.Sprintf("answer is about order id %q, not %q", o.ID, wantID), nil)
	case wantMerchantID != "" && o.MerchantOrderID != wantMerchantID:
		return nil, nil, c.badData(endpoint, fmt.Sprintf("answer is about merchantOrderId %q, not %q", o.MerchantOrderID, wantMerchantID), nil)
	}
	return o, data, nil
}

// call sends one request and returns the data of a success envelope.
func (c *Client) call(ctx context.Context, endpoint string, body []byte) (json.RawMessage, error) {
	if c.limiter != nil {
		if err := c.limiter.Wait(ctx); err != nil {
			return nil, notSent(endpoint, fmt.Errorf("rate limiter: %w", err))
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, notSent(endpoint, err)
	}
	callCtx := ctx
	if c.timeout > 0 {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(callCtx, http.MethodPost, c.base+endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, notSent(endpoint, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json; charset=utf-8")
	req.Header.Set("Authorization", c.key)

	start := time.Now()
	data, err := c.roundTrip(endpoint, req)
	var de *InDoubtError
	if errors.As(err, &de) && ctx.Err() == nil && errors.Is(callCtx.Err(), context.DeadlineExceeded) {
		de.Reason = fmt.Sprintf("no complete answer within the %v timeout: %s", c.timeout, de.Reason)
	}
	if c.observe != nil {
		c.observe(endpoint, outcomeOf(err), time.Since(start))
	}
	return data, err
}

func (c *Client) roundTrip(endpoint string, req *http.Request) (json.RawMessage, error) {
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, &InDoubtError{Endpoint: endpoint, Reason: c.scrub(err.Error()), Err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return nil, &InDoubtError{Endpoint: endpoint, StatusCode: resp.StatusCode,
			Reason: c.scrub(fmt.Sprintf("reading HTTP %d answer: %v", resp.StatusCode, err)), Err: err}
	}
	if len(body) > MaxResponseBytes {
		return nil, &InDoubtError{Endpoint: endpoint, StatusCode: resp.StatusCode,
			Reason: fmt.Sprintf("HTTP %d answer is larger than %d bytes", resp.StatusCode, MaxResponseBytes)}
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &InDoubtError{Endpoint: endpoint, StatusCode: resp.StatusCode,
			Reason: c.scrub(fmt.Sprintf("unexpected HTTP status %d, body %s", resp.StatusCode, bodyPrefix(body)))}
	}
	data, perr, reason, cause := decodeEnvelope(body)
	switch {
	case perr != nil:
		c.scrubError(perr)
		return nil, fmt.Errorf("%s: %w", endpoint, perr)
	case reason != "":
		if cause != nil {
			reason += ": " + cause.Error()
		}
		return nil, &InDoubtError{Endpoint: endpoint, StatusCode: resp.StatusCode,
			Reason: c.scrub(reason + ", body " + bodyPrefix(body)), Err: cause}
	}
	return data, nil
}

// DecodeEnvelope reads a provider response body. It returns the data of a
// success envelope (JSON null when the envelope has no data), a *Error for an
// envelope whose error is set, or an error wrapping ErrInDoubt for a body
// that is not an envelope.
func DecodeEnvelope(body []byte) (json.RawMessage, error) {
	data, perr, reason, cause := decodeEnvelope(body)
	switch {
	case perr != nil:
		return nil, perr
	case reason != "" && cause != nil:
		return nil, fmt.Errorf("%w: %s: %w", ErrInDoubt, reason, cause)
	case reason != "":
		return nil, fmt.Errorf("%w: %s", ErrInDoubt, reason)
	}
	return data, nil
}

// decodeEnvelope returns the data, or the provider's error, or why body is
// not an envelope (with the decoding error, if any).
func decodeEnvelope(body []byte) (json.RawMessage, *Error, string, error) {
	if firstByte(body) != '{' {
		return nil, nil, "answer is not a JSON object", nil
	}
	var env struct {
		Data  json.RawMessage `json:"data"`
		Error json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, nil, "answer is not an envelope", err
	}
	if env.Data == nil && env.Error == nil {
		return nil, nil, "answer has neither data nor error", nil
	}
	if env.Error != nil && !isNull(env.Error) {
		var e Error
		if err := json.Unmarshal(env.Error, &e); err != nil {
			return nil, nil, "error object does not decode", err
		}
		if e.Code == "" {
			return nil, nil, "error object has no code", nil
		}
		return nil, &e, "", nil
	}
	if env.Data == nil {
		return json.RawMessage("null"), nil, "", nil
	}
	return env.Data, nil, "", nil
}

func (c *Client) badData(endpoint, reason string, err error) error {
	if err != nil {
		reason += ": " + err.Error()
	}
	return &InDoubtError{Endpoint: endpoint, StatusCode: http.StatusOK, Reason: c.scrub(reason), Err: err}
}

func notSent(endpoint string, err error) error {
	return fmt.Errorf("%s: %w: %w", endpoint, ErrNotSent, err)
}

func outcomeOf(err error) string {
	var perr *Error
	switch {
	case err == nil:
		return OutcomeOK
	case errors.As(err, &perr):
		return OutcomeError
	default:
		return OutcomeInDoubt
	}
}

// scrub removes the API key from s, in case an answer or a transport error
// echoes it.
func (c *Client) scrub(s string) string {
	if c.key == "" || !strings.Contains(s, c.key) {
		return s
	}
	return strings.ReplaceAll(s, c.key, "[redacted]")
}

func (c *Client) scrubError(e *Error) {
	for i := range e.ValidationErrors {
		e.ValidationErrors[i].Field = c.scrub(e.ValidationErrors[i].Field)
		e.ValidationErrors[i].Message = c.scrub(e.ValidationErrors[i].Message)
	}
}

// bodyPrefix quotes at most the first 64 bytes of body for an error message.
func bodyPrefix(body []byte) string {
	const n = 64
	if len(body) == 0 {
		return "empty"
	}
	if len(body) <= n {
		return fmt.Sprintf("%q", body)
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(body[cut]) {
		cut--
	}
	return fmt.Sprintf("%q… (%d bytes)", body[:cut], len(body))
}

func firstByte(b []byte) byte {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c
	}
	return 0
}

func isNull(b []byte) bool { return bytes.Equal(bytes.TrimSpace(b), []byte("null")) }
