package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestAdminExposure(t *testing.T) {
	tests := []struct {
		name     string
		addr     string
		tokenSet bool
		warn     bool
	}{
		{"IPv4 loopback", "127.0.0.1:8081", false, false},
		{"other loopback address", "127.0.0.2:8081", false, false},
		{"IPv6 loopback", "[::1]:8081", false, false},
		{"IPv4-mapped loopback", "[::ffff:127.0.0.1]:8081", false, false},
		{"localhost", "localhost:8081", false, false},
		{"all IPv4 interfaces", "0.0.0.0:8081", false, true},
		{"all interfaces as the listener reports them", "[::]:8081", false, true},
		{"a host address", "192.0.2.2:8081", false, true},
		{"a host name", "orderd.internal:8081", false, true},
		{"all interfaces with a token", "[::]:8081", true, false},
		{"a host address with a token", "192.0.2.2:8081", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			warnAdminExposure(slog.New(slog.NewJSONHandler(&logs, nil)), tt.addr, tt.tokenSet)
			got := strings.Contains(logs.String(), `"level":"WARN"`)
			if got != tt.warn {
				t.Fatalf("warned = %v, want %v; log: %s", got, tt.warn, logs.String())
			}
			if tt.warn && !strings.Contains(logs.String(), "admin.token_file") {
				t.Errorf("warning does not name admin.token_file: %s", logs.String())
			}
		})
	}
}
