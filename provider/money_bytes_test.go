package provider_test

import (
	"fmt"
	"testing"

	"orderd/provider"
)

// TestParseAmountBytes_matchesParseAmount: the reader of an amount's bytes
// (a report's amount columns) gives the decimal ParseAmount gives (value
// and scale, which the report writes back), and refuses what it refuses.
func TestParseAmountBytes_matchesParseAmount(t *testing.T) {
	inputs := []string{"0", "0.00", "00.10", "5", "5.0", "100.00", "7.5", "0.001", "123456789012345678",
		"12345678901234567.8", "1234567890123456789", "99999999999999999999.99", "1.", ".5", "-1.00", "+2",
		"-.5", "1e5", "", "1.2.3", "12a", " 1", "0.000000000000000001"}
	for i := range 2000 {
		inputs = append(inputs, fmt.Sprintf("%d.%0*d", i*7919, i%5, i%97))
	}
	for _, s := range inputs {
		want, wantErr := provider.ParseAmount(s)
		got, err := provider.ParseAmountBytes([]byte(s))
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
