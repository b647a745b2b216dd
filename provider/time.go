package provider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// Time is a provider timestamp. The provider writes ISO 8601 with either a
// "Z" suffix or a "+00:00" offset; both parse. It marshals back in RFC 3339
// with nanoseconds in UTC. The zero Time marshals as null.
type Time struct {
	time.Time
}

// timeLayouts are tried in order. RFC 3339 covers "Z" and "+00:00" with or
// without fractional seconds; the others cover timestamps without a zone,
// which are read as UTC.
var timeLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04:05.999999999",
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999",
}

// ParseTime parses a provider timestamp. Instants whose UTC year falls
// outside 0000–9999 are refused: RFC 3339 cannot write them back.
func ParseTime(s string) (Time, error) {
	for _, layout := range timeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			if y := t.UTC().Year(); y < 0 || y > 9999 {
				return Time{}, &timeError{s: s, outOfRange: true}
			}
			return Time{t.UTC()}, nil
		}
	}
	return Time{}, &timeError{s: s}
}

// timeError is ParseTime's refusal of s.
type timeError struct {
	s          string
	outOfRange bool
}

func (e *timeError) Error() string { return "timestamp " + e.problem() }

// problem is the error without naming the timestamp, for a caller that
// names the field instead.
func (e *timeError) problem() string {
	if e.outOfRange {
		return quoteShort(e.s) + " is out of range"
	}
	return quoteShort(e.s) + " is not ISO 8601"
}

// MarshalJSON writes the time in RFC 3339 UTC, or null when zero.
func (t Time) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte("null"), nil
	}
	return json.Marshal(t.UTC().Format(time.RFC3339Nano))
}

// UnmarshalJSON reads a timestamp string or null.
func (t *Time) UnmarshalJSON(data []byte) error {
	if bytes.Equal(data, []byte("null")) {
		*t = Time{}
		return nil
	}
	s, ok := plainJSONString(data)
	if !ok {
		// A variable of its own: one whose address json.Unmarshal takes
		// lives on the heap, and s would then cost an allocation on every
		// call, the plain case included.
		var u string
		if err := json.Unmarshal(data, &u); err != nil {
			return fmt.Errorf("timestamp must be a string, got %s", truncate(data))
		}
		s = u
	}
	if s == "" {
		*t = Time{}
		return nil
	}
	p, err := ParseTime(s)
	if err != nil {
		return err
	}
	*t = p
	return nil
}

// plainJSONString returns the text of data when data is exactly a JSON
// string of printable ASCII without escapes, as timestamps, amounts and
// currencies are written; such a string decodes to its bytes as they are.
// For anything else it reports false and the caller uses encoding/json.
func plainJSONString(data []byte) (string, bool) {
	if len(data) < 2 || data[0] != '"' || data[len(data)-1] != '"' {
		return "", false
	}
	if n := plainStringLen(data[1:]); n != len(data)-2 {
		return "", false
	}
	return string(data[1 : len(data)-1]), true
}

// plainStringLen returns how many bytes at the start of b are printable
// ASCII other than a quote or a backslash: what a JSON string can hold
// without escapes and without being decoded.
func plainStringLen(b []byte) int {
	for i, c := range b {
		if c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			return i
		}
	}
	return len(b)
}
