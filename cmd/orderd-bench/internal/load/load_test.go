package load

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"orderd/cmd/orderd-bench/internal/cli"
	"orderd/provider"
	"orderd/receiver"
	"orderd/store"
	"orderd/test/support/testaddr"
)

// liveReceiver is the real receiver over a real store in a temporary directory,
// verifying with the public key the tool generated.
type liveReceiver struct {
	url   string
	store *store.Store
}

func startReceiver(t *testing.T, pubFile string) *liveReceiver {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "orderd.db"), store.Options{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := st.Close(ctx); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	keys, err := provider.LoadPublicKeys(pubFile)
	if err != nil {
		t.Fatal(err)
	}
	v, err := provider.NewVerifier(keys...)
	if err != nil {
		t.Fatal(err)
	}
	srv := receiver.NewServer(receiver.ServerConfig{Addr: "127.0.0.1:0"},
		receiver.New(receiver.Config{}, receiver.Deps{Store: st, Verifier: v}), nil)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			t.Errorf("close server: %v", err)
		}
	})
	return &liveReceiver{url: "http://" + srv.Addr() + receiver.DefaultPath, store: st}
}

func (tg *liveReceiver) count(t *testing.T, table string) int {
	t.Helper()
	var n int
	if err := tg.store.DB().QueryRowContext(t.Context(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

// runTool runs the command in-process and returns its output.
func runTool(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = run(t.Context(), args, &out, &errOut)
	return out.String(), errOut.String(), err
}

// genKey writes a fresh key pair with the tool itself.
func genKey(t *testing.T, kind string) (priv, pub string) {
	t.Helper()
	priv = filepath.Join(t.TempDir(), "load.pem")
	if _, stderr, err := runTool(t, "-gen-key-out", priv, "-key-type", kind); err != nil {
		t.Fatalf("-gen-key-out: %v\n%s", err, stderr)
	}
	return priv, priv + ".pub"
}

// summaryLine is one parsed summary: field name to value.
type summaryLine map[string]string

// parseSummaries reads the summary lines of stdout by their target.
func parseSummaries(t *testing.T, stdout string) map[string]summaryLine {
	t.Helper()
	lines := map[string]summaryLine{}
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		s := summaryLine{}
		for _, field := range strings.Fields(line) {
			k, v, ok := strings.Cut(field, "=")
			if !ok {
				t.Fatalf("field %q of %q is not key=value", field, line)
			}
			s[k] = v
		}
		name := s["target"]
		if name == "" {
			name = "ratio"
		}
		lines[name] = s
	}
	return lines
}

func (s summaryLine) int(t *testing.T, key string) int {
	t.Helper()
	n, err := strconv.Atoi(s[key])
	if err != nil {
		t.Fatalf("%s=%q is not a count", key, s[key])
	}
	return n
}

// ms parses a latency field such as "12.34ms".
func (s summaryLine) ms(t *testing.T, key string) float64 {
	t.Helper()
	v, ok := strings.CutSuffix(s[key], "ms")
	f, err := strconv.ParseFloat(v, 64)
	if !ok || err != nil {
		t.Fatalf("%s=%q is not milliseconds", key, s[key])
	}
	return f
}

// checkCounts asserts that the counts of a summary add up and that the
// latency percentiles are ordered.
func checkCounts(t *testing.T, s summaryLine) {
	t.Helper()
	sent := s.int(t, "sent")
	if sum := s.int(t, "ok") + s.int(t, "503") + s.int(t, "other") + s.int(t, "err"); sum != sent {
		t.Errorf("ok+503+other+err = %d, sent = %d", sum, sent)
	}
	p50, p90, p99, maxMS := s.ms(t, "p50"), s.ms(t, "p90"), s.ms(t, "p99"), s.ms(t, "max")
	if !(0 < p50 && p50 <= p90 && p90 <= p99 && p99 <= maxMS) {
		t.Errorf("percentiles out of order: p50=%v p90=%v p99=%v max=%v", p50, p90, p99, maxMS)
	}
	if _, err := strconv.ParseFloat(strings.TrimSuffix(s["rate"], "/s"), 64); err != nil || !strings.HasSuffix(s["rate"], "/s") {
		t.Errorf("rate=%q is not N/s", s["rate"])
	}
}

// TestRun_Flat drives a real receiver flat out beside the ceiling: every
// request is answered 200, every repeat is recognised as a duplicate, and
// the store holds one order per distinct webhook.
func TestRun_Flat(t *testing.T) {
	priv, pub := genKey(t, "ecdsa")
	tg := startReceiver(t, pub)
	const n = 200
	stdout, stderr, err := runTool(t, "-url", tg.url, "-ceiling", "-key", priv,
		"-flat", "-c", "8", "-n", strconv.Itoa(n), "-repeat", "0.2")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr)
	}
	sums := parseSummaries(t, stdout)
	orderd, ceiling := sums["orderd"], sums["ceiling"]
	if orderd == nil || ceiling == nil || sums["ratio"] == nil {
		t.Fatalf("want orderd, ceiling and ratio lines, got:\n%s", stdout)
	}
	for _, s := range []summaryLine{orderd, ceiling} {
		checkCounts(t, s)
		if s.int(t, "sent") != n || s.int(t, "ok") != n {
			t.Errorf("%s: sent=%s ok=%s, want %d each", s["target"], s["sent"], s["ok"], n)
		}
	}
	repeats := orderd.int(t, "repeats")
	// Repeats are spread evenly; the first senders have nothing
	// acknowledged to repeat yet.
	if repeats < n/5-8 || repeats > n/5 {
		t.Errorf("repeats = %d, want about %d", repeats, n/5)
	}
	if got := orderd.int(t, "duplicate"); got != repeats {
		t.Errorf("receiver answered duplicate %d times for %d repeats", got, repeats)
	}
	if got := ceiling.int(t, "duplicate"); got != 0 {
		t.Errorf("ceiling duplicate = %d, want 0 (it keeps nothing)", got)
	}
	if got, want := tg.count(t, "orders"), n-repeats; got != want {
		t.Errorf("orders stored = %d, want %d distinct webhooks", got, want)
	}
	if got := tg.count(t, "quarantine"); got != 0 {
		t.Errorf("quarantined = %d, want 0: the generated bodies must be valid orders", got)
	}
	ratio, err := strconv.ParseFloat(sums["ratio"]["ratio"], 64)
	if err != nil || ratio <= 0 {
		t.Errorf("ratio line = %v", sums["ratio"])
	}
}

// TestRun_Rate: at a fixed rate the requests are paced over the duration,
// not sent at once. The pacing is judged on the ceiling, whose answers take
// no disk writes; the receiver's count must add up to what it stored.
func TestRun_Rate(t *testing.T) {
	priv, pub := genKey(t, "ecdsa")
	tg := startReceiver(t, pub)
	stdout, stderr, err := runTool(t, "-url", tg.url, "-ceiling", "-key", priv, "-rate", "200", "-d", "1s", "-c", "32")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr)
	}
	sums := parseSummaries(t, stdout)
	orderd, ceiling := sums["orderd"], sums["ceiling"]
	if orderd == nil || ceiling == nil {
		t.Fatalf("want orderd and ceiling lines, got:\n%s", stdout)
	}
	for _, s := range []summaryLine{orderd, ceiling} {
		checkCounts(t, s)
		if s["mode"] != "200/s" || s["lag_max"] == "" {
			t.Errorf("%s: mode=%q lag_max=%q, want 200/s and a lag", s["target"], s["mode"], s["lag_max"])
		}
		// 200 slots in 1 s: never more requests than slots.
		if sent := s.int(t, "sent"); sent > 200 {
			t.Errorf("%s: sent = %d, want at most 200", s["target"], sent)
		}
	}
	// A loaded machine may miss the last few slots, not most of them.
	if sent := ceiling.int(t, "sent"); sent < 150 {
		t.Errorf("ceiling: sent = %d of 200 slots:\n%s", sent, stdout)
	}
	elapsed, err := time.ParseDuration(ceiling["elapsed"])
	if err != nil || elapsed < 900*time.Millisecond || elapsed > 2*time.Second {
		t.Errorf("ceiling: elapsed = %q, want about the 1s the slots span", ceiling["elapsed"])
	}
	if got := tg.count(t, "orders"); got != orderd.int(t, "ok") {
		t.Errorf("orders = %d, ok = %s", got, orderd["ok"])
	}
}

// TestRun_Answers: answers other than 200 are counted where they belong.
func TestRun_Answers(t *testing.T) {
	priv, _ := genKey(t, "ecdsa")
	_, otherPub := genKey(t, "ecdsa")
	tg := startReceiver(t, otherPub) // verifies with a key the tool does not sign with
	stdout, stderr, err := runTool(t, "-url", tg.url, "-key", priv, "-flat", "-n", "20", "-c", "2")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr)
	}
	s := parseSummaries(t, stdout)["orderd"]
	checkCounts(t, s)
	if s.int(t, "other") != 20 || s.int(t, "ok") != 0 {
		t.Errorf("other=%s ok=%s, want every answer a 401", s["other"], s["ok"])
	}
	if !strings.Contains(stderr, "answer 401") {
		t.Errorf("stderr does not name the first failure:\n%s", stderr)
	}
	if got := tg.count(t, "orders"); got != 0 {
		t.Errorf("orders = %d after forged webhooks", got)
	}

	// Nothing listening: every request is a transport error.
	dead := "http://" + testaddr.Loopback(t) + receiver.DefaultPath
	stdout, _, err = runTool(t, "-url", dead, "-key", priv, "-flat", "-n", "5", "-c", "1", "-timeout", "2s")
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	s = parseSummaries(t, stdout)["orderd"]
	if s.int(t, "err") != 5 || s.int(t, "sent") != 5 {
		t.Errorf("err=%s sent=%s, want 5 transport errors", s["err"], s["sent"])
	}
}

// TestRun_Usage: a bad command line exits 2 with a message naming the flag,
// and sends nothing.
func TestRun_Usage(t *testing.T) {
	priv, _ := genKey(t, "ecdsa")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"nothing to do", []string{"-flat", "-n", "1"}, "nothing to do"},
		{"no key", []string{"-ceiling", "-flat", "-n", "1"}, "-key"},
		{"no mode", []string{"-ceiling", "-key", priv, "-n", "1"}, "-flat"},
		{"both modes", []string{"-ceiling", "-key", priv, "-flat", "-rate", "5", "-n", "1"}, "-flat"},
		{"unbounded", []string{"-ceiling", "-key", priv, "-flat"}, "-n"},
		{"repeat of one", []string{"-ceiling", "-key", priv, "-flat", "-n", "1", "-repeat", "1"}, "-repeat"},
		{"no concurrency", []string{"-ceiling", "-key", priv, "-flat", "-n", "1", "-c", "0"}, "-c"},
		{"not a URL", []string{"-url", "127.0.0.1:8080", "-key", priv, "-flat", "-n", "1"}, "-url"},
		{"key file missing", []string{"-ceiling", "-key", priv + ".missing", "-flat", "-n", "1"}, "-key"},
		{"public key as private", []string{"-ceiling", "-key", priv + ".pub", "-flat", "-n", "1"}, "-key"},
		{"unknown key type", []string{"-gen-key-out", filepath.Join(t.TempDir(), "k.pem"), "-key-type", "dsa"}, "-key-type"},
		{"no rounds", []string{"-ceiling", "-key", priv, "-flat", "-n", "1", "-rounds", "0"}, "-rounds"},
		{"stray argument", []string{"-ceiling", "-key", priv, "-flat", "-n", "1", "extra"}, "extra"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, err := runTool(t, tt.args...)
			if cli.ExitCode(err, &bytes.Buffer{}, "load") != 2 {
				t.Fatalf("err = %v, want a usage error (exit 2)", err)
			}
			if !strings.Contains(err.Error()+stderr, tt.want) {
				t.Errorf("error %q does not name %q", err, tt.want)
			}
			if stdout != "" {
				t.Errorf("stdout = %q, want nothing sent", stdout)
			}
		})
	}
}

// TestGenerateKeyFiles: the private key is written 0600 and never over an
// existing file.
func TestGenerateKeyFiles(t *testing.T) {
	priv, pub := genKey(t, "ecdsa")
	fi, err := os.Stat(priv)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("private key mode = %v, want 0600", perm)
	}
	before, _ := os.ReadFile(priv)
	if _, _, err := runTool(t, "-gen-key-out", priv); err == nil {
		t.Error("-gen-key-out overwrote an existing key file")
	}
	if after, _ := os.ReadFile(priv); !bytes.Equal(before, after) {
		t.Error("existing key file changed")
	}
	if _, err := provider.LoadPublicKeys(pub); err != nil {
		t.Errorf("public key file: %v", err)
	}
}

// TestLoadKey_OpenSSL: keys made by the openssl CLI in its usual forms
// sign webhooks that openssl itself verifies.
func TestLoadKey_OpenSSL(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl not installed")
	}
	dir := t.TempDir()
	tests := []struct {
		name string
		gen  func(out string) []string
	}{
		{"EC PRIVATE KEY (SEC 1)", func(out string) []string {
			return []string{"ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", out}
		}},
		{"PRIVATE KEY (PKCS #8, RSA)", func(out string) []string {
			return []string{"genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", out}
		}},
		{"RSA PRIVATE KEY (PKCS #1)", func(out string) []string {
			return []string{"genrsa", "-traditional", "-out", out, "2048"}
		}},
	}
	bodyFile := filepath.Join(dir, "body.json")
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keyFile := filepath.Join(dir, strconv.Itoa(i)+".pem")
			pubFile := keyFile + ".pub"
			openssl(t, tt.gen(keyFile)...)
			if pemType := firstPEMType(t, keyFile); !strings.Contains(tt.name, pemType+" (") {
				t.Fatalf("openssl wrote a %q block, not the form this case is about", pemType)
			}
			openssl(t, "pkey", "-in", keyFile, "-pubout", "-out", pubFile)
			key, err := loadKey(keyFile)
			if err != nil {
				t.Fatalf("loadKey: %v", err)
			}
			c, err := newCorpus(t.Context(), key, 1)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(bodyFile, c.bodies[0], 0o600); err != nil {
				t.Fatal(err)
			}
			sigFile := filepath.Join(dir, "sig.bin")
			raw, err := base64.StdEncoding.DecodeString(c.sigs[0])
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(sigFile, raw, 0o600); err != nil {
				t.Fatal(err)
			}
			openssl(t, "dgst", "-sha512", "-verify", pubFile, "-signature", sigFile, bodyFile)
		})
	}
}

func openssl(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "openssl", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("openssl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func firstPEMType(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatalf("%s holds no PEM block", path)
	}
	return block.Type
}
