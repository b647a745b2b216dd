package load

import (
	"context"
	"crypto"
	"errors"
	"io"
	"net/http"
	"time"

	"orderd/provider"
	"orderd/receiver"
)

// ceilingServer is the verify-only endpoint: orderd's own HTTP server
// settings and signature verifier, and nothing after them — no decoding,
// no store. What it sustains bounds what any receiver on this machine can.
type ceilingServer struct {
	srv *receiver.Server
}

// startCeiling serves the verify-only endpoint on a free loopback port.
func startCeiling(pub crypto.PublicKey) (*ceilingServer, error) {
	v, err := provider.NewVerifier(pub)
	if err != nil {
		return nil, err
	}
	srv := receiver.NewServer(receiver.ServerConfig{Addr: "127.0.0.1:0"}, verifyOnly(v), nil)
	if err := srv.Start(); err != nil {
		return nil, err
	}
	return &ceilingServer{srv: srv}, nil
}

// URL is where the ceiling takes webhooks.
func (s *ceilingServer) URL() string {
	return "http://" + s.srv.Addr() + receiver.DefaultPath
}

// Close stops the server and waits for its goroutine.
func (s *ceilingServer) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = s.srv.Close(ctx)
}

// verifyOnly answers 200 to a POST whose Signature verifies over its body
// (at most receiver.DefaultMaxBodyBytes), and 405, 413 or 401 otherwise.
func verifyOnly(v *provider.Verifier) http.Handler {
	reply := func(w http.ResponseWriter, code int, status string) {
		w.Header()["Content-Type"] = []string{"application/json"}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, `{"status":"`+status+`"}`+"\n")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			reply(w, http.StatusMethodNotAllowed, "bad_method")
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, receiver.DefaultMaxBodyBytes))
		if err != nil {
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				reply(w, http.StatusRequestEntityTooLarge, "too_large")
				return
			}
			reply(w, http.StatusBadRequest, "bad_request")
			return
		}
		if err := v.Verify(body, r.Header.Get("Signature")); err != nil {
			reply(w, http.StatusUnauthorized, "bad_signature")
			return
		}
		reply(w, http.StatusOK, "verified")
	})
}
