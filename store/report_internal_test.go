package store

import (
	"fmt"
	"testing"

	"orderd/provider"
)

// TestParseAmount_matchesProvider: the report's reader of an amount column
// gives the decimal provider.ParseAmount gives (value and scale, which the
// report writes back), and refuses what it refuses.
func TestParseAmount_matchesProvider(t *testing.T) {
	inputs := []string{"0", "0.00", "00.10", "5", "5.0", "100.00", "7.5", "0.001", "123456789012345678",
		"12345678901234567.8", "1234567890123456789", "99999999999999999999.99", "1.", ".5", "-1.00", "+2",
		"-.5", "1e5", "", "1.2.3", "12a", " 1", "0.000000000000000001"}
	for i := range 2000 {
		inputs = append(inputs, fmt.Sprintf("%d.%0*d", i*7919, i%5, i%97))
	}
	for _, s := range inputs {
		want, wantErr := provider.ParseAmount(s)
		got, err := parseAmount([]byte(s))
		if (err != nil) != (wantErr != nil) {
			t.Errorf("%q: error %v, ParseAmount's %v", s, err, wantErr)
			continue
		}
		if err == nil && (got.Exponent() != want.Exponent() || !got.Equal(want) ||
			provider.FormatAmount(got) != provider.FormatAmount(want)) {
			t.Errorf("%q: %s (exponent %d), ParseAmount's %s (exponent %d)", s, got, got.Exponent(), want, want.Exponent())
		}
	}
}
