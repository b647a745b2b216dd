package provider

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// Fingerprint returns the hex SHA-256 of a canonical JSON of the fields that
// describe the order's state: id, merchantOrderId, type, status,
// rejectReason, the merchant wallets, and for each transaction (sorted by
// id) its id, type, status, amounts, completedAt and rejectReason.
//
// Volatile and create-only fields (auth, createdAt, unknown fields) are left
// out and amounts are normalised ("5" and "5.00" are equal), so a webhook
// and a poll of the same state have the same fingerprint whatever their JSON
// formatting.
func (o *Order) Fingerprint() string {
	c := canonicalOrder{
		ID:              o.ID,
		MerchantOrderID: o.MerchantOrderID,
		Type:            string(o.Type),
		Status:          string(o.Status),
		RejectReason:    o.RejectReason,
		Source:          canonicalMoney(o.MerchantSourceWallet),
		Target:          canonicalMoney(o.MerchantTargetWallet),
		Transactions:    make([]canonicalTx, 0, len(o.Transactions)),
	}
	for _, t := range o.Transactions {
		ct := canonicalTx{
			ID:             t.ID,
			Type:           t.Type,
			Status:         string(t.Status),
			Authorized:     canonicalMoney(t.Authorized),
			MerchantWallet: canonicalMoney(t.MerchantWallet),
			Amount:         canonicalMoney(t.Amount),
			RejectReason:   t.RejectReason,
		}
		if !t.CompletedAt.IsZero() {
			ct.CompletedAt = t.CompletedAt.UTC().Format(time.RFC3339Nano)
		}
		c.Transactions = append(c.Transactions, ct)
	}
	// Sort by id; transactions that share an id (which the provider should
	// not send) are ordered by their whole canonical form, so the input's
	// order never matters.
	slices.SortFunc(c.Transactions, func(a, b canonicalTx) int {
		if c := strings.Compare(a.ID, b.ID); c != 0 {
			return c
		}
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		return bytes.Compare(ja, jb)
	})
	// Marshalling these plain structs cannot fail.
	b, _ := json.Marshal(c)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// The canonical structs fix field order and names; encoding/json writes
// struct fields in declaration order, which makes the output canonical.
type canonicalOrder struct {
	ID              string        `json:"id"`
	MerchantOrderID string        `json:"merchantOrderId"`
	Type            string        `json:"type"`
	Status          string        `json:"status"`
	RejectReason    *string       `json:"rejectReason"`
	Source          *[2]string    `json:"merchantSourceWallet"`
	Target          *[2]string    `json:"merchantTargetWallet"`
	Transactions    []canonicalTx `json:"transactions"`
}

type canonicalTx struct {
	ID             string     `json:"id"`
	Type           string     `json:"type"`
	Status         string     `json:"status"`
	Authorized     *[2]string `json:"authorized"`
	MerchantWallet *[2]string `json:"merchantWallet"`
	Amount         *[2]string `json:"amount"`
	CompletedAt    string     `json:"completedAt"`
	RejectReason   *string    `json:"rejectReason"`
}

func canonicalMoney(m *Money) *[2]string {
	if m == nil {
		return nil
	}
	return &[2]string{NormalizeAmount(m.Amount), m.Currency}
}
