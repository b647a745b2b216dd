package reconcile

import (
	"context"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// TimeAxis fits a chart's time axis to times within p, as the HTML
// report does, and returns its ends and its tick labels ("time date",
// the date only where it shows, "@end" when right-aligned).
func TimeAxis(p Period, times []time.Time) (from, to time.Time, ticks []string) {
	a := newTimeAxis(p, times)
	for _, t := range a.ticks() {
		s := t.Time
		if t.Date != "" {
			s += " " + t.Date
		}
		if t.Anchor == "end" {
			s += " @end"
		}
		ticks = append(ticks, s)
	}
	return a.from, a.to, ticks
}

// EncodeLine returns l's JSON as the report writes it and as
// encoding/json writes jsonLine, the reference it must equal.
func EncodeLine(l *Line) (fast, reference []byte) {
	fast = append([]byte(nil), newLineEncoder().line(l)...)
	jw := newJSONWriter(nil)
	jw.buf.Reset()
	if err := jw.enc.Encode(newJSONLine(l)); err != nil {
		panic(err)
	}
	return fast, []byte(strings.TrimSuffix(jw.buf.String(), "\n"))
}

// DecodeAmounts decodes raw with the token reader (fastErr is its
// refusal) and with the general decode, for the tests to compare.
func DecodeAmounts(raw []byte) (fast, general any, fastErr, generalErr error) {
	var f, g orderAmounts
	var d amountsDecoder
	fastErr = d.decode(raw, &f)
	generalErr = g.decode(raw)
	// No transactions is no transactions, whether nil or empty.
	for _, a := range []*orderAmounts{&f, &g} {
		if len(a.Transactions) == 0 {
			a.Transactions = nil
		}
	}
	return f, g, fastErr, generalErr
}

// AppendAmount and AppendStamp are the report lines' formatters.
func AppendAmount(b []byte, d decimal.Decimal) []byte { return appendAmount(b, d) }

func AppendStamp(b []byte, t time.Time) []byte { return appendStamp(b, t) }

// Lines calls fn with every line of the report of p, as the reports read
// them.
func Lines(ctx context.Context, r *Reporter, p Period, fn func(*Line) error) error {
	rp, err := r.open(ctx, p)
	if err != nil {
		return err
	}
	defer rp.close()
	return rp.lines(ctx, fn)
}
