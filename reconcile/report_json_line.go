package reconcile

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"

	"orderd/provider"
)

// lineEncoder writes a report line's JSON exactly as encoding/json writes
// jsonLine (with HTML escaping off, and provider.Money's own MarshalJSON,
// which escapes its currency for HTML), without reflection: at a million
// lines the reflective encoder and its re-validation of every
// MarshalJSON's output cost more than reading the lines. A string that is
// not plain printable ASCII goes through encoding/json itself, so the two
// agree on every escape by construction; the tests hold them to each
// other.
type lineEncoder struct {
	buf  []byte
	slow bytes.Buffer
	enc  *json.Encoder
}

func newLineEncoder() *lineEncoder {
	e := &lineEncoder{}
	e.enc = json.NewEncoder(&e.slow)
	e.enc.SetEscapeHTML(false)
	return e
}

// line returns l's JSON; the bytes are valid until the next call.
func (e *lineEncoder) line(l *Line) []byte {
	b := e.buf[:0]
	b = append(b, `{"id":`...)
	b = e.str(b, l.OrderID, false)
	b = append(b, `,"merchantOrderId":`...)
	b = e.str(b, l.MerchantOrderID, false)
	b = append(b, `,"type":`...)
	b = e.str(b, l.Type, false)
	b = append(b, `,"status":`...)
	b = e.str(b, l.Status, false)
	b = append(b, `,"membership":`...)
	b = e.str(b, l.Membership, false)
	b = append(b, `,"createdAt":`...)
	b = appendTime(b, l.CreatedAt)
	b = append(b, `,"completedAt":`...)
	b = appendTime(b, l.CompletedAt)
	b = append(b, `,"authorized":`...)
	b = e.money(b, l.Authorized)
	b = append(b, `,"requested":`...)
	b = e.money(b, l.Requested)
	b = append(b, `,"merchant":`...)
	b = e.money(b, l.Merchant)
	b = append(b, `,"fee":`...)
	b = e.money(b, l.Fee)
	b = append(b, `,"refunded":[`...)
	for i, r := range l.Refunded {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"amount":`...)
		// An amount is plain ASCII: digits, a point, a minus sign.
		b = append(b, '"')
		b = appendAmount(b, r.Money.Amount)
		b = append(b, '"')
		b = append(b, `,"currency":`...)
		b = e.str(b, r.Money.Currency, false)
		b = append(b, `,"count":`...)
		b = strconv.AppendInt(b, int64(r.Count), 10)
		b = append(b, '}')
	}
	b = append(b, `],"learnedVia":`...)
	b = e.str(b, l.LearnedVia, false)
	b = append(b, `,"openFindings":[`...)
	for i, k := range l.OpenFindings {
		if i > 0 {
			b = append(b, ',')
		}
		b = e.str(b, k, false)
	}
	b = append(b, "]}"...)
	e.buf = b
	return b
}

func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = appendStamp(b, t)
	return append(b, '"')
}

// money is provider.Money's MarshalJSON: the amount as written, the
// currency as json.Marshal writes it (HTML characters escaped).
func (e *lineEncoder) money(b []byte, m *provider.Money) []byte {
	if m == nil {
		return append(b, "null"...)
	}
	b = append(b, `{"amount":"`...)
	b = appendAmount(b, m.Amount)
	b = append(b, `","currency":`...)
	b = e.str(b, m.Currency, true)
	return append(b, '}')
}

// str appends s as a JSON string: plain printable ASCII as it is, anything
// else as encoding/json writes it (escapeHTML as json.Marshal, else as an
// Encoder with SetEscapeHTML(false)).
func (e *lineEncoder) str(b []byte, s string, escapeHTML bool) []byte {
	plain := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || escapeHTML && (c == '<' || c == '>' || c == '&') {
			plain = false
			break
		}
	}
	if plain {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	if escapeHTML {
		q, _ := json.Marshal(s) // a string always marshals
		return append(b, q...)
	}
	e.slow.Reset()
	_ = e.enc.Encode(s)
	return append(b, bytes.TrimSuffix(e.slow.Bytes(), []byte("\n"))...)
}
