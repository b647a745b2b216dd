package publish

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"orderd/internal/jsonenc"
	"orderd/store"
)

// DefaultPrefix is the subject prefix used when none is configured.
const DefaultPrefix = "orderd"

// SpecVersion is the CloudEvents version of every event orderd publishes.
const SpecVersion = "1.0"

// DefaultSchemaURL is where the admin listener serves the AsyncAPI document
// of the events at its default address; each event's dataschema is this
// URL (or the configured one) with a fragment naming its data's schema.
const DefaultSchemaURL = "http://127.0.0.1:8081/v1/asyncapi.yaml"

// schemasPointer leads the fragment of every dataschema: the JSON pointer
// to the schemas of the AsyncAPI document (api/asyncapi.yaml).
const schemasPointer = "#/components/schemas/"

// SchemaName is the name, under components/schemas of the AsyncAPI
// document, of the schema of an event type's data: "Order" for every
// order state ("order.<status>", "order.updated"), "NotCreatedAttempt" for
// "order.not_created", and "<Kind>Finding" for "reconcile.<kind>"
// ("reconcile.stuck_order" is "StuckOrderFinding"); empty for a type
// orderd does not make. It is derived from the type alone, when the event
// is encoded, so the outbox rows, their ids and the replicated log stay as
// they were, events queued before an upgrade carry it too, and every
// instance names the same schema.
func SchemaName(eventType string) string {
	switch {
	case eventType == store.EventOrderNotCreated:
		return "NotCreatedAttempt"
	case strings.HasPrefix(eventType, "order.") && len(eventType) > len("order."):
		return "Order"
	case strings.HasPrefix(eventType, "reconcile.") && len(eventType) > len("reconcile."):
		kind := eventType[len("reconcile."):]
		if store.SubjectToken(kind) != kind {
			return "" // not a kind orderd writes (those are subject tokens)
		}
		var b strings.Builder
		for word := range strings.SplitSeq(kind, "_") {
			if word == "" {
				continue
			}
			b.WriteString(strings.ToUpper(word[:1]))
			b.WriteString(word[1:])
		}
		b.WriteString("Finding")
		return b.String()
	}
	return ""
}

// ValidateSchemaURL reports whether u can lead every event's dataschema:
// CloudEvents wants an absolute URI there, and the fragment is orderd's.
func ValidateSchemaURL(u string) error {
	p, err := url.Parse(u)
	switch {
	case err != nil:
		return fmt.Errorf("schema URL: %w", err)
	case !p.IsAbs():
		return fmt.Errorf("schema URL %q is not absolute (it needs a scheme, e.g. https://)", u)
	case strings.Contains(u, "#"):
		return fmt.Errorf("schema URL %q has a fragment; each event adds its own", u)
	case len(u) > MaxSchemaURLLen:
		return fmt.Errorf("schema URL is %d bytes long; at most %d", len(u), MaxSchemaURLLen)
	}
	return nil
}

// MaxSchemaURLLen bounds the schema URL, which every event carries, well
// inside the room EventOverhead leaves for the envelope.
const MaxSchemaURLLen = 512

// ErrInvalidEvent is wrapped by EncodeEvent when an outbox row cannot become
// a CloudEvent. Such a row is a defect of its producer, not a passing fault:
// publishing it again would fail the same way.
var ErrInvalidEvent = errors.New("invalid event")

// ValidatePrefix reports whether prefix can lead every orderd subject: one or
// more dot-separated tokens of letters, digits, '_' and '-'. Wildcards,
// spaces and empty tokens are refused because the stream takes
// "<prefix>.>" and each event goes to "<prefix>.<relative subject>".
func ValidatePrefix(prefix string) error {
	if prefix == "" {
		return errors.New("subject prefix is empty")
	}
	if err := validSubject(prefix); err != nil {
		return fmt.Errorf("subject prefix %q: %w", prefix, err)
	}
	return nil
}

// validSubject checks a (relative) subject token by token.
func validSubject(s string) error {
	for tok := range strings.SplitSeq(s, ".") {
		if tok == "" {
			return errors.New("empty token")
		}
		for _, c := range tok {
			switch {
			case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
			default:
				return fmt.Errorf("token %q has %q (allowed: letters, digits, '_', '-')", tok, c)
			}
		}
	}
	return nil
}

// EncodeEvent turns an outbox row into the NATS subject it is published on
// (prefix + "." + ev.Subject) and a CloudEvents 1.0 event in structured JSON
// mode. The event's data is ev.Data verbatim, so that it reaches consumers
// byte for byte as the provider sent it; merchantorderid and learnedvia are
// omitted when empty (finding events have neither), like subject and time,
// and so is traceparent (the CloudEvents distributed tracing extension:
// the W3C traceparent of what caused the event, when that was traced).
// dataschema is schemaURL with the fragment of the type's schema
// (SchemaName); it is omitted for a type without one, or when schemaURL is
// empty. Errors wrap ErrInvalidEvent and name the offending field.
//
// The envelope is written by hand, attribute by attribute in the order a
// reader meets them, with strings escaped exactly as encoding/json escapes
// them: the relay encodes every event, and reflection was most of its cost.
func EncodeEvent(ev store.OutboxEvent, prefix, source, schemaURL string) (subject string, payload []byte, err error) {
	switch {
	case ev.ID == "":
		return "", nil, fmt.Errorf("%w: seq %d: id is empty", ErrInvalidEvent, ev.Seq)
	case ev.Type == "":
		return "", nil, fmt.Errorf("%w: %s: type is empty", ErrInvalidEvent, ev.ID)
	case source == "":
		return "", nil, fmt.Errorf("%w: %s: source is empty", ErrInvalidEvent, ev.ID)
	case len(ev.Data) == 0 || !json.Valid(ev.Data):
		return "", nil, fmt.Errorf("%w: %s: data is not valid JSON", ErrInvalidEvent, ev.ID)
	}
	if err := validSubject(ev.Subject); err != nil {
		return "", nil, fmt.Errorf("%w: %s: subject %q: %v", ErrInvalidEvent, ev.ID, ev.Subject, err)
	}
	schema := ""
	if schemaURL != "" {
		schema = SchemaName(ev.Type)
	}
	// The attributes are short; 256 bytes covers them and the time.
	b := make([]byte, 0, 256+len(ev.ID)+len(source)+len(ev.Type)+len(ev.EventSubject)+
		len(ev.MerchantOrderID)+len(ev.LearnedVia)+len(schemaURL)+len(schema)+len(ev.Traceparent)+len(ev.Data))
	b = append(b, `{"specversion":"`+SpecVersion+`","id":`...)
	b = jsonenc.AppendString(b, ev.ID)
	b = append(b, `,"source":`...)
	b = jsonenc.AppendString(b, source)
	b = append(b, `,"type":`...)
	b = jsonenc.AppendString(b, ev.Type)
	if ev.EventSubject != "" {
		b = append(b, `,"subject":`...)
		b = jsonenc.AppendString(b, ev.EventSubject)
	}
	if !ev.Time.IsZero() {
		// RFC 3339 needs no escaping.
		b = append(b, `,"time":"`...)
		b = ev.Time.UTC().AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	b = append(b, `,"datacontenttype":"application/json"`...)
	if schema != "" {
		b = append(b, `,"dataschema":`...)
		// The pointer and the name need no escaping ([A-Za-z0-9/#_-]):
		// they go inside the URL's closing quote, with no string built
		// per event.
		b = jsonenc.AppendString(b, schemaURL)
		b = append(b[:len(b)-1], schemasPointer...)
		b = append(b, schema...)
		b = append(b, '"')
	}
	if ev.MerchantOrderID != "" {
		b = append(b, `,"merchantorderid":`...)
		b = jsonenc.AppendString(b, ev.MerchantOrderID)
	}
	if ev.LearnedVia != "" {
		b = append(b, `,"learnedvia":`...)
		b = jsonenc.AppendString(b, string(ev.LearnedVia))
	}
	if ev.Traceparent != "" {
		// The CloudEvents distributed tracing extension: the span that
		// caused the event, for the consumer's own spans.
		b = append(b, `,"traceparent":`...)
		b = jsonenc.AppendString(b, ev.Traceparent)
	}
	b = append(b, `,"data":`...)
	b = append(b, ev.Data...)
	b = append(b, '}')
	return prefix + "." + ev.Subject, b, nil
}
