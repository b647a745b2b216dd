package provider

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"time"

	"orderd/internal/jsonenc"
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
//
// The canonical JSON is, byte for byte, what encoding/json wrote for it
// when this function used it (fingerprints are part of stored event ids and
// must never change); it is written by hand because it is computed for every
// webhook:
//
//	{"id":…,"merchantOrderId":…,"type":…,"status":…,"rejectReason":null|…,
//	 "merchantSourceWallet":null|["<amount>","<currency>"],"merchantTargetWallet":…,
//	 "transactions":[{"id":…,"type":…,"status":…,"authorized":null|[…],
//	   "merchantWallet":…,"amount":…,"completedAt":"<RFC 3339 UTC>"|"","rejectReason":…},…]}
func (o *Order) Fingerprint() string {
	// Each transaction's canonical form goes into one scratch buffer;
	// spans index it, since appending may move it.
	type span struct {
		id         string
		start, end int
	}
	// The buffers start on the stack, sized for an order with a few
	// transactions; a larger order grows them onto the heap.
	var scratchBuf [1536]byte
	var txsBuf [4]span
	scratch := scratchBuf[:0]
	txs := txsBuf[:0]
	for i := range o.Transactions {
		t := &o.Transactions[i]
		start := len(scratch)
		scratch = appendCanonicalTx(scratch, t)
		txs = append(txs, span{id: t.ID, start: start, end: len(scratch)})
	}
	// Sort by id; transactions that share an id (which the provider should
	// not send) are ordered by their whole canonical form, so the input's
	// order never matters.
	slices.SortFunc(txs, func(a, b span) int {
		if c := strings.Compare(a.id, b.id); c != 0 {
			return c
		}
		return bytes.Compare(scratch[a.start:a.end], scratch[b.start:b.end])
	})
	var bBuf [2048]byte
	b := bBuf[:0]
	b = append(b, `{"id":`...)
	b = jsonenc.AppendString(b, o.ID)
	b = append(b, `,"merchantOrderId":`...)
	b = jsonenc.AppendString(b, o.MerchantOrderID)
	b = append(b, `,"type":`...)
	b = jsonenc.AppendString(b, string(o.Type))
	b = append(b, `,"status":`...)
	b = jsonenc.AppendString(b, string(o.Status))
	b = append(b, `,"rejectReason":`...)
	b = appendOptString(b, o.RejectReason)
	b = append(b, `,"merchantSourceWallet":`...)
	b = appendCanonicalMoney(b, o.MerchantSourceWallet)
	b = append(b, `,"merchantTargetWallet":`...)
	b = appendCanonicalMoney(b, o.MerchantTargetWallet)
	b = append(b, `,"transactions":[`...)
	for i, t := range txs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, scratch[t.start:t.end]...)
	}
	b = append(b, "]}"...)
	sum := sha256.Sum256(b)
	var out [2 * sha256.Size]byte
	hex.Encode(out[:], sum[:])
	return string(out[:])
}

// appendCanonicalTx appends a transaction's canonical JSON.
func appendCanonicalTx(b []byte, t *Transaction) []byte {
	b = append(b, `{"id":`...)
	b = jsonenc.AppendString(b, t.ID)
	b = append(b, `,"type":`...)
	b = jsonenc.AppendString(b, t.Type)
	b = append(b, `,"status":`...)
	b = jsonenc.AppendString(b, string(t.Status))
	b = append(b, `,"authorized":`...)
	b = appendCanonicalMoney(b, t.Authorized)
	b = append(b, `,"merchantWallet":`...)
	b = appendCanonicalMoney(b, t.MerchantWallet)
	b = append(b, `,"amount":`...)
	b = appendCanonicalMoney(b, t.Amount)
	b = append(b, `,"completedAt":"`...)
	if !t.CompletedAt.IsZero() {
		// RFC 3339 needs no escaping.
		b = t.CompletedAt.UTC().AppendFormat(b, time.RFC3339Nano)
	}
	b = append(b, `","rejectReason":`...)
	b = appendOptString(b, t.RejectReason)
	return append(b, '}')
}

func appendOptString(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return jsonenc.AppendString(b, *s)
}

// appendCanonicalMoney appends null or ["<normalised amount>","<currency>"].
func appendCanonicalMoney(b []byte, m *Money) []byte {
	if m == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	b = jsonenc.AppendString(b, NormalizeAmount(m.Amount))
	b = append(b, ',')
	b = jsonenc.AppendString(b, m.Currency)
	return append(b, ']')
}
