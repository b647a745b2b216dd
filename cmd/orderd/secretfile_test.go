package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mkfifo makes a named pipe in dir. At the end of the test it opens the
// pipe for writing and closes it, so that a reader still blocked on it (the
// code before the fix) is released rather than leaked.
func mkfifo(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if f, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	return p
}

// loadWithin runs LoadConfig and fails the test when it is still waiting
// after 10s: a secret file must never make start-up wait.
func loadWithin(t *testing.T, path string) (*Config, error) {
	t.Helper()
	type loaded struct {
		cfg *Config
		err error
	}
	ch := make(chan loaded, 1)
	go func() {
		cfg, err := LoadConfig(path, func(string) string { return "" })
		ch <- loaded{cfg, err}
	}()
	select {
	case l := <-ch:
		return l.cfg, l.err
	case <-time.After(10 * time.Second):
		t.Fatal("LoadConfig is still waiting after 10s")
		return nil, nil
	}
}

// TestLoadConfig_SecretFiles: secret and key files are read with a size
// limit and only when they are regular files, so /dev/zero cannot exhaust
// memory and a FIFO cannot hold start-up; each refusal names the key.
func TestLoadConfig_SecretFiles(t *testing.T) {
	dir := t.TempDir()
	big := writeFile(t, dir, "big", strings.Repeat("k", maxSecretFileBytes+1))
	fifo := mkfifo(t, dir, "fifo")
	token := writeFile(t, dir, "token", "file-token\n")
	conf := func(extra string) string {
		return "provider:\n  base_url: https://api.provider.example\n  api_key: k\n  public_keys: [k.pem]\n" + extra
	}
	tests := []struct {
		name, yaml, want string
	}{
		{"endless device", conf("admin:\n  token_file: /dev/zero\n"), "admin.token_file: /dev/zero is not a regular file (it is a character device)"},
		{"named pipe", conf("admin:\n  token_file: " + fifo + "\n"), "admin.token_file: " + fifo + " is not a regular file (it is a named pipe)"},
		{"API key from a pipe", "provider:\n  base_url: https://api.provider.example\n  api_key_file: " + fifo + "\n  public_keys: [k.pem]\n",
			"provider.api_key_file: " + fifo + " is not a regular file"},
		{"too large", conf("admin:\n  token_file: " + big + "\n"), "admin.token_file: " + big + " is larger than 65536 bytes"},
		{"directory", conf("admin:\n  token_file: " + dir + "\n"), "admin.token_file: " + dir + " is not a regular file (it is a directory)"},
		{"NATS token from a pipe", conf("nats:\n  url: nats://127.0.0.1:4222\n  token_file: " + fifo + "\n"), "nats.token_file: " + fifo + " is not a regular file"},
		{"NATS credentials from a pipe", conf("nats:\n  url: nats://127.0.0.1:4222\n  credentials_file: " + fifo + "\n"), "nats.credentials_file: " + fifo + " is not a regular file"},
		{"TLS key too large", conf("nats:\n  url: tls://127.0.0.1:4222\n  tls:\n    cert_file: " + token + "\n    key_file: " + big + "\n"),
			"nats.tls.key_file: " + big + " is larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, t.TempDir(), "config.yaml", tt.yaml)
			_, err := loadWithin(t, path)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("LoadConfig = %v, want an error saying %q", err, tt.want)
			}
		})
	}

	t.Run("public key from a pipe", func(t *testing.T) {
		path := writeFile(t, t.TempDir(), "config.yaml", strings.Replace(conf(""), "[k.pem]", "["+fifo+"]", 1))
		cfg, err := loadWithin(t, path)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { _, err := cfg.ProviderPublicKeys(); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "provider.public_keys[0]: public key file: "+fifo+" is not a regular file") {
				t.Errorf("ProviderPublicKeys = %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("ProviderPublicKeys is still waiting on a FIFO after 10s")
		}
	})

	t.Run("readable by others is a warning", func(t *testing.T) {
		for mode, warn := range map[os.FileMode]bool{0o600: false, 0o640: false, 0o644: true} {
			if err := os.Chmod(token, mode); err != nil {
				t.Fatal(err)
			}
			path := writeFile(t, t.TempDir(), "config.yaml", conf("admin:\n  token_file: "+token+"\n"))
			cfg, err := loadWithin(t, path)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Admin.Token.Reveal() != "file-token" {
				t.Errorf("token %q", cfg.Admin.Token.Reveal())
			}
			got := strings.Join(cfg.Warnings(), "\n")
			if warn != strings.Contains(got, "admin.token_file: "+token+" is readable by other users") {
				t.Errorf("mode %o: warnings %q", mode, got)
			}
		}
	})

	t.Run("writable by others is refused", func(t *testing.T) {
		for _, mode := range []os.FileMode{0o620, 0o602, 0o666} {
			if err := os.Chmod(token, mode); err != nil {
				t.Fatal(err)
			}
			path := writeFile(t, t.TempDir(), "config.yaml", conf("admin:\n  token_file: "+token+"\n"))
			_, err := loadWithin(t, path)
			want := "admin.token_file: " + token + " can be changed by users other than its owner"
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "chmod go-w "+token) {
				t.Errorf("mode %o: LoadConfig = %v, want an error saying %q and the chmod that mends it", mode, err, want)
			}
			var ce *configError
			if !errors.As(err, &ce) {
				t.Errorf("mode %o: %T is not a configuration error (exit 2)", mode, err)
			}
		}
		if err := os.Chmod(token, 0o600); err != nil {
			t.Fatal(err)
		}
		pem := writeFile(t, t.TempDir(), "provider.pem", "not read")
		if err := os.Chmod(pem, 0o664); err != nil {
			t.Fatal(err)
		}
		path := writeFile(t, t.TempDir(), "config.yaml", strings.Replace(conf(""), "[k.pem]", "["+pem+"]", 1))
		cfg, err := loadWithin(t, path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cfg.ProviderPublicKeys(); err == nil || !strings.Contains(err.Error(), "provider.public_keys[0]: "+pem+" can be changed by users other than its owner") {
			t.Errorf("ProviderPublicKeys of a group-writable key = %v", err)
		}
	})
}

// TestRun_SignalStopsWaitingStartup: a start-up that waits (here on a
// configuration file that is a FIFO nobody writes) ends when the process
// is told to stop, saying what it was waiting for.
func TestRun_SignalStopsWaitingStartup(t *testing.T) {
	fifo := mkfifo(t, t.TempDir(), "config.yaml")
	ctx, cancel := context.WithCancel(t.Context())
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"orderd", "run", "-config", fifo}, func(string) string { return "" }, nil, &stdout, &stderr)
	}()
	cancel() // what SIGTERM does to main's context
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "stopped while reading the configuration "+fifo) {
			t.Errorf("run = %v", err)
		}
		if code := exitCode(err, &stderr); code != 1 {
			t.Errorf("exit code %d, want 1", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run ignored the stop while waiting on its configuration for 10s")
	}
}
