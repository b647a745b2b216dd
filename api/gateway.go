package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"orderd/provider"
	"orderd/store"
)

// gatewayCall is one validated gateway request, ready to become an attempt.
type gatewayCall struct {
	kind            store.AttemptKind
	merchantOrderID string
	// request is what is sent to the provider; its canonical JSON is
	// stored with the attempt and hashed for idempotency.
	request any
	// key returns the attempt's idempotency key, given the request hash.
	key func(hash string) string
	// do calls the provider.
	do func(ctx context.Context) callResult
}

// callResult is what a provider call gave.
type callResult struct {
	err      error
	response json.RawMessage
	// obs is the created order, applied through the one write path.
	obs *store.Observation
	// watch asks the reconciler to poll an order.
	watch *store.Watch
	// requisite registers a created requisite for the reconciler's sweep;
	// deactivated ends the sweep of one.
	requisite   *store.Requisite
	deactivated string
}

// idempotencyHeader is the optional key of refunds and requisites.
const idempotencyHeader = "Idempotency-Key"

// run records the attempt, calls the provider if the attempt is new, and
// answers with the outcome.
func (s *server) run(w http.ResponseWriter, r *http.Request, c gatewayCall) {
	if s.deps.Provider == nil {
		s.fail(w, r, errNoProvider)
		return
	}
	req, err := canonicalJSON(c.request)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	hash := requestHash(c.kind, req)
	a, isNew, err := s.deps.Store.BeginAttempt(r.Context(), store.NewAttempt{
		Kind:            c.kind,
		Origin:          store.OriginGateway,
		MerchantOrderID: c.merchantOrderID,
		IdempotencyKey:  c.key(hash),
		Request:         req,
		RequestHash:     hash,
		State:           store.AttemptPending,
		RetryRejected:   true,
		FinalCodes:      finalRejectionCodes,
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	log := s.log.With("attempt", a.ID, "kind", a.Kind, "merchantOrderId", a.MerchantOrderID)
	if !isNew {
		log.Info("gateway repeat answered from the stored attempt", "state", a.State)
		writeJSON(w, http.StatusOK, outcomeBody(a))
		return
	}

	// The attempt is durable; from here on the call and the recording of
	// its outcome must not depend on the client staying connected.
	ctx := context.WithoutCancel(r.Context())
	res := c.do(ctx)
	out := s.outcome(res)
	stored, err := s.deps.Store.FinishAttempt(ctx, a.ID, out)
	if err != nil {
		// The answer is still the provider's truth; the attempt stays
		// pending and becomes in doubt for the reconciler to settle.
		log.Error("gateway outcome not recorded; the attempt stays pending", "state", out.State, "err", err)
		stored = a
		stored.State, stored.ErrorCode, stored.Detail, stored.Response = out.State, out.ErrorCode, out.Detail, out.Response
	}
	switch stored.State {
	case store.AttemptInDoubt:
		log.Warn("gateway creation in doubt", "detail", stored.Detail)
	case store.AttemptRejected:
		log.Info("gateway creation rejected", "code", stored.ErrorCode)
	default:
		log.Info("gateway creation answered", "state", stored.State)
	}
	writeJSON(w, freshStatus(stored), outcomeBody(stored))
}

// outcome classifies a provider call's result.
func (s *server) outcome(res callResult) store.AttemptOutcome {
	var perr *provider.Error
	switch {
	case res.err == nil:
		return store.AttemptOutcome{State: store.AttemptCreated, Response: res.response,
			Observation: res.obs, Watch: res.watch, Requisite: res.requisite, DeactivatedRequisite: res.deactivated}
	case errors.As(res.err, &perr):
		body, _ := json.Marshal(perr) // plain fields always marshal
		return store.AttemptOutcome{State: store.AttemptRejected, ErrorCode: string(perr.Code),
			Detail: res.err.Error(), Response: body, DeactivatedRequisite: res.deactivated}
	case errors.Is(res.err, provider.ErrNotSent):
		body, _ := json.Marshal(provider.Error{Code: codeNotSent})
		return store.AttemptOutcome{State: store.AttemptRejected, ErrorCode: codeNotSent,
			Detail: res.err.Error(), Response: body}
	default:
		return store.AttemptOutcome{State: store.AttemptInDoubt, Detail: res.err.Error()}
	}
}

// createdBody is the answer for a created attempt. Exactly one of the
// payload fields is set, by kind.
type createdBody struct {
	State     store.AttemptState `json:"state"`
	Order     json.RawMessage    `json:"order,omitempty"`
	Requisite json.RawMessage    `json:"requisite,omitempty"`
	Result    json.RawMessage    `json:"result,omitempty"`
}

// storedRejection is the answer for a rejected attempt: the provider's
// error object as it was stored.
type storedRejection struct {
	State store.AttemptState `json:"state"`
	Error json.RawMessage    `json:"error"`
}

// pendingBody is the answer for an attempt that is not settled.
type pendingBody struct {
	State   store.AttemptState `json:"state"`
	Attempt attemptView        `json:"attempt"`
}

// outcomeBody is the answer for an attempt, built only from what is stored
// so that an identical repeat gets the same body as the first answer.
func outcomeBody(a store.Attempt) any {
	switch a.State {
	case store.AttemptCreated:
		b := createdBody{State: a.State}
		payload := a.Response
		if len(payload) == 0 {
			payload = json.RawMessage("null")
		}
		switch a.Kind {
		case store.AttemptRequisite:
			b.Requisite = payload
		case store.AttemptRequisiteDeactivate:
			b.Result = payload
		default:
			b.Order = payload
		}
		return b
	case store.AttemptRejected:
		e := a.Response
		if len(e) == 0 {
			e, _ = json.Marshal(provider.Error{Code: provider.Code(a.ErrorCode)})
		}
		return storedRejection{State: a.State, Error: e}
	default:
		return pendingBody{State: a.State, Attempt: newAttemptView(a)}
	}
}

// freshStatus is the HTTP status of the first answer for an attempt.
func freshStatus(a store.Attempt) int {
	switch a.State {
	case store.AttemptCreated:
		if a.Kind == store.AttemptRequisiteDeactivate {
			return http.StatusOK
		}
		return http.StatusCreated
	case store.AttemptRejected:
		return statusForCode(a.ErrorCode)
	case store.AttemptNotCreated:
		return http.StatusOK
	default:
		return http.StatusAccepted
	}
}

// requestHash identifies a request of a kind by its canonical JSON.
func requestHash(kind store.AttemptKind, canonical []byte) string {
	h := sha256.New()
	h.Write([]byte(kind))
	h.Write([]byte{0})
	h.Write(canonical)
	return hex.EncodeToString(h.Sum(nil))
}

// orderKey is the idempotency key of payins and payouts: one per
// merchantOrderId, shared by both kinds.
func orderKey(merchantOrderID string) string { return "order:" + merchantOrderID }

// headerKey reads the optional Idempotency-Key header. Given more than
// once it is refused, like a repeated query parameter: which of two keys
// the request meant cannot be told.
func headerKey(r *http.Request) (string, error) {
	if len(r.Header.Values(idempotencyHeader)) > 1 {
		return "", &badRequestError{field: idempotencyHeader, msg: idempotencyHeader + " is given more than once"}
	}
	k := r.Header.Get(idempotencyHeader)
	if k == "" {
		return "", nil
	}
	if len(k) > maxIDLength || strings.ContainsFunc(k, func(c rune) bool { return c < 0x21 || c > 0x7e }) {
		return "", &badRequestError{field: idempotencyHeader,
			msg: idempotencyHeader + " must be at most 255 visible ASCII characters"}
	}
	return k, nil
}

// decodeBody reads the body and decodes it strictly into dst.
func (s *server) decodeBody(w http.ResponseWriter, r *http.Request, dst any) error {
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	return decodeStrict(body, dst)
}

// moneyBody is a Money object as a request carries it; the amount stays a
// string until validated.
type moneyBody struct {
	Amount   string `json:"amount"`
	Currency string `json:"currency"`
}

// payinBody is the provider's payment-form/create body.
type payinBody struct {
	MerchantOrderID string     `json:"merchantOrderId"`
	Invoice         *moneyBody `json:"invoice"`
	Client          *struct {
		Name     string `json:"name"`
		Email    string `json:"email"`
		Phone    string `json:"phone"`
		Taxpayer *struct {
			Number string `json:"number"`
		} `json:"taxpayer"`
	} `json:"client"`
	ReturnURL  string `json:"returnUrl"`
	WebhookURL string `json:"webhookUrl"`
	Attributes *struct {
		RoutingKey string `json:"routingKey"`
	} `json:"attributes"`
}

// handlePayin is POST /v1/payins.
func (s *server) handlePayin(w http.ResponseWriter, r *http.Request) {
	var b payinBody
	if err := s.decodeBody(w, r, &b); err != nil {
		s.fail(w, r, err)
		return
	}
	req, err := s.payinRequest(b)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.run(w, r, gatewayCall{
		kind:            store.AttemptPayin,
		merchantOrderID: req.MerchantOrderID,
		request:         req,
		key:             func(string) string { return orderKey(req.MerchantOrderID) },
		do: func(ctx context.Context) callResult {
			o, raw, err := s.deps.Provider.CreatePayment(ctx, req)
			if err != nil {
				return callResult{err: err}
			}
			return callResult{response: raw, obs: s.observation(o, raw)}
		},
	})
}

// payinRequest validates a payin body and builds the provider's request.
func (s *server) payinRequest(b payinBody) (provider.PaymentRequest, error) {
	var v fieldErrors
	v.identifier("merchantOrderId", b.MerchantOrderID)
	inv := b.Invoice
	if inv == nil {
		inv = &moneyBody{}
	}
	amount := v.amount("invoice.amount", inv.Amount)
	v.currency("invoice.currency", inv.Currency)
	v.url("returnUrl", b.ReturnURL)
	v.url("webhookUrl", b.WebhookURL)
	req := provider.PaymentRequest{
		MerchantOrderID: b.MerchantOrderID,
		Invoice:         provider.Money{Amount: amount, Currency: inv.Currency},
		ReturnURL:       b.ReturnURL,
		WebhookURL:      b.WebhookURL,
	}
	var taxpayer string
	if c := b.Client; c != nil {
		req.Client = &provider.PaymentClient{Name: c.Name, Email: c.Email, Phone: c.Phone}
		if c.Taxpayer != nil {
			taxpayer = c.Taxpayer.Number
			req.Client.Taxpayer = &provider.Taxpayer{Number: taxpayer}
		}
		v.text("client.name", c.Name, maxIDLength)
		v.text("client.email", c.Email, maxIDLength)
		v.text("client.phone", c.Phone, maxIDLength)
		v.text("client.taxpayer.number", taxpayer, maxIDLength)
	}
	if a := b.Attributes; a != nil {
		v.text("attributes.routingKey", a.RoutingKey, maxIDLength)
		if a.RoutingKey != "" {
			req.Attributes = &provider.PaymentAttributes{RoutingKey: a.RoutingKey}
		}
		if a.RoutingKey == provider.RoutingKeyExtended {
			// The extended variant needs the customer in full.
			c := req.Client
			if c == nil {
				c = &provider.PaymentClient{}
			}
			v.required("client.name", c.Name)
			v.required("client.email", c.Email)
			v.required("client.phone", c.Phone)
			v.required("client.taxpayer.number", taxpayer)
		}
	}
	if err := v.err(); err != nil {
		return provider.PaymentRequest{}, err
	}
	if req.WebhookURL == "" {
		req.WebhookURL = s.cfg.PublicURL
	}
	return req, nil
}

// handlePayout is POST /v1/payouts. The provider does not show the
// withdrawal body, so it is passed through as a canonical JSON object.
func (s *server) handlePayout(w http.ResponseWriter, r *http.Request) {
	body, err := s.readBody(w, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	m, err := decodeObject(body, payoutKeys)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	moid, err := s.payoutRequest(m)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.run(w, r, gatewayCall{
		kind:            store.AttemptPayout,
		merchantOrderID: moid,
		request:         m,
		key:             func(string) string { return orderKey(moid) },
		do: func(ctx context.Context) callResult {
			req, err := canonicalJSON(m)
			if err != nil {
				return callResult{err: err}
			}
			raw, err := s.deps.Provider.CreateWithdrawal(ctx, req)
			if err != nil {
				return callResult{err: err}
			}
			res := callResult{response: raw}
			if o, derr := provider.DecodeOrder(raw); derr == nil && o.MerchantOrderID == moid {
				res.obs = s.observation(o, raw)
			} else {
				// The answer's shape is not documented; get-status will
				// tell the order's state.
				res.watch = &store.Watch{MerchantOrderID: moid, Type: provider.TypePayout,
					Reason: "payout created through the gateway; its answer is not an order"}
			}
			return res
		},
	})
}

// payoutKeys are the keys of a withdrawal body that orderd reads.
var payoutKeys = func() *provider.KeySchema {
	money := &provider.KeySchema{Keys: []string{"amount", "currency"}}
	return &provider.KeySchema{
		Keys:    []string{"merchantOrderId", "amount", "invoice", "currency", "returnUrl", "webhookUrl"},
		Objects: map[string]*provider.KeySchema{"amount": money, "invoice": money},
	}
}()

// payoutRequest validates a withdrawal body in place (filling webhookUrl)
// and returns its merchantOrderId.
func (s *server) payoutRequest(m map[string]any) (string, error) {
	var v fieldErrors
	moid, ok := m["merchantOrderId"].(string)
	if _, present := m["merchantOrderId"]; present && !ok {
		v.add("merchantOrderId", "must be a string")
	} else {
		v.identifier("merchantOrderId", moid)
	}
	if a, present := m["amount"]; present {
		switch a := a.(type) {
		case string:
			v.amount("amount", a)
		case map[string]any:
			v.moneyObject("amount", a)
		default:
			v.add("amount", "must be a decimal number in a string or an {amount, currency} object")
		}
	}
	if inv, present := m["invoice"]; present {
		if obj, ok := inv.(map[string]any); ok {
			v.moneyObject("invoice", obj)
		} else {
			v.add("invoice", "must be an {amount, currency} object")
		}
	}
	if c, present := m["currency"]; present {
		if cs, ok := c.(string); ok {
			v.currency("currency", cs)
		} else {
			v.add("currency", "must be a string")
		}
	}
	for _, f := range []string{"returnUrl", "webhookUrl"} {
		switch u := m[f].(type) {
		case nil:
		case string:
			v.url(f, u)
		default:
			v.add(f, "must be a string")
		}
	}
	if err := v.err(); err != nil {
		return "", err
	}
	if u, _ := m["webhookUrl"].(string); u == "" && s.cfg.PublicURL != "" {
		m["webhookUrl"] = s.cfg.PublicURL
	}
	return moid, nil
}

// moneyObject checks an {amount, currency} object of a pass-through body.
func (v *fieldErrors) moneyObject(prefix string, m map[string]any) {
	amount, ok := m["amount"].(string)
	if _, present := m["amount"]; present && !ok {
		v.add(prefix+".amount", "must be a decimal number in a string, like \"10.50\"")
	} else {
		v.amount(prefix+".amount", amount)
	}
	currency, ok := m["currency"].(string)
	if _, present := m["currency"]; present && !ok {
		v.add(prefix+".currency", "must be a string")
	} else {
		v.currency(prefix+".currency", currency)
	}
}

// refundBody is the provider's refund/create body.
type refundBody struct {
	Amount          string `json:"amount"`
	RefundReason    string `json:"refundReason"`
	ID              string `json:"id"`
	MerchantOrderID string `json:"merchantOrderId"`
}

// handleRefund is POST /v1/refunds.
func (s *server) handleRefund(w http.ResponseWriter, r *http.Request) {
	hk, err := headerKey(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var b refundBody
	if err := s.decodeBody(w, r, &b); err != nil {
		s.fail(w, r, err)
		return
	}
	var v fieldErrors
	amount := v.amount("amount", b.Amount)
	v.text("refundReason", b.RefundReason, 1024)
	if b.ID == "" && b.MerchantOrderID == "" {
		v.add("merchantOrderId", "merchantOrderId or id is required")
	}
	v.uuid("id", b.ID)
	if b.MerchantOrderID != "" {
		v.identifier("merchantOrderId", b.MerchantOrderID)
	}
	if err := v.err(); err != nil {
		s.fail(w, r, err)
		return
	}
	req := provider.RefundRequest{Amount: amount, RefundReason: b.RefundReason,
		ID: strings.ToLower(b.ID), MerchantOrderID: b.MerchantOrderID}
	s.run(w, r, gatewayCall{
		kind:            store.AttemptRefund,
		merchantOrderID: b.MerchantOrderID,
		request:         req,
		key: func(hash string) string {
			switch {
			case hk != "":
				return "refund:key:" + hk
			case req.MerchantOrderID != "":
				return "refund:" + req.MerchantOrderID + ":" + hash
			default:
				return "refund:id:" + req.ID + ":" + hash
			}
		},
		do: func(ctx context.Context) callResult {
			o, raw, err := s.deps.Provider.CreateRefund(ctx, req)
			if err != nil {
				return callResult{err: err}
			}
			// The answer shows the refund, not the order's whole state:
			// the refunded order is polled instead of applied from it.
			return callResult{response: raw, watch: &store.Watch{MerchantOrderID: o.MerchantOrderID,
				ProviderOrderID: o.ID, Type: o.Type, Reason: "refund created through the gateway"}}
		},
	})
}

// requisiteBody is the provider's client-requisite/create body.
type requisiteBody struct {
	Client *struct {
		ID string `json:"id"`
	} `json:"client"`
	Currency              string  `json:"currency"`
	ConversionCurrency    *string `json:"conversionCurrency"`
	MerchantOrderIDPrefix string  `json:"merchantOrderIdPrefix"`
	Type                  string  `json:"type"`
	Attributes            *struct {
		BlockchainNetwork *string `json:"blockchainNetwork"`
		RoutingKey        *string `json:"routingKey"`
	} `json:"attributes"`
	WebhookURL string `json:"webhookUrl"`
}

// handleRequisite is POST /v1/requisites.
func (s *server) handleRequisite(w http.ResponseWriter, r *http.Request) {
	hk, err := headerKey(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var b requisiteBody
	if err := s.decodeBody(w, r, &b); err != nil {
		s.fail(w, r, err)
		return
	}
	var v fieldErrors
	req := provider.RequisiteRequest{
		Currency:              b.Currency,
		MerchantOrderIDPrefix: b.MerchantOrderIDPrefix,
		Type:                  b.Type,
		WebhookURL:            b.WebhookURL,
	}
	if b.Client != nil {
		req.Client.ID = b.Client.ID
	}
	v.identifier("client.id", req.Client.ID)
	v.currency("currency", b.Currency)
	if b.ConversionCurrency != nil {
		req.ConversionCurrency = *b.ConversionCurrency
		v.optionalCurrency("conversionCurrency", req.ConversionCurrency)
	}
	v.text("merchantOrderIdPrefix", b.MerchantOrderIDPrefix, 64)
	v.oneOf("type", b.Type, provider.RequisiteLongTerm, provider.RequisiteShortTerm)
	v.url("webhookUrl", b.WebhookURL)
	if a := b.Attributes; a != nil {
		attrs := provider.RequisiteAttributes{}
		if a.BlockchainNetwork != nil {
			attrs.BlockchainNetwork = *a.BlockchainNetwork
			v.text("attributes.blockchainNetwork", attrs.BlockchainNetwork, maxIDLength)
		}
		if a.RoutingKey != nil {
			attrs.RoutingKey = *a.RoutingKey
			v.text("attributes.routingKey", attrs.RoutingKey, maxIDLength)
		}
		if attrs != (provider.RequisiteAttributes{}) {
			req.Attributes = &attrs
		}
	}
	if err := v.err(); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.WebhookURL == "" {
		req.WebhookURL = s.cfg.PublicURL
	}
	s.run(w, r, gatewayCall{
		kind:    store.AttemptRequisite,
		request: req,
		key: func(hash string) string {
			if hk != "" {
				return "requisite:key:" + hk
			}
			return "requisite:" + hash
		},
		do: func(ctx context.Context) callResult {
			rq, raw, err := s.deps.Provider.CreateRequisite(ctx, req)
			if err != nil {
				return callResult{err: err}
			}
			// Deposits to the requisite create orders by themselves; the
			// reconciler sweeps it so that no deposit goes unnoticed.
			return callResult{response: raw, requisite: &store.Requisite{ID: rq.ID, Currency: req.Currency,
				Source: store.RequisiteFromGateway}}
		},
	})
}

// handleRequisiteDeactivate is POST /v1/requisites/deactivate.
func (s *server) handleRequisiteDeactivate(w http.ResponseWriter, r *http.Request) {
	var b struct {
		ID string `json:"id"`
	}
	if err := s.decodeBody(w, r, &b); err != nil {
		s.fail(w, r, err)
		return
	}
	var v fieldErrors
	if v.required("id", b.ID) {
		v.uuid("id", b.ID)
	}
	if err := v.err(); err != nil {
		s.fail(w, r, err)
		return
	}
	id := strings.ToLower(b.ID)
	s.run(w, r, gatewayCall{
		kind: store.AttemptRequisiteDeactivate,
		request: struct {
			ID string `json:"id"`
		}{id},
		key: func(string) string { return store.RequisiteDeactivateKey(id) },
		do: func(ctx context.Context) callResult {
			raw, err := s.deps.Provider.DeactivateRequisite(ctx, id)
			if provider.ErrorCode(err) == provider.CodeWalletNotFound {
				// The provider does not know the id (registered by
				// mistake through /v1/watch, say): its answer stands,
				// and orderd stops sweeping it after one last sweep.
				return callResult{err: err, deactivated: id}
			}
			if err != nil {
				return callResult{err: err}
			}
			return callResult{response: raw, deactivated: id}
		},
	})
}

// observation is a created order as the one write path takes it.
func (s *server) observation(o *provider.Order, raw json.RawMessage) *store.Observation {
	return &store.Observation{Source: store.SourceGateway, Order: o, Raw: raw, ObservedAt: s.now()}
}
