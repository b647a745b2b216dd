package providertest

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"orderd/provider"
)

// FaultKind says how an injected fault disturbs a call.
type FaultKind string

// Fault kinds. "Before" kinds leave no effect behind; "after" kinds apply
// the call's effect (an order is created, a refund recorded) and then fail,
// which is what makes a creation "in doubt".
const (
	// FailBefore answers a 5xx with a non-JSON body; the call has no effect.
	FailBefore FaultKind = "fail_before"
	// FailAfter applies the call, then answers a 5xx instead of its result.
	FailAfter FaultKind = "fail_after"
	// Slow waits Fault.Delay, then handles the call normally (the effect
	// happens even if the client gave up waiting).
	Slow FaultKind = "slow"
	// Reset closes the connection without an answer; no effect.
	Reset FaultKind = "reset"
	// ResetAfter applies the call, then closes the connection without an
	// answer.
	ResetAfter FaultKind = "reset_after"
	// ErrorAnswer answers an error envelope with Fault.Code (default
	// UNKNOWN) and has no effect, e.g. PAYIN_DISABLED.
	ErrorAnswer FaultKind = "error_answer"
	// RejectAtCreate makes a payment or withdrawal creation produce an
	// order that a third party has already rejected: the order exists,
	// its rejectReason is Fault.Reason. It only matches create endpoints.
	RejectAtCreate FaultKind = "reject_at_create"
)

// Fault disturbs the next Count calls to Endpoint.
type Fault struct {
	// Endpoint is the path the fault applies to, e.g. PathGetStatus
	// ("/api/v3/order/get-status"; "order/get-status" works too). Empty
	// matches every endpoint.
	Endpoint string
	Kind     FaultKind
	// Count is how many calls the fault disturbs; zero means one.
	Count int
	// Delay is waited before the fault acts, whatever its kind; it is the
	// whole effect of Slow.
	Delay time.Duration
	// Status is the HTTP status of FailBefore and FailAfter; default 500.
	Status int
	// Code is the error code ErrorAnswer answers.
	Code provider.Code
	// Reason is the rejectReason RejectAtCreate writes.
	Reason string
}

// InjectFault queues f. Faults are matched in the order they were
// injected; each call consumes at most one.
func (s *Server) InjectFault(f Fault) error {
	switch f.Kind {
	case FailBefore, FailAfter, Slow, Reset, ResetAfter, ErrorAnswer, RejectAtCreate:
	default:
		return fmt.Errorf("inject fault: unknown kind %q", f.Kind)
	}
	if f.Endpoint != "" {
		f.Endpoint = normalizeEndpoint(f.Endpoint)
		if !isEndpoint(f.Endpoint) {
			return fmt.Errorf("inject fault: unknown endpoint %q", f.Endpoint)
		}
	}
	if f.Kind == RejectAtCreate && f.Endpoint != "" && !isCreateEndpoint(f.Endpoint) {
		return fmt.Errorf("inject fault: %s applies only to %s and %s", RejectAtCreate, PathPaymentCreate, PathWithdrawalCreate)
	}
	if f.Count <= 0 {
		f.Count = 1
	}
	if f.Status == 0 {
		f.Status = http.StatusInternalServerError
	}
	if f.Status < 500 || f.Status > 599 {
		return fmt.Errorf("inject fault: status %d is not a 5xx", f.Status)
	}
	if f.Code == "" {
		f.Code = provider.CodeUnknown
	}
	if f.Reason == "" {
		f.Reason = rejectThirdParty
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &f)
	return nil
}

// ClearFaults drops every fault not yet consumed.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// takeFault consumes the first fault matching path, if any.
func (s *Server) takeFault(path string) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range s.faults {
		if f.Endpoint != "" && f.Endpoint != path {
			continue
		}
		if f.Kind == RejectAtCreate && !isCreateEndpoint(path) {
			continue
		}
		f.Count--
		if f.Count == 0 {
			s.faults = append(s.faults[:i:i], s.faults[i+1:]...)
		}
		c := *f
		return &c
	}
	return nil
}

func normalizeEndpoint(e string) string {
	if strings.HasPrefix(e, "/api/") {
		return e
	}
	return apiPrefix + strings.TrimPrefix(e, "/")
}

func isCreateEndpoint(path string) bool {
	return path == PathPaymentCreate || path == PathWithdrawalCreate
}

// fail answers a 5xx the way a broken gateway in front of the provider
// would: not an envelope.
func fail(w http.ResponseWriter, status int) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = fmt.Fprintln(w, http.StatusText(status))
}

// reset drops the connection without writing anything, with a TCP RST
// where the connection allows it.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}
