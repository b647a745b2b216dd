package providertest

import (
	"fmt"
	"slices"
	"strings"

	"orderd/provider"
)

// NewOrder describes an order that CreateOrder makes as if the merchant had
// called the API itself.
type NewOrder struct {
	MerchantOrderID string
	// Type is payin (the default) or payout.
	Type       provider.OrderType
	Amount     string
	Currency   string
	WebhookURL string
}

// CreateOrder creates an order in processing without going through HTTP,
// under the same rules as the create endpoints. A refusal is a
// *provider.Error with the code the API would answer.
func (s *Server) CreateOrder(n NewOrder) (provider.Order, error) {
	if n.Type == "" {
		n.Type = provider.TypePayin
	}
	var v fieldErrors
	v.merchantOrderID("merchantOrderId", n.MerchantOrderID)
	m := v.money("amount", &moneyRequest{Amount: n.Amount, Currency: n.Currency})
	v.url("webhookUrl", n.WebhookURL)
	if n.Type != provider.TypePayin && n.Type != provider.TypePayout {
		v.add("type", "must be payin or payout")
	}
	if err := v.err(); err != nil {
		return provider.Order{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ord, perr := s.createLocked(newOrderSpec{
		merchantOrderID: n.MerchantOrderID,
		typ:             n.Type,
		amount:          m,
		webhookURL:      n.WebhookURL,
	})
	if perr != nil {
		return provider.Order{}, perr
	}
	return cloneOrder(&ord.o), nil
}

// Complete finishes a processing payin or payout successfully: its
// transaction is completed with completedAt; a payin credits the balance
// with the authorized amount minus the fee (merchantTargetWallet), a payout
// debits it (merchantSourceWallet). The webhook follows.
func (s *Server) Complete(merchantOrderID string) error {
	return s.finish(merchantOrderID, provider.StatusCompleted, "")
}

// Reject finishes a processing order unsuccessfully with reason (default
// "rejected") as its rejectReason. The webhook follows.
func (s *Server) Reject(merchantOrderID, reason string) error {
	if reason == "" {
		reason = rejectControl
	}
	return s.finish(merchantOrderID, provider.StatusRejected, reason)
}

func (s *Server) finish(merchantOrderID string, to provider.Status, reason string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ord, ok := s.orders[merchantOrderID]
	if !ok {
		return fmt.Errorf("%s order %s: %w", to, merchantOrderID, ErrNotFound)
	}
	if ord.o.Status != provider.StatusProcessing {
		return fmt.Errorf("%s order %s: %w: it is %s", to, merchantOrderID, ErrConflict, ord.o.Status)
	}
	s.finishLocked(ord, to, reason)
	return nil
}

// Deposit makes the client of a requisite send amount to it, which creates
// a payin order in processing (Complete or Reject it, or let AutoComplete
// do so) whose webhook goes to the requisite's webhookUrl. A deposit below
// the requisite's minAmount is cancelled: the order is created rejected.
// An unknown requisite is ErrNotFound; an expired or deactivated one is a
// *provider.Error with WALLET_INACTIVE.
func (s *Server) Deposit(requisiteID, amount string) (*provider.Order, error) {
	var v fieldErrors
	d := v.amount("amount", amount)
	if err := v.err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.requisites[strings.ToLower(requisiteID)]
	if !ok {
		return nil, fmt.Errorf("deposit to requisite %s: %w", requisiteID, ErrNotFound)
	}
	if !r.activeAt(s.now()) {
		return nil, &provider.Error{Code: provider.CodeWalletInactive}
	}
	spec := newOrderSpec{
		merchantOrderID: s.depositOrderID(r),
		typ:             provider.TypePayin,
		amount:          provider.Money{Amount: d, Currency: r.currency},
		webhookURL:      r.webhookURL,
		requisite:       r,
	}
	if d.LessThan(s.reqMin) {
		spec.rejectReason = rejectBelowMin
	}
	ord := s.createOrderLocked(spec)
	o := cloneOrder(&ord.o)
	return &o, nil
}

// AdjustBalance moves the balance of currency by delta (a signed numeric
// string) with no order behind it, as a fee correction or a manual
// settlement would: the movement a reconciler must report as drift.
func (s *Server) AdjustBalance(currency, delta string) error {
	if !isCurrency(currency) {
		return fmt.Errorf("adjust balance: currency %q is not a lowercase three-letter ISO code", currency)
	}
	d, err := provider.ParseAmount(delta)
	if err != nil {
		return fmt.Errorf("adjust balance: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.balances[currency] = cents(s.balances[currency].Add(d))
	s.changedLocked()
	return nil
}

// AdvanceRefund moves a partial refund from new to processing.
func (s *Server) AdvanceRefund(merchantOrderID, refundID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ord, ok := s.orders[merchantOrderID]
	if !ok {
		return fmt.Errorf("advance refund of %s: %w", merchantOrderID, ErrNotFound)
	}
	return s.moveRefundLocked(ord, refundID, provider.StatusProcessing, "")
}

// CompleteRefund finishes a refund: completed when ok (the balance is
// debited by the refund amount), rejected otherwise. A partial refund still
// in new passes through processing first, as its state machine requires.
func (s *Server) CompleteRefund(merchantOrderID, refundID string, ok bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ord, found := s.orders[merchantOrderID]
	if !found {
		return fmt.Errorf("complete refund of %s: %w", merchantOrderID, ErrNotFound)
	}
	to, reason := provider.StatusCompleted, ""
	if !ok {
		to, reason = provider.StatusRejected, "refund rejected"
	}
	if tx := refundTx(ord, refundID); tx != nil && tx.Status == provider.StatusNew && !ord.refunds[refundID] {
		if err := s.moveRefundLocked(ord, refundID, provider.StatusProcessing, ""); err != nil {
			return err
		}
	}
	return s.moveRefundLocked(ord, refundID, to, reason)
}

// Order returns a copy of the order's current state, as get-status would
// show it.
func (s *Server) Order(merchantOrderID string) (provider.Order, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ord, ok := s.orders[merchantOrderID]
	if !ok {
		return provider.Order{}, false
	}
	return cloneOrder(&ord.o), true
}

// OrderJSON returns the exact bytes get-status would answer as data for
// the order now.
func (s *Server) OrderJSON(merchantOrderID string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ord, ok := s.orders[merchantOrderID]
	if !ok {
		return nil, false
	}
	return renderOrder(&ord.o), true
}

// Orders returns a copy of every order, oldest first.
func (s *Server) Orders() []provider.Order {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := make([]*order, 0, len(s.orders))
	for _, o := range s.orders {
		list = append(list, o)
	}
	slices.SortFunc(list, func(a, b *order) int { return a.seq - b.seq })
	out := make([]provider.Order, len(list))
	for i, o := range list {
		out[i] = cloneOrder(&o.o)
	}
	return out
}

// Requisite returns a copy of a requisite's current state.
func (s *Server) Requisite(id string) (provider.Requisite, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.requisites[strings.ToLower(id)]
	if !ok {
		return provider.Requisite{}, false
	}
	return r.r, true
}
