package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// result is what one in-process run of orderd produced.
type result struct {
	code           int
	stdout, stderr string
}

// runOrderd runs the real command registry in-process, as main would, with
// the given environment (nothing from the test process's own) and stdin.
func runOrderd(t *testing.T, env map[string]string, stdin io.Reader, args ...string) result {
	t.Helper()
	return runWith(t, commands(), env, stdin, args...)
}

// runWith runs the given commands through the real dispatcher.
func runWith(t *testing.T, cmds []command, env map[string]string, stdin io.Reader, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	getenv := func(k string) string { return env[k] }
	err := dispatch(t.Context(), cmds, append([]string{"orderd"}, args...), getenv, stdin, &stdout, &stderr)
	code := exitCode(err, &stderr)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// writeFile writes content to name in dir and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
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
