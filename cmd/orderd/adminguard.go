package main

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// guardAdmin refuses state-changing admin requests (POST to the gateway
// and the watch list) that a web browser sends on behalf of another site.
// Without it, a page the operator visits could make the browser post a
// payin to an admin API on 127.0.0.1 that has no token: the API reads a
// JSON body whatever its Content-Type, so such a "simple" request needs no
// CORS preflight. Browsers mark cross-site requests (Sec-Fetch-Site, or an
// Origin that is not the Host); tools such as curl send neither and pass,
// as do GET, HEAD and OPTIONS.
//
// When loopbackOnly is set (a loopback listener with no token), requests
// must also name a loopback host in their Host header: a DNS-rebinding page
// reaches 127.0.0.1 under a name of its own, which this refuses, so it can
// neither read orders nor create them.
func guardAdmin(h http.Handler, loopbackOnly bool) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"error":"cross-origin request refused: the admin API takes state-changing requests only from non-browser clients or its own pages"}` + "\n"))
	}))
	h = cop.Handler(h)
	if !loopbackOnly {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackHost(r.Host) {
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.WriteHeader(http.StatusMisdirectedRequest)
			_, _ = w.Write([]byte(`{"error":"the admin API answers only to a loopback host name (127.0.0.1, [::1], localhost) while it has no token"}` + "\n"))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// loopbackHost reports whether a Host header names this machine's loopback.
func loopbackHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}
