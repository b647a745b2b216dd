package provider_test

import (
	"encoding/json"
	"testing"

	"orderd/provider"
)

// completedOrder is a webhook body as the provider sends it for a completed
// payin with a partial refund.
const completedOrder = `{"id":"3351231c-514a-4336-aadc-8e45ab5bd4f5","merchantOrderId":"demo-7126-0001","type":"payin",` +
	`"createdAt":"2026-11-22T00:25:26.218152+00:00","status":"completed","rejectReason":null,"merchantSourceWallet":null,` +
	`"merchantTargetWallet":{"amount":"465.25","currency":"brl"},"transactions":[{"id":"5494942f-ca69-4b90-ac33-d0baa4665dea",` +
	`"type":"payin","status":"completed","authorized":{"amount":"474.75","currency":"brl"},"merchantWallet":{"amount":"465.25","currency":"brl"},` +
	`"counterpartyInfo":null,"paymentInfo":null,"createdAt":"2026-11-22T00:25:26.218152Z","completedAt":"2026-11-22T00:25:29.233419Z","rejectReason":null},` +
	`{"id":"6494942f-ca69-4b90-ac33-d0baa4665dea","type":"refund","status":"completed","amount":{"amount":"100.00","currency":"brl"},` +
	`"createdAt":"2026-11-22T00:26:26Z","completedAt":"2026-11-22T00:26:29Z","rejectReason":null}]}`

// BenchmarkDecodeOrder measures the webhook hot path's decode and
// fingerprint, beside a plain encoding/json decode of the same body into a
// map (the ceiling: what any decoder must at least scan). The body has no
// unknown field, so DecodeOrder reads it in its one strict pass; the
// unknown-fields case measures the general path it falls back to.
func BenchmarkDecodeOrder(b *testing.B) {
	body := []byte(completedOrder)
	b.Run("DecodeOrder+Fingerprint", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			o, err := provider.DecodeOrder(body)
			if err != nil {
				b.Fatal(err)
			}
			_ = o.Fingerprint()
		}
	})
	b.Run("ceiling-map", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var m map[string]any
			if err := json.Unmarshal(body, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("DecodeOrder", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := provider.DecodeOrder(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	// An order with fields this package does not know (kept in Extra): the
	// uncommon case. The fast pass refuses it and the general path, which
	// collects them, decodes it again.
	unknown := []byte(futureOrder)
	b.Run("DecodeOrder-unknown-fields", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := provider.DecodeOrder(unknown); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkOrder_Fingerprint measures the hand-written canonical encoding
// beside the encoding/json one it replaced (referenceFingerprint), on the
// same decoded order.
func BenchmarkOrder_Fingerprint(b *testing.B) {
	o, err := provider.DecodeOrder([]byte(completedOrder))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("hand-written", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = o.Fingerprint()
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = referenceFingerprint(o)
		}
	})
}
