package providertest

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"orderd/provider"
)

type moneyRequest struct {
	Amount   string `json:"amount"`
	Currency string `json:"currency"`
}

type paymentRequest struct {
	MerchantOrderID string        `json:"merchantOrderId"`
	Invoice         *moneyRequest `json:"invoice"`
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

func (s *Server) handleBalances(c *apiCall) (any, *provider.Error) {
	var req struct{}
	if err := decode(c.body, &req); err != nil {
		return nil, err
	}
	return s.Balances(), nil
}

// Balances returns the balance of every currency the server has seen,
// sorted by currency, as the balances endpoint answers them.
func (s *Server) Balances() []provider.Balance {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]provider.Balance, 0, len(s.balances))
	for ccy, d := range s.balances {
		out = append(out, provider.Balance{Currency: ccy, Amount: provider.FormatAmount(cents(d))})
	}
	slices.SortFunc(out, func(a, b provider.Balance) int { return strings.Compare(a.Currency, b.Currency) })
	return out
}

func (s *Server) handlePaymentCreate(c *apiCall) (any, *provider.Error) {
	var req paymentRequest
	if err := decode(c.body, &req); err != nil {
		return nil, err
	}
	var v fieldErrors
	v.merchantOrderID("merchantOrderId", req.MerchantOrderID)
	amount := v.money("invoice", req.Invoice)
	v.url("returnUrl", req.ReturnURL)
	v.url("webhookUrl", req.WebhookURL)
	var name, email, phone, taxpayer string
	if cl := req.Client; cl != nil {
		name, email, phone = cl.Name, cl.Email, cl.Phone
		if cl.Taxpayer != nil {
			taxpayer = cl.Taxpayer.Number
		}
	}
	if req.Attributes != nil && req.Attributes.RoutingKey == provider.RoutingKeyExtended {
		v.required("client.name", name)
		v.required("client.email", email)
		v.required("client.phone", phone)
		v.required("client.taxpayer.number", taxpayer)
	}
	if email != "" && !isEmail(email) {
		v.add("client.email", "must be an e-mail address")
	}
	if phone != "" && !isPhone(phone) {
		v.add("client.phone", "must be digits with the country code")
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	spec := newOrderSpec{
		merchantOrderID: req.MerchantOrderID,
		typ:             provider.TypePayin,
		amount:          amount,
		webhookURL:      req.WebhookURL,
		returnURL:       req.ReturnURL,
	}
	if c.fault != nil && c.fault.Kind == RejectAtCreate {
		spec.rejectReason = c.fault.Reason
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ord, perr := s.createLocked(spec)
	if perr != nil {
		return nil, perr
	}
	w := wireCreated{
		ID:              ord.o.ID,
		MerchantOrderID: ord.o.MerchantOrderID,
		Type:            ord.o.Type,
		CreatedAt:       tsOffset(ord.o.CreatedAt),
		Status:          ord.o.Status,
		RejectReason:    ord.o.RejectReason,
	}
	if a := ord.auth; a != nil && ord.o.Status == provider.StatusProcessing {
		w.Auth = &wireAuth{Type: a.Type, RedirectURL: a.RedirectURL, Code: a.Code, ExpiresAt: tsOffset(a.ExpiresAt)}
	}
	return w, nil
}

// createLocked applies the rules every creation passes — a unique
// merchantOrderId, the amount bounds and, for payouts, the balance — and
// creates the order.
func (s *Server) createLocked(spec newOrderSpec) (*order, *provider.Error) {
	if _, dup := s.orders[spec.merchantOrderID]; dup {
		return nil, &provider.Error{Code: provider.CodeOrderAlreadyExists}
	}
	if s.minAmount != nil && spec.amount.Amount.LessThan(*s.minAmount) {
		return nil, &provider.Error{Code: provider.CodeAmountLessThanAllowed}
	}
	if s.maxAmount != nil && spec.amount.Amount.GreaterThan(*s.maxAmount) {
		return nil, &provider.Error{Code: provider.CodeAmountGreaterThanAllowed}
	}
	if spec.typ == provider.TypePayout && spec.rejectReason == "" &&
		s.available(spec.amount.Currency).LessThan(spec.amount.Amount) {
		return nil, &provider.Error{Code: provider.CodeNotEnoughBalance}
	}
	return s.createOrderLocked(spec), nil
}

func (s *Server) handleGetStatus(c *apiCall) (any, *provider.Error) {
	var req struct {
		MerchantOrderID string `json:"merchantOrderId"`
	}
	if err := decode(c.body, &req); err != nil {
		return nil, err
	}
	var v fieldErrors
	v.required("merchantOrderId", req.MerchantOrderID)
	if err := v.err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ord, ok := s.orders[req.MerchantOrderID]
	if !ok {
		return nil, &provider.Error{Code: provider.CodeOrderNotFound}
	}
	return renderOrder(&ord.o), nil
}

func (s *Server) handleRefundCreate(c *apiCall) (any, *provider.Error) {
	var req struct {
		Amount          string `json:"amount"`
		RefundReason    string `json:"refundReason"`
		ID              string `json:"id"`
		MerchantOrderID string `json:"merchantOrderId"`
	}
	if err := decode(c.body, &req); err != nil {
		return nil, err
	}
	var v fieldErrors
	amount := v.amount("amount", req.Amount)
	v.maxLen("refundReason", req.RefundReason, 255)
	switch {
	case req.ID == "" && req.MerchantOrderID == "":
		v.add("id", "id or merchantOrderId is required")
		v.add("merchantOrderId", "id or merchantOrderId is required")
	case req.ID != "" && !isUUID(req.ID):
		v.add("id", "must be a UUID")
	}
	if err := v.err(); err != nil {
		return nil, err
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	var ord *order
	if req.ID != "" {
		ord = s.byID[strings.ToLower(req.ID)]
		if ord != nil && req.MerchantOrderID != "" && ord.o.MerchantOrderID != req.MerchantOrderID {
			ord = nil
		}
	} else {
		ord = s.orders[req.MerchantOrderID]
	}
	if ord == nil {
		return nil, &provider.Error{Code: provider.CodeOrderNotFound}
	}
	if ord.o.Type != provider.TypePayin || ord.o.Status != provider.StatusCompleted {
		return nil, &provider.Error{Code: provider.CodeOperationNotSupported}
	}
	if left := refundable(ord); amount.GreaterThan(left) {
		return nil, validationError("amount", "must not exceed the refundable amount "+provider.FormatAmount(cents(left)))
	}
	if s.available(ord.amount.Currency).LessThan(amount) {
		return nil, &provider.Error{Code: provider.CodeNotEnoughBalance}
	}
	tx := s.createRefundLocked(ord, amount)
	return wireRefundCreated{
		ID:              ord.o.ID,
		MerchantOrderID: ord.o.MerchantOrderID,
		Type:            ord.o.Type,
		CreatedAt:       tsOffset(ord.o.CreatedAt),
		Status:          ord.o.Status,
		RefundTransaction: wireRefund{
			ID: tx.ID, Status: tx.Status, Type: tx.Type, Amount: *tx.Amount, CreatedAt: tsZulu(tx.CreatedAt),
		},
	}, nil
}

func (s *Server) handleWithdrawalCreate(c *apiCall) (any, *provider.Error) {
	var req struct {
		MerchantOrderID string        `json:"merchantOrderId"`
		Amount          *moneyRequest `json:"amount"`
		Invoice         *moneyRequest `json:"invoice"`
		WebhookURL      string        `json:"webhookUrl"`
	}
	if err := decode(c.body, &req); err != nil {
		return nil, err
	}
	var v fieldErrors
	v.merchantOrderID("merchantOrderId", req.MerchantOrderID)
	var amount provider.Money
	switch {
	case req.Amount != nil:
		amount = v.money("amount", req.Amount)
	case req.Invoice != nil:
		amount = v.money("invoice", req.Invoice)
	default:
		v.add("amount", "is required")
	}
	v.url("webhookUrl", req.WebhookURL)
	if err := v.err(); err != nil {
		return nil, err
	}
	spec := newOrderSpec{
		merchantOrderID: req.MerchantOrderID,
		typ:             provider.TypePayout,
		amount:          amount,
		webhookURL:      req.WebhookURL,
	}
	if c.fault != nil && c.fault.Kind == RejectAtCreate {
		spec.rejectReason = c.fault.Reason
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ord, perr := s.createLocked(spec)
	if perr != nil {
		return nil, perr
	}
	return renderOrder(&ord.o), nil
}

func (s *Server) handleRequisiteCreate(c *apiCall) (any, *provider.Error) {
	var req struct {
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
	if err := decode(c.body, &req); err != nil {
		return nil, err
	}
	var v fieldErrors
	clientID := ""
	if req.Client != nil {
		clientID = req.Client.ID
	}
	if v.required("client.id", clientID) {
		v.maxLen("client.id", clientID, 255)
	}
	v.currency("currency", req.Currency)
	if cc := req.ConversionCurrency; cc != nil && *cc != "" && !isCurrency(*cc) {
		v.add("conversionCurrency", "must be a lowercase three-letter ISO code")
	}
	v.maxLen("merchantOrderIdPrefix", req.MerchantOrderIDPrefix, 64)
	kind := req.Type
	switch kind {
	case "":
		kind = provider.RequisiteLongTerm
	case provider.RequisiteLongTerm, provider.RequisiteShortTerm:
	default:
		v.add("type", "must be long_term or short_term")
	}
	v.url("webhookUrl", req.WebhookURL)
	if err := v.err(); err != nil {
		return nil, err
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	// One client keeps one requisite per currency and kind: asking again
	// returns the one still active.
	for _, r := range s.requisites {
		if r.clientID == clientID && r.currency == req.Currency && r.kind == kind && r.activeAt(now) {
			return toWireRequisite(&r.r), nil
		}
	}
	r := &requisite{
		clientID:   clientID,
		currency:   req.Currency,
		kind:       kind,
		prefix:     req.MerchantOrderIDPrefix,
		webhookURL: req.WebhookURL,
		active:     true,
	}
	r.r = provider.Requisite{
		ID:        s.newUUIDLocked(),
		Requisite: provider.RequisiteValue{Clabe: s.newClabeLocked(), Type: "clabe"},
		ExpiresAt: provider.Time{Time: now.Add(r.lifetime())},
		MinAmount: provider.FormatAmount(cents(s.reqMin)),
	}
	s.requisites[r.r.ID] = r
	s.changedLocked()
	return toWireRequisite(&r.r), nil
}

func (r *requisite) activeAt(now time.Time) bool {
	return r.active && now.Before(r.r.ExpiresAt.Time)
}

func (s *Server) handleRequisiteDeactivate(c *apiCall) (any, *provider.Error) {
	var req struct {
		ID string `json:"id"`
	}
	if err := decode(c.body, &req); err != nil {
		return nil, err
	}
	var v fieldErrors
	v.required("id", req.ID)
	if err := v.err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.requisites[strings.ToLower(req.ID)]
	if !ok {
		return nil, &provider.Error{Code: provider.CodeWalletNotFound}
	}
	if now := s.now(); r.activeAt(now) {
		r.r.ExpiresAt = provider.Time{Time: now}
	}
	r.active = false
	s.changedLocked()
	return toWireRequisite(&r.r), nil
}

// Paging limits of get-orders-list; the spec shows neither.
const (
	defaultListLimit = 50
	maxListLimit     = 100
)

func (s *Server) handleRequisiteOrders(c *apiCall) (any, *provider.Error) {
	var req struct {
		ID            string  `json:"id"`
		CreatedAtFrom *string `json:"createdAtFrom"`
		CreatedAtTo   *string `json:"createdAtTo"`
		Limit         *int    `json:"limit"`
		Offset        *int    `json:"offset"`
	}
	if err := decode(c.body, &req); err != nil {
		return nil, err
	}
	var v fieldErrors
	v.required("id", req.ID)
	var from, to time.Time
	parse := func(field string, p *string) time.Time {
		if p == nil || *p == "" {
			return time.Time{}
		}
		t, err := provider.ParseTime(*p)
		if err != nil {
			v.add(field, "must be an ISO 8601 timestamp")
		}
		return t.Time
	}
	from = parse("createdAtFrom", req.CreatedAtFrom)
	to = parse("createdAtTo", req.CreatedAtTo)
	if !from.IsZero() && !to.IsZero() && to.Before(from) {
		v.add("createdAtTo", "must not be before createdAtFrom")
	}
	limit, offset := defaultListLimit, 0
	if req.Limit != nil {
		limit = *req.Limit
		if limit < 1 || limit > maxListLimit {
			v.add("limit", "must be between 1 and "+strconv.Itoa(maxListLimit))
		}
	}
	if req.Offset != nil {
		offset = *req.Offset
		if offset < 0 {
			v.add("offset", "must not be negative")
		}
	}
	if err := v.err(); err != nil {
		return nil, err
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.requisites[strings.ToLower(req.ID)]
	if !ok {
		return nil, &provider.Error{Code: provider.CodeWalletNotFound}
	}
	var match []*order
	for _, o := range r.orders {
		t := o.o.CreatedAt.Time
		if (!from.IsZero() && t.Before(from)) || (!to.IsZero() && !t.Before(to)) {
			continue
		}
		match = append(match, o)
	}
	list := wireOrdersList{Orders: []json.RawMessage{}, Total: len(match)}
	for i := offset; i < len(match) && i < offset+limit; i++ {
		list.Orders = append(list.Orders, renderOrder(&match[i].o))
	}
	return list, nil
}
