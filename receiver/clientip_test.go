package receiver_test

import (
	"slices"
	"strings"
	"testing"

	"orderd/receiver"
)

func TestParsePrefixes(t *testing.T) {
	tests := []struct {
		name    string
		in      []string
		want    []string
		wantErr string
	}{
		{name: "empty", in: nil, want: []string{}},
		{name: "prefixes and addresses", in: []string{"203.0.113.0/24", " 198.51.100.7 ", "2001:db8::/32", "2001:db8::1"},
			want: []string{"203.0.113.0/24", "198.51.100.7/32", "2001:db8::/32", "2001:db8::1/128"}},
		{name: "host bits are masked", in: []string{"10.1.2.3/8"}, want: []string{"10.0.0.0/8"}},
		{name: "bad prefix", in: []string{"10.0.0.0/8", "10.0.0.0/33"}, wantErr: `entry 2 ("10.0.0.0/33")`},
		{name: "hostname", in: []string{"provider.example"}, wantErr: `entry 1 ("provider.example") is neither`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := receiver.ParsePrefixes(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			strs := make([]string, 0, len(got))
			for _, p := range got {
				strs = append(strs, p.String())
			}
			if !slices.Equal(strs, tt.want) {
				t.Errorf("got %v, want %v", strs, tt.want)
			}
		})
	}
}
