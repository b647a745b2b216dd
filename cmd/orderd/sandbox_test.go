package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sandboxRun is one in-process "orderd sandbox -demo=false".
type sandboxRun struct {
	stdout, stderr     *syncBuffer
	admin, fake, fkey  string
	stop               context.CancelFunc
	done               chan error
	banner, configPath string
}

var (
	bannerAdmin = regexp.MustCompile(`admin API +http://(\S+)`)
	bannerFake  = regexp.MustCompile(`fake provider +(\S+) +\(API key "([^"]+)"\)`)
)

// startSandbox runs the sandbox in dir, without demo traffic, until the
// test stops it, and waits until it has printed its banner and is ready.
func startSandbox(t *testing.T, dir string) *sandboxRun {
	t.Helper()
	return startSandboxWith(t, dir, "-demo=false")
}

// startSandboxWith is startSandbox with the sandbox's flags given.
func startSandboxWith(t *testing.T, dir string, flags ...string) *sandboxRun {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	s := &sandboxRun{stdout: &syncBuffer{}, stderr: &syncBuffer{}, stop: cancel, done: make(chan error, 1),
		configPath: filepath.Join(dir, "config.yaml")}
	args := append([]string{"orderd", "sandbox", "-dir", dir}, flags...)
	go func() {
		s.done <- run(ctx, args, func(string) string { return "" }, nil, s.stdout, s.stderr)
	}()
	t.Cleanup(func() { s.close(t) })
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		out := s.stdout.String()
		if strings.Contains(out, "to start from scratch.") {
			s.banner = out
			break
		}
		select {
		case err := <-s.done:
			s.done <- err
			t.Fatalf("the sandbox returned before its banner: %v\n%s", err, s.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no banner within 30s:\n%s\n%s", out, s.stderr)
		}
	}
	m, f := bannerAdmin.FindStringSubmatch(s.banner), bannerFake.FindStringSubmatch(s.banner)
	if m == nil || f == nil {
		t.Fatalf("the banner does not say where the admin API and the fake are:\n%s", s.banner)
	}
	s.admin, s.fake, s.fkey = m[1], f[1], f[2]
	waitReady(t, s.admin, s.done)
	return s
}

// close stops the sandbox and waits for it to return.
func (s *sandboxRun) close(t *testing.T) {
	t.Helper()
	s.stop()
	select {
	case err := <-s.done:
		s.done <- err
		if err != nil {
			t.Errorf("the sandbox returned %v\n%s", err, s.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Error("the sandbox did not stop within 30s")
	}
}

// do sends a JSON request and returns the status and body.
func do(t *testing.T, method, url, auth, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitStatus polls orderd until it has the order in status.
func (s *sandboxRun) waitStatus(t *testing.T, moid, status string) {
	t.Helper()
	s.waitStatusWithin(t, moid, status, 20*time.Second)
}

// waitStatusWithin is waitStatus with its own bound.
func (s *sandboxRun) waitStatusWithin(t *testing.T, moid, status string, within time.Duration) {
	t.Helper()
	var body string
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var code int
		if code, body = do(t, "GET", "http://"+s.admin+"/v1/orders/"+moid, "", ""); code == http.StatusOK &&
			strings.Contains(body, `"status":"`+status+`"`) {
			return
		}
	}
	t.Fatalf("orderd does not have %s %s within %s: %s", moid, status, within, body)
}

// TestSandbox_Restart: a sandbox stopped and started again finds the fake
// provider as it left it — its orders and balances — so the restart shows
// up as no drift and no unknown order, and the banner says what a restart
// keeps.
func TestSandbox_Restart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sb")
	s := startSandbox(t, dir)
	if !strings.Contains(s.banner, "tail -config "+s.configPath) || strings.Contains(s.banner, "Restarted") {
		t.Errorf("first banner:\n%s", s.banner)
	}
	for _, moid := range []string{"sb-1", "sb-2", "sb-3"} {
		code, body := do(t, "POST", "http://"+s.admin+"/v1/payins", "",
			`{"merchantOrderId":"`+moid+`","invoice":{"amount":"100.00","currency":"brl"},"client":{"name":"Test"}}`)
		if code != http.StatusCreated {
			t.Fatalf("create %s: %d %s", moid, code, body)
		}
	}
	for _, moid := range []string{"sb-1", "sb-2"} {
		if code, body := do(t, "POST", s.fake+"/_control/complete", s.fkey, `{"merchantOrderId":"`+moid+`"}`); code != http.StatusOK {
			t.Fatalf("complete %s: %d %s", moid, code, body)
		}
		s.waitStatus(t, moid, "completed")
	}
	balances := func(when string) string {
		t.Helper()
		r := runOrderd(t, nil, nil, "reconcile", "-config", s.configPath, "-job", "balances")
		if r.code != 0 {
			t.Fatalf("balances %s: exit %d\n%s%s", when, r.code, r.stdout, r.stderr)
		}
		return r.stdout
	}
	balances("before the restart")
	s.close(t)

	s = startSandbox(t, dir)
	for _, want := range []string{"Restarted:", "provider-state.json", "tail -config " + s.configPath, "nats sub"} {
		if !strings.Contains(s.banner, want) {
			t.Errorf("banner after the restart does not say %q:\n%s", want, s.banner)
		}
	}
	if i, j := strings.Index(s.banner, "tail -config"), strings.Index(s.banner, "nats sub"); i > j {
		t.Errorf("the banner offers nats sub before orderd tail:\n%s", s.banner)
	}
	// The fake still knows the open order and pays it; the webhook reaches
	// this run's receiver.
	if code, body := do(t, "POST", s.fake+"/_control/complete", s.fkey, `{"merchantOrderId":"sb-3"}`); code != http.StatusOK {
		t.Fatalf("complete sb-3 after the restart: %d %s", code, body)
	}
	s.waitStatus(t, "sb-3", "completed")
	if out := balances("after the restart"); !strings.Contains(out, "balances    ok ") || strings.Contains(out, "drifting=") {
		t.Errorf("balances after the restart:\n%s", out)
	}
	code, body := do(t, "GET", "http://"+s.admin+"/v1/findings?state=all&kind=balance_drift", "", "")
	var page struct{ Findings []json.RawMessage }
	if err := json.Unmarshal([]byte(body), &page); code != http.StatusOK || err != nil || len(page.Findings) != 0 {
		t.Errorf("balance_drift findings after the restart: %d %s", code, body)
	}
	if strings.Contains(s.stderr.String(), "ORDER_NOT_FOUND") {
		t.Errorf("the restarted sandbox polled orders the provider does not know:\n%s", s.stderr)
	}
}

// TestSandbox_SaysWhatItDoesOnPurpose: the banner names the faults the
// sandbox injects on purpose, and an accepted webhook shows in the log at
// the sandbox's level (info), not only at debug.
func TestSandbox_SaysWhatItDoesOnPurpose(t *testing.T) {
	s := startSandbox(t, filepath.Join(t.TempDir(), "sb"))
	for _, want := range []string{
		"On purpose",
		"twice",
		"gateway creation in doubt",
		"unexpected HTTP\n    status 500",
		"balance_drift",
		`"outcome":"accepted"`,
		`"stale"`,
		// Its own pid, which a signal must reach (not go run's).
		fmt.Sprintf("kill -INT %d", os.Getpid()),
	} {
		if !strings.Contains(s.banner, want) {
			t.Errorf("the banner does not say %q:\n%s", want, s.banner)
		}
	}
	code, body := do(t, "POST", "http://"+s.admin+"/v1/payins", "",
		`{"merchantOrderId":"sb-info","invoice":{"amount":"10.00","currency":"brl"},"client":{"name":"Test"}}`)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, body)
	}
	if code, body := do(t, "POST", s.fake+"/_control/complete", s.fkey, `{"merchantOrderId":"sb-info"}`); code != http.StatusOK {
		t.Fatalf("complete: %d %s", code, body)
	}
	s.waitStatus(t, "sb-info", "completed")
	// The receiver logs a delivery after it has answered it, so the line may
	// trail the status the test has just read.
	accepted := regexp.MustCompile(`(?mi)^.*"level":"info".*"msg":"webhook".*"outcome":"accepted".*"merchant_order_id":"sb-info".*$`)
	for deadline := time.Now().Add(10 * time.Second); !accepted.MatchString(s.stderr.String()); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no info line for the accepted webhook of sb-info within 10s:\n%s", s.stderr)
		}
	}
}

// inDoubtDemo matches the demo's log line for a creation the fake answers
// 500 after making it.
var inDoubtDemo = regexp.MustCompile(`"msg":"demo: the provider answers this creation 500 on purpose[^"]*".*"merchant_order_id":"(demo-[^"]+)"`)

// TestSandbox_demoFinishesInDoubtCreations: the demo's creations answered
// 500 on purpose are orders at the provider like the others, and their
// payers pay them: orderd sees each one completed, as it sees the demo's
// other payins, instead of processing until it gives up on them and
// raises a stuck_order finding nobody meant.
func TestSandbox_demoFinishesInDoubtCreations(t *testing.T) {
	// One demo step every 100ms: the in-doubt creation is every eighth
	// step, so two of them come within about two seconds.
	s := startSandboxWith(t, filepath.Join(t.TempDir(), "sb"), "-every", "100ms")
	var ids []string
	for deadline := time.Now().Add(20 * time.Second); len(ids) < 2; time.Sleep(50 * time.Millisecond) {
		ids = ids[:0]
		for _, m := range inDoubtDemo.FindAllStringSubmatch(s.stderr.String(), 2) {
			ids = append(ids, m[1])
		}
		if time.Now().After(deadline) {
			t.Fatalf("the demo made %d creations in doubt within 20s, want 2:\n%s", len(ids), s.stderr)
		}
	}
	for _, id := range ids {
		// Settled by the doubt job or learned from the webhook, it is an
		// order orderd knows, and its payer's payment completes it.
		s.waitStatusWithin(t, id, "completed", 45*time.Second)
	}
}

// freeBase finds a port N such that N to N+3 are free on 127.0.0.1 now.
func freeBase(t *testing.T) int {
	t.Helper()
	for base := 20000 + os.Getpid()%20000; base < 60000; base += 7 {
		var lns []net.Listener
		for i := range 4 {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+i))
			if err != nil {
				break
			}
			lns = append(lns, ln)
		}
		for _, ln := range lns {
			ln.Close()
		}
		if len(lns) == 4 {
			return base
		}
	}
	t.Fatal("no four consecutive free ports on 127.0.0.1")
	return 0
}

func TestSandbox_ListenBase(t *testing.T) {
	base := freeBase(t)
	s := startSandboxWith(t, t.TempDir(), "-demo=false", "-listen-base", strconv.Itoa(base))
	for _, want := range []string{
		fmt.Sprintf("webhooks        http://127.0.0.1:%d/webhooks/orders", base),
		fmt.Sprintf("admin API       http://127.0.0.1:%d ", base+1),
		fmt.Sprintf("NATS            nats://127.0.0.1:%d ", base+2),
		fmt.Sprintf("fake provider   http://127.0.0.1:%d ", base+3),
	} {
		if !strings.Contains(s.banner, want) {
			t.Errorf("the banner does not say %q:\n%s", want, s.banner)
		}
	}
	// The config the banner names points the other commands at the same ports.
	cfg, err := os.ReadFile(s.configPath)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("127.0.0.1:%d", base+2); !strings.Contains(string(cfg), want) {
		t.Errorf("config %s does not name NATS at %s:\n%s", s.configPath, want, cfg)
	}
}

func TestSandbox_ChosenPortTakenFails(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().String()
	dir := t.TempDir()
	r := runOrderd(t, nil, nil, "sandbox", "-dir", dir, "-demo=false", "-admin", taken)
	if r.code == 0 {
		t.Fatalf("the sandbox started with -admin %s taken; stdout:\n%s", taken, r.stdout)
	}
	if want := "admin API on " + taken; !strings.Contains(r.stderr, want) {
		t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
	}
	if strings.Contains(r.stdout, "sandbox is running") {
		t.Errorf("a banner was printed although the start failed:\n%s", r.stdout)
	}
}

func TestSandbox_PortFlagsRefused(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"base too high", []string{"-listen-base", "65533"}, "-listen-base 65533: want a port from 1 to 65532"},
		{"negative base", []string{"-listen-base", "-5"}, "-listen-base -5"},
		{"address without port", []string{"-nats", "127.0.0.1"}, `-nats "127.0.0.1": want HOST:PORT`},
		{"port not a number", []string{"-provider", "127.0.0.1:http"}, `-provider "127.0.0.1:http": the port is not a number`},
		{"cluster", []string{"-cluster", "-listen-base", "9000"}, "apply to the single-node sandbox, not to -cluster"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "sb")
			r := runOrderd(t, nil, nil, append([]string{"sandbox", "-dir", dir, "-demo=false"}, tt.args...)...)
			if r.code != 2 {
				t.Errorf("exit code %d, want 2; stderr:\n%s", r.code, r.stderr)
			}
			if !strings.Contains(r.stderr, tt.want) {
				t.Errorf("stderr does not say %q:\n%s", tt.want, r.stderr)
			}
			if _, err := os.Stat(dir); err == nil {
				t.Errorf("a refused start created %s", dir)
			}
		})
	}
}
