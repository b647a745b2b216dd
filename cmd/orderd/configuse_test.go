package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"orderd/provider/providertest"
	"orderd/test/support/testaddr"
)

// hostConfig is docs/install.md's service config as ops read it on the host:
// the API key and admin token files live in the service's credentials
// directory, which exists only inside the unit, and so does the provider's
// public key. natsExtra is added to the nats section.
func hostConfig(t *testing.T, dir, baseURL, natsExtra string) string {
	t.Helper()
	creds := filepath.Join(dir, "run", "credentials", "orderd.service")
	return writeFile(t, dir, "config.yaml", fmt.Sprintf(`provider:
  base_url: %s
  api_key_file: %s
  public_keys: [%s]
admin:
  token_file: %s
store:
  path: %s
nats:
  embedded:
    listen: %s
    store_dir: %s
%sreports:
  dir: %s
`, baseURL, filepath.Join(creds, "provider-api-key"), filepath.Join(creds, "provider.pem"),
		filepath.Join(creds, "admin-token"), filepath.Join(dir, "orderd.db"), testaddr.Loopback(t),
		filepath.Join(dir, "nats"), natsExtra, filepath.Join(dir, "reports")))
}

// TestCommands_UseOnlyTheirConfig: migrate, report and tail do not read the
// provider's API key, the admin token or the public keys, so they work on a
// host where those files exist only inside the service; run still demands
// every one of them.
func TestCommands_UseOnlyTheirConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := hostConfig(t, dir, "https://api.provider.example", "")

	r := runOrderd(t, nil, nil, "migrate", "-config", cfg)
	if r.code != 0 || !strings.Contains(r.stdout, "is up to date") {
		t.Fatalf("migrate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runOrderd(t, nil, nil, "report", "-config", cfg, "-from", "2026-11-01", "-to", "2026-11-02", "-format", "json")
	if r.code != 0 || !strings.Contains(r.stdout, `"currencies"`) {
		t.Errorf("report: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	} else {
		checkReportSchema(t, []byte(r.stdout))
	}
	// Nothing listens on nats.embedded.listen: tail gets past the config
	// and says whom it could not reach.
	r = runOrderd(t, nil, nil, "tail", "-config", cfg)
	if r.code != 1 || !strings.Contains(r.stderr, "cannot reach NATS at nats://127.0.0.1:") || strings.Contains(r.stderr, "config") {
		t.Errorf("tail: exit %d, stderr %q; want 1 and cannot reach NATS", r.code, r.stderr)
	}

	r = runOrderd(t, nil, nil, "run", "-config", cfg)
	for _, key := range []string{"provider.api_key_file", "admin.token_file"} {
		if r.code != 2 || !strings.Contains(r.stderr, key) {
			t.Errorf("run: exit %d, stderr %q; want 2 naming %s", r.code, r.stderr, key)
		}
	}

	t.Run("tail reads the NATS token it uses", func(t *testing.T) {
		dir := t.TempDir()
		cfg := hostConfig(t, dir, "https://api.provider.example", "  url: nats://"+testaddr.Loopback(t)+"\n  token_file: "+filepath.Join(dir, "absent")+"\n")
		r := runOrderd(t, nil, nil, "tail", "-config", cfg)
		if r.code != 2 || !strings.Contains(r.stderr, "nats.token_file") {
			t.Errorf("tail: exit %d, stderr %q; want 2 naming nats.token_file", r.code, r.stderr)
		}
	})

	t.Run("tail with the embedded server on port 0", func(t *testing.T) {
		dir := t.TempDir()
		cfg := writeFile(t, dir, "config.yaml", fmt.Sprintf(`provider:
  base_url: https://api.provider.example
  public_keys: [%s]
store:
  path: %s
nats:
  embedded:
    listen: 127.0.0.1:0
`, filepath.Join(dir, "provider.pem"), filepath.Join(dir, "orderd.db")))
		r := runOrderd(t, nil, nil, "tail", "-config", cfg)
		if r.code != 2 || !strings.Contains(r.stderr, "nats.embedded.listen") || !strings.Contains(r.stderr, "-server") {
			t.Errorf("tail: exit %d, stderr %q; want 2 naming nats.embedded.listen and -server", r.code, r.stderr)
		}
	})

	t.Run("reconcile needs the API key only", func(t *testing.T) {
		fake := providertest.NewServer(providertest.Options{})
		t.Cleanup(fake.Close)
		dir := t.TempDir()
		cfg := hostConfig(t, dir, fake.URL(), "")
		r := runOrderd(t, nil, nil, "reconcile", "-config", cfg, "-job", "stale")
		if r.code != 2 || !strings.Contains(r.stderr, "provider.api_key_file") || strings.Contains(r.stderr, "admin.token_file") {
			t.Errorf("reconcile without the API key file: exit %d, stderr %q; want 2 naming provider.api_key_file only", r.code, r.stderr)
		}
		creds := filepath.Join(dir, "run", "credentials", "orderd.service")
		if err := os.MkdirAll(creds, 0o700); err != nil {
			t.Fatal(err)
		}
		writeFile(t, creds, "provider-api-key", fake.APIKey()+"\n")
		r = runOrderd(t, nil, nil, "reconcile", "-config", cfg, "-job", "stale")
		if r.code != 0 || !strings.Contains(r.stdout, "stale") {
			t.Errorf("reconcile with the API key file only: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
}

// TestRun_MissingPublicKeyCreatesNothing: a public key file that is not
// there is a configuration error naming the key and its line, found before
// the database and the NATS store are created.
func TestRun_MissingPublicKeyCreatesNothing(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "config.yaml", fmt.Sprintf(`provider:
  base_url: https://api.provider.example
  api_key: inline-key
  public_keys:
    - %s
store:
  path: %s
nats:
  embedded:
    listen: %s
    store_dir: %s
`, filepath.Join(dir, "absent.pem"), filepath.Join(dir, "orderd.db"), testaddr.Loopback(t), filepath.Join(dir, "nats")))
	r := runOrderd(t, nil, nil, "run", "-config", cfg)
	if r.code != 2 || !strings.Contains(r.stderr, "line 5: provider.public_keys[0]: public key file: open "+filepath.Join(dir, "absent.pem")) {
		t.Errorf("exit %d, stderr %q; want 2 naming provider.public_keys[0] on line 5 and the file", r.code, r.stderr)
	}
	for _, p := range []string{"orderd.db", "nats"} {
		if _, err := os.Stat(filepath.Join(dir, p)); !os.IsNotExist(err) {
			t.Errorf("%s was created (%v)", p, err)
		}
	}
}

// TestCommands_MissingStoreDir: a store.path in a directory that does not
// exist is a configuration error naming the key for every command that
// opens the store, not SQLite's "unable to open database file (14)".
func TestCommands_MissingStoreDir(t *testing.T) {
	fake := providertest.NewServer(providertest.Options{})
	t.Cleanup(fake.Close)
	dir := t.TempDir()
	key := writeFile(t, dir, "provider.pem", string(fake.PublicKeyPEM()))
	missing := filepath.Join(dir, "no-such-dir")
	cfg := writeFile(t, dir, "config.yaml", fmt.Sprintf(`provider:
  base_url: %s
  api_key: %s
  public_keys: [%s]
receiver:
  listen: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
store:
  path: %s
nats:
  embedded:
    listen: 127.0.0.1:0
    store_dir: %s
`, fake.URL(), fake.APIKey(), key, filepath.Join(missing, "orderd.db"), filepath.Join(dir, "nats")))
	for _, args := range [][]string{
		{"run"},
		{"migrate"},
		{"reconcile", "-job", "stale"},
		{"report", "-from", "2026-11-01", "-to", "2026-11-02"},
	} {
		r := runOrderd(t, nil, nil, append(args, "-config", cfg)...)
		if r.code != 2 || !strings.Contains(r.stderr, "line 10: store.path: directory "+missing+" does not exist") || strings.Contains(r.stderr, "(14)") {
			t.Errorf("%s: exit %d, stderr %q; want 2 naming store.path and its directory", args[0], r.code, r.stderr)
		}
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("the store directory was created (%v)", err)
	}

	// report only reads: the file itself must be there.
	cfg2 := strings.Replace(cfg, "config.yaml", "config2.yaml", 1)
	b, _ := os.ReadFile(cfg)
	if err := os.WriteFile(cfg2, []byte(strings.Replace(string(b), missing, dir, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runOrderd(t, nil, nil, "report", "-config", cfg2, "-from", "2026-11-01", "-to", "2026-11-02")
	if r.code != 2 || !strings.Contains(r.stderr, "store.path: "+filepath.Join(dir, "orderd.db")+" does not exist") {
		t.Errorf("report on a store not created yet: exit %d, stderr %q", r.code, r.stderr)
	}
}
