package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"orderd/provider"
	"orderd/store"
)

// The admin API's own error codes in gateway answers, beside the
// provider's codes.
const (
	// codeIdempotencyConflict: the key already belongs to an attempt with
	// a different request.
	codeIdempotencyConflict = "IDEMPOTENCY_CONFLICT"
	// codeNotSent: the request never left orderd; the provider saw nothing.
	codeNotSent = "NOT_SENT"
)

// Errors the handlers return for fail to map.
var (
	errUnauthorized     = errors.New("missing or invalid bearer token")
	errRouteNotFound    = errors.New("no such route")
	errMethodNotAllowed = errors.New("method not allowed on this path")
	errNoProvider       = errors.New("the gateway has no provider client configured")
)

// badRequestError is a request orderd cannot read: malformed JSON, an
// unknown field, a bad query parameter. Field names the field or parameter
// when there is one.
type badRequestError struct {
	msg   string
	field string
}

func (e *badRequestError) Error() string { return e.msg }

// tooLargeError is a body over the configured limit.
type tooLargeError struct{ limit int64 }

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("body is larger than %d bytes", e.limit)
}

// slowBodyError is a body that did not arrive within the server's read
// timeout.
type slowBodyError struct{ err error }

func (e *slowBodyError) Error() string {
	return "the body did not arrive in time: " + e.err.Error()
}

// typeConflictError is a watch whose type is not that of the live attempt
// holding its merchantOrderId.
type typeConflictError struct {
	existing store.Attempt
	want     string
}

func (e *typeConflictError) Error() string {
	return fmt.Sprintf("type is %s, but merchantOrderId %q belongs to a %s (attempt %d)",
		e.want, e.existing.MerchantOrderID, e.existing.Kind, e.existing.ID)
}

// findingNotFoundError is an action on a finding id that does not exist.
type findingNotFoundError struct{ id int64 }

func (e *findingNotFoundError) Error() string { return fmt.Sprintf("no finding %d", e.id) }

func (e *findingNotFoundError) Unwrap() error { return store.ErrFindingNotFound }

// notReadyError names the readiness checks that failed.
type notReadyError struct {
	checks     map[string]string
	failed     []string
	migrations []store.MigrationProgress
}

func (e *notReadyError) Error() string { return fmt.Sprintf("not ready: %v", e.failed) }

// errorBody is the answer to an error outside the gateway's outcomes.
type errorBody struct {
	Error string `json:"error"`
	Field string `json:"field,omitempty"`
}

// rejectedBody is the gateway's answer to a request it or the provider
// refused.
type rejectedBody struct {
	State   string        `json:"state"`
	Error   rejectedError `json:"error"`
	Attempt *attemptView  `json:"attempt,omitempty"`
}

type rejectedError struct {
	Code             string                     `json:"code"`
	ValidationErrors []provider.ValidationError `json:"validationErrors"`
	Message          string                     `json:"message,omitempty"`
}

// fail writes the answer for err. It is the one place that maps errors to
// HTTP statuses; statusForCode is the same for the provider's codes.
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var (
		bad      *badRequestError
		large    *tooLargeError
		slow     *slowBodyError
		fields   fieldErrors
		conflict *store.AttemptConflictError
		typeConf *typeConflictError
		notReady *notReadyError
		// transition: a person's action that does not apply to the
		// finding as it stands.
		transition *store.TransitionError
	)
	switch {
	case errors.Is(err, errUnauthorized):
		w.Header().Set("WWW-Authenticate", `Bearer realm="orderd"`)
		writeJSON(w, http.StatusUnauthorized, errorBody{Error: err.Error()})
	case errors.Is(err, errClusterOff):
		writeJSON(w, http.StatusNotFound, errorBody{Error: err.Error()})
	case errors.Is(err, errRouteNotFound):
		writeJSON(w, http.StatusNotFound, errorBody{Error: fmt.Sprintf("no route %s %s", r.Method, r.URL.Path)})
	case errors.Is(err, errMethodNotAllowed):
		writeJSON(w, http.StatusMethodNotAllowed, errorBody{Error: fmt.Sprintf("%s is not allowed on %s", r.Method, r.URL.Path)})
	case errors.As(err, &bad):
		writeJSON(w, http.StatusBadRequest, errorBody{Error: bad.msg, Field: bad.field})
	case errors.As(err, &large):
		writeJSON(w, http.StatusRequestEntityTooLarge, errorBody{Error: large.Error()})
	case errors.As(err, &slow):
		writeJSON(w, http.StatusRequestTimeout, errorBody{Error: slow.Error()})
	case errors.As(err, &fields):
		writeJSON(w, http.StatusUnprocessableEntity, rejectedBody{State: "rejected",
			Error: rejectedError{Code: string(provider.CodeValidation), ValidationErrors: fields}})
	case errors.As(err, &conflict):
		v := newAttemptView(conflict.Existing)
		writeJSON(w, http.StatusConflict, rejectedBody{State: "rejected", Attempt: &v,
			Error: rejectedError{Code: codeIdempotencyConflict,
				Message: fmt.Sprintf("%s was already used by attempt %d with a different request",
					describeKey(conflict.Existing), conflict.Existing.ID)}})
	case errors.As(err, &typeConf):
		v := newAttemptView(typeConf.existing)
		writeJSON(w, http.StatusConflict, rejectedBody{State: "rejected", Attempt: &v,
			Error: rejectedError{Code: codeIdempotencyConflict, Message: typeConf.Error(),
				ValidationErrors: []provider.ValidationError{{Field: "type",
					Message: fmt.Sprintf("is %s, but the merchantOrderId belongs to a %s", typeConf.want, typeConf.existing.Kind)}}}})
	case errors.Is(err, store.ErrFindingNotFound):
		writeJSON(w, http.StatusNotFound, errorBody{Error: err.Error()})
	case errors.As(err, &transition):
		writeJSON(w, http.StatusConflict, errorBody{Error: transition.Error(), Field: "action"})
	case errors.As(err, &notReady):
		writeJSON(w, http.StatusServiceUnavailable, readyBody{Status: "not ready", Failing: notReady.failed, Checks: notReady.checks,
			Migrations: notReady.migrations})
	case errors.Is(err, ErrNotLeader):
		writeJSON(w, http.StatusConflict, errorBody{Error: err.Error()})
	case errors.Is(err, store.ErrNotFound):
		writeJSON(w, http.StatusNotFound, errorBody{Error: err.Error()})
	case errors.Is(err, errNoProvider), errors.Is(err, store.ErrOverloaded), errors.Is(err, store.ErrClosed),
		errors.Is(err, store.ErrUnavailable), errors.Is(err, store.ErrUnconfirmed):
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: err.Error()})
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client went away; nobody reads this answer.
		writeJSON(w, 499, errorBody{Error: "request canceled"})
	default:
		s.log.Error("admin request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeJSON(w, http.StatusInternalServerError, errorBody{Error: "internal error: " + err.Error()})
	}
}

// statusForCode is the HTTP status of a gateway answer carrying a
// definite rejection with code.
func statusForCode(code string) int {
	switch provider.Code(code) {
	case provider.CodeValidation, provider.CodeInvalidData,
		provider.CodeAmountGreaterThanAllowed, provider.CodeAmountLessThanAllowed, provider.CodeNotEnoughBalance,
		provider.CodeOperationNotSupported, provider.CodeOrderNotFound:
		// The request itself cannot be served as it is.
		return http.StatusUnprocessableEntity
	case provider.CodeOrderAlreadyExists:
		return http.StatusConflict
	case provider.CodePayinDisabled, provider.CodePayoutDisabled, provider.CodeRequestFromUntrustedSource,
		provider.CodeAuthenticationFailed, provider.CodeRefererDoesNotMatch,
		provider.CodeWalletNotFound, provider.CodeWalletInactive:
		// The merchant's account cannot do it: configuration, not data.
		return http.StatusForbidden
	default:
		// REJECTED_DUE_TO_TECHNICAL_ISSUE, ROUTING_NOT_CONFIGURED,
		// POINT_NOT_FOUND, METHOD_NOT_FOUND, INVALID_HTTP_METHOD, UNKNOWN,
		// codes the spec does not list, and requests that never left
		// orderd: the provider cannot serve it now.
		return http.StatusServiceUnavailable
	}
}

// retryableRejection reports whether the same request can succeed later
// after a rejection with code: the cause lies with the merchant's account
// or the provider, not in the request.
func retryableRejection(code string) bool {
	st := statusForCode(code)
	return st == http.StatusForbidden || st == http.StatusServiceUnavailable
}

// finalRejectionCodes are the documented codes whose rejection the same
// request cannot escape (retryableRejection is false): a gateway repeat of
// such a rejected request is answered from the stored attempt. The store
// gets them as data, so that every instance decides alike.
var finalRejectionCodes = func() []string {
	var codes []string
	for _, c := range provider.Codes {
		if !retryableRejection(string(c)) {
			codes = append(codes, string(c))
		}
	}
	return codes
}()

// describeKey names an attempt's idempotency key for people.
func describeKey(a store.Attempt) string {
	switch a.Kind {
	case store.AttemptPayin, store.AttemptPayout:
		return fmt.Sprintf("merchantOrderId %q", a.MerchantOrderID)
	}
	return fmt.Sprintf("idempotency key %q", a.IdempotencyKey)
}
