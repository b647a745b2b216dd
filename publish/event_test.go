package publish_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"orderd/publish"
	"orderd/store"
)

// orderJSON is an order as the provider formats it, with spacing and a
// field orderd does not know, which must reach consumers untouched.
const orderJSON = `{"id": "ord-1", "merchantOrderId": "m-1", "type": "payin", "status": "completed",
 "note": "<&>", "merchantTargetWallet": {"amount": "5.00", "currency": "USD"}}`

func TestEncodeEvent(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 30, 45, 123000000, time.FixedZone("X", 3600))
	tests := []struct {
		name        string
		ev          store.OutboxEvent
		wantSubject string
		wantExt     map[string]string
	}{
		{
			name: "order event",
			ev: store.OutboxEvent{
				Seq: 1, ID: strings.Repeat("ab", 32), Type: "order.completed",
				Subject: "orders.payin.completed", EventSubject: "ord-1", Time: at,
				MerchantOrderID: "m-1", LearnedVia: store.SourceWebhook, Data: json.RawMessage(orderJSON),
			},
			wantSubject: "acme.orderd.orders.payin.completed",
			wantExt:     map[string]string{"merchantorderid": "m-1", "learnedvia": "webhook"},
		},
		{
			name: "finding event without order attributes",
			ev: store.OutboxEvent{
				Seq: 2, ID: strings.Repeat("cd", 32), Type: "reconcile.balance_drift",
				Subject: "reconcile.balance_drift", EventSubject: "USD", Time: at,
				Data: json.RawMessage(`{"kind":"balance_drift","currency":"USD","drift":"0.10"}`),
			},
			wantSubject: "acme.orderd.reconcile.balance_drift",
			wantExt:     map[string]string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			subject, payload, err := publish.EncodeEvent(tt.ev, "acme.orderd", "urn:orderd:test")
			if err != nil {
				t.Fatalf("EncodeEvent: %v", err)
			}
			if subject != tt.wantSubject {
				t.Errorf("subject = %q, want %q", subject, tt.wantSubject)
			}
			var ce cloudevents.Event
			if err := ce.UnmarshalJSON(payload); err != nil {
				t.Fatalf("not a CloudEvent: %v\n%s", err, payload)
			}
			if err := ce.Validate(); err != nil {
				t.Fatalf("invalid CloudEvent: %v", err)
			}
			if ce.SpecVersion() != "1.0" || ce.ID() != tt.ev.ID || ce.Source() != "urn:orderd:test" ||
				ce.Type() != tt.ev.Type || ce.Subject() != tt.ev.EventSubject || ce.DataContentType() != "application/json" {
				t.Errorf("attributes = %s", ce.String())
			}
			if !ce.Time().Equal(at) {
				t.Errorf("time = %s, want %s", ce.Time(), at)
			}
			if string(ce.Data()) != string(tt.ev.Data) {
				t.Errorf("data changed:\n got %s\nwant %s", ce.Data(), tt.ev.Data)
			}
			ext := ce.Extensions()
			if len(ext) != len(tt.wantExt) {
				t.Errorf("extensions = %v, want %v", ext, tt.wantExt)
			}
			for k, v := range tt.wantExt {
				if ext[k] != v {
					t.Errorf("extension %s = %v, want %q", k, ext[k], v)
				}
			}
		})
	}
}

func TestEncodeEvent_Invalid(t *testing.T) {
	good := store.OutboxEvent{
		Seq: 7, ID: "id-7", Type: "order.processing", Subject: "orders.payin.processing",
		EventSubject: "ord-7", Time: time.Now(), Data: json.RawMessage(`{"id":"ord-7"}`),
	}
	tests := []struct {
		name   string
		change func(*store.OutboxEvent)
		want   string
	}{
		{"empty id", func(e *store.OutboxEvent) { e.ID = "" }, "id is empty"},
		{"empty type", func(e *store.OutboxEvent) { e.Type = "" }, "type is empty"},
		{"data not JSON", func(e *store.OutboxEvent) { e.Data = json.RawMessage(`{"id":`) }, "data is not valid JSON"},
		{"no data", func(e *store.OutboxEvent) { e.Data = nil }, "data is not valid JSON"},
		{"wildcard subject", func(e *store.OutboxEvent) { e.Subject = "orders.*.processing" }, "subject"},
		{"empty subject token", func(e *store.OutboxEvent) { e.Subject = "orders..processing" }, "subject"},
		{"empty subject", func(e *store.OutboxEvent) { e.Subject = "" }, "subject"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := good
			tt.change(&ev)
			_, _, err := publish.EncodeEvent(ev, "orderd", "orderd")
			if !errors.Is(err, publish.ErrInvalidEvent) {
				t.Fatalf("err = %v, want ErrInvalidEvent", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %q, want it to name %q", err, tt.want)
			}
		})
	}
	if _, _, err := publish.EncodeEvent(good, "orderd", ""); err == nil || !strings.Contains(err.Error(), "source") {
		t.Errorf("empty source: err = %v, want it to name the source", err)
	}
}

func TestValidatePrefix(t *testing.T) {
	tests := []struct {
		prefix string
		ok     bool
	}{
		{"orderd", true},
		{"acme.orderd", true},
		{"Shop-1_eu", true},
		{"", false},
		{"orderd.", false},
		{".orderd", false},
		{"order d", false},
		{"orderd.>", false},
		{"orders.*", false},
		{"ordérd", false},
	}
	for _, tt := range tests {
		t.Run(tt.prefix, func(t *testing.T) {
			err := publish.ValidatePrefix(tt.prefix)
			if (err == nil) != tt.ok {
				t.Fatalf("ValidatePrefix(%q) = %v, want ok=%v", tt.prefix, err, tt.ok)
			}
		})
	}
}
