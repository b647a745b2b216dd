package providertest

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"orderd/provider"
)

// order is the fake's record of one order. o is the state get-status shows;
// the other fields are what the provider knows but does not show.
type order struct {
	o          provider.Order
	seq        int
	amount     provider.Money // invoice amount of a payin, amount of a payout
	net        decimal.Decimal
	auth       *provider.Auth
	webhookURL string
	returnURL  string
	requisite  *requisite
	refunds    map[string]bool // refund transaction id → full refund
	// delivered is closed when the order's latest webhook delivery ends.
	delivered chan struct{}
}

// requisite is the fake's record of one client requisite.
type requisite struct {
	r          provider.Requisite
	clientID   string
	currency   string
	kind       string
	prefix     string
	webhookURL string
	active     bool
	orders     []*order
}

const (
	rejectBelowMin     = "deposit amount is below the requisite's minAmount"
	rejectThirdParty   = "rejected by a third party"
	rejectControl      = "rejected"
	longTermRequisite  = 365 * 24 * time.Hour
	shortTermRequisite = 24 * time.Hour
	authLifetime       = 30 * time.Minute
)

// newOrderSpec describes an order to create; it has passed validation.
type newOrderSpec struct {
	merchantOrderID string
	typ             provider.OrderType
	amount          provider.Money
	webhookURL      string
	returnURL       string
	requisite       *requisite
	// rejectReason, when set, creates the order already rejected, as a
	// third party refusing the payment at creation does.
	rejectReason string
}

// now returns the server's clock in UTC at the precision the wire carries.
func (s *Server) now() time.Time {
	return s.opts.Now().UTC().Truncate(time.Microsecond)
}

func (s *Server) newUUIDLocked() string {
	hi, lo := s.rng.Uint64(), s.rng.Uint64()
	var b [16]byte
	for i := range 8 {
		b[i] = byte(hi >> (56 - 8*i))
		b[8+i] = byte(lo >> (56 - 8*i))
	}
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// newClabeLocked makes an 18-digit CLABE with a valid check digit: bank
// code, branch, an 11-digit account and the weighted (3, 7, 1) check digit.
func (s *Server) newClabeLocked() string {
	var b strings.Builder
	b.WriteString("646180")
	for range 11 {
		b.WriteByte(byte('0' + s.rng.IntN(10)))
	}
	return b.String() + string(clabeCheckDigit(b.String()))
}

// clabeCheckDigit computes the 18th digit of a CLABE from its first 17.
func clabeCheckDigit(first17 string) byte {
	weights := [3]int{3, 7, 1}
	sum := 0
	for i := 0; i < len(first17); i++ {
		sum += (int(first17[i]-'0') * weights[i%3]) % 10
	}
	return byte('0' + (10-sum%10)%10)
}

// cents gives d at least two decimal places, as the provider writes money.
func cents(d decimal.Decimal) decimal.Decimal {
	if d.Exponent() > -2 {
		return decimal.RequireFromString(d.StringFixed(2))
	}
	return d
}

func moneyPtr(d decimal.Decimal, currency string) *provider.Money {
	return &provider.Money{Amount: cents(d), Currency: currency}
}

func strPtr(s string) *string { return &s }

// nullJSON is how the fake fills counterpartyInfo and paymentInfo, whose
// content the spec does not show.
func nullJSON() json.RawMessage { return json.RawMessage("null") }

// createOrderLocked stores a new order in processing (or rejected, when the
// spec says so) and returns it. The caller has checked uniqueness.
func (s *Server) createOrderLocked(spec newOrderSpec) *order {
	now := s.now()
	s.seq++
	ord := &order{
		seq:        s.seq,
		amount:     provider.Money{Amount: cents(spec.amount.Amount), Currency: spec.amount.Currency},
		webhookURL: spec.webhookURL,
		returnURL:  spec.returnURL,
		requisite:  spec.requisite,
		refunds:    map[string]bool{},
	}
	ord.o = provider.Order{
		ID:              s.newUUIDLocked(),
		MerchantOrderID: spec.merchantOrderID,
		Type:            spec.typ,
		CreatedAt:       provider.Time{Time: now},
		Status:          provider.StatusProcessing,
	}
	ord.net = ord.amount.Amount
	if spec.typ == provider.TypePayin {
		fee := ord.amount.Amount.Mul(s.feePercent).Div(decimal.NewFromInt(100)).Round(2)
		ord.net = cents(ord.amount.Amount.Sub(fee))
	}
	ord.o.Transactions = []provider.Transaction{{
		ID:               s.newUUIDLocked(),
		Type:             string(spec.typ),
		Status:           provider.StatusProcessing,
		Authorized:       moneyPtr(ord.amount.Amount, ord.amount.Currency),
		MerchantWallet:   moneyPtr(ord.net, ord.amount.Currency),
		CounterpartyInfo: nullJSON(),
		PaymentInfo:      nullJSON(),
		CreatedAt:        provider.Time{Time: now},
	}}
	if spec.typ == provider.TypePayin && spec.requisite == nil {
		ord.auth = &provider.Auth{
			Type:        "pixDynamicQrCode",
			RedirectURL: s.url + "/checkout/" + ord.o.ID,
			Code:        "00020126580014br.gov.bcb.pix0136" + ord.o.ID + "5204000053039865802BR6304",
			ExpiresAt:   provider.Time{Time: now.Add(authLifetime)},
		}
	}
	s.orders[ord.o.MerchantOrderID] = ord
	s.byID[ord.o.ID] = ord
	s.changedLocked()
	if spec.requisite != nil {
		spec.requisite.orders = append(spec.requisite.orders, ord)
	}
	if spec.typ == provider.TypePayout {
		s.reserve(ord.amount.Currency, ord.amount.Amount)
	}
	if spec.rejectReason != "" {
		s.finishLocked(ord, provider.StatusRejected, spec.rejectReason)
		return ord
	}
	s.scheduleAutoCompleteLocked(ord.o.MerchantOrderID, "")
	return ord
}

// finishLocked moves a processing order to its final status, moves the
// balance and sends the webhook.
func (s *Server) finishLocked(ord *order, status provider.Status, reason string) {
	prev := renderOrder(&ord.o)
	now := s.now()
	s.changedLocked()
	tx := &ord.o.Transactions[0]
	ord.o.Status = status
	tx.Status = status
	ccy := ord.amount.Currency
	switch status {
	case provider.StatusCompleted:
		tx.CompletedAt = provider.Time{Time: now}
		switch ord.o.Type {
		case provider.TypePayin:
			ord.o.MerchantTargetWallet = moneyPtr(ord.net, ccy)
			s.balances[ccy] = s.balances[ccy].Add(ord.net)
			if r := ord.requisite; r != nil {
				r.r.ExpiresAt = provider.Time{Time: now.Add(r.lifetime())}
			}
		case provider.TypePayout:
			ord.o.MerchantSourceWallet = moneyPtr(ord.amount.Amount, ccy)
			s.balances[ccy] = s.balances[ccy].Sub(ord.amount.Amount)
		}
	case provider.StatusRejected:
		ord.o.RejectReason = strPtr(reason)
		tx.RejectReason = strPtr(reason)
	}
	if ord.o.Type == provider.TypePayout {
		s.reserve(ccy, ord.amount.Amount.Neg())
	}
	s.notifyLocked(ord, WebhookFinal, prev)
}

func (r *requisite) lifetime() time.Duration {
	if r.kind == provider.RequisiteShortTerm {
		return shortTermRequisite
	}
	return longTermRequisite
}

// reserve moves money that pending payouts and refunds hold, so that two of
// them cannot together spend more than the balance.
func (s *Server) reserve(currency string, d decimal.Decimal) {
	s.reserved[currency] = s.reserved[currency].Add(d)
}

// available is the balance minus what pending debits hold.
func (s *Server) available(currency string) decimal.Decimal {
	return s.balances[currency].Sub(s.reserved[currency])
}

// refundableLocked is the original amount minus every refund not rejected.
func refundable(ord *order) decimal.Decimal {
	left := ord.amount.Amount
	for _, t := range ord.o.Transactions {
		if t.Type == "refund" && t.Status != provider.StatusRejected && t.Amount != nil {
			left = left.Sub(t.Amount.Amount)
		}
	}
	return left
}

// createRefundLocked adds a refund transaction in status new. The caller
// has checked the refund rules.
func (s *Server) createRefundLocked(ord *order, amount decimal.Decimal) *provider.Transaction {
	full := amount.Equal(ord.amount.Amount)
	tx := provider.Transaction{
		ID:               s.newUUIDLocked(),
		Type:             "refund",
		Status:           provider.StatusNew,
		Amount:           moneyPtr(amount, ord.amount.Currency),
		CounterpartyInfo: nullJSON(),
		PaymentInfo:      nullJSON(),
		CreatedAt:        provider.Time{Time: s.now()},
	}
	ord.o.Transactions = append(ord.o.Transactions, tx)
	ord.refunds[tx.ID] = full
	s.changedLocked()
	s.reserve(ord.amount.Currency, amount)
	s.scheduleAutoCompleteLocked(ord.o.MerchantOrderID, tx.ID)
	return &ord.o.Transactions[len(ord.o.Transactions)-1]
}

// refundTx finds a refund transaction of ord.
func refundTx(ord *order, refundID string) *provider.Transaction {
	if _, ok := ord.refunds[refundID]; !ok {
		return nil
	}
	for i := range ord.o.Transactions {
		if ord.o.Transactions[i].ID == refundID {
			return &ord.o.Transactions[i]
		}
	}
	return nil
}

// moveRefundLocked applies one step of a refund's state machine. A full
// refund goes new → completed|rejected; a partial one new → processing →
// completed|rejected.
func (s *Server) moveRefundLocked(ord *order, refundID string, to provider.Status, reason string) error {
	tx := refundTx(ord, refundID)
	if tx == nil {
		return fmt.Errorf("%w: refund %s of order %s", ErrNotFound, refundID, ord.o.MerchantOrderID)
	}
	full := ord.refunds[refundID]
	from := tx.Status
	switch {
	case from == provider.StatusNew && to == provider.StatusProcessing && !full,
		from == provider.StatusNew && to.IsFinal() && full,
		from == provider.StatusProcessing && to.IsFinal():
	default:
		kind := "partial"
		if full {
			kind = "full"
		}
		return fmt.Errorf("%w: %s refund %s cannot go from %s to %s", ErrConflict, kind, refundID, from, to)
	}
	tx.Status = to
	s.changedLocked()
	if !to.IsFinal() {
		return nil
	}
	ccy := ord.amount.Currency
	s.reserve(ccy, tx.Amount.Amount.Neg())
	switch to {
	case provider.StatusCompleted:
		tx.CompletedAt = provider.Time{Time: s.now()}
		s.balances[ccy] = s.balances[ccy].Sub(tx.Amount.Amount)
	case provider.StatusRejected:
		tx.RejectReason = strPtr(reason)
	}
	if s.opts.RefundWebhooks {
		s.notifyLocked(ord, WebhookRefund, nil)
	}
	return nil
}

// cloneOrder deep-copies an order so callers cannot reach the server's state.
func cloneOrder(o *provider.Order) provider.Order {
	c := *o
	c.RejectReason = cloneStr(o.RejectReason)
	c.MerchantSourceWallet = cloneMoney(o.MerchantSourceWallet)
	c.MerchantTargetWallet = cloneMoney(o.MerchantTargetWallet)
	c.Transactions = make([]provider.Transaction, len(o.Transactions))
	for i, t := range o.Transactions {
		t.Authorized = cloneMoney(t.Authorized)
		t.MerchantWallet = cloneMoney(t.MerchantWallet)
		t.Amount = cloneMoney(t.Amount)
		t.RejectReason = cloneStr(t.RejectReason)
		t.CounterpartyInfo = nullJSON()
		t.PaymentInfo = nullJSON()
		c.Transactions[i] = t
	}
	c.Extra = nil
	return c
}

func cloneStr(p *string) *string {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func cloneMoney(m *provider.Money) *provider.Money {
	if m == nil {
		return nil
	}
	v := *m
	return &v
}

// depositOrderID names the order a deposit creates: the requisite's prefix
// and a sequence number unique within the server.
func (s *Server) depositOrderID(r *requisite) string {
	prefix := r.prefix
	if prefix == "" {
		prefix = "dep-"
	}
	for {
		s.depositSeq++
		id := prefix + r.r.ID[:8] + "-" + strconv.Itoa(s.depositSeq)
		if _, taken := s.orders[id]; !taken {
			return id
		}
	}
}
