package provider_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"orderd/provider"
)

func TestMoney_JSONRoundTrip(t *testing.T) {
	for _, amount := range []string{
		"0.10", "1000000000000.01", "5", "5.00", "0", "0.00", "-3.50", "100",
		"123456789012345678901234567890.123456789", "0.000000001",
	} {
		t.Run(amount, func(t *testing.T) {
			in := `{"amount":"` + amount + `","currency":"BRL"}`
			var m provider.Money
			if err := json.Unmarshal([]byte(in), &m); err != nil {
				t.Fatalf("Unmarshal(%s): %v", in, err)
			}
			out, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if want := `{"amount":"` + amount + `","currency":"brl"}`; string(out) != want {
				t.Errorf("round trip of %s gave %s, want %s", in, out, want)
			}
			if got := provider.FormatAmount(m.Amount); got != amount {
				t.Errorf("FormatAmount = %q, want %q", got, amount)
			}
		})
	}
}

func TestMoney_UnmarshalJSONRefuses(t *testing.T) {
	tests := map[string]string{
		"JSON number":          `{"amount":5.1,"currency":"brl"}`,
		"JSON integer":         `{"amount":5,"currency":"brl"}`,
		"exponent":             `{"amount":"1e3","currency":"brl"}`,
		"empty amount":         `{"amount":"","currency":"brl"}`,
		"missing amount":       `{"currency":"brl"}`,
		"null amount":          `{"amount":null,"currency":"brl"}`,
		"words":                `{"amount":"five","currency":"brl"}`,
		"NaN":                  `{"amount":"NaN","currency":"brl"}`,
		"comma decimal":        `{"amount":"1,00","currency":"brl"}`,
		"leading dot":          `{"amount":".5","currency":"brl"}`,
		"trailing dot":         `{"amount":"5.","currency":"brl"}`,
		"spaces":               `{"amount":" 5","currency":"brl"}`,
		"two dots":             `{"amount":"1.2.3","currency":"brl"}`,
		"amount is an object":  `{"amount":{"value":"5"},"currency":"brl"}`,
		"money is a string":    `"5 brl"`,
		"absurdly long amount": `{"amount":"` + strings.Repeat("9", 100) + `","currency":"brl"}`,
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			var m provider.Money
			if err := json.Unmarshal([]byte(in), &m); err == nil {
				t.Fatalf("Unmarshal(%s) accepted %v", in, m)
			}
		})
	}
}

func TestMoney_NullInsideOrder(t *testing.T) {
	var o provider.Order
	in := `{"id":"x","merchantOrderId":"m","type":"payin","status":"processing","merchantSourceWallet":null,"merchantTargetWallet":null}`
	if err := json.Unmarshal([]byte(in), &o); err != nil {
		t.Fatal(err)
	}
	if o.MerchantSourceWallet != nil || o.MerchantTargetWallet != nil {
		t.Errorf("null wallets decoded as %v %v", o.MerchantSourceWallet, o.MerchantTargetWallet)
	}
	var rt provider.RefundTransaction
	if err := json.Unmarshal([]byte(`{"id":"r","amount":null}`), &rt); err != nil {
		t.Errorf("a null non-pointer Money: %v; want it left zero", err)
	}
}

func TestNormalizeAmount(t *testing.T) {
	tests := []struct{ in, want string }{
		{"5", "5"}, {"5.00", "5"}, {"5.0", "5"}, {"0.10", "0.1"}, {"-0.00", "0"},
		{"1000000000000.01", "1000000000000.01"}, {"100", "100"}, {"+7.50", "7.5"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			d, err := provider.ParseAmount(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := provider.NormalizeAmount(d); got != tt.want {
				t.Errorf("NormalizeAmount(%s) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

// TestParseAmount_Errors: a refusal says what is wrong with the amount; one
// that is only too long says so, with the limit.
func TestParseAmount_Errors(t *testing.T) {
	tests := map[string]struct{ in, want string }{
		"exponent":     {"1e400", `amount "1e400" is not a decimal number`},
		"words":        {"five", `amount "five" is not a decimal number`},
		"empty":        {"", `amount "" is not a decimal number`},
		"65 digits":    {strings.Repeat("9", 62) + ".00", "amount too long (65 characters; at most 64)"},
		"long garbage": {strings.Repeat("x", 1000), "amount too long (1000 characters; at most 64)"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if d, err := provider.ParseAmount(tt.in); err == nil || err.Error() != tt.want {
				t.Errorf("ParseAmount = %v, %v; want the error %s", d, err, tt.want)
			}
		})
	}
	if _, err := provider.ParseAmount(strings.Repeat("9", 61) + ".00"); err != nil {
		t.Errorf("ParseAmount refused 64 characters: %v", err)
	}
}

func TestMoney_Equal(t *testing.T) {
	tests := []struct {
		a, b provider.Money
		want bool
	}{
		{provider.MustMoney("5", "brl"), provider.MustMoney("5.00", "BRL"), true},
		{provider.MustMoney("5", "brl"), provider.MustMoney("5.01", "brl"), false},
		{provider.MustMoney("5", "brl"), provider.MustMoney("5", "mxn"), false},
	}
	for _, tt := range tests {
		t.Run(tt.a.String()+" vs "+tt.b.String(), func(t *testing.T) {
			if got := tt.a.Equal(tt.b); got != tt.want {
				t.Errorf("Equal = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestBalance_Money(t *testing.T) {
	m, err := provider.Balance{Currency: "MXN", Amount: "1000000000000.01"}.Money()
	if err != nil || m.String() != "1000000000000.01 mxn" {
		t.Errorf("Money() = %v, %v", m, err)
	}
	if _, err := (provider.Balance{Currency: "mxn", Amount: "1e5"}).Money(); err == nil {
		t.Error("Money() accepted an exponent")
	}
}

func TestTime_UnmarshalJSON(t *testing.T) {
	want := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, in := range []string{
		`"2026-01-02T03:04:05Z"`,
		`"2026-01-02T03:04:05+00:00"`,
		`"2026-01-02T03:04:05.000Z"`,
		`"2026-01-02T06:04:05+03:00"`,
		`"2026-01-01T22:04:05-05:00"`,
		`"2026-01-02T03:04:05"`,
	} {
		t.Run(in, func(t *testing.T) {
			var tm provider.Time
			if err := json.Unmarshal([]byte(in), &tm); err != nil {
				t.Fatalf("Unmarshal(%s): %v", in, err)
			}
			if !tm.Equal(want) {
				t.Errorf("Unmarshal(%s) = %v, want %v", in, tm, want)
			}
			out, _ := json.Marshal(tm)
			if string(out) != `"2026-01-02T03:04:05Z"` {
				t.Errorf("Marshal = %s", out)
			}
		})
	}
	t.Run("fraction kept", func(t *testing.T) {
		var tm provider.Time
		if err := json.Unmarshal([]byte(`"2026-01-02T03:04:05.123456+00:00"`), &tm); err != nil {
			t.Fatal(err)
		}
		if out, _ := json.Marshal(tm); string(out) != `"2026-01-02T03:04:05.123456Z"` {
			t.Errorf("Marshal = %s", out)
		}
	})
	t.Run("null and empty are zero", func(t *testing.T) {
		for _, in := range []string{`null`, `""`} {
			tm := provider.Time{Time: want}
			if err := json.Unmarshal([]byte(in), &tm); err != nil || !tm.IsZero() {
				t.Errorf("Unmarshal(%s) = %v, %v; want zero", in, tm, err)
			}
		}
		if out, _ := json.Marshal(provider.Time{}); string(out) != "null" {
			t.Errorf("zero Time marshals as %s", out)
		}
	})
	for _, in := range []string{`1767323045`, `"yesterday"`, `"2026-13-02T03:04:05Z"`, `"2026-01-02"`,
		`"0000-01-01T00:00:00+01:00"`, `"9999-12-31T23:00:00-02:00"`} {
		t.Run("refuses "+in, func(t *testing.T) {
			var tm provider.Time
			if err := json.Unmarshal([]byte(in), &tm); err == nil {
				t.Errorf("Unmarshal(%s) accepted %v", in, tm)
			}
		})
	}
}

func TestRequestedAmount(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string // want "" means none
	}{
		{"a payin's invoice", `{"merchantOrderId":"m","invoice":{"amount":"45.50","currency":"BRL"},"client":{"name":"Ana"}}`, "45.50 brl"},
		{"a payout's amount object", `{"merchantOrderId":"m","amount":{"amount":"12.00","currency":"usd"}}`, "12.00 usd"},
		{"a payout's amount and currency", `{"merchantOrderId":"m","amount":"7","currency":"mxn"}`, "7 mxn"},
		{"the invoice wins", `{"invoice":{"amount":"1.00","currency":"brl"},"amount":"2.00","currency":"usd"}`, "1.00 brl"},
		{"an amount without a currency", `{"amount":"7"}`, ""},
		{"an amount as a JSON number", `{"amount":7,"currency":"brl"}`, ""},
		{"not a number", `{"invoice":{"amount":"lots","currency":"brl"}}`, ""},
		{"no amount", `{"merchantOrderId":"m","destination":"x"}`, ""},
		{"not JSON", `{"invoice":`, ""},
		{"empty", ``, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, ok := provider.RequestedAmount([]byte(tc.body))
			got := ""
			if ok {
				got = m.String()
			}
			if got != tc.want {
				t.Errorf("RequestedAmount(%s) = %q, want %q", tc.body, got, tc.want)
			}
		})
	}
}
