package main

import (
	"net/http"
)

// guardAdmin refuses state-changing admin requests (POST to the gateway
// and the watch list) that a web browser sends on behalf of another site.
// Without it, a page the operator visits could make the browser post a
// payin to an admin API on 127.0.0.1 that has no token: the API reads a
// JSON body whatever its Content-Type, so such a "simple" request needs no
// CORS preflight. Browsers mark cross-site requests (Sec-Fetch-Site, or an
// Origin that is not the Host); tools such as curl send neither and pass,
// as do GET, HEAD and OPTIONS.
func guardAdmin(h http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"error":"cross-origin request refused: the admin API takes state-changing requests only from non-browser clients or its own pages"}` + "\n"))
	}))
	return cop.Handler(h)
}
