package provider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/shopspring/decimal"
)

// Money is an exact amount in one currency. Amounts travel as numeric strings
// ("5", "0.10") and are never converted to floating point.
type Money struct {
	Amount   decimal.Decimal
	Currency string
}

// NewMoney parses amount as an exact decimal and lowercases currency.
func NewMoney(amount, currency string) (Money, error) {
	d, err := ParseAmount(amount)
	if err != nil {
		return Money{}, err
	}
	return Money{Amount: d, Currency: strings.ToLower(currency)}, nil
}

// MustMoney is NewMoney for constants in tests and examples; it panics on a bad amount.
func MustMoney(amount, currency string) Money {
	m, err := NewMoney(amount, currency)
	if err != nil {
		panic(err)
	}
	return m
}

// MaxAmountLen bounds an amount's text; the longest the provider writes is
// far shorter.
const MaxAmountLen = 64

// ParseAmount parses a numeric string as an exact decimal. It accepts only
// plain decimal notation (optional sign, digits, optional fraction) of at
// most 64 characters, which is what the provider writes; exponents, NaN
// and empty strings are errors.
func ParseAmount(s string) (decimal.Decimal, error) {
	if len(s) > MaxAmountLen {
		return decimal.Decimal{}, &amountError{s: s, tooLong: true}
	}
	if !isPlainDecimal(s) {
		return decimal.Decimal{}, &amountError{s: s}
	}
	return decimal.NewFromString(s)
}

// ParseAmountBytes is ParseAmount for an amount's bytes, without their
// string: the usual amount (digits, a point and digits, 18 digits at most)
// is read as an integer and a scale, the same decimal ParseAmount gives;
// any other goes to ParseAmount. A report reads millions of them.
func ParseAmountBytes(b []byte) (decimal.Decimal, error) {
	var (
		v      int64
		digits int
		scale  int32
		dot    bool
	)
	for i, c := range b {
		switch {
		case c >= '0' && c <= '9':
			v = v*10 + int64(c-'0')
			digits++
			if dot {
				scale++
			}
		case c == '.' && !dot && i > 0 && i < len(b)-1:
			dot = true
		default:
			return ParseAmount(string(b))
		}
	}
	if digits == 0 || digits > 18 {
		return ParseAmount(string(b))
	}
	return decimal.New(v, -scale), nil
}

// amountError is ParseAmount's refusal of s.
type amountError struct {
	s       string
	tooLong bool
}

func (e *amountError) Error() string { return "amount " + e.problem() }

// problem is the error without naming the amount, for a caller that names
// the field instead.
func (e *amountError) problem() string {
	if e.tooLong {
		return fmt.Sprintf("too long (%d characters; at most %d)", len(e.s), MaxAmountLen)
	}
	return strconv.Quote(e.s) + " is not a decimal number"
}

func isPlainDecimal(s string) bool {
	if len(s) == 0 || len(s) > MaxAmountLen {
		return false
	}
	i := 0
	if s[0] == '-' || s[0] == '+' {
		i++
	}
	digits, dot := 0, false
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '.' && !dot:
			dot = true
		default:
			return false
		}
	}
	return digits > 0 && s[len(s)-1] != '.' && s[0] != '.'
}

// FormatAmount writes d the way the provider writes amounts: plain decimal
// notation keeping the scale it was parsed with, so "0.10" stays "0.10".
func FormatAmount(d decimal.Decimal) string {
	if exp := d.Exponent(); exp < 0 {
		return d.StringFixed(-exp)
	}
	return d.String()
}

// NormalizeAmount writes d without trailing fractional zeros, so that "5" and
// "5.00" have one canonical form. It is used for fingerprints and comparisons.
func NormalizeAmount(d decimal.Decimal) string {
	return d.String()
}

// String returns "<amount> <currency>".
func (m Money) String() string { return FormatAmount(m.Amount) + " " + m.Currency }

// Equal reports whether m and o are the same amount in the same currency,
// whatever their scale.
func (m Money) Equal(o Money) bool {
	return m.Currency == o.Currency && m.Amount.Equal(o.Amount)
}

type moneyJSON struct {
	Amount   json.RawMessage `json:"amount"`
	Currency string          `json:"currency"`
}

// MarshalJSON writes {"amount":"<numeric string>","currency":"<ccy>"}.
func (m Money) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"amount":"`)
	b.WriteString(FormatAmount(m.Amount))
	b.WriteString(`","currency":`)
	c, err := json.Marshal(m.Currency)
	if err != nil {
		return nil, err
	}
	b.Write(c)
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads a Money object. The amount must be a JSON string holding
// a plain decimal; a JSON number is refused so that no amount ever passes
// through floating point.
func (m *Money) UnmarshalJSON(data []byte) error {
	if bytes.Equal(data, []byte("null")) {
		return nil // as encoding/json does for values that are null
	}
	s, currency, ok := plainMoney(data)
	if !ok {
		var raw moneyJSON
		if err := json.Unmarshal(data, &raw); err != nil {
			return fmt.Errorf("money: %w", err)
		}
		if a := raw.Amount; len(a) >= 2 && a[0] == '"' && a[len(a)-1] == '"' && bytes.IndexByte(a, '\\') < 0 {
			// A plain quoted string, as every amount the provider writes is;
			// the JSON decoder has already checked it is well formed.
			s = string(a[1 : len(a)-1])
		} else {
			// Not &s: that would put s on the heap on every call (see
			// Time.UnmarshalJSON).
			var u string
			if err := json.Unmarshal(raw.Amount, &u); err != nil {
				return fmt.Errorf("money: amount must be a numeric string, got %s", truncate(raw.Amount))
			}
			s = u
		}
		currency = raw.Currency
	}
	d, err := ParseAmount(s)
	if err != nil {
		return fmt.Errorf("money: %w", err)
	}
	m.Amount = d
	m.Currency = strings.ToLower(currency)
	return nil
}

// plainMoney reads a Money object in the shape the provider writes it,
// {"amount":"<a>","currency":"<c>"}: both keys spelled exactly so, in either
// order, no whitespace, amount present, values strings of printable ASCII
// without escapes. It reports false for anything else, which encoding/json
// then decodes (other spellings of the keys, unknown keys, duplicates,
// whitespace, escapes, amounts that are not strings).
func plainMoney(data []byte) (amount, currency string, ok bool) {
	if len(data) < 2 || data[0] != '{' || data[len(data)-1] != '}' {
		return "", "", false
	}
	rest := data[1 : len(data)-1]
	var haveAmount, haveCurrency bool
	for len(rest) > 0 {
		key, n := plainStringPrefix(rest)
		if n == 0 || n >= len(rest) || rest[n] != ':' {
			return "", "", false
		}
		rest = rest[n+1:]
		val, n := plainStringPrefix(rest)
		if n == 0 {
			return "", "", false
		}
		rest = rest[n:]
		switch string(key) {
		case "amount":
			if haveAmount {
				return "", "", false
			}
			haveAmount, amount = true, string(val)
		case "currency":
			if haveCurrency {
				return "", "", false
			}
			haveCurrency, currency = true, string(val)
		default:
			return "", "", false
		}
		if len(rest) > 0 {
			if rest[0] != ',' || len(rest) == 1 {
				return "", "", false
			}
			rest = rest[1:]
		}
	}
	if !haveAmount {
		return "", "", false
	}
	return amount, currency, true
}

// plainStringPrefix reads the plain JSON string (see plainStringLen) at the
// start of b. It returns its text and the bytes it takes with its quotes,
// or n == 0 when b does not start with one.
func plainStringPrefix(b []byte) (text []byte, n int) {
	if len(b) < 2 || b[0] != '"' {
		return nil, 0
	}
	l := plainStringLen(b[1:])
	if 1+l >= len(b) || b[1+l] != '"' {
		return nil, 0
	}
	return b[1 : 1+l], l + 2
}

func truncate(b []byte) string {
	if len(b) > 32 {
		return string(b[:32]) + "…"
	}
	if len(b) == 0 {
		return "nothing"
	}
	return string(b)
}
