package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"orderd/provider/providertest"
	"orderd/publish"
)

// result is what one in-process run of orderd produced.
type result struct {
	code           int
	stdout, stderr string
}

// runOrderd runs the real command registry in-process, as main would, with
// the given environment (nothing from the test process's own) and stdin.
func runOrderd(t testing.TB, env map[string]string, stdin io.Reader, args ...string) result {
	t.Helper()
	return runWith(t, commands(), env, stdin, args...)
}

// runWith runs the given commands through the real dispatcher.
func runWith(t testing.TB, cmds []command, env map[string]string, stdin io.Reader, args ...string) result {
	t.Helper()
	// Synchronised: a NATS client's callbacks may still log after the
	// command returned.
	var stdout, stderr syncBuffer
	getenv := func(k string) string { return env[k] }
	err := dispatch(t.Context(), cmds, append([]string{"orderd"}, args...), getenv, stdin, &stdout, &stderr)
	code := exitCode(err, &stderr)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// writeFile writes content to name in dir and returns its path.
func writeFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// validYAML is a minimal configuration that validates: the three provider
// keys without defaults, with the API key inline.
const validYAML = `provider:
  base_url: https://api.provider.example
  api_key: inline-key
  public_keys: [/etc/orderd/provider.pem]
`

// withLines returns validYAML with extra top-level sections appended.
func withLines(extra ...string) string {
	return validYAML + strings.Join(extra, "\n") + "\n"
}

// quietJobs turns every reconcile schedule off and logs JSON at info, as
// most daemon tests want.
const quietJobs = `reconcile:
  schedules: {stale: "off", doubt: "off", balances: "off", requisites: "off", report: "off"}
log:
  level: info
  format: json
`

// daemonConfig writes the fake provider's public key into dir and a
// config for a daemon against the fake, every listener on loopback port 0
// and the database in dir; nats is the nats section's body (indented
// lines) and extra is appended at the top level.
func daemonConfig(t testing.TB, dir string, fake *providertest.Server, nats, extra string) string {
	t.Helper()
	key := writeFile(t, dir, "provider.pem", string(fake.PublicKeyPEM()))
	return writeFile(t, dir, "config.yaml", fmt.Sprintf(`provider:
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
%s%s`, fake.URL(), fake.APIKey(), key, filepath.Join(dir, "orderd.db"), nats, extra))
}

// natsAndFake starts an embedded NATS cluster and a fake provider whose
// webhooks follow within milliseconds, both stopped when the test ends
// (after the daemons a test starts later, whose cleanups run first).
func natsAndFake(t *testing.T) (*publish.EmbeddedCluster, *providertest.Server) {
	t.Helper()
	ec, err := publish.StartEmbeddedCluster(publish.EmbeddedClusterConfig{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ec.Shutdown)
	fake := providertest.NewServer(providertest.Options{WebhookBaseDelay: 10 * time.Millisecond})
	t.Cleanup(fake.Close)
	return ec, fake
}

// jetStreamAt connects to the NATS server at url for the rest of the test.
func jetStreamAt(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	conn, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	js, _ := jetstream.New(conn)
	return js
}
