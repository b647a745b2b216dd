package main

import (
	"context"
	"crypto"
	"io"
	"net"
	"net/http"
	"time"

	"orderd/provider"
)

// ceiling is the verify-only server: a plain net/http server that reads the
// body and checks its Signature (RSA PKCS #1 v1.5 over SHA-512, or ECDSA),
// and nothing else. What it sustains bounds what any receiver on this
// machine can.
type ceiling struct {
	srv  *http.Server
	ln   net.Listener
	done chan error
}

// maxCeilingBody bounds a body like the receiver's default.
const maxCeilingBody = 1 << 20

func startCeiling(pub crypto.PublicKey) (*ceiling, error) {
	v, err := provider.NewVerifier(pub)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	c := &ceiling{ln: ln, done: make(chan error, 1)}
	c.srv = &http.Server{Handler: verifyOnly(v), ReadHeaderTimeout: 10 * time.Second}
	go func() { c.done <- c.srv.Serve(ln) }()
	return c, nil
}

// URL is where the ceiling takes webhooks.
func (c *ceiling) URL() string { return "http://" + c.ln.Addr().String() + "/webhooks/orders" }

func (c *ceiling) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = c.srv.Shutdown(ctx)
	<-c.done
}

func verifyOnly(v *provider.Verifier) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "only POST", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxCeilingBody))
		if err != nil {
			http.Error(w, "body could not be read", http.StatusBadRequest)
			return
		}
		if err := v.Verify(body, r.Header.Get("Signature")); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"verified"}`+"\n")
	})
}
