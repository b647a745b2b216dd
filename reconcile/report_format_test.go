package reconcile_test

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"orderd/provider"
	"orderd/reconcile"
)

// TestAppendAmount_matchesFormatAmount: the lines' amount formatter writes
// what provider.FormatAmount writes, for amounts as written, as computed
// (fees, refund sums) and at the edges of its hand-written range.
func TestAppendAmount_matchesFormatAmount(t *testing.T) {
	amounts := []decimal.Decimal{}
	for _, s := range []string{"0", "0.00", "0.05", "-0.05", "5", "500", "1e3", "10.00", "-10.30", "123456.789",
		"0.000000000000000001", "-0.000000000000000001", "999999999999999999", "0.999999999999999999",
		"-999999999999999999.5", "9999999999999999999.01", "1.0000000000000000001", "12345678901234567890123.45"} {
		amounts = append(amounts, decimal.RequireFromString(s))
	}
	amounts = append(amounts, decimal.RequireFromString("10.00").Sub(decimal.RequireFromString("9.7")),
		decimal.RequireFromString("2.50").Add(decimal.RequireFromString("2.50")), decimal.New(-7, 0), decimal.New(3, 2))
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		amounts = append(amounts, decimal.New(r.Int64N(2_000_000_000)-1_000_000_000, -int32(r.IntN(20))))
	}
	for _, d := range amounts {
		if got, want := string(reconcile.AppendAmount([]byte("x"), d)), "x"+provider.FormatAmount(d); got != want {
			t.Errorf("%s (coefficient %s, exponent %d): got %q, want %q", d, d.Coefficient(), d.Exponent(), got, want)
		}
	}
}

// TestAppendStamp_matchesFormat: the lines' time formatter writes what
// time.Format writes with TimeLayout, in UTC, and nothing for no time.
func TestAppendStamp_matchesFormat(t *testing.T) {
	if got := reconcile.AppendStamp(nil, time.Time{}); len(got) != 0 {
		t.Errorf("zero time: %q", got)
	}
	sp := time.FixedZone("x", -3*3600)
	times := []time.Time{
		time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
		time.Date(2026, 11, 1, 22, 30, 0, 5e6, sp), time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), time.UnixMilli(1_790_000_000_123),
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 10000 {
		times = append(times, time.Unix(r.Int64N(4e9), r.Int64N(1e9)))
	}
	for _, at := range times {
		if got, want := string(reconcile.AppendStamp(nil, at)), at.UTC().Format(reconcile.TimeLayout); got != want {
			t.Errorf("%s: got %q, want %q", strconv.Quote(at.String()), got, want)
		}
	}
}
