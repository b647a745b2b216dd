package providertest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"orderd/provider"
)

const controlPrefix = "/_control/"

// ControlHandler serves the test controls over HTTP, for a fake running in
// another process (cmd/providertest). Every request carries the API key in
// Authorization, like the API. Routes, with JSON bodies:
//
//	POST /_control/create-order     {"merchantOrderId","type","amount","currency","webhookUrl"}
//	POST /_control/complete         {"merchantOrderId"}
//	POST /_control/reject           {"merchantOrderId","reason"}
//	POST /_control/deposit          {"requisiteId","amount"}
//	POST /_control/adjust-balance   {"currency","delta"}
//	POST /_control/advance-refund   {"merchantOrderId","refundId"}
//	POST /_control/complete-refund  {"merchantOrderId","refundId","ok"}
//	POST /_control/fault            {"endpoint","kind","count","delay":"250ms","status","code","reason"}
//	POST /_control/clear-faults
//	POST /_control/webhook-url      {"url"}
//	GET  /_control/order?merchantOrderId=…
//	GET  /_control/orders
//	GET  /_control/balances
//	GET  /_control/webhooks
//	GET  /_control/calls?endpoint=…
//
// Answers are {"data": …} with 200, or {"error": {"message", "code",
// "validationErrors"}} with 400 (bad control request), 401 (wrong key),
// 404 (unknown order, refund or requisite), 409 (state does not allow it)
// or 422 (refused with a provider error code). Orders are written in the
// provider's own JSON shape.
func (s *Server) ControlHandler() http.Handler {
	mux := http.NewServeMux()
	post := func(name string, h func(r *http.Request) (any, error)) {
		mux.HandleFunc("POST "+controlPrefix+name, func(w http.ResponseWriter, r *http.Request) {
			data, err := h(r)
			writeControl(w, data, err)
		})
	}
	get := func(name string, h func(r *http.Request) (any, error)) {
		mux.HandleFunc("GET "+controlPrefix+name, func(w http.ResponseWriter, r *http.Request) {
			data, err := h(r)
			writeControl(w, data, err)
		})
	}

	post("create-order", func(r *http.Request) (any, error) {
		var req struct {
			MerchantOrderID string             `json:"merchantOrderId"`
			Type            provider.OrderType `json:"type"`
			Amount          string             `json:"amount"`
			Currency        string             `json:"currency"`
			WebhookURL      string             `json:"webhookUrl"`
		}
		if err := decodeControl(r, &req); err != nil {
			return nil, err
		}
		o, err := s.CreateOrder(NewOrder{MerchantOrderID: req.MerchantOrderID, Type: req.Type,
			Amount: req.Amount, Currency: req.Currency, WebhookURL: req.WebhookURL})
		if err != nil {
			return nil, err
		}
		return s.orderData(o.MerchantOrderID)
	})
	post("complete", func(r *http.Request) (any, error) {
		var req struct {
			MerchantOrderID string `json:"merchantOrderId"`
		}
		if err := decodeControl(r, &req); err != nil {
			return nil, err
		}
		if err := s.Complete(req.MerchantOrderID); err != nil {
			return nil, err
		}
		return s.orderData(req.MerchantOrderID)
	})
	post("reject", func(r *http.Request) (any, error) {
		var req struct {
			MerchantOrderID string `json:"merchantOrderId"`
			Reason          string `json:"reason"`
		}
		if err := decodeControl(r, &req); err != nil {
			return nil, err
		}
		if err := s.Reject(req.MerchantOrderID, req.Reason); err != nil {
			return nil, err
		}
		return s.orderData(req.MerchantOrderID)
	})
	post("deposit", func(r *http.Request) (any, error) {
		var req struct {
			RequisiteID string `json:"requisiteId"`
			Amount      string `json:"amount"`
		}
		if err := decodeControl(r, &req); err != nil {
			return nil, err
		}
		o, err := s.Deposit(req.RequisiteID, req.Amount)
		if err != nil {
			return nil, err
		}
		return s.orderData(o.MerchantOrderID)
	})
	post("adjust-balance", func(r *http.Request) (any, error) {
		var req struct {
			Currency string `json:"currency"`
			Delta    string `json:"delta"`
		}
		if err := decodeControl(r, &req); err != nil {
			return nil, err
		}
		if err := s.AdjustBalance(req.Currency, req.Delta); err != nil {
			return nil, badControl(err.Error())
		}
		return s.Balances(), nil
	})
	refundReq := func(r *http.Request) (moid, refundID string, ok bool, err error) {
		var req struct {
			MerchantOrderID string `json:"merchantOrderId"`
			RefundID        string `json:"refundId"`
			OK              *bool  `json:"ok"`
		}
		if err := decodeControl(r, &req); err != nil {
			return "", "", false, err
		}
		return req.MerchantOrderID, req.RefundID, req.OK == nil || *req.OK, nil
	}
	post("advance-refund", func(r *http.Request) (any, error) {
		moid, id, _, err := refundReq(r)
		if err != nil {
			return nil, err
		}
		if err := s.AdvanceRefund(moid, id); err != nil {
			return nil, err
		}
		return s.orderData(moid)
	})
	post("complete-refund", func(r *http.Request) (any, error) {
		moid, id, ok, err := refundReq(r)
		if err != nil {
			return nil, err
		}
		if err := s.CompleteRefund(moid, id, ok); err != nil {
			return nil, err
		}
		return s.orderData(moid)
	})
	post("fault", func(r *http.Request) (any, error) {
		var req struct {
			Endpoint string        `json:"endpoint"`
			Kind     FaultKind     `json:"kind"`
			Count    int           `json:"count"`
			Delay    string        `json:"delay"`
			Status   int           `json:"status"`
			Code     provider.Code `json:"code"`
			Reason   string        `json:"reason"`
		}
		if err := decodeControl(r, &req); err != nil {
			return nil, err
		}
		f := Fault{Endpoint: req.Endpoint, Kind: req.Kind, Count: req.Count, Status: req.Status,
			Code: req.Code, Reason: req.Reason}
		if req.Delay != "" {
			d, err := time.ParseDuration(req.Delay)
			if err != nil {
				return nil, badControl("delay: " + err.Error())
			}
			f.Delay = d
		}
		if err := s.InjectFault(f); err != nil {
			return nil, badControl(err.Error())
		}
		return struct{}{}, nil
	})
	post("clear-faults", func(*http.Request) (any, error) {
		s.ClearFaults()
		return struct{}{}, nil
	})
	post("webhook-url", func(r *http.Request) (any, error) {
		var req struct {
			URL string `json:"url"`
		}
		if err := decodeControl(r, &req); err != nil {
			return nil, err
		}
		s.SetWebhookURLOverride(req.URL)
		return struct{}{}, nil
	})
	get("order", func(r *http.Request) (any, error) {
		return s.orderData(r.URL.Query().Get("merchantOrderId"))
	})
	get("orders", func(*http.Request) (any, error) {
		orders := s.Orders()
		out := make([]json.RawMessage, 0, len(orders))
		for _, o := range orders {
			if b, ok := s.OrderJSON(o.MerchantOrderID); ok {
				out = append(out, b)
			}
		}
		return out, nil
	})
	get("balances", func(*http.Request) (any, error) { return s.Balances(), nil })
	get("webhooks", func(*http.Request) (any, error) {
		attempts := s.Webhooks()
		out := make([]webhookAttemptJSON, len(attempts))
		for i, a := range attempts {
			out[i] = webhookAttemptJSON{Delivery: a.Delivery, Kind: a.Kind, MerchantOrderID: a.MerchantOrderID,
				OrderStatus: a.OrderStatus, URL: a.URL, Body: a.Body, Signature: a.Signature,
				Attempt: a.Attempt, Status: a.Status, Err: a.Err, At: a.At}
		}
		return out, nil
	})
	get("calls", func(r *http.Request) (any, error) {
		calls := s.Calls(r.URL.Query().Get("endpoint"))
		out := make([]callRecordJSON, len(calls))
		for i, c := range calls {
			out[i] = callRecordJSON{Endpoint: c.Endpoint, Method: c.Method, Status: c.Status, Code: c.Code,
				Fault: c.Fault, At: c.At, DurationMS: float64(c.Duration.Microseconds()) / 1000, Remote: c.Remote}
		}
		return out, nil
	})

	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != s.opts.APIKey {
			writeControlError(w, http.StatusUnauthorized, controlError{Message: "wrong or missing Authorization"})
			return
		}
		mux.ServeHTTP(w, r)
	})
}

type webhookAttemptJSON struct {
	Delivery        int             `json:"delivery"`
	Kind            WebhookKind     `json:"kind"`
	MerchantOrderID string          `json:"merchantOrderId"`
	OrderStatus     provider.Status `json:"orderStatus"`
	URL             string          `json:"url"`
	Body            json.RawMessage `json:"body"`
	Signature       string          `json:"signature"`
	Attempt         int             `json:"attempt"`
	Status          int             `json:"status"`
	Err             string          `json:"err,omitempty"`
	At              time.Time       `json:"at"`
}

type callRecordJSON struct {
	Endpoint   string        `json:"endpoint"`
	Method     string        `json:"method"`
	Status     int           `json:"status"`
	Code       provider.Code `json:"code,omitempty"`
	Fault      FaultKind     `json:"fault,omitempty"`
	At         time.Time     `json:"at"`
	DurationMS float64       `json:"durationMs"`
	Remote     string        `json:"remote"`
}

func (s *Server) orderData(merchantOrderID string) (any, error) {
	b, ok := s.OrderJSON(merchantOrderID)
	if !ok {
		return nil, fmt.Errorf("order %q: %w", merchantOrderID, ErrNotFound)
	}
	return json.RawMessage(b), nil
}

// controlError is the error object of a control answer.
type controlError struct {
	Message          string                     `json:"message"`
	Code             provider.Code              `json:"code,omitempty"`
	ValidationErrors []provider.ValidationError `json:"validationErrors,omitempty"`
}

type badControlError string

func (e badControlError) Error() string { return string(e) }

func badControl(msg string) error { return badControlError(msg) }

func decodeControl(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20))
	if err := dec.Decode(v); err != nil {
		return badControl("body: " + err.Error())
	}
	return nil
}

// writeControl is the one place control errors become HTTP statuses.
func writeControl(w http.ResponseWriter, data any, err error) {
	if err == nil {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(struct {
			Data any `json:"data"`
		}{data})
		return
	}
	var pe *provider.Error
	var bad badControlError
	switch {
	case errors.As(err, &pe):
		writeControlError(w, http.StatusUnprocessableEntity,
			controlError{Message: pe.Error(), Code: pe.Code, ValidationErrors: pe.ValidationErrors})
	case errors.As(err, &bad):
		writeControlError(w, http.StatusBadRequest, controlError{Message: err.Error()})
	case errors.Is(err, ErrNotFound):
		writeControlError(w, http.StatusNotFound, controlError{Message: err.Error()})
	case errors.Is(err, ErrConflict):
		writeControlError(w, http.StatusConflict, controlError{Message: err.Error()})
	default:
		writeControlError(w, http.StatusInternalServerError, controlError{Message: err.Error()})
	}
}

func writeControlError(w http.ResponseWriter, status int, e controlError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(struct {
		Error controlError `json:"error"`
	}{e})
}
