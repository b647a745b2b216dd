package api

import (
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/shopspring/decimal"

	"orderd/provider"
)

// fieldErrors collects every problem of one request, so that one answer
// names them all, in the provider's VALIDATION shape. As an error it is
// answered 422.
type fieldErrors []provider.ValidationError

func (v fieldErrors) Error() string {
	var b strings.Builder
	b.WriteString("validation failed")
	for i, e := range v {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(e.Field + " " + e.Message)
	}
	return b.String()
}

func (v *fieldErrors) add(field, message string) {
	*v = append(*v, provider.ValidationError{Field: field, Message: message})
}

// err returns v as an error, or nil when there is nothing wrong.
func (v fieldErrors) err() error {
	if len(v) == 0 {
		return nil
	}
	return v
}

// maxIDLength bounds identifiers such as merchantOrderId.
const maxIDLength = 255

func (v *fieldErrors) required(field, value string) bool {
	if strings.TrimSpace(value) == "" {
		v.add(field, "is required")
		return false
	}
	return true
}

// identifier checks a required identifier: present, at most 255
// characters, no control characters.
func (v *fieldErrors) identifier(field, value string) {
	if !v.required(field, value) {
		return
	}
	v.text(field, value, maxIDLength)
}

// text checks an optional free-text value's length and characters.
func (v *fieldErrors) text(field, value string, max int) {
	if problem := textProblem(value, max); problem != "" {
		v.add(field, problem)
	}
}

// textProblem is what is wrong with a free-text value a person or a
// platform sends, or "": it must be valid UTF-8, at most max characters
// (not bytes), and free of control characters. The gateway and the
// findings' trail (JSON or the dashboard's form) hold text to the same
// rules, so a value is refused or stored alike whichever way it comes, and
// stored as sent: a replicated log command, encoded as JSON, would
// otherwise carry U+FFFD where a single node stored the raw bytes.
func textProblem(value string, max int) string {
	switch {
	case !utf8.ValidString(value):
		return "must be valid UTF-8"
	case utf8.RuneCountInString(value) > max:
		return "must be at most " + strconv.Itoa(max) + " characters"
	case strings.ContainsFunc(value, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return "must not contain control characters"
	}
	return ""
}

// maxAmountLength bounds the amounts the gateway sends. orderd reads the
// provider's amounts with provider.ParseAmount, which takes at most 64
// characters; the provider's answers for an order (fees, conversions,
// balances) can be longer than the amount sent, and an answer orderd
// cannot read breaks its webhooks and the balances job for good. Half the
// parser's limit leaves ample room.
const maxAmountLength = 32

// amount checks a required amount: an unsigned numeric string greater than
// zero, at most maxAmountLength characters.
func (v *fieldErrors) amount(field, value string) decimal.Decimal {
	if !v.required(field, value) {
		return decimal.Decimal{}
	}
	d, err := provider.ParseAmount(value)
	switch {
	case len(value) > maxAmountLength:
		v.add(field, "must be at most "+strconv.Itoa(maxAmountLength)+" characters")
	case err != nil || value[0] == '+':
		// The provider writes amounts unsigned; a "+" is not sent on.
		v.add(field, "must be a decimal number in a string, like \"10.50\"")
	case !d.IsPositive():
		v.add(field, "must be greater than zero")
	default:
		return d
	}
	return decimal.Decimal{}
}

// currency checks a required lowercase three-letter ISO code.
func (v *fieldErrors) currency(field, value string) {
	if v.required(field, value) {
		v.optionalCurrency(field, value)
	}
}

func (v *fieldErrors) optionalCurrency(field, value string) {
	if value != "" && !isCurrency(value) {
		v.add(field, "must be a lowercase three-letter ISO code, like \"brl\"")
	}
}

// url checks an optional absolute http(s) URL.
func (v *fieldErrors) url(field, value string) {
	if value != "" && !isHTTPURL(value) {
		v.add(field, "must be an absolute http or https URL")
	}
}

// uuid checks an optional UUID.
func (v *fieldErrors) uuid(field, value string) {
	if value != "" && !isUUID(value) {
		v.add(field, "must be a UUID")
	}
}

// absent checks that a field not used in this case is not given.
func (v *fieldErrors) absent(field, value, message string) {
	if value != "" {
		v.add(field, message)
	}
}

// oneOf checks an optional value against its allowed values.
func (v *fieldErrors) oneOf(field, value string, allowed ...string) {
	if value == "" {
		return
	}
	for _, a := range allowed {
		if value == a {
			return
		}
	}
	v.add(field, "must be one of "+strings.Join(allowed, ", "))
}

func isCurrency(s string) bool {
	if len(s) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if s[i] < 'a' || s[i] > 'z' {
			return false
		}
	}
	return true
}

func isHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.User == nil
}

func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}
