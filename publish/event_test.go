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
		wantSchema  string
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
			wantSchema:  publish.DefaultSchemaURL + "#/components/schemas/Order",
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
			wantSchema:  publish.DefaultSchemaURL + "#/components/schemas/BalanceDriftFinding",
			wantExt:     map[string]string{},
		}, {
			name: "traced order event",
			ev: store.OutboxEvent{
				Seq: 3, ID: strings.Repeat("ef", 32), Type: "order.completed",
				Subject: "orders.payin.completed", EventSubject: "ord-1", Time: at,
				MerchantOrderID: "m-1", LearnedVia: store.SourceWebhook, Data: json.RawMessage(orderJSON),
				Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
			},
			wantSubject: "acme.orderd.orders.payin.completed",
			wantSchema:  publish.DefaultSchemaURL + "#/components/schemas/Order",
			wantExt: map[string]string{"merchantorderid": "m-1", "learnedvia": "webhook",
				"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			subject, payload, err := publish.EncodeEvent(tt.ev, "acme.orderd", "urn:orderd:test", publish.DefaultSchemaURL)
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
			if ce.DataSchema() != tt.wantSchema {
				t.Errorf("dataschema = %q, want %q", ce.DataSchema(), tt.wantSchema)
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
			_, _, err := publish.EncodeEvent(ev, "orderd", "orderd", publish.DefaultSchemaURL)
			if !errors.Is(err, publish.ErrInvalidEvent) {
				t.Fatalf("err = %v, want ErrInvalidEvent", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %q, want it to name %q", err, tt.want)
			}
		})
	}
	if _, _, err := publish.EncodeEvent(good, "orderd", "", publish.DefaultSchemaURL); err == nil || !strings.Contains(err.Error(), "source") {
		t.Errorf("empty source: err = %v, want it to name the source", err)
	}
}

// referenceEvent is the event as json.Marshal writes the envelope, the way
// EncodeEvent wrote it before it wrote it by hand: the bytes must not
// change, so that consumers and tests comparing events see the same ones.
func referenceEvent(t testing.TB, ev store.OutboxEvent, source string) []byte {
	t.Helper()
	env := struct {
		SpecVersion     string `json:"specversion"`
		ID              string `json:"id"`
		Source          string `json:"source"`
		Type            string `json:"type"`
		Subject         string `json:"subject,omitempty"`
		Time            string `json:"time,omitempty"`
		DataContentType string `json:"datacontenttype"`
		DataSchema      string `json:"dataschema,omitempty"`
		MerchantOrderID string `json:"merchantorderid,omitempty"`
		LearnedVia      string `json:"learnedvia,omitempty"`
	}{"1.0", ev.ID, source, ev.Type, ev.EventSubject, "", "application/json", "", ev.MerchantOrderID, string(ev.LearnedVia)}
	if name := publish.SchemaName(ev.Type); name != "" {
		env.DataSchema = publish.DefaultSchemaURL + "#/components/schemas/" + name
	}
	if !ev.Time.IsZero() {
		env.Time = ev.Time.UTC().Format(time.RFC3339Nano)
	}
	head, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return append(append(append(head[:len(head)-1], `,"data":`...), ev.Data...), '}')
}

func FuzzEncodeEvent_matchesMarshal(f *testing.F) {
	f.Add("id-1", "order.completed", "ord-<1>", "m&1", "webhook", "urn:orderd", int64(1772368245123000000))
	f.Add("\u2028\"", "t", "", "", "", "s\xff", int64(0))
	f.Fuzz(func(t *testing.T, id, typ, subject, moid, via, source string, nanos int64) {
		if id == "" || typ == "" || source == "" {
			return // refused; TestEncodeEvent_Invalid covers those
		}
		ev := store.OutboxEvent{
			Seq: 1, ID: id, Type: typ, Subject: "orders.payin.completed", EventSubject: subject,
			MerchantOrderID: moid, LearnedVia: store.Source(via), Data: json.RawMessage(orderJSON),
		}
		if nanos != 0 {
			ev.Time = time.Unix(0, nanos)
		}
		_, got, err := publish.EncodeEvent(ev, "orderd", source, publish.DefaultSchemaURL)
		if err != nil {
			t.Fatal(err)
		}
		if want := referenceEvent(t, ev, source); string(got) != string(want) {
			t.Errorf("EncodeEvent =\n%s\nwant\n%s", got, want)
		}
	})
}

func TestSchemaName(t *testing.T) {
	tests := []struct{ typ, want string }{
		{"order.completed", "Order"},
		{"order.processing", "Order"},
		{"order.updated", "Order"},
		{"order.not_created", "NotCreatedAttempt"},
		{"reconcile.stuck_order", "StuckOrderFinding"},
		{"reconcile.mismatch", "MismatchFinding"},
		{"reconcile.event_not_published", "EventNotPublishedFinding"},
		{"order.", ""},
		{"reconcile.", ""},
		{"reconcile.Bad Kind", ""},
		{"test", ""},
	}
	for _, tt := range tests {
		t.Run(tt.typ, func(t *testing.T) {
			if got := publish.SchemaName(tt.typ); got != tt.want {
				t.Errorf("SchemaName(%q) = %q, want %q", tt.typ, got, tt.want)
			}
		})
	}
}

func TestValidateSchemaURL(t *testing.T) {
	tests := []struct {
		url string
		ok  bool
	}{
		{publish.DefaultSchemaURL, true},
		{"https://events.example.com/orderd/asyncapi.yaml", true},
		{"urn:orderd:events", true},
		{"", false},
		{"/v1/asyncapi.yaml", false},
		{"https://example.com/asyncapi.yaml#/components", false},
		{"https://example.com/" + strings.Repeat("a", publish.MaxSchemaURLLen), false},
		{"http://[::1", false},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			err := publish.ValidateSchemaURL(tt.url)
			if (err == nil) != tt.ok {
				t.Fatalf("ValidateSchemaURL(%q) = %v, want ok=%v", tt.url, err, tt.ok)
			}
		})
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

// BenchmarkEncodeEvent measures the hand-written envelope beside the
// json.Marshal one it replaced (referenceEvent), for an order event.
func BenchmarkEncodeEvent(b *testing.B) {
	ev := store.OutboxEvent{
		Seq: 1, ID: strings.Repeat("ab", 32), Type: "order.completed",
		Subject: "orders.payin.completed", EventSubject: "3351231c-514a-4336-aadc-8e45ab5bd4f5", Time: time.Now(),
		MerchantOrderID: "demo-7126-0001", LearnedVia: store.SourceWebhook, Data: json.RawMessage(strings.ReplaceAll(orderJSON, "\n", "")),
	}
	b.Run("hand-written", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := publish.EncodeEvent(ev, "orderd", "orderd", publish.DefaultSchemaURL); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json-marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			// EncodeEvent's own checks, then the envelope as it was.
			if !json.Valid(ev.Data) {
				b.Fatal("invalid data")
			}
			_ = referenceEvent(b, ev, "orderd")
		}
	})
}
