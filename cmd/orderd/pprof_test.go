package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestWithPprof(t *testing.T) {
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	})
	get := func(h http.Handler, path, auth string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", "http://127.0.0.1:8081"+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}

	t.Run("no token", func(t *testing.T) {
		h := withPprof(next, "")
		if rec := get(h, "/debug/pprof/heap?debug=1", ""); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "heap profile") {
			t.Errorf("GET /debug/pprof/heap?debug=1 = %d %.80q, want 200 with the heap profile", rec.Code, rec.Body)
		}
		if rec := get(h, "/debug/pprof/", ""); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "allocs") {
			t.Errorf("GET /debug/pprof/ = %d, want 200 with the index listing allocs", rec.Code)
		}
		for _, p := range []string{"/metrics", "/debug/pprofx", "/v1/orders"} {
			if rec := get(h, p, ""); rec.Code != http.StatusTeapot {
				t.Errorf("GET %s = %d, want it passed to the admin API (418)", p, rec.Code)
			}
		}
	})

	t.Run("token", func(t *testing.T) {
		h := withPprof(next, "s3cret")
		for _, auth := range []string{"", "Bearer wrong", "Basic s3cret", "s3cret"} {
			rec := get(h, "/debug/pprof/cmdline", auth)
			if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "bearer token") {
				t.Errorf("Authorization %q: %d %q, want 401 naming the bearer token", auth, rec.Code, rec.Body)
			}
		}
		if rec := get(h, "/debug/pprof/cmdline", "Bearer s3cret"); rec.Code != http.StatusOK {
			t.Errorf("with the token: %d, want 200", rec.Code)
		}
		if rec := get(h, "/metrics", ""); rec.Code != http.StatusTeapot {
			t.Errorf("GET /metrics = %d, want it passed to the admin API, which checks tokens itself", rec.Code)
		}
	})
}
