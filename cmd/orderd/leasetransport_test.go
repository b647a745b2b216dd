package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// TestLeaseTransport: the jobs' provider requests go out only under the
// lease. Without it nothing is sent; a request that cannot be written
// before the lease may have ended elsewhere is cancelled unsent; one
// written in time may take its answer as long as the provider does.
func TestLeaseTransport(t *testing.T) {
	var got atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		if r.URL.Path == "/slow" {
			time.Sleep(300 * time.Millisecond)
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	lease := func(d time.Duration, held bool) func() (time.Time, bool) {
		until := time.Now().Add(d)
		return func() (time.Time, bool) { return until, held && time.Now().Before(until) }
	}
	get := func(rt http.RoundTripper, path string) (string, error) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := (&http.Client{Transport: rt}).Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}

	t.Run("not leading", func(t *testing.T) {
		got.Store(0)
		_, err := get(leaseTransport{next: http.DefaultTransport, until: lease(time.Minute, false)}, "/")
		if !errors.Is(err, errNotLeading) || got.Load() != 0 {
			t.Fatalf("without the lease: %v, %d requests reached the provider; want errNotLeading and none", err, got.Load())
		}
	})
	t.Run("slow answer under the lease", func(t *testing.T) {
		got.Store(0)
		body, err := get(leaseTransport{next: http.DefaultTransport, until: lease(100*time.Millisecond, true)}, "/slow")
		if err != nil || body != "ok" || got.Load() != 1 {
			t.Fatalf("a request written under the lease, answered after it: %q, %v, %d requests", body, err, got.Load())
		}
	})
	t.Run("lease ends before the request is written", func(t *testing.T) {
		got.Store(0)
		// A connection that takes longer to open than the lease lasts:
		// as a leader paused before it could send.
		slow := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			select {
			case <-time.After(400 * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}
		defer slow.CloseIdleConnections()
		_, err := get(leaseTransport{next: slow, until: lease(100*time.Millisecond, true)}, "/")
		time.Sleep(500 * time.Millisecond)
		if !errors.Is(err, errNotLeading) || got.Load() != 0 {
			t.Fatalf("the lease ended before the request was written: %v, %d requests reached the provider; want errNotLeading and none", err, got.Load())
		}
	})
}
