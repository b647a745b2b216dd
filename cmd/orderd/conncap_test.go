package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestWebhookConnCap(t *testing.T) {
	tests := []struct {
		name       string
		configured int
		nofile     uint64
		want       int
		warn       bool
	}{
		{"automatic, generous limit", 0, 524288, 4096, false},
		{"automatic, small limit", 0, 256, 128, false},
		{"automatic, tiny limit", 0, 1, 1, false},
		{"configured within the limit", 500, 1024, 500, false},
		{"configured beyond the limit", 5000, 1024, 1024 - 128, true},
		{"configured, limit below the reserve", 10, 100, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, warn := webhookConnCap(tt.configured, tt.nofile)
			if got != tt.want || (warn != "") != tt.warn {
				t.Errorf("webhookConnCap(%d, %d) = %d, %q; want %d, warning %v", tt.configured, tt.nofile, got, warn, tt.want, tt.warn)
			}
			if tt.warn && !strings.Contains(warn, "receiver.max_connections") {
				t.Errorf("warning %q does not name receiver.max_connections", warn)
			}
		})
	}
}

// TestRun_AdminAnswersDuringConnectionFlood runs the real daemon with 256
// file descriptors while a client keeps 600 connections open (or waiting)
// on the webhook listener, and checks that the admin listener still
// answers /healthz and /readyz: the webhook listener's connections are
// capped below what the process can open.
func TestRun_AdminAnswersDuringConnectionFlood(t *testing.T) {
	de := newDaemonEnv(t, "")
	dir := filepath.Dir(de.cfgPath)
	cmd := exec.Command("sh", "-c", `ulimit -n 256 && exec "$0" "$@"`, orderdBinary(t), "run", "-config", de.cfgPath)
	cmd.Dir = dir
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	addrs := waitStarted(t, stderr, exited)
	waitReady(t, addrs.Admin, exited)

	// The flood: 600 clients, each sending half a request and waiting for
	// the server to drop it (at the 5 s header timeout), then again.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 600 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, err := net.DialTimeout("tcp", addrs.Webhooks, 2*time.Second)
				if err != nil {
					time.Sleep(50 * time.Millisecond)
					continue
				}
				go func() { <-stop; c.Close() }()
				_, _ = io.WriteString(c, "POST /webhooks/orders HTTP/1.1\r\nHost: x\r\n")
				_, _ = io.Copy(io.Discard, c)
				c.Close()
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()

	// Wait until the listener is full, as its log says.
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(stderr.String(), "listener has all its connections open"); {
		if time.Now().After(deadline) {
			t.Fatalf("the webhook listener never reported being full:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	client := &http.Client{Timeout: 5 * time.Second}
	for i := range 10 {
		for _, path := range []string{"/healthz", "/readyz"} {
			resp, err := client.Get("http://" + addrs.Admin + path)
			if err != nil {
				t.Fatalf("round %d: GET %s during the flood: %v", i, path, err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("round %d: GET %s = %d during the flood", i, path, resp.StatusCode)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if strings.Contains(stderr.String(), "too many open files") {
		t.Errorf("the daemon ran out of file descriptors:\n%s", grepLines(stderr.String(), "too many open files"))
	}
}

// grepLines returns the lines of s that contain sub, at most ten.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) && len(out) < 10 {
			out = append(out, l)
		}
	}
	return fmt.Sprint(strings.Join(out, "\n"))
}
