package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"orderd/test/support/syncbuf"
)

// parseReady reads PROVIDER_URL and PROVIDER_API_KEY from the output.
func parseReady(out string) (url, key string) {
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "PROVIDER_URL="); ok {
			url = v
		}
		if v, ok := strings.CutPrefix(line, "PROVIDER_API_KEY="); ok {
			key = v
		}
	}
	return url, key
}

func postJSON(t *testing.T, url, key, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	pub := filepath.Join(dir, "provider.pem")
	ctx, cancel := context.WithCancel(t.Context())
	var stdout, stderr syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-pubkey", pub, "-api-key", "e2e-key", "-key-type", "ecdsa",
			"-balance", "brl=100", "-webhook-base-delay", "5ms"}, &stdout, &stderr)
	}()

	var url, key string
	deadline := time.Now().Add(10 * time.Second)
	for url == "" {
		if time.Now().After(deadline) {
			t.Fatalf("not ready; stderr: %s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
		url, key = parseReady(stdout.String())
	}
	if key != "e2e-key" || !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("ready lines: %q", stdout.String())
	}
	pemBytes, err := os.ReadFile(pub)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		t.Fatalf("public key file: %q", pemBytes)
	}
	if _, err := x509.ParsePKIXPublicKey(block.Bytes); err != nil {
		t.Fatal(err)
	}

	status, b := postJSON(t, url+"/_control/create-order", key, `{"merchantOrderId":"e-1","amount":"10","currency":"brl"}`)
	if status != 200 {
		t.Fatalf("create-order: %d %s", status, b)
	}
	for _, c := range []struct{ path, body string }{
		{"/_control/complete", `{"merchantOrderId":"e-1"}`},
		{"/_control/adjust-balance", `{"currency":"brl","delta":"1"}`},
		{"/_control/fault", `{"endpoint":"order/get-status","kind":"fail_before"}`},
	} {
		if status, b := postJSON(t, url+c.path, key, c.body); status != 200 {
			t.Fatalf("%s: %d %s", c.path, status, b)
		}
	}
	if status, _ := postJSON(t, url+"/api/v3/order/get-status", key, `{"merchantOrderId":"e-1"}`); status != 500 {
		t.Errorf("injected fault: HTTP %d", status)
	}
	status, b = postJSON(t, url+"/api/v3/order/get-status", key, `{"merchantOrderId":"e-1"}`)
	var env struct {
		Data struct {
			Status string `json:"status"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &env); err != nil || status != 200 || env.Data.Status != "completed" {
		t.Errorf("get-status: %d %s", status, b)
	}
	_, b = postJSON(t, url+"/api/v3/balances", key, `{}`)
	if !strings.Contains(string(b), `"amount":"110.80"`) {
		t.Errorf("balances %s, want 100 + 9.80 + 1", b)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("run did not stop")
	}
	if _, err := http.Post(url+"/api/v3/balances", "application/json", nil); err == nil {
		t.Error("still listening after stop")
	}
}

func TestRun_Usage(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"unknown flag", []string{"-nope"}},
		{"bad balance", []string{"-balance", "brl"}},
		{"bad balance amount", []string{"-balance", "brl=lots"}},
		{"bad key type", []string{"-key-type", "dsa"}},
		{"bad log level", []string{"-log-level", "loud"}},
		{"bad duplicate probability", []string{"-duplicate-webhooks", "2"}},
		{"stray argument", []string{"serve"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), tt.args, &stdout, &stderr)
			if code := exitCode(err, &stderr); code != 2 {
				t.Errorf("exit %d (%v), want 2", code, err)
			}
			if stdout.Len() != 0 {
				t.Errorf("printed %q on a usage error", stdout.String())
			}
		})
	}
	t.Run("address in use", func(t *testing.T) {
		var stdout, stderr syncbuf.Buffer
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- run(ctx, []string{"-key-type", "ecdsa"}, &stdout, &stderr) }()
		var url string
		for deadline := time.Now().Add(10 * time.Second); url == "" && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
			url, _ = parseReady(stdout.String())
		}
		if url == "" {
			cancel()
			t.Fatalf("first instance not ready: %s", stderr.String())
		}
		err := run(t.Context(), []string{"-key-type", "ecdsa", "-listen", strings.TrimPrefix(url, "http://")}, io.Discard, io.Discard)
		if code := exitCode(err, io.Discard); code != 1 {
			t.Errorf("exit %d (%v), want 1", code, err)
		}
		cancel()
		<-done
	})
}

// TestMain_Signal builds the command and stops it with SIGTERM, as an
// end-to-end suite does.
func TestMain_Signal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "providertest")
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), bin, "-key-type", "ecdsa", "-pubkey", filepath.Join(t.TempDir(), "k.pem"))
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(stdout)
			if !sc.Scan() || !strings.HasPrefix(sc.Text(), "PROVIDER_URL=http://127.0.0.1:") {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatalf("first line %q", sc.Text())
			}
			go func() { _, _ = io.Copy(io.Discard, stdout) }()
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			waited := make(chan error, 1)
			go func() { waited <- cmd.Wait() }()
			select {
			case err := <-waited:
				if err != nil {
					t.Errorf("exit after %v: %v, want status 0", sig, err)
				}
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatalf("no exit after %v", sig)
			}
		})
	}
}
