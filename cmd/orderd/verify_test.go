package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// openssl runs the real openssl command line and returns its stdout.
func openssl(t *testing.T, stdin []byte, args ...string) []byte {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "openssl", args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("openssl %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// keyPair makes a private key with openssl and writes its public half as
// PEM; it returns both paths.
func keyPair(t *testing.T, dir, name string, genArgs ...string) (private, public string) {
	t.Helper()
	private = filepath.Join(dir, name+".key")
	public = filepath.Join(dir, name+".pub.pem")
	openssl(t, nil, append([]string{"genpkey", "-out", private}, genArgs...)...)
	openssl(t, nil, "pkey", "-in", private, "-pubout", "-out", public)
	return private, public
}

// sign signs body exactly as the provider does:
// openssl dgst -sha512 -sign KEY | openssl base64 -A.
func sign(t *testing.T, private string, body []byte) string {
	t.Helper()
	raw := openssl(t, body, "dgst", "-sha512", "-sign", private)
	return strings.TrimSpace(string(openssl(t, raw, "base64", "-A")))
}

func TestRun_Verify(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl is not installed; the signature interop test needs the real command line (.ci/run installs it)")
	}
	dir := t.TempDir()
	rsaKey, rsaPub := keyPair(t, dir, "rsa", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048")
	ecKey, ecPub := keyPair(t, dir, "ec", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256")
	_, otherPub := keyPair(t, dir, "other", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384")

	body := []byte(`{"id":"ord_1","merchantOrderId":"m-1","type":"payin","status":"completed"}`)
	bodyFile := writeFile(t, dir, "body.json", string(body))
	rsaSig := sign(t, rsaKey, body)
	ecSig := sign(t, ecKey, body)
	// openssl base64 without -A wraps at 64 columns, as a header copied from
	// a log might be.
	wrapped := strings.TrimSpace(string(openssl(t, openssl(t, body, "dgst", "-sha512", "-sign", rsaKey), "base64")))
	if !strings.Contains(wrapped, "\n") {
		t.Fatalf("expected a wrapped signature, got %q", wrapped)
	}

	tests := []struct {
		name       string
		args       []string
		stdin      []byte
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{name: "RSA, body from a file", args: []string{"-pubkey", rsaPub, "-signature", rsaSig, bodyFile}, wantStdout: "signature OK\n"},
		{name: "RSA, body from stdin", args: []string{"-pubkey", rsaPub, "-signature", rsaSig}, stdin: body, wantStdout: "signature OK\n"},
		{name: "EC, body from stdin as -", args: []string{"-pubkey", ecPub, "-signature", ecSig, "-"}, stdin: body, wantStdout: "signature OK\n"},
		{name: "signature wrapped over lines", args: []string{"-pubkey", rsaPub, "-signature", wrapped, bodyFile}, wantStdout: "signature OK\n"},
		{name: "several keys during a rotation", args: []string{"-pubkey", otherPub, "-pubkey", ecPub, "-signature", ecSig, bodyFile}, wantStdout: "signature OK\n"},
		{name: "tampered body", args: []string{"-pubkey", rsaPub, "-signature", rsaSig}, stdin: bytes.Replace(body, []byte("completed"), []byte("rejected"), 1), wantCode: 1, wantStdout: "signature INVALID: provider: signature does not verify\n"},
		{name: "one trailing newline more", args: []string{"-pubkey", ecPub, "-signature", ecSig}, stdin: append(append([]byte{}, body...), '\n'), wantCode: 1, wantStdout: "signature INVALID: "},
		{name: "foreign key", args: []string{"-pubkey", otherPub, "-signature", ecSig, bodyFile}, wantCode: 1, wantStdout: "signature INVALID: provider: signature does not verify\n"},
		{name: "RSA signature against an EC key", args: []string{"-pubkey", ecPub, "-signature", rsaSig, bodyFile}, wantCode: 1, wantStdout: "signature INVALID: "},
		{name: "truncated signature", args: []string{"-pubkey", rsaPub, "-signature", rsaSig[:len(rsaSig)-8], bodyFile}, wantCode: 1, wantStdout: "signature INVALID: provider: malformed signature"},
		{name: "not base64", args: []string{"-pubkey", rsaPub, "-signature", "not*base64!", bodyFile}, wantCode: 1, wantStdout: "signature INVALID: provider: malformed signature: not base64"},
		{name: "missing -pubkey", args: []string{"-signature", rsaSig, bodyFile}, wantCode: 2, wantStderr: "orderd verify: -pubkey is required"},
		{name: "missing -signature", args: []string{"-pubkey", rsaPub, bodyFile}, wantCode: 2, wantStderr: "orderd verify: -signature is required"},
		{name: "unreadable key file", args: []string{"-pubkey", filepath.Join(dir, "absent.pem"), "-signature", rsaSig, bodyFile}, wantCode: 2, wantStderr: "orderd verify: -pubkey: public key file: open "},
		{name: "private key given as the public key", args: []string{"-pubkey", rsaKey, "-signature", rsaSig, bodyFile}, wantCode: 2, wantStderr: "is a private key"},
		{name: "unreadable body file", args: []string{"-pubkey", rsaPub, "-signature", rsaSig, filepath.Join(dir, "absent.json")}, wantCode: 2, wantStderr: "orderd verify: body: open "},
		{name: "two body files", args: []string{"-pubkey", rsaPub, "-signature", rsaSig, bodyFile, bodyFile}, wantCode: 2, wantStderr: "want at most one body file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runOrderd(t, nil, bytes.NewReader(tt.stdin), append([]string{"verify"}, tt.args...)...)
			if r.code != tt.wantCode {
				t.Errorf("exit code %d, want %d\nstdout: %s\nstderr: %s", r.code, tt.wantCode, r.stdout, r.stderr)
			}
			if !strings.HasPrefix(r.stdout, tt.wantStdout) || (tt.wantStdout == "" && r.stdout != "") {
				t.Errorf("stdout %q, want it to start with %q", r.stdout, tt.wantStdout)
			}
			if !strings.Contains(r.stderr, tt.wantStderr) || (tt.wantStderr == "" && r.stderr != "") {
				t.Errorf("stderr %q, want %q", r.stderr, tt.wantStderr)
			}
		})
	}

	// The verdict is the same when openssl itself is asked.
	sigFile := filepath.Join(dir, "sig.bin")
	if err := os.WriteFile(sigFile, openssl(t, []byte(rsaSig), "base64", "-d", "-A"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := openssl(t, body, "dgst", "-sha512", "-verify", rsaPub, "-signature", sigFile); !bytes.Contains(out, []byte("Verified OK")) {
		t.Fatalf("openssl does not verify the signature the test made: %s", out)
	}
}

func TestConfig_ProviderPublicKeys(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl is not installed (.ci/run installs it)")
	}
	dir := t.TempDir()
	_, pub := keyPair(t, dir, "ec", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256")
	priv, pub2 := keyPair(t, dir, "rsa", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048")
	load := func(keys ...string) ([]int, error) {
		yaml := "provider:\n  base_url: https://p.example\n  api_key: k\n  public_keys:\n"
		for _, k := range keys {
			yaml += "    - " + k + "\n"
		}
		path := writeFile(t, dir, "config.yaml", yaml)
		cfg, err := LoadConfig(path, func(string) string { return "" })
		if err != nil {
			t.Fatalf("LoadConfig: %v", err)
		}
		got, err := cfg.ProviderPublicKeys()
		return make([]int, len(got)), err
	}

	if keys, err := load(pub, pub2); err != nil || len(keys) != 2 {
		t.Errorf("two key files: %d keys, %v", len(keys), err)
	}
	for name, tc := range map[string]struct {
		file, want string
	}{
		"missing file":  {filepath.Join(dir, "absent.pem"), "line 6: provider.public_keys[1]: public key file: open "},
		"a private key": {priv, "is a private key"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := load(pub, tc.file)
			var ce *configError
			if err == nil || !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "config.yaml") {
				t.Errorf("error %v, want a config error naming the file and %q", err, tc.want)
			}
		})
	}
}

// TestRun_VerifyKeyFiles: -pubkey files are read like the configuration's
// key files, with a size limit and only when they are regular files, so
// /dev/zero cannot exhaust memory and a FIFO cannot hold the command; each
// refusal names the flag and the file and exits 2.
func TestRun_VerifyKeyFiles(t *testing.T) {
	dir := t.TempDir()
	body := writeFile(t, dir, "body.json", `{"id":"ord_1"}`)
	big := writeFile(t, dir, "big.pem", strings.Repeat("k", maxSecretFileBytes+1))
	fifo := mkfifo(t, dir, "fifo.pem")
	tests := []struct {
		name, file, want string
	}{
		{name: "file over the limit", file: big, want: big + " is larger than 65536 bytes"},
		{name: "named pipe", file: fifo, want: fifo + " is not a regular file (it is a named pipe)"},
		{name: "endless device", file: "/dev/zero", want: "/dev/zero is not a regular file (it is a character device)"},
		{name: "directory", file: dir, want: dir + " is not a regular file (it is a directory)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := os.Stat(tt.file); err != nil {
				t.Skip(err)
			}
			ch := make(chan result, 1)
			go func() {
				ch <- runOrderd(t, nil, nil, "verify", "-pubkey", tt.file, "-signature", "c2ln", body)
			}()
			var r result
			select {
			case r = <-ch:
			case <-time.After(10 * time.Second):
				t.Fatal("verify is still reading the key file after 10s")
			}
			if r.code != 2 {
				t.Errorf("exit code %d, want 2\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
			}
			if want := "orderd verify: -pubkey: public key file: " + tt.want; !strings.Contains(r.stderr, want) {
				t.Errorf("stderr %q, want %q", r.stderr, want)
			}
		})
	}
}
