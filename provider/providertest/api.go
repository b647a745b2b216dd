package providertest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"orderd/provider"
)

// The provider's endpoints.
const (
	apiPrefix               = "/api/v3/"
	PathBalances            = "/api/v3/balances"
	PathPaymentCreate       = "/api/v3/order/payment-form/create"
	PathGetStatus           = "/api/v3/order/get-status"
	PathRefundCreate        = "/api/v3/order/refund/create"
	PathWithdrawalCreate    = "/api/v3/order/withdrawal/create"
	PathRequisiteCreate     = "/api/v3/client-requisite/create"
	PathRequisiteDeactivate = "/api/v3/client-requisite/deactivate"
	PathRequisiteOrders     = "/api/v3/client-requisite/get-orders-list"
)

// maxBodyBytes bounds a request body; a larger one is INVALID_DATA.
const maxBodyBytes = 1 << 20

// CallRecord records one call to the API.
type CallRecord struct {
	// Endpoint is the request path, e.g. PathGetStatus.
	Endpoint string
	Method   string
	Header   http.Header
	// Body is the request body as received; it is shared, do not modify it.
	Body []byte
	// Status is the HTTP status answered, 0 when the connection was reset.
	Status int
	// Code is the error code of an error envelope, "" otherwise.
	Code provider.Code
	// Fault is the injected fault that disturbed the call, if any.
	Fault FaultKind
	// At is the real time the call arrived.
	At       time.Time
	Duration time.Duration
	// Remote is the caller's address (host:port) as the connection
	// shows it, so a suite that runs several callers on addresses of
	// their own can tell whose call it was.
	Remote string
}

// Calls returns the calls made to endpoint (a path such as PathGetStatus,
// or "order/get-status"), oldest first; an empty endpoint returns every
// call. At most Options.MaxRecords are kept.
func (s *Server) Calls(endpoint string) []CallRecord {
	if endpoint != "" {
		endpoint = normalizeEndpoint(endpoint)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []CallRecord
	for _, c := range s.calls {
		if endpoint == "" || c.Endpoint == endpoint {
			out = append(out, c)
		}
	}
	return out
}

// apiCall is one decoded request as an endpoint sees it.
type apiCall struct {
	r     *http.Request
	body  []byte
	fault *Fault
}

type endpointFunc func(c *apiCall) (any, *provider.Error)

func (s *Server) endpoint(path string) endpointFunc {
	switch path {
	case PathBalances:
		return s.handleBalances
	case PathPaymentCreate:
		return s.handlePaymentCreate
	case PathGetStatus:
		return s.handleGetStatus
	case PathRefundCreate:
		return s.handleRefundCreate
	case PathWithdrawalCreate:
		return s.handleWithdrawalCreate
	case PathRequisiteCreate:
		return s.handleRequisiteCreate
	case PathRequisiteDeactivate:
		return s.handleRequisiteDeactivate
	case PathRequisiteOrders:
		return s.handleRequisiteOrders
	}
	return nil
}

func isEndpoint(path string) bool {
	switch path {
	case PathBalances, PathPaymentCreate, PathGetStatus, PathRefundCreate, PathWithdrawalCreate,
		PathRequisiteCreate, PathRequisiteDeactivate, PathRequisiteOrders:
		return true
	}
	return false
}

// routes is the server's whole handler: the API, the customer's checkout
// page, and the controls when Options.ControlAPI is set.
func (s *Server) routes() http.Handler {
	var control http.Handler
	if s.opts.ControlAPI {
		control = s.ControlHandler()
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case control != nil && strings.HasPrefix(r.URL.Path, controlPrefix):
			control.ServeHTTP(w, r)
		case strings.HasPrefix(r.URL.Path, checkoutPrefix):
			s.serveCheckout(w, r)
		default:
			s.serveAPI(w, r)
		}
	})
}

// serveAPI answers one API call: faults first, then the checks every call
// passes (method, key, source), then the endpoint. Every answer the
// provider gives is HTTP 200 with an envelope; only faults answer otherwise.
func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	rec := CallRecord{Endpoint: r.URL.Path, Method: r.Method, Header: r.Header.Clone(), At: time.Now(), Remote: r.RemoteAddr}
	body, readErr := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	rec.Body = body
	// answer records the call before the client can see the answer, so a
	// test that reads Calls right after a call always finds it.
	answer := func(status int, code provider.Code, write func()) {
		rec.Status, rec.Code, rec.Duration = status, code, time.Since(rec.At)
		s.mu.Lock()
		s.calls = appendBounded(s.calls, rec, s.opts.MaxRecords)
		s.mu.Unlock()
		s.log.Debug("api call", "endpoint", rec.Endpoint, "status", rec.Status, "code", rec.Code,
			"fault", rec.Fault, "elapsed", rec.Duration)
		write()
	}
	envelope := func(data any, perr *provider.Error) {
		b, code := envelopeBytes(data, perr)
		answer(http.StatusOK, code, func() { writeJSON(w, b) })
	}

	h := s.endpoint(r.URL.Path)
	var f *Fault
	if h != nil {
		f = s.takeFault(r.URL.Path)
	}
	if f != nil {
		rec.Fault = f.Kind
		if !s.sleep(f.Delay) {
			return
		}
		switch f.Kind {
		case FailBefore:
			answer(f.Status, "", func() { fail(w, f.Status) })
			return
		case Reset:
			answer(0, "", func() { reset(w) })
			return
		case ErrorAnswer:
			envelope(nil, &provider.Error{Code: f.Code})
			return
		}
	}

	data, perr := s.dispatch(r, h, body, readErr, f)

	if f != nil {
		switch f.Kind {
		case FailAfter:
			answer(f.Status, "", func() { fail(w, f.Status) })
			return
		case ResetAfter:
			answer(0, "", func() { reset(w) })
			return
		}
	}
	envelope(data, perr)
}

func (s *Server) dispatch(r *http.Request, h endpointFunc, body []byte, readErr error, f *Fault) (any, *provider.Error) {
	if r.Method != http.MethodPost {
		return nil, &provider.Error{Code: provider.CodeInvalidHTTPMethod}
	}
	if r.Header.Get("Authorization") != s.opts.APIKey {
		return nil, &provider.Error{Code: provider.CodeAuthenticationFailed}
	}
	if s.allowedIPs != nil {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		if !s.allowedIPs[host] {
			return nil, &provider.Error{Code: provider.CodeRequestFromUntrustedSource}
		}
	}
	if ref := r.Header.Get("Referer"); ref != "" && len(s.opts.AllowedReferers) > 0 {
		u, err := url.Parse(ref)
		if err != nil || !slices.Contains(s.opts.AllowedReferers, u.Hostname()) {
			return nil, &provider.Error{Code: provider.CodeRefererDoesNotMatch}
		}
	}
	if h == nil {
		return nil, &provider.Error{Code: provider.CodeMethodNotFound}
	}
	if readErr != nil || len(body) > maxBodyBytes {
		return nil, &provider.Error{Code: provider.CodeInvalidData}
	}
	return h(&apiCall{r: r, body: body, fault: f})
}

// envelopeBytes encodes the provider's envelope and returns the error code
// it carries ("" on success).
func envelopeBytes(data any, perr *provider.Error) ([]byte, provider.Code) {
	type env struct {
		Data  any             `json:"data"`
		Error *provider.Error `json:"error"`
	}
	if perr == nil {
		if raw, ok := data.([]byte); ok {
			data = json.RawMessage(raw)
		}
		b, err := json.Marshal(env{data, nil})
		if err == nil {
			return b, ""
		}
		perr = &provider.Error{Code: provider.CodeUnknown}
	}
	// An *Error of plain fields always marshals.
	b, _ := json.Marshal(env{nil, perr})
	return b, perr.Code
}

// writeJSON writes an HTTP 200 JSON answer.
func writeJSON(w http.ResponseWriter, b []byte) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// decode reads a JSON object into v. A syntax error, trailing data or a
// body that is not an object is INVALID_DATA; a value of the wrong type is
// VALIDATION naming the field.
func decode(body []byte, v any) *provider.Error {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return &provider.Error{Code: provider.CodeInvalidData}
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return validationError(te.Field, "must be "+jsonKind(te.Type.Kind().String()))
		}
		return &provider.Error{Code: provider.CodeInvalidData}
	}
	if _, err := dec.Token(); err != io.EOF {
		return &provider.Error{Code: provider.CodeInvalidData}
	}
	return nil
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "int", "int64":
		return "an integer"
	case "bool":
		return "a boolean"
	case "struct", "map", "ptr":
		return "an object"
	case "slice":
		return "an array"
	}
	return "of another type"
}

func validationError(field, message string) *provider.Error {
	return &provider.Error{Code: provider.CodeValidation,
		ValidationErrors: []provider.ValidationError{{Field: field, Message: message}}}
}
