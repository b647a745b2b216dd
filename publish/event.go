package publish

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

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

// envelope is the CloudEvent without its data. The field order is the order
// in which a reader meets the attributes; data is appended by hand so that
// it reaches consumers byte for byte as the provider sent it (json.Marshal
// would compact and HTML-escape a RawMessage).
type envelope struct {
	SpecVersion     string `json:"specversion"`
	ID              string `json:"id"`
	Source          string `json:"source"`
	Type            string `json:"type"`
	Subject         string `json:"subject,omitempty"`
	Time            string `json:"time,omitempty"`
	DataContentType string `json:"datacontenttype"`
	MerchantOrderID string `json:"merchantorderid,omitempty"`
	LearnedVia      string `json:"learnedvia,omitempty"`
}

// EncodeEvent turns an outbox row into the NATS subject it is published on
// (prefix + "." + ev.Subject) and a CloudEvents 1.0 event in structured JSON
// mode. The event's data is ev.Data verbatim; merchantorderid and learnedvia
// are omitted when empty (finding events have neither). Errors wrap
// ErrInvalidEvent and name the offending field.
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
	env := envelope{
		SpecVersion:     SpecVersion,
		ID:              ev.ID,
		Source:          source,
		Type:            ev.Type,
		Subject:         ev.EventSubject,
		DataContentType: "application/json",
		MerchantOrderID: ev.MerchantOrderID,
		LearnedVia:      string(ev.LearnedVia),
	}
	if !ev.Time.IsZero() {
		env.Time = ev.Time.UTC().Format(time.RFC3339Nano)
	}
	head, err := json.Marshal(env)
	if err != nil {
		return "", nil, fmt.Errorf("%w: %s: %v", ErrInvalidEvent, ev.ID, err)
	}
	payload = make([]byte, 0, len(head)+len(`,"data":`)+len(ev.Data))
	payload = append(payload, head[:len(head)-1]...) // drop the closing brace
	payload = append(payload, `,"data":`...)
	payload = append(payload, ev.Data...)
	payload = append(payload, '}')
	return prefix + "." + ev.Subject, payload, nil
}
