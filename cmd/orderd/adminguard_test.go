package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestGuardAdmin(t *testing.T) {
	tests := []struct {
		name    string
		method  string
		headers map[string]string
		passed  bool
	}{
		{"curl-like POST", "POST", nil, true},
		{"same-origin POST from the dashboard", "POST", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://127.0.0.1:8081"}, true},
		{"cross-site POST", "POST", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, false},
		{"same-site POST from another port", "POST", map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "http://127.0.0.1:3000"}, false},
		{"POST from another origin, older browser", "POST", map[string]string{"Origin": "https://evil.example"}, false},
		{"cross-site GET", "GET", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			served := 0
			h := guardAdmin(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				served++
				w.WriteHeader(http.StatusCreated)
			}), false)
			req := httptest.NewRequest(tt.method, "http://127.0.0.1:8081/v1/payins", strings.NewReader(`{"merchantOrderId":"m-1"}`))
			req.Header.Set("Content-Type", "text/plain")
			for k, v := range tt.headers {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if got := served == 1; got != tt.passed {
				t.Fatalf("passed = %v, want %v (answer %d %s)", got, tt.passed, rec.Code, rec.Body)
			}
			if !tt.passed && (rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), `"error"`)) {
				t.Errorf("refusal = %d %s, want 403 with a JSON error", rec.Code, rec.Body)
			}
		})
	}
}

func TestGuardAdmin_loopbackHost(t *testing.T) {
	tests := []struct {
		host   string
		passed bool
	}{
		{"127.0.0.1:8081", true},
		{"[::1]:8081", true},
		{"localhost:8081", true},
		{"LOCALHOST.:8081", true},
		{"127.0.0.2", true},
		{"rebind.evil.example:8081", false},
		{"192.0.2.10:8081", false},
		{"", false},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			served := 0
			h := guardAdmin(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served++ }), true)
			req := httptest.NewRequest("GET", "/v1/orders/m-1", nil)
			req.Host = tt.host
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if got := served == 1; got != tt.passed {
				t.Fatalf("Host %q served = %v, want %v (answer %d)", tt.host, got, tt.passed, rec.Code)
			}
			if !tt.passed && rec.Code != http.StatusMisdirectedRequest {
				t.Errorf("refusal = %d, want 421", rec.Code)
			}
		})
		// With a token (or a non-loopback listener) any Host is served.
		served := 0
		h := guardAdmin(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served++ }), false)
		req := httptest.NewRequest("GET", "/v1/orders/m-1", nil)
		req.Host = tt.host
		h.ServeHTTP(httptest.NewRecorder(), req)
		if served != 1 {
			t.Errorf("Host %q refused without the loopback-only guard", tt.host)
		}
	}
}
