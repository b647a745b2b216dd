package main

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"net/http/pprof"
	"strings"
)

// pprofPrefix is where admin.pprof serves Go's profiles.
const pprofPrefix = "/debug/pprof/"

// withPprof serves net/http/pprof under /debug/pprof/ in front of the admin
// API: the index, cmdline, profile (CPU, ?seconds=N), symbol, trace, and
// every named profile (heap, allocs, goroutine, block, mutex, ...; heap and
// allocs take ?seconds=N for the difference over N seconds). With a token
// they need it as the API does (Authorization: Bearer). Everything else
// goes to next.
func withPprof(next http.Handler, token string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(pprofPrefix, pprof.Index)
	mux.HandleFunc(pprofPrefix+"cmdline", pprof.Cmdline)
	mux.HandleFunc(pprofPrefix+"profile", pprof.Profile)
	mux.HandleFunc(pprofPrefix+"symbol", pprof.Symbol)
	mux.HandleFunc(pprofPrefix+"trace", pprof.Trace)
	var profiles http.Handler = mux
	if token != "" {
		want := sha256.Sum256([]byte(token))
		profiles = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
			sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
			if !ok || !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="orderd"`)
				w.Header().Set("Content-Type", "application/json; charset=utf-8")
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = w.Write([]byte(`{"error":"missing or invalid bearer token"}` + "\n"))
				return
			}
			mux.ServeHTTP(w, r)
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, pprofPrefix) {
			profiles.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}
