//go:build e2e

package e2e_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"orderd/test/support/testaddr"

	"orderd/test/support/testbin"
)

// proc is one started program. It is stopped by its PID: kill sends
// SIGKILL, stop SIGTERM; the test's cleanup kills whatever still runs.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited
	err  error         // Wait's result, valid after done
	log  *os.File
}

// startProc starts bin with args, its stderr (and stdout unless a writer is
// given) appended to logPath. The test's cleanup kills it if it still runs.
func startProc(t *testing.T, name, logPath string, stdout io.Writer, bin string, args ...string) *proc {
	t.Helper()
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(lf, "---- %s start %s %s\n", time.Now().Format(time.RFC3339Nano), name, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Stderr = lf
	cmd.Stdout = lf
	if stdout != nil {
		cmd.Stdout = stdout
	}
	if err := cmd.Start(); err != nil {
		lf.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), log: lf}
	go func() {
		p.err = cmd.Wait()
		fmt.Fprintf(lf, "---- %s exit %s: %v\n", time.Now().Format(time.RFC3339Nano), name, p.err)
		lf.Close()
		close(p.done)
	}()
	t.Cleanup(p.kill)
	return p
}

// running reports whether the process has not exited yet.
func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL to the process by its PID and waits for it to exit.
func (p *proc) kill() {
	if !p.running() {
		return
	}
	_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// stop sends SIGTERM and waits up to timeout for a clean exit; past it the
// process is killed and stop returns an error.
func (p *proc) stop(timeout time.Duration) error {
	if !p.running() {
		return fmt.Errorf("%s had already exited: %v", p.name, p.err)
	}
	_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		p.kill()
		return fmt.Errorf("%s did not stop within %s of SIGTERM", p.name, timeout)
	}
}

// dumpLogsOnFailure prints the tail of each log file when the test failed.
func dumpLogsOnFailure(t *testing.T, paths ...string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
			if len(lines) > 60 {
				lines = lines[len(lines)-60:]
			}
			t.Logf("---- last lines of %s:\n%s", filepath.Base(p), strings.Join(lines, "\n"))
		}
	})
}

// waitFor polls cond every interval until it is true or timeout passes.
func waitFor(timeout, interval time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(interval)
	}
}

// httpStatus does a GET and returns the status and body; 0 when the
// request failed.
func httpStatus(url string) (int, string) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, string(b)
}

// natsServer is a nats-server process with JetStream on a fixed port and
// store directory, so it can be killed and started again on the same data.
// Its ports are reserved for the test (see testaddr), so nothing else takes
// them while it is down.
type natsServer struct {
	t        *testing.T
	addr     string // client host:port
	monitor  string // monitoring host:port
	confPath string
	logPath  string
	p        *proc
}

// newNATS prepares a nats-server in dir without starting it.
func newNATS(t *testing.T, dir string) *natsServer {
	t.Helper()
	n := &natsServer{t: t, addr: testaddr.Loopback(t), monitor: testaddr.Loopback(t),
		confPath: filepath.Join(dir, "nats.conf"), logPath: filepath.Join(dir, "nats.log")}
	host, port, _ := net.SplitHostPort(n.addr)
	mhost, mport, _ := net.SplitHostPort(n.monitor)
	conf := fmt.Sprintf(`host: %s
port: %s
http: "%s:%s"
jetstream {
  store_dir: %q
  max_memory_store: 64MB
  max_file_store: 1GB
  # Every write reaches the disk before JetStream acknowledges it.
  sync_interval: always
}
`, host, port, mhost, mport, filepath.Join(dir, "jetstream"))
	if err := os.WriteFile(n.confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	dumpLogsOnFailure(t, n.logPath)
	return n
}

// URL is the client URL.
func (n *natsServer) URL() string { return "nats://" + n.addr }

// start starts the server and waits until JetStream is healthy.
func (n *natsServer) start() {
	n.t.Helper()
	n.p = startProc(n.t, "nats-server", n.logPath, nil, bins.nats, "-c", n.confPath)
	ok := waitFor(15*time.Second, 20*time.Millisecond, func() bool {
		if !n.p.running() {
			return true
		}
		code, _ := httpStatus("http://" + n.monitor + "/healthz?js-enabled-only=true")
		return code == http.StatusOK
	})
	if !n.p.running() {
		n.t.Fatalf("nats-server exited at start: %v", n.p.err)
	}
	if !ok {
		n.t.Fatal("nats-server not healthy within 15s")
	}
}

// kill stops the server with SIGKILL.
func (n *natsServer) kill() { n.p.kill() }

// fakeProvider is cmd/providertest running as a process.
type fakeProvider struct {
	t       *testing.T
	url     string
	apiKey  string
	pubKey  string // PEM file of its webhook key
	logPath string
	p       *proc
}

// startFake starts the fake provider with extra flags and waits for it to
// print its URL and API key.
func startFake(t *testing.T, dir string, flags ...string) *fakeProvider {
	t.Helper()
	f := &fakeProvider{t: t, pubKey: filepath.Join(dir, "provider.pem"), logPath: filepath.Join(dir, "provider.log")}
	dumpLogsOnFailure(t, f.logPath)
	pr, pw := io.Pipe()
	args := append([]string{"-listen", "127.0.0.1:0", "-pubkey", f.pubKey}, flags...)
	f.p = startProc(t, "providertest", f.logPath, pw, bins.provider, args...)
	go func() {
		<-f.p.done
		pw.Close()
	}()
	url, key, err := testbin.ProviderReady(pr, 15*time.Second)
	if err != nil {
		t.Fatalf("%v (%v)", err, f.p.err)
	}
	f.url, f.apiKey = url, key
	return f
}

// control calls a test control under /_control/ and decodes its data into
// out (when not nil). It fails the test unless the answer is 200.
func (f *fakeProvider) control(method, name string, body any, out any) {
	f.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(mustJSON(f.t, body))
	}
	req, err := http.NewRequest(method, f.url+"/_control/"+name, rd)
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Authorization", f.apiKey)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		f.t.Fatalf("control %s: %v", name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		f.t.Fatalf("control %s: %d %s", name, resp.StatusCode, b)
	}
	if out != nil {
		if err := decodeData(b, out); err != nil {
			f.t.Fatalf("control %s: %v: %s", name, err, b)
		}
	}
}

// orderdConfig holds what differs between the suite's orderd configs.
type orderdConfig struct {
	providerURL, apiKey string
	publicKeys          []string
	natsURL             string
	// embeddedNATS, when set, runs orderd's embedded NATS server with
	// its store in this directory (natsURL is then ignored).
	embeddedNATS string
	storePath    string
	// publicURL, when set, is receiver.public_url.
	publicURL bool
	// reconcile is the whole reconcile section; empty turns every job off.
	reconcile string
	// extra is appended to the top level.
	extra string
	// rate and burst are provider.rate_limit and rate_burst; 0 means 200
	// and 20.
	rate  float64
	burst int
}

// orderd is the daemon as a process, restartable on the same files.
type orderd struct {
	t        *testing.T
	dir      string
	recv     string // webhook listener host:port
	admin    string // admin listener host:port
	cfgPath  string
	logPath  string
	dbPath   string
	natsURL  string
	p        *proc
	webhooks string // webhook URL
}

// newOrderd writes a config in dir for a daemon on loopback ports reserved
// for the test, so that a restarted daemon gets the same addresses and
// clients (the load, the fake's webhooks) keep reaching it.
func newOrderd(t *testing.T, dir string, c orderdConfig) *orderd {
	t.Helper()
	o := &orderd{t: t, dir: dir, recv: testaddr.Loopback(t), admin: testaddr.Loopback(t),
		cfgPath: filepath.Join(dir, "orderd.yaml"), logPath: filepath.Join(dir, "orderd.log"),
		dbPath: c.storePath, natsURL: c.natsURL}
	if o.dbPath == "" {
		o.dbPath = filepath.Join(dir, "orderd.db")
	}
	o.webhooks = "http://" + o.recv + "/webhooks/orders"
	rec := c.reconcile
	if rec == "" {
		rec = `reconcile:
  schedules: {stale: "off", doubt: "off", balances: "off", requisites: "off", report: "off"}
`
	}
	if c.rate == 0 {
		c.rate, c.burst = 200, 20
	}
	keys := make([]string, len(c.publicKeys))
	for i, k := range c.publicKeys {
		keys[i] = fmt.Sprintf("%q", k)
	}
	publicURL := ""
	if c.publicURL {
		publicURL = "  public_url: " + o.webhooks + "\n"
	}
	natsSection := fmt.Sprintf("nats:\n  url: %s\n  unreachable_ready_after: 1s\n", c.natsURL)
	if c.embeddedNATS != "" {
		addr := testaddr.Loopback(t)
		o.natsURL = "nats://" + addr
		natsSection = fmt.Sprintf("nats:\n  embedded:\n    listen: %s\n    store_dir: %q\n  unreachable_ready_after: 1s\n", addr, c.embeddedNATS)
	}
	cfg := fmt.Sprintf(`provider:
  base_url: %s
  api_key: %s
  public_keys: [%s]
  timeout: 1s
  rate_limit: %g
  rate_burst: %d
receiver:
  listen: %s
  ack_budget: 2s
%sadmin:
  listen: %s
store:
  path: %q
%spublish:
  publish_timeout: 2s
reports:
  dir: %q
log:
  level: info
  format: json
shutdown_timeout: 10s
%s%s`, c.providerURL, c.apiKey, strings.Join(keys, ", "), c.rate, c.burst, o.recv, publicURL, o.admin, o.dbPath,
		natsSection, filepath.Join(dir, "reports"), rec, c.extra)
	if err := os.WriteFile(o.cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	dumpLogsOnFailure(t, o.logPath)
	return o
}

// start starts the daemon without waiting for it.
func (o *orderd) start() {
	o.t.Helper()
	o.p = startProc(o.t, "orderd", o.logPath, nil, bins.orderd, "run", "-config", o.cfgPath)
}

// waitHealthy waits until GET /healthz answers 200: the process serves.
func (o *orderd) waitHealthy() {
	o.t.Helper()
	o.waitAdmin("/healthz", 20*time.Second)
}

// waitReady waits until GET /readyz answers 200: store and NATS are fine.
func (o *orderd) waitReady() {
	o.t.Helper()
	o.waitAdmin("/readyz", 30*time.Second)
}

func (o *orderd) waitAdmin(path string, timeout time.Duration) {
	o.t.Helper()
	var code int
	var body string
	ok := waitFor(timeout, 20*time.Millisecond, func() bool {
		if !o.p.running() {
			return true
		}
		code, body = httpStatus("http://" + o.admin + path)
		return code == http.StatusOK
	})
	if !o.p.running() {
		o.t.Fatalf("orderd exited while waiting for %s: %v", path, o.p.err)
	}
	if !ok {
		o.t.Fatalf("orderd %s not 200 within %s: last %d %s", path, timeout, code, body)
	}
}

// startReady starts the daemon and waits until it is ready.
func (o *orderd) startReady() {
	o.t.Helper()
	o.start()
	o.waitReady()
}

// kill stops the daemon with SIGKILL.
func (o *orderd) kill() { o.p.kill() }

// stop stops the daemon with SIGTERM and fails the test unless it exits
// cleanly.
func (o *orderd) stop() {
	o.t.Helper()
	if err := o.p.stop(20 * time.Second); err != nil {
		o.t.Fatalf("orderd did not stop cleanly: %v", err)
	}
}

// reconcileOnce runs "orderd reconcile -job JOB" on the same config and
// returns its summary (stdout).
func (o *orderd) reconcileOnce(ctx context.Context, job string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bins.orderd, "reconcile", "-config", o.cfgPath, "-job", job)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if lf, lerr := os.OpenFile(o.logPath, os.O_WRONLY|os.O_APPEND, 0o644); lerr == nil {
		fmt.Fprintf(lf, "---- orderd reconcile -job %s: %v\n%s%s", job, err, stdout.String(), stderr.String())
		lf.Close()
	}
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return stdout.String(), fmt.Errorf("orderd reconcile exited %d: %s", ee.ExitCode(), stderr.String())
		}
		return stdout.String(), err
	}
	return stdout.String(), nil
}

// env is one test's world: a nats-server, the fake provider, a signing key
// of the test's own, and an orderd config that trusts both keys.
type env struct {
	dir    string
	nats   *natsServer
	fake   *fakeProvider
	signer *signer
	od     *orderd
}

// envOptions adjust newEnv.
type envOptions struct {
	fakeFlags []string
	reconcile string
	publicURL bool
	storePath string
	// natsDown leaves nats-server not started.
	natsDown bool
	// embeddedNATS runs orderd's embedded NATS with its store in this
	// directory instead of the suite's nats-server (which still starts,
	// unused, unless natsDown).
	embeddedNATS string
}

// newEnv starts nats-server (unless natsDown) and the fake provider and
// writes orderd's config; orderd itself is not started.
func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{dir: dir, nats: newNATS(t, dir), fake: startFake(t, dir, o.fakeFlags...), signer: newSigner(t, dir)}
	if !o.natsDown {
		e.nats.start()
	}
	e.od = newOrderd(t, dir, orderdConfig{
		providerURL:  e.fake.url,
		apiKey:       e.fake.apiKey,
		publicKeys:   []string{e.fake.pubKey, e.signer.pubKey},
		natsURL:      e.nats.URL(),
		storePath:    o.storePath,
		embeddedNATS: o.embeddedNATS,
		publicURL:    o.publicURL,
		reconcile:    o.reconcile,
	})
	return e
}
