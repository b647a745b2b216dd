//go:build chaos

package chaos_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"orderd/test/support/testbin"
)

// leaseTTL is cluster.lease_ttl of the suite's instances. A lease write
// lets its holder act for 9/10 of it (docs/replicated-mode.md).
const leaseTTL = 2 * time.Second

// balancesEvery is how often the suite's leader reads the provider's
// balances (reconcile.schedules.balances): a leader that leads that long
// makes a leader-only call whatever else the run left it to do.
const balancesEvery = 3 * time.Second

// proc is one started program, in a namespace, known by its PID: every
// signal the suite sends goes to that PID ("ip netns exec" execs the
// program in its own place, so the PID is the program's).
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited
	err  error         // Wait's result, valid after done

	mu     sync.Mutex
	paused bool
}

// startIn starts bin in h's namespace with its output appended to logPath
// (and stdout to out when not nil). The test's cleanup kills it if it
// still runs.
func startIn(t *testing.T, h *host, name, logPath string, out io.Writer, bin string, args ...string) *proc {
	t.Helper()
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(lf, "---- %s start %s\n", time.Now().Format(time.RFC3339Nano), name)
	cmd := exec.Command("ip", append([]string{"netns", "exec", h.ns, bin}, args...)...)
	cmd.Stdout, cmd.Stderr = lf, lf
	if out != nil {
		cmd.Stdout = out
	}
	if err := cmd.Start(); err != nil {
		lf.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		fmt.Fprintf(lf, "---- %s exit %s: %v\n", time.Now().Format(time.RFC3339Nano), name, p.err)
		lf.Close()
		close(p.done)
	}()
	t.Cleanup(p.kill)
	return p
}

func (p *proc) running() bool {
	if p == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// signal sends sig to the process's PID if it still runs.
func (p *proc) signal(sig syscall.Signal) {
	if p.running() {
		_ = syscall.Kill(p.cmd.Process.Pid, sig)
	}
}

// pause stops the process with SIGSTOP; resume continues it.
func (p *proc) pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.signal(syscall.SIGSTOP)
	p.paused = p.running()
}

func (p *proc) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.signal(syscall.SIGCONT)
	p.paused = false
}

// kill sends SIGKILL (which also ends a stopped process) and waits.
func (p *proc) kill() {
	if !p.running() {
		return
	}
	p.signal(syscall.SIGKILL)
	<-p.done
}

// stop sends SIGCONT and SIGTERM and waits up to timeout, then kills.
func (p *proc) stop(timeout time.Duration) {
	if !p.running() {
		return
	}
	p.resume()
	p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.kill()
	}
}

// exitCode is the exit status once the process has ended, -1 before or
// when a signal ended it.
func (p *proc) exitCode() int {
	if p == nil || p.running() || p.cmd.ProcessState == nil {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
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

// httpc is the suite's client for health and admin reads.
var httpc = &http.Client{Timeout: 2 * time.Second}

// get does a GET and returns the status and body; 0 when it failed.
func get(url string) (int, string) {
	resp, err := httpc.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, string(b)
}

// natsNode is one nats-server of the cluster, restartable on its files.
type natsNode struct {
	h        *host
	dir      string
	confPath string
	logPath  string
	p        *proc
}

func (n *natsNode) url() string     { return "nats://" + n.h.ip + ":4222" }
func (n *natsNode) monitor() string { return "http://" + n.h.ip + ":8222" }

// streamDir is where this node keeps the stream's files: nats-server puts
// a directory "jetstream" of its own inside store_dir, and the global
// account's streams below "$G".
func (n *natsNode) streamDir(stream string) string {
	return filepath.Join(n.dir, "jetstream", "jetstream", "$G", "streams", stream)
}

// world is one run's deployment on the lab's hosts.
type world struct {
	t                         *testing.T
	lab                       *lab
	dir                       string
	nats                      []*natsNode
	prov                      *proc
	provURL, provKey, provPub string
	signer                    *signer
	ods                       []*instance
}

// instance is one orderd in replicated mode.
type instance struct {
	name    string
	h       *host
	dir     string
	cfgPath string
	logPath string
	dbPath  string
	// bin is the orderd binary it runs (another release in the upgrade
	// test).
	bin string
	p   *proc
}

func (o *instance) admin() string    { return "http://" + o.h.ip + ":8081" }
func (o *instance) webhooks() string { return "http://" + o.h.ip + ":8080/webhooks/orders" }

// newWorld writes the configs and starts NATS, the provider and both
// instances, and waits until both are ready.
func newWorld(t *testing.T, l *lab, seed uint64) *world {
	return newWorldOn(t, l, seed, bins.orderd)
}

// newWorldOn is newWorld with both instances running the orderd binary bin.
func newWorldOn(t *testing.T, l *lab, seed uint64, bin string) *world {
	t.Helper()
	w := &world{t: t, lab: l, dir: t.TempDir()}
	w.signer = newSigner(t, w.dir)
	var routes []string
	for _, name := range []string{"n1", "n2", "n3"} {
		routes = append(routes, fmt.Sprintf("%q", "nats://"+l.hosts[name].ip+":6222"))
	}
	for _, name := range []string{"n1", "n2", "n3"} {
		h := l.hosts[name]
		n := &natsNode{h: h, dir: filepath.Join(w.dir, name)}
		n.confPath, n.logPath = filepath.Join(n.dir, "nats.conf"), filepath.Join(n.dir, "nats.log")
		if err := os.MkdirAll(n.dir, 0o755); err != nil {
			t.Fatal(err)
		}
		conf := fmt.Sprintf(`server_name: %s
listen: %s:4222
http: %s:8222
# A webhook of receiver.max_body_bytes fits in one log entry.
max_payload: 4MB
jetstream {
  store_dir: %q
  max_memory_store: 64MB
  max_file_store: 1GB
  # Every write is on disk before JetStream acknowledges it: the setting
  # replicated mode's guarantees assume.
  sync_interval: always
}
cluster {
  name: orderd-chaos
  listen: %s:6222
  routes: [%s]
}
`, name, h.ip, h.ip, filepath.Join(n.dir, "jetstream"), h.ip, strings.Join(routes, ", "))
		if err := os.WriteFile(n.confPath, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		w.nats = append(w.nats, n)
	}
	for i := range w.nats {
		w.startNATS(i)
	}
	for i := range w.nats {
		if err := w.waitNATS(i, 60*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	w.startProvider(seed)
	for _, name := range []string{"a", "b"} {
		o := w.newInstance(name)
		o.bin = bin
		w.ods = append(w.ods, o)
	}
	// The first instance creates the log, the lease and the snapshot
	// store with three replicas, which needs every NATS node; the
	// second joins it.
	w.ods[0].p = w.startInstance(w.ods[0])
	if err := w.waitReady(w.ods[0], 90*time.Second); err != nil {
		t.Fatal(err)
	}
	w.ods[1].p = w.startInstance(w.ods[1])
	if err := w.waitReady(w.ods[1], 90*time.Second); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *world) startNATS(i int) {
	n := w.nats[i]
	n.p = startIn(w.t, n.h, "nats-server "+n.h.name, n.logPath, nil, bins.nats, "-c", n.confPath)
}

// waitNATS waits until node i runs JetStream and knows its meta leader.
func (w *world) waitNATS(i int, timeout time.Duration) error {
	n := w.nats[i]
	var last string
	if waitFor(timeout, 100*time.Millisecond, func() bool {
		if !n.p.running() {
			return true
		}
		code, body := get(n.monitor() + "/jsz")
		var jsz struct {
			Meta struct {
				Leader string `json:"leader"`
			} `json:"meta_cluster"`
		}
		last = fmt.Sprintf("%d %.200s", code, body)
		return code == http.StatusOK && json.Unmarshal([]byte(body), &jsz) == nil && jsz.Meta.Leader != ""
	}) && n.p.running() {
		return nil
	}
	return fmt.Errorf("nats %s: no JetStream meta leader within %s (running %v, last %s)", n.h.name, timeout, n.p.running(), last)
}

// startProvider starts the fake provider in its namespace: it completes
// every created order after two seconds and sends its webhooks to the
// creating instance.
func (w *world) startProvider(seed uint64) {
	t := w.t
	h := w.lab.hosts["provider"]
	w.provPub = filepath.Join(w.dir, "provider.pem")
	pr, pw := io.Pipe()
	w.prov = startIn(t, h, "providertest", filepath.Join(w.dir, "provider.log"), pw, bins.provider,
		"-listen", h.ip+":9000", "-pubkey", w.provPub, "-auto-complete", "2s",
		"-webhook-base-delay", "500ms", "-max-webhook-delay", "4s", "-seed", fmt.Sprint(seed|1),
		"-balance", "brl=100000.00")
	go func() {
		<-w.prov.done
		pw.Close()
	}()
	url, key, err := testbin.ProviderReady(pr, 15*time.Second)
	if err != nil {
		t.Fatalf("%v (%v)", err, w.prov.err)
	}
	w.provURL, w.provKey = url, key
}

// natsURLs lists every node, as an instance's nats.url does.
func (w *world) natsURLs() string {
	var urls []string
	for _, n := range w.nats {
		urls = append(urls, n.url())
	}
	return strings.Join(urls, ",")
}

// newInstance writes instance name's config. Its reconcile jobs poll and
// read balances often, so the leader calls the provider all through a
// run: the calls the lease must fence.
func (w *world) newInstance(name string) *instance {
	t := w.t
	h := w.lab.hosts[name]
	o := &instance{name: name, h: h, dir: filepath.Join(w.dir, name)}
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	o.cfgPath, o.logPath, o.dbPath = filepath.Join(o.dir, "orderd.yaml"), filepath.Join(o.dir, "orderd.log"), filepath.Join(o.dir, "orderd.db")
	cfg := fmt.Sprintf(`provider:
  base_url: %s
  api_key: %s
  public_keys: [%q, %q]
  timeout: 2s
  rate_limit: 20
  rate_burst: 5
receiver:
  listen: %s:8080
  ack_budget: 2s
  public_url: %s
admin:
  listen: %s:8081
store:
  path: %q
nats:
  url: %s
  unreachable_ready_after: 1s
publish:
  publish_timeout: 2s
reconcile:
  stale_after: 1s
  give_up_after: 1h
  doubt_min_age: 3s
  concurrency: 2
  backoff_base: 1s
  backoff_max: 2s
  schedules: {stale: "@every 1s", doubt: "@every 2s", balances: "@every %s", requisites: "off", report: "off"}
reports:
  dir: %q
log:
  level: info
  format: json
shutdown_timeout: 10s
cluster:
  enabled: true
  node: %s
  lease_ttl: %s
`, w.provURL, w.provKey, w.provPub, w.signer.pubKey, h.ip, o.webhooks(), h.ip, o.dbPath, w.natsURLs(), balancesEvery,
		filepath.Join(o.dir, "reports"), name, leaseTTL)
	if err := os.WriteFile(o.cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return o
}

func (w *world) startInstance(o *instance) *proc {
	bin := o.bin
	if bin == "" {
		bin = bins.orderd
	}
	return startIn(w.t, o.h, "orderd "+o.name, o.logPath, nil, bin, "run", "-config", o.cfgPath)
}

// waitReady waits until GET /readyz answers 200.
func (w *world) waitReady(o *instance, timeout time.Duration) error {
	var code int
	var body string
	if waitFor(timeout, 100*time.Millisecond, func() bool {
		if !o.p.running() {
			return true
		}
		code, body = get(o.admin() + "/readyz")
		return code == http.StatusOK
	}) && o.p.running() {
		return nil
	}
	return fmt.Errorf("orderd %s not ready within %s (running %v, exit %d): %d %s", o.name, timeout, o.p.running(), o.p.exitCode(), code, body)
}

// clusterView is GET /v1/cluster.
type clusterView struct {
	Node       string `json:"node"`
	Leader     string `json:"leader"`
	Leading    bool   `json:"leading"`
	Term       uint64 `json:"term"`
	LogLastSeq uint64 `json:"logLastSeq"`
	AppliedSeq uint64 `json:"appliedSeq"`
	Error      string `json:"error"`
	// LogVersion is absent from releases before log versions.
	LogVersion *struct {
		InForce int      `json:"inForce"`
		HeldBy  []string `json:"heldBy"`
		Reads   struct {
			Newest int `json:"newest"`
		} `json:"reads"`
	} `json:"logVersion"`
}

func (o *instance) view() (clusterView, bool) {
	code, body := get(o.admin() + "/v1/cluster")
	var v clusterView
	if code != http.StatusOK || json.Unmarshal([]byte(body), &v) != nil {
		return v, false
	}
	return v, true
}

// byName returns the instance with that node name.
func (w *world) byName(name string) *instance {
	for _, o := range w.ods {
		if o.name == name {
			return o
		}
	}
	return nil
}

// byIP returns the instance with that address.
func (w *world) byIP(ip string) *instance {
	for _, o := range w.ods {
		if o.h.ip == ip {
			return o
		}
	}
	return nil
}

// tail returns the last n lines of a file, for a run's report.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
