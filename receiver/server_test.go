package receiver_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"orderd/receiver"
)

func startServer(t *testing.T, cfg receiver.ServerConfig, h http.Handler) *receiver.Server {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	srv := receiver.NewServer(cfg, h, nil)
	if err := srv.Start(); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			t.Errorf("close server: %v", err)
		}
	})
	return srv
}

func postHTTP(t *testing.T, client *http.Client, url string, body []byte, sig string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Signature", sig)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("post: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	return resp.StatusCode, string(b)
}

// TestServer_Start: the handler serves over real HTTP on the bound address.
func TestServer_Start(t *testing.T) {
	f := newFixture(t, receiver.Config{AllowedIPs: prefixes(t, "127.0.0.0/8")})
	srv := startServer(t, receiver.ServerConfig{}, f.handler)
	if !strings.HasPrefix(srv.Addr(), "127.0.0.1:") || strings.HasSuffix(srv.Addr(), ":0") {
		t.Fatalf("Addr = %q, want the bound loopback port", srv.Addr())
	}
	url := "http://" + srv.Addr() + receiver.DefaultPath
	body := newOrder(1, "completed").JSON()
	code, answer := postHTTP(t, http.DefaultClient, url, body, sign(t, f.key, body))
	if code != http.StatusOK || !strings.Contains(answer, `"status":"accepted"`) {
		t.Fatalf("answer = %d %s", code, answer)
	}
	code, _ = postHTTP(t, http.DefaultClient, url, body, "")
	if code != http.StatusUnauthorized {
		t.Fatalf("unsigned answer = %d, want 401", code)
	}
	if n := f.count("webhook_deliveries", ""); n != 1 {
		t.Errorf("deliveries = %d, want 1", n)
	}

	second := receiver.NewServer(receiver.ServerConfig{Addr: srv.Addr()}, f.handler, nil)
	if err := second.Start(); err == nil {
		second.Close(t.Context())
		t.Fatal("a second server started on a taken address")
	}
}

// TestServer_Timeouts: clients that stall cannot keep a connection.
func TestServer_Timeouts(t *testing.T) {
	f := newFixture(t, receiver.Config{})
	srv := startServer(t, receiver.ServerConfig{
		ReadHeaderTimeout: 200 * time.Millisecond,
		ReadTimeout:       400 * time.Millisecond,
		IdleTimeout:       300 * time.Millisecond,
	}, f.handler)

	tests := []struct {
		name  string
		write func(c net.Conn) error
	}{
		{
			name: "headers never finished",
			write: func(c net.Conn) error {
				_, err := io.WriteString(c, "POST /webhooks/orders HTTP/1.1\r\nHost: x\r\n")
				return err
			},
		},
		{
			name: "body never finished",
			write: func(c net.Conn) error {
				_, err := io.WriteString(c, "POST /webhooks/orders HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"id\":")
				return err
			},
		},
		{
			name: "idle keep-alive connection",
			write: func(c net.Conn) error {
				_, err := io.WriteString(c, "GET /webhooks/orders HTTP/1.1\r\nHost: x\r\n\r\n")
				return err
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", srv.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := tt.write(c); err != nil {
				t.Fatal(err)
			}
			// The server must close the connection well before this
			// deadline; reading whatever it answers until then.
			start := time.Now()
			if err := c.SetReadDeadline(start.Add(3 * time.Second)); err != nil {
				t.Fatal(err)
			}
			_, err = io.Copy(io.Discard, bufio.NewReader(c))
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("connection still open after %v", time.Since(start))
			}
		})
	}
	if got := f.orderData(); got != noOrderData {
		t.Errorf("stored: %s", got)
	}
}

// TestServer_Close: a request in flight when the server closes is still
// answered, and Close waits for it.
func TestServer_Close(t *testing.T) {
	f := newFixture(t, receiver.Config{AckBudget: 500 * time.Millisecond})
	srv := receiver.NewServer(receiver.ServerConfig{Addr: "127.0.0.1:0"}, f.handler, nil)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	lock := holdWriteLock(t, f.dbPath)

	body := newOrder(1, "completed").JSON()
	url := "http://" + srv.Addr() + receiver.DefaultPath
	type answer struct {
		code int
		err  error
	}
	sig := sign(t, f.key, body)
	done := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("Signature", sig)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- answer{err: err}
			return
		}
		resp.Body.Close()
		done <- answer{code: resp.StatusCode}
	}()
	// Wait until the request is inside the handler, blocked on the store.
	time.Sleep(150 * time.Millisecond)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := srv.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	select {
	case a := <-done:
		if a.err != nil || a.code != http.StatusServiceUnavailable {
			t.Fatalf("in-flight request: code %d, err %v; want 503", a.code, a.err)
		}
	default:
		t.Fatal("Close returned before the in-flight request was answered")
	}
	lock.release()
	if _, err := net.DialTimeout("tcp", srv.Addr(), time.Second); err == nil {
		t.Error("server still accepts connections after Close")
	}
}

// TestServer_CloseDoesNotWaitForSilentConnections: a connection that has
// not sent a byte holds nothing to answer. net/http's Shutdown counts such
// a connection as busy for its first 5 s, which held a replicated leader's
// shutdown, and with it the lease's release, that long. Close closes it at
// once, and an idle connection of the same client after its request too.
func TestServer_CloseDoesNotWaitForSilentConnections(t *testing.T) {
	f := newFixture(t, receiver.Config{})
	srv := receiver.NewServer(receiver.ServerConfig{Addr: "127.0.0.1:0"}, f.handler, nil)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	silent, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	// A request on another connection makes sure the server has
	// accepted the silent one (accepts are in order) before Close.
	resp, err := http.Get("http://" + srv.Addr() + "/nothing-here")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	// Well under net/http's 5 s for a silent connection.
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	if err := srv.Close(ctx); err != nil {
		t.Fatalf("close with a connection that sent nothing: %v", err)
	}
	silent.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := silent.Read(make([]byte, 1)); err == nil {
		t.Errorf("the silent connection is still open (read %d bytes)", n)
	}
}

// TestServer_StartOn: a listener the caller bound is served as it is (the
// configured address is not bound), and Close closes it.
func TestServer_StartOn(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "served") })
	srv := receiver.NewServer(receiver.ServerConfig{Addr: "203.0.113.1:1"}, h, nil)
	if err := srv.StartOn(ln); err != nil {
		t.Fatal(err)
	}
	if srv.Addr() != ln.Addr().String() {
		t.Errorf("Addr = %q, want the listener's %s", srv.Addr(), ln.Addr())
	}
	resp, err := http.Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "served" {
		t.Errorf("answer %q", b)
	}
	if err := srv.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close: %v, want the listener closed", err)
	}
}

// TestServer_MaxConns: with every connection slot taken, a new client is
// not served (it waits in the listen queue, holding no descriptor of the
// server's) until one of them closes; then it is.
func TestServer_MaxConns(t *testing.T) {
	var served atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		io.WriteString(w, "ok")
	})
	srv := startServer(t, receiver.ServerConfig{MaxConns: 3, ReadHeaderTimeout: time.Minute, IdleTimeout: time.Minute}, h)
	var held []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	// Each held connection is accepted: a request on the first is served.
	if _, err := io.WriteString(held[0], "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.ReadResponse(bufio.NewReader(held[0]), nil); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("first connection: %v %v", resp, err)
	}

	// A fourth connection's request waits while all three are open.
	extra, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	if _, err := io.WriteString(extra, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	answered := make(chan error, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(extra), nil)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = errors.New(resp.Status)
		}
		answered <- err
	}()
	select {
	case err := <-answered:
		t.Fatalf("the fourth connection was served past the cap of 3 (%v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	if n := served.Load(); n != 1 {
		t.Fatalf("served %d requests, want 1", n)
	}

	// One closes: the waiting client is taken in and answered.
	held[1].Close()
	select {
	case err := <-answered:
		if err != nil {
			t.Fatalf("the waiting connection: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting connection was not served after a slot freed")
	}
}

// TestServer_MaxConnsRefusalsAreRead: behind the connection cap, a request
// the server refuses unread (headers too large) still gets its answer, not
// a connection reset: the capped connection half-closes like a plain one.
func TestServer_MaxConnsRefusalsAreRead(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	srv := startServer(t, receiver.ServerConfig{MaxConns: 4}, h)
	for i := range 10 {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+srv.Addr()+"/", strings.NewReader(`{"id":"x"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Padding", strings.Repeat("p", 70<<10))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("request %d: reading the answer: %v", i, err)
		}
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Fatalf("request %d: %d, want 431", i, resp.StatusCode)
		}
	}
}
