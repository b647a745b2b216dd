package publish

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"orderd/internal/jsonenc"
	"orderd/store"
)

// DefaultPrefix is the subject prefix used when none is configured.
const DefaultPrefix = "orderd"

// SpecVersion is the CloudEvents version of every event orderd publishes.
const SpecVersion = "1.0"

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
// omitted when empty (finding events have neither), like subject and time.
// Errors wrap ErrInvalidEvent and name the offending field.
//
// The envelope is written by hand, attribute by attribute in the order a
// reader meets them, with strings escaped exactly as encoding/json escapes
// them: the relay encodes every event, and reflection was most of its cost.
func EncodeEvent(ev store.OutboxEvent, prefix, source string) (subject string, payload []byte, err error) {
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
	// The attributes are short; 256 bytes covers them and the time.
	b := make([]byte, 0, 256+len(ev.ID)+len(source)+len(ev.Type)+len(ev.EventSubject)+
		len(ev.MerchantOrderID)+len(ev.LearnedVia)+len(ev.Data))
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
	if ev.MerchantOrderID != "" {
		b = append(b, `,"merchantorderid":`...)
		b = jsonenc.AppendString(b, ev.MerchantOrderID)
	}
	if ev.LearnedVia != "" {
		b = append(b, `,"learnedvia":`...)
		b = jsonenc.AppendString(b, string(ev.LearnedVia))
	}
	b = append(b, `,"data":`...)
	b = append(b, ev.Data...)
	b = append(b, '}')
	return prefix + "." + ev.Subject, b, nil
}
