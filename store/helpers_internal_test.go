package store

import (
	"testing"
	"time"

	"orderd/provider"
)

// processingBody is the webhook body of a processing payin.
func processingBody(id, merchantOrderID string) []byte {
	return []byte(`{"id":"` + id + `","merchantOrderId":"` + merchantOrderID + `","type":"payin",` +
		`"createdAt":"2026-03-01T12:00:00+00:00","status":"processing","rejectReason":null}`)
}

// webhookObs is raw as a webhook delivery observed now.
func webhookObs(t *testing.T, raw []byte) Observation {
	t.Helper()
	o, err := provider.DecodeOrder(raw)
	if err != nil {
		t.Fatal(err)
	}
	return Observation{Source: SourceWebhook, Order: o, Raw: raw, ObservedAt: time.Now(), Delivery: &Delivery{RemoteAddr: "127.0.0.1:1"}}
}
