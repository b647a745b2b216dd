package eventschema_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"orderd/api"
	"orderd/provider"
	"orderd/publish"
	"orderd/store"
	"orderd/test/support/eventschema"
)

const orderJSON = `{"id":"0b7e6f4e-1f8a-4c55-9d1e-2a3b4c5d6e7f","merchantOrderId":"m-1","type":"payin",
"createdAt":"2026-03-01T10:00:00Z","status":"completed","rejectReason":null,"merchantSourceWallet":null,
"merchantTargetWallet":{"amount":"9.70","currency":"brl"},"transactions":[{"id":"t-1","type":"payin",
"status":"completed","authorized":{"amount":"10.00","currency":"brl"},"merchantWallet":{"amount":"9.70",
"currency":"brl"},"counterpartyInfo":{"anything":1},"paymentInfo":null,"createdAt":"2026-03-01T10:00:00Z",
"completedAt":"2026-03-01T10:01:00Z","rejectReason":null}]}`

func encode(t *testing.T, ev store.OutboxEvent) []byte {
	t.Helper()
	if ev.ID == "" {
		ev.ID = store.EventID(ev.Type, string(ev.Data))
	}
	ev.Time = time.Date(2026, 3, 1, 10, 1, 0, 0, time.UTC)
	_, payload, err := publish.EncodeEvent(ev, "orderd", "orderd", publish.DefaultSchemaURL)
	if err != nil {
		t.Fatal(err)
	}
	return payload
}

func orderEvent(t *testing.T, data string) []byte {
	return encode(t, store.OutboxEvent{Type: "order.completed", Subject: "orders.payin.completed",
		EventSubject: "0b7e6f4e", MerchantOrderID: "m-1", LearnedVia: store.SourceWebhook, Data: json.RawMessage(data)})
}

func findingEvent(t *testing.T, detail string) []byte {
	data := `{"id":7,"kind":"stuck_order","key":"o-1","state":"open","status":"open","detail":` + detail +
		`,"foundAt":"2026-03-01T10:01:00Z","trail":[]}`
	return encode(t, store.OutboxEvent{Type: "reconcile.stuck_order", Subject: "reconcile.stuck_order",
		EventSubject: "o-1", Data: json.RawMessage(data)})
}

const stuckDetail = `{"orderId":"o-1","merchantOrderId":"m-1","type":"payin","status":"processing",
"lastChangeAt":"2026-02-28T10:00:00Z","checkAttempts":3,"giveUpAfter":"24h0m0s"}`

func TestValidator_Check(t *testing.T) {
	published, err := eventschema.New(api.AsyncAPI(), eventschema.Published)
	if err != nil {
		t.Fatal(err)
	}
	strict, err := eventschema.New(api.AsyncAPI(), eventschema.Strict)
	if err != nil {
		t.Fatal(err)
	}
	withField := strings.Replace(orderJSON, `"status":"completed"`, `"status":"completed","newField":"x"`, 1)
	tests := []struct {
		name              string
		event             []byte
		published, strict string // "" = valid, else part of the error
	}{
		{"order event", orderEvent(t, orderJSON), "", ""},
		{"order field the document does not name", orderEvent(t, withField), "", "newField"},
		{"amount as a number", orderEvent(t, strings.Replace(orderJSON, `"9.70"`, `9.70`, 1)), "amount", "amount"},
		{"order without id", orderEvent(t, `{"merchantOrderId":"m-1","type":"payin","status":"new"}`), "id", "id"},
		{"finding event", findingEvent(t, stuckDetail), "", ""},
		{"finding detail field the document does not name", findingEvent(t, strings.Replace(stuckDetail, `"checkAttempts":3`, `"checkAttempts":3,"extra":1`, 1)), "extra", "extra"},
		{"finding detail without a required field", findingEvent(t, `{"orderId":"o-1"}`), "missing", "missing"},
		{"order status the document has no message for", encode(t, store.OutboxEvent{Type: "order.expired", Subject: "orders.payin.expired",
			EventSubject: "o", MerchantOrderID: "m", LearnedVia: store.SourcePoll, Data: json.RawMessage(orderJSON)}),
			"", "no message"},
		{"unknown finding kind", encode(t, store.OutboxEvent{Type: "reconcile.new_kind", Subject: "reconcile.new_kind",
			EventSubject: "o-1", Data: json.RawMessage(`{"id":7,"kind":"new_kind","key":"o-1","state":"open","detail":{},"foundAt":"2026-03-01T10:01:00Z"}`)}),
			"no message", "no message"},
		{"order event without merchantorderid", encode(t, store.OutboxEvent{Type: "order.completed", Subject: "orders.payin.completed",
			EventSubject: "o", LearnedVia: store.SourcePoll, Data: json.RawMessage(orderJSON)}), "merchantorderid", "merchantorderid"},
		{"envelope attribute the document does not name", []byte(strings.Replace(string(orderEvent(t, orderJSON)), `"specversion":"1.0"`, `"specversion":"1.0","traceparent":"x"`, 1)), "traceparent", "traceparent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, c := range []struct {
				v    *eventschema.Validator
				want string
				mode string
			}{{published, tt.published, "published"}, {strict, tt.strict, "strict"}} {
				_, err := c.v.Check(tt.event)
				switch {
				case c.want == "" && err != nil:
					t.Errorf("%s: %v", c.mode, err)
				case c.want != "" && err == nil:
					t.Errorf("%s: valid, want an error naming %q", c.mode, c.want)
				case c.want != "" && !strings.Contains(err.Error(), c.want):
					t.Errorf("%s: %v, want it to name %q", c.mode, err, c.want)
				}
			}
		})
	}
}

// TestDocument_namesEveryProviderField fails when provider's order types
// gain a field the document's schema of them does not name: orderd
// republishes the provider's order, so a field orderd decodes is one
// consumers see.
func TestDocument_namesEveryProviderField(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]any `yaml:"properties"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(api.AsyncAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	for name, typ := range map[string]reflect.Type{
		"Order":             reflect.TypeFor[provider.Order](),
		"Transaction":       reflect.TypeFor[provider.Transaction](),
		"RefundTransaction": reflect.TypeFor[provider.RefundTransaction](),
		"Auth":              reflect.TypeFor[provider.Auth](),
	} {
		props := doc.Components.Schemas[name].Properties
		if props == nil {
			t.Errorf("components/schemas/%s has no properties", name)
			continue
		}
		for f := range typ.Fields() {
			tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if tag == "" || tag == "-" {
				continue
			}
			if _, ok := props[tag]; !ok {
				t.Errorf("provider.%s.%s (%q) is not in components/schemas/%s", typ.Name(), f.Name, tag, name)
			}
		}
	}
	// Money is written by hand (MarshalJSON); its two fields are fixed.
	for _, f := range []string{"amount", "currency"} {
		if _, ok := doc.Components.Schemas["Money"].Properties[f]; !ok {
			t.Errorf("components/schemas/Money lacks %s", f)
		}
	}
}
