package reconcile

import (
	"time"

	"github.com/shopspring/decimal"

	"orderd/provider"
)

// The report's order lines format two amounts and two times each; over a
// million lines, provider.FormatAmount and time.Format (a string each,
// and decimal's big.Int arithmetic) cost more than writing the lines.
// These append into the caller's buffer instead, and write exactly what
// those write (TestAppendAmount_matchesFormatAmount,
// TestAppendStamp_matchesFormat).

// appendAmount appends provider.FormatAmount(d): the amount with as many
// decimal places as it was written with. A coefficient of up to 18 digits
// with up to 18 places is written by hand; anything else by FormatAmount.
func appendAmount(b []byte, d decimal.Decimal) []byte {
	exp := d.Exponent()
	if exp >= 0 || exp < -18 || d.NumDigits() > 18 {
		return append(b, provider.FormatAmount(d)...)
	}
	c := d.CoefficientInt64()
	if c < 0 {
		b = append(b, '-')
		c = -c
	}
	// The coefficient's digits, zero-padded to one more than the places:
	// "0.05", not ".05".
	places := int(-exp)
	var digits [20]byte
	i := len(digits)
	for c > 0 || len(digits)-i <= places {
		i--
		digits[i] = byte('0' + c%10)
		c /= 10
	}
	intLen := len(digits) - i - places
	b = append(b, digits[i:i+intLen]...)
	b = append(b, '.')
	return append(b, digits[i+intLen:]...)
}

// appendStamp appends t in TimeLayout, UTC; a zero time appends nothing.
func appendStamp(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return b
	}
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(b, TimeLayout)
	}
	hour, minute, sec := t.Clock()
	b = append4(b, year)
	b = append(b, '-')
	b = append2(b, int(month))
	b = append(b, '-')
	b = append2(b, day)
	b = append(b, 'T')
	b = append2(b, hour)
	b = append(b, ':')
	b = append2(b, minute)
	b = append(b, ':')
	b = append2(b, sec)
	ms := t.Nanosecond() / 1e6
	b = append(b, '.', byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10))
	return append(b, 'Z')
}

func append2(b []byte, v int) []byte { return append(b, byte('0'+v/10), byte('0'+v%10)) }

func append4(b []byte, v int) []byte {
	return append(b, byte('0'+v/1000), byte('0'+v/100%10), byte('0'+v/10%10), byte('0'+v%10))
}
