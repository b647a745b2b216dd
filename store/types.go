package store

import (
	"encoding/json"
	"net/http"
	"time"

	"orderd/provider"
)

// Source says how orderd learned an order's state.
type Source string

// Sources of an observation. They are the learnedvia attribute of events.
const (
	SourceWebhook Source = "webhook"
	SourcePoll    Source = "poll"
	SourceGateway Source = "gateway"
)

// Observation is one sighting of an order's state, from any source. Every
// change of an order goes through Store.Apply with one of these.
type Observation struct {
	Source Source
	// Order is the decoded order; Raw is the same order exactly as received
	// (the webhook body, or the data of a get-status or create response).
	// Raw is what events carry as data, so consumers see the provider's own
	// shape.
	Order *provider.Order
	Raw   []byte
	// Delivery describes the HTTP delivery of a webhook; nil for polls and
	// gateway answers.
	Delivery *Delivery
	// ObservedAt is when orderd received the state.
	ObservedAt time.Time
}

// Delivery is what orderd keeps of an authenticated webhook delivery besides
// its body.
type Delivery struct {
	Header     http.Header
	RemoteAddr string
}

// Outcome is what Apply decided about an observation.
type Outcome string

// Outcomes of Apply.
const (
	// OutcomeNew: the order was not known; it is stored and an event queued.
	OutcomeNew Outcome = "new"
	// OutcomeChanged: the order's state changed; an event is queued.
	OutcomeChanged Outcome = "changed"
	// OutcomeDuplicate: the same state was already known; nothing changed
	// but the repeat is recorded.
	OutcomeDuplicate Outcome = "duplicate"
	// OutcomeStale: an older state than the one known (for example a
	// processing webhook after the order completed); kept in history,
	// otherwise ignored.
	OutcomeStale Outcome = "stale"
)

// Result reports what Apply did.
type Result struct {
	Outcome Outcome
	// EventID is the id of the queued event when Outcome is New or Changed.
	EventID string
	// Previous is the status the order had before, empty when new.
	Previous provider.Status
}

// OutboxEvent is one queued event, ready to be published. Subject is
// relative to the configured subject prefix ("orders.payin.completed"); the
// publisher prepends the prefix and wraps the fields in a CloudEvent.
type OutboxEvent struct {
	Seq             int64
	ID              string
	Type            string
	Subject         string
	EventSubject    string
	Time            time.Time
	MerchantOrderID string
	LearnedVia      Source
	Data            json.RawMessage
	// Traceparent is the W3C traceparent of the span that caused the
	// event (a webhook, a job, a gateway creation), empty when that was
	// not traced. The relay passes it on; the store keeps it beside the
	// row (outbox_traces), not in it.
	Traceparent string
}
