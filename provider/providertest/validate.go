package providertest

import (
	"net/mail"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/shopspring/decimal"

	"orderd/provider"
)

// fieldErrors collects every problem of one request, so that one answer
// names them all.
type fieldErrors []provider.ValidationError

func (v *fieldErrors) add(field, message string) {
	*v = append(*v, provider.ValidationError{Field: field, Message: message})
}

func (v fieldErrors) err() *provider.Error {
	if len(v) == 0 {
		return nil
	}
	return &provider.Error{Code: provider.CodeValidation, ValidationErrors: v}
}

func (v *fieldErrors) required(field, value string) bool {
	if strings.TrimSpace(value) == "" {
		v.add(field, "is required")
		return false
	}
	return true
}

func (v *fieldErrors) maxLen(field, value string, n int) {
	if utf8.RuneCountInString(value) > n {
		v.add(field, "must be at most "+strconv.Itoa(n)+" characters")
	}
}

func (v *fieldErrors) merchantOrderID(field, value string) {
	if v.required(field, value) {
		v.maxLen(field, value, 255)
	}
}

// maxScale is the most decimal places an amount may have.
const maxScale = 8

// amount checks a positive numeric string.
func (v *fieldErrors) amount(field, value string) decimal.Decimal {
	if !v.required(field, value) {
		return decimal.Decimal{}
	}
	d, err := provider.ParseAmount(value)
	switch {
	case err != nil:
		v.add(field, "must be a numeric string")
	case !d.IsPositive():
		v.add(field, "must be greater than zero")
	case d.Exponent() < -maxScale:
		v.add(field, "must have at most "+strconv.Itoa(maxScale)+" decimal places")
	default:
		return d
	}
	return decimal.Decimal{}
}

func (v *fieldErrors) currency(field, value string) {
	if v.required(field, value) && !isCurrency(value) {
		v.add(field, "must be a lowercase three-letter ISO code")
	}
}

// money checks an {amount, currency} object under prefix.
func (v *fieldErrors) money(prefix string, m *moneyRequest) provider.Money {
	if m == nil {
		m = &moneyRequest{}
	}
	d := v.amount(prefix+".amount", m.Amount)
	v.currency(prefix+".currency", m.Currency)
	return provider.Money{Amount: d, Currency: m.Currency}
}

func (v *fieldErrors) url(field, value string) {
	if value == "" {
		return
	}
	u, err := url.Parse(value)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.add(field, "must be an absolute http or https URL")
	}
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

func isEmail(s string) bool {
	a, err := mail.ParseAddress(s)
	return err == nil && a.Address == s
}

// isPhone accepts digits with the country code, optionally after a "+".
func isPhone(s string) bool {
	s = strings.TrimPrefix(s, "+")
	if len(s) < 10 || len(s) > 15 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
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
