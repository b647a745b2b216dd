package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"orderd/cluster"
	"orderd/provider/providertest"
	"orderd/publish"
	"orderd/store"
)

// The replicated sandbox's timing.
const (
	// sandboxLeaseTTL is short, so that a takeover shows within seconds
	// (at most two of it).
	sandboxLeaseTTL = 4 * time.Second
	// sandboxRestartAfter is how long a killed instance stays down before
	// the sandbox starts it again: long enough to see the cluster run on
	// the other one.
	sandboxRestartAfter = 10 * time.Second
	// sandboxStartWait bounds an instance's start: NATS, the log, catching
	// up, /readyz.
	sandboxStartWait = 60 * time.Second
	// sandboxStopWait bounds an instance's clean stop before it is killed;
	// it is longer than the instance's shutdown_timeout (15s).
	sandboxStopWait = 20 * time.Second
	// sandboxMarker marks a directory "orderd sandbox -cluster" made, so
	// that it wipes nothing else.
	sandboxMarker = ".orderd-sandbox-cluster"
	// maxProxyBody bounds a request body the sandbox's proxy buffers (to
	// send it again to the next instance when one refuses the
	// connection); above receiver.max_body_bytes' default.
	maxProxyBody = 4 << 20
)

// clusterSandbox is "orderd sandbox -cluster": a three-node NATS cluster in
// this process, two orderd instances as child processes of this program,
// and a round-robin proxy in front of their webhook listeners. It stops
// what it started, by PID; an instance that dies meanwhile is reported,
// and started again after sandboxRestartAfter.
type clusterSandbox struct {
	exe    string // this program
	root   string // <dir>/cluster
	log    *slog.Logger
	stdout io.Writer // the banner and what happens to the instances
	stderr io.Writer // the instances' logs, rendered

	outMu sync.Mutex // one line at a time on stdout and stderr

	// writeConfig writes an instance's config file with the given
	// listen addresses.
	writeConfig func(in *sandboxInstance, webhooks, admin string) error

	mu        sync.Mutex
	instances []*sandboxInstance
	stopping  bool

	wg sync.WaitGroup // process waiters and restarts
}

// sandboxInstance is one orderd child process and what the sandbox knows
// of it; its fields are guarded by clusterSandbox.mu.
type sandboxInstance struct {
	name    string
	dir     string
	cfgPath string

	proc     *os.Process   // the running process; nil when there is none
	exited   chan struct{} // closed when proc has exited
	up       bool          // proc has answered /readyz
	webhooks string        // host:port, from its "orderd started" line
	admin    string
}

func runSandboxCluster(ctx context.Context, e *env, dir string, demo bool, every time.Duration) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this program, to start the instances: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("sandbox dir: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	root := filepath.Join(abs, "cluster")
	unlock, err := store.Lock(root)
	if errors.Is(err, store.ErrLocked) {
		return fmt.Errorf("another orderd sandbox -cluster runs on %s", root)
	}
	if err != nil {
		return err
	}
	defer unlock()
	if err := cleanSandboxCluster(root); err != nil {
		return err
	}
	lg, err := e.NewLogging(LogConfig{Level: "info", Format: "auto"})
	if err != nil {
		return err
	}
	s := &clusterSandbox{exe: exe, root: root, log: lg.Logger, stdout: e.Stdout, stderr: e.Stderr}

	fake, err := providertest.Start(sandboxProviderOptions())
	if err != nil {
		return fmt.Errorf("fake provider: %w", err)
	}
	defer fake.Close()
	keyFile := filepath.Join(root, "provider-public.pem")
	apiKeyFile := filepath.Join(root, "provider-api-key")
	if err := os.WriteFile(keyFile, fake.PublicKeyPEM(), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(apiKeyFile, []byte(fake.APIKey()+"\n"), 0o600); err != nil {
		return err
	}

	// The NATS cluster: three JetStream servers, each fsyncing every
	// write before its ack (sync_interval: always), which is what the
	// guarantees of replicated mode assume.
	// The servers' chatter while they find each other and while they stop
	// (routes refused, no meta leader yet) is left out; a start that fails
	// says why in its error.
	var natsLoud atomic.Bool
	natsc, err := publish.StartEmbeddedCluster(publish.EmbeddedClusterConfig{
		Dir:    filepath.Join(root, "nats"),
		Logger: slog.New(gatedHandler{lg.Logger.Handler(), &natsLoud}).With("component", "nats"),
	})
	if err != nil {
		return err
	}
	natsLoud.Store(true)
	defer func() { natsLoud.Store(false); natsc.Shutdown() }()

	// The provider's one webhookUrl: a proxy over the instances' webhook
	// listeners, on the single sandbox's port when it is free.
	ln, err := listenPreferred("127.0.0.1:8080")
	if err != nil {
		return fmt.Errorf("webhook proxy: %w", err)
	}
	publicURL := "http://" + ln.Addr().String() + "/webhooks/orders"
	proxy := &http.Server{
		Handler:           s.webhookProxy(),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(lg.Logger.With("component", "proxy").Handler(), slog.LevelWarn),
	}
	go func() { _ = proxy.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = proxy.Shutdown(sctx)
	}()

	// The instances' own context ends when the sandbox stops, on any path:
	// nothing is started again after that.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, name := range []string{"a", "b"} {
		in := &sandboxInstance{name: name, dir: filepath.Join(root, name)}
		in.cfgPath = filepath.Join(in.dir, "config.yaml")
		if err := os.MkdirAll(in.dir, 0o700); err != nil {
			return err
		}
		s.instances = append(s.instances, in)
	}
	// From here on, every instance started is stopped on the way out.
	defer func() { cancel(); s.stopInstances() }()
	s.writeConfig = func(in *sandboxInstance, webhooks, admin string) error {
		return writeClusterInstanceConfig(in, fake, apiKeyFile, keyFile, natsc.ClientURL(), webhooks, admin, publicURL)
	}
	// The instances bind free ports and say which; their configs are then
	// written again with those, so that a restart comes back on them.
	errs := make(chan error, len(s.instances))
	for _, in := range s.instances {
		go func() {
			err := s.writeConfig(in, anyLoopbackPort, anyLoopbackPort)
			if err == nil {
				err = s.start(ctx, in)
			}
			if err == nil {
				err = s.writeConfig(in, in.webhooks, in.admin)
			}
			errs <- err
		}()
	}
	for range s.instances {
		if err := <-errs; err != nil {
			return err
		}
	}
	leader, err := s.waitLeader(ctx)
	if err != nil {
		return err
	}
	s.printBanner(fake, natsc.ClientURL(), publicURL, leader)

	if demo {
		g := &demoTraffic{
			// The gateway calls go to any instance, as the webhooks do.
			admin:  "http://orderd-admin",
			fake:   fake,
			log:    lg.Logger.With("component", "demo"),
			every:  every,
			client: &http.Client{Transport: newRoundRobin(s.adminAddrs), Timeout: 30 * time.Second},
		}
		done := make(chan struct{})
		go func() { defer close(done); g.run(ctx) }()
		defer func() { <-done }()
	}
	<-ctx.Done()
	s.say("stopping: the instances (by pid), the proxy, NATS and the fake provider")
	return nil
}

// cleanSandboxCluster makes root an empty directory of the sandbox's: the
// replicated sandbox starts clean each time, wiping only a directory it
// made before.
func cleanSandboxCluster(root string) error {
	if _, err := os.Stat(root); err == nil {
		if _, err := os.Stat(filepath.Join(root, sandboxMarker)); err != nil {
			return fmt.Errorf("%s exists and was not made by orderd sandbox -cluster; move it away or give another -dir", root)
		}
		if err := os.RemoveAll(root); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return fmt.Errorf("sandbox dir: %w", err)
	}
	return os.WriteFile(filepath.Join(root, sandboxMarker), []byte("made by orderd sandbox -cluster, which wipes this directory when it starts\n"), 0o600)
}

// writeClusterInstanceConfig writes an instance's config file.
func writeClusterInstanceConfig(in *sandboxInstance, fake *providertest.Server, apiKeyFile, keyFile, natsURL, webhooks, admin, publicURL string) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, `# Written by "orderd sandbox -cluster" for instance %s; rewritten at every start.
provider:
  base_url: %q
  api_key_file: %q
  public_keys: [%q]
  timeout: 5s
  # Each instance's gateway has a budget of its own: the single sandbox's
  # 50 calls/s, divided between the two.
  rate_limit: 25
  rate_burst: 5
receiver:
  listen: %q
  # The proxy in front of both instances: the provider's one webhookUrl.
  public_url: %q
admin:
  listen: %q
store:
  path: %q
nats:
  url: %q
cluster:
  enabled: true
  node: %q
  lease_ttl: %s
  snapshot_every: 1m
%sreports:
  dir: %q
log:
  level: info
  format: json
`, in.name, fake.URL(), apiKeyFile, keyFile, webhooks, publicURL, admin,
		filepath.Join(in.dir, "orderd.db"), natsURL, in.name, sandboxLeaseTTL, sandboxReconcileYAML, filepath.Join(in.dir, "reports"))
	return os.WriteFile(in.cfgPath, b.Bytes(), 0o600)
}

// sandboxChildEnv is this process's environment without what would change
// an instance's configuration behind its config file (an admin token, an
// API key, another config path) or its log format.
func sandboxChildEnv(environ []string) []string {
	return slices.DeleteFunc(slices.Clone(environ), func(kv string) bool {
		return strings.HasPrefix(kv, "ORDERD_") || strings.HasPrefix(kv, "JOURNAL_STREAM=")
	})
}

// start runs an instance's process and waits until it has said where it
// listens and answers /readyz, or exits, or sandboxStartWait passes.
func (s *clusterSandbox) start(ctx context.Context, in *sandboxInstance) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd := exec.Command(s.exe, "run", "-config", in.cfgPath)
	cmd.Dir = in.dir
	cmd.Env = sandboxChildEnv(os.Environ())
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = childProcAttr()
	started := make(chan [2]string, 1)
	var addrInUse atomic.Bool
	exited := make(chan struct{})
	startErr := make(chan error, 1)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		// On Linux an instance is killed when the thread that started it
		// ends (so that none outlives a killed sandbox); this goroutine
		// keeps that thread until the instance has exited.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		err := cmd.Start()
		w.Close()
		if err != nil {
			r.Close()
			startErr <- err
			return
		}
		s.mu.Lock()
		if s.stopping {
			_ = cmd.Process.Kill()
		}
		in.proc, in.exited, in.up = cmd.Process, exited, false
		s.mu.Unlock()
		startErr <- nil
		go s.copyLog(in.name, r, started, &addrInUse)
		werr := cmd.Wait()
		close(exited)
		s.exited(ctx, in, cmd.Process.Pid, werr)
	}()
	if err := <-startErr; err != nil {
		return fmt.Errorf("start instance %s: %w", in.name, err)
	}
	pid := cmd.Process.Pid
	fail := func(why string) error {
		_ = cmd.Process.Kill()
		return fmt.Errorf("instance %s (pid %d) %s; its log is above", in.name, pid, why)
	}
	timeout := time.NewTimer(sandboxStartWait)
	defer timeout.Stop()
	var addrs [2]string
	select {
	case addrs = <-started:
	case <-exited:
		err := fmt.Errorf("instance %s (pid %d) exited before it started: %s; its log is above", in.name, pid, cmd.ProcessState)
		if addrInUse.Load() {
			err = fmt.Errorf("%w: %w", errAddrTaken, err)
		}
		return err
	case <-timeout.C:
		return fail(fmt.Sprintf("did not start within %s", sandboxStartWait))
	case <-ctx.Done():
		return ctx.Err()
	}
	s.mu.Lock()
	in.webhooks, in.admin = addrs[0], addrs[1]
	s.mu.Unlock()
	client := &http.Client{Timeout: 5 * time.Second}
	for {
		resp, err := client.Get("http://" + addrs[1] + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("instance %s (pid %d) exited before it was ready: %s; its log is above", in.name, pid, cmd.ProcessState)
		case <-timeout.C:
			return fail(fmt.Sprintf("was not ready within %s", sandboxStartWait))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	s.mu.Lock()
	if in.proc == cmd.Process {
		in.up = true
	}
	s.mu.Unlock()
	return nil
}

// errAddrTaken is a start that failed because a listen address was taken.
var errAddrTaken = errors.New("a listen address is taken")

// exited is told that an instance's process has ended. Unless the sandbox
// is stopping, it says so, watches the lease move and starts the instance
// again after sandboxRestartAfter.
func (s *clusterSandbox) exited(ctx context.Context, in *sandboxInstance, pid int, err error) {
	s.mu.Lock()
	wasUp := in.up && in.proc != nil && in.proc.Pid == pid
	if in.proc != nil && in.proc.Pid == pid {
		in.proc, in.up = nil, false
	}
	stopping := s.stopping
	s.mu.Unlock()
	if stopping || !wasUp || ctx.Err() != nil {
		// A start that failed is reported by start.
		return
	}
	died := time.Now()
	s.say("instance %s (pid %d) died: %v", in.name, pid, err)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.watchTakeover(ctx, in, died)
		s.say("instance %s starts again in %s (%s after it died)", in.name,
			(sandboxRestartAfter - time.Since(died)).Round(time.Second), sandboxRestartAfter)
		select {
		case <-ctx.Done():
			return
		case <-time.After(sandboxRestartAfter - time.Since(died)):
		}
		err := s.start(ctx, in)
		if errors.Is(err, errAddrTaken) && ctx.Err() == nil {
			// Another program took a port while the instance was down.
			s.say("instance %s's addresses were taken meanwhile; starting it on new ones", in.name)
			if err = s.writeConfig(in, anyLoopbackPort, anyLoopbackPort); err == nil {
				err = s.start(ctx, in)
			}
		}
		if err == nil {
			s.mu.Lock()
			webhooks, admin := in.webhooks, in.admin
			s.mu.Unlock()
			err = s.writeConfig(in, webhooks, admin)
		}
		if err != nil {
			if ctx.Err() == nil {
				s.say("instance %s did not start again: %v", in.name, err)
			}
			return
		}
		s.mu.Lock()
		newPid, admin := 0, in.admin
		if in.proc != nil {
			newPid = in.proc.Pid
		}
		s.mu.Unlock()
		s.say("instance %s is back: pid %d, admin http://%s; it catches up on the log it missed and follows the leader", in.name, newPid, admin)
	}()
}

// watchTakeover polls the other instances' GET /v1/cluster until one holds
// the lease, and says which and when.
func (s *clusterSandbox) watchTakeover(ctx context.Context, dead *sandboxInstance, died time.Time) {
	deadline := died.Add(2*sandboxLeaseTTL + 10*time.Second)
	for time.Now().Before(deadline) {
		for _, in := range s.upInstances() {
			if in.name == dead.name {
				continue
			}
			if st, err := clusterStatusOf(ctx, in.admin); err == nil && st.Leading {
				s.say("instance %s holds the lease (term %d) %s after %s died; webhooks and gateway calls go to %s meanwhile",
					in.name, st.Term, time.Since(died).Round(100*time.Millisecond), dead.name, in.name)
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	s.say("no instance holds the lease %s after %s died; GET /v1/cluster on each says why", time.Since(died).Round(time.Second), dead.name)
}

// waitLeader waits until an instance holds the lease.
func (s *clusterSandbox) waitLeader(ctx context.Context) (*sandboxInstance, error) {
	deadline := time.Now().Add(3*sandboxLeaseTTL + 10*time.Second)
	for {
		for _, in := range s.upInstances() {
			if st, err := clusterStatusOf(ctx, in.admin); err == nil && st.Leading {
				return in, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, errors.New("no instance took the lease; the instances' logs are above")
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// clusterStatusOf reads an instance's GET /v1/cluster.
func clusterStatusOf(ctx context.Context, admin string) (cluster.Status, error) {
	var st cluster.Status
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/v1/cluster", nil)
	if err != nil {
		return st, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("GET /v1/cluster: %s", resp.Status)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// upInstances are the instances that answered /readyz since they last
// started, as a copy.
func (s *clusterSandbox) upInstances() []*sandboxInstance {
	s.mu.Lock()
	defer s.mu.Unlock()
	var up []*sandboxInstance
	for _, in := range s.instances {
		if in.up {
			c := *in
			up = append(up, &c)
		}
	}
	return up
}

// webhookAddrs and adminAddrs are the instances' listeners, whether they
// run or not: one that does not refuses the connection and the proxy goes
// on to the next.
func (s *clusterSandbox) webhookAddrs() []string {
	return s.addrs(func(in *sandboxInstance) string { return in.webhooks })
}

func (s *clusterSandbox) adminAddrs() []string {
	return s.addrs(func(in *sandboxInstance) string { return in.admin })
}

func (s *clusterSandbox) addrs(of func(*sandboxInstance) string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, in := range s.instances {
		if a := of(in); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// webhookProxy forwards the provider's webhooks to the instances, round
// robin.
func (s *clusterSandbox) webhookProxy() http.Handler {
	log := s.log.With("component", "proxy")
	return &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host = "http", "orderd"
		},
		Transport: newRoundRobin(s.webhookAddrs),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			log.Warn("webhook not forwarded", "err", err)
			http.Error(w, "no orderd instance took the webhook", http.StatusBadGateway)
		},
	}
}

// stopInstances stops every running instance by its PID: SIGTERM, and
// SIGKILL if it has not stopped within sandboxStopWait. Nothing is started
// again afterwards.
func (s *clusterSandbox) stopInstances() {
	type running struct {
		in     *sandboxInstance
		proc   *os.Process
		exited chan struct{}
	}
	s.mu.Lock()
	s.stopping = true
	var rs []running
	for _, in := range s.instances {
		if in.proc != nil {
			rs = append(rs, running{in, in.proc, in.exited})
		}
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Go(func() {
			_ = r.proc.Signal(syscall.SIGTERM)
			select {
			case <-r.exited:
			case <-time.After(sandboxStopWait):
				s.say("instance %s (pid %d) did not stop within %s; killing it", r.in.name, r.proc.Pid, sandboxStopWait)
				_ = r.proc.Kill()
				<-r.exited
			}
		})
	}
	wg.Wait()
	s.wg.Wait()
}

// say prints a line about the sandbox on stdout, with the time.
func (s *clusterSandbox) say(format string, args ...any) {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	fmt.Fprintf(s.stdout, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// copyLog renders an instance's JSON log lines on stderr, each marked
// with the instance's name, reports the addresses of its "orderd started"
// line on started, and sets addrInUse when a line says that an address is
// in use.
func (s *clusterSandbox) copyLog(name string, r io.ReadCloser, started chan<- [2]string, addrInUse *atomic.Bool) {
	defer r.Close()
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			text, fields := renderLogLine(name, line)
			if bytes.Contains(line, []byte("address already in use")) {
				addrInUse.Store(true)
			}
			if fields["msg"] == "orderd started" {
				select {
				case started <- [2]string{fields["webhooks"], fields["admin"]}:
				default:
				}
			}
			s.outMu.Lock()
			fmt.Fprintln(s.stderr, text)
			s.outMu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// renderLogLine turns one JSON log line into "a  15:04:05.000 INFO
// component  message key=value …" and returns its string fields; a line
// that is not JSON is marked and kept as it is.
func renderLogLine(name string, line []byte) (string, map[string]string) {
	line = bytes.TrimRight(line, "\r\n")
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return name + "  " + string(line), nil
	}
	str := map[string]string{}
	for k, v := range m {
		if s, ok := v.(string); ok {
			str[k] = s
		}
	}
	var b strings.Builder
	ts := str["time"]
	if len(ts) >= len("2006-01-02T15:04:05.000") {
		ts = ts[len("2006-01-02T"):len("2006-01-02T15:04:05.000")]
	}
	fmt.Fprintf(&b, "%s  %s %-5s %-9s %s", name, ts, strings.ToUpper(str["level"]), str["component"], str["msg"])
	var keys []string
	for k := range m {
		switch k {
		case "time", "level", "component", "msg", "caller", "logger":
		default:
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		var v string
		if s, ok := m[k].(string); ok {
			v = s
			if strings.ContainsAny(v, " =\"") || v == "" {
				v = strconv.Quote(v)
			}
		} else {
			j, _ := json.Marshal(m[k])
			v = string(j)
		}
		fmt.Fprintf(&b, " %s=%s", k, v)
	}
	return b.String(), str
}

// printBanner says where everything listens and how to watch a takeover.
func (s *clusterSandbox) printBanner(fake *providertest.Server, natsURL, publicURL string, leader *sandboxInstance) {
	s.mu.Lock()
	type row struct{ name, admin, cfg string }
	var rows []row
	pids := map[string]int{}
	for _, in := range s.instances {
		rows = append(rows, row{in.name, in.admin, in.cfgPath})
		if in.proc != nil {
			pids[in.name] = in.proc.Pid
		}
	}
	s.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, `orderd sandbox -cluster is running: two orderd instances on a three-node NATS cluster,
replicated mode on loopback. Ctrl-C stops it and everything it started.

  fake provider   %s  (API key %q)
  webhooks        %s
                  (the provider's one webhookUrl: a round-robin proxy over both instances
                  that skips one refusing connections)
  NATS cluster    %s
                  (3 JetStream servers in this process, each write fsynced before its ack)
`, fake.URL(), fake.APIKey(), publicURL, natsURL)
	for _, r := range rows {
		fmt.Fprintf(&b, "  instance %s      pid %d   admin http://%s   config %s\n", r.name, pids[r.name], r.admin, r.cfg)
	}
	fmt.Fprintf(&b, "  directory       %s  (wiped at the next start)\n", s.root)
	fmt.Fprintf(&b, "  sandbox         pid %d  (Ctrl-C, or kill %d, stops it and everything it started)\n\n", os.Getpid(), os.Getpid())
	var follower row
	for _, r := range rows {
		if r.name != leader.name {
			follower = r
		}
	}
	fmt.Fprintf(&b, `Instance %s holds the lease: it runs the relay, the reconcile jobs and the snapshots;
both take webhooks and gateway calls and apply the log. Kill the leader and watch %s
take over within two lease_ttl (%s):

  kill -9 %d

This sandbox says when the lease has moved, and starts the killed instance again %s
after it died (it catches up on the log it missed). Kill %d (%s) instead to see that losing a
follower moves nothing.

See it:
`, leader.name, follower.name, 2*sandboxLeaseTTL, pids[leader.name], sandboxRestartAfter, pids[follower.name], follower.name)
	for _, r := range rows {
		fmt.Fprintf(&b, "  curl -s http://%s/v1/cluster    # %s: leader, term, appliedSeq, lag, snapshot\n", r.admin, r.name)
	}
	fmt.Fprintf(&b, `  curl -s http://%s/metrics | grep -E '^orderd_(cluster_leader|log_)'
  %s tail -config %s    # the events, once each, across the takeover

`, rows[0].admin, selfCommand(), rows[0].cfg)
	b.WriteString(sandboxFaults(false, fake.URL(), fake.APIKey()))
	s.outMu.Lock()
	defer s.outMu.Unlock()
	fmt.Fprint(s.stdout, b.String())
}

// roundRobin is an http.RoundTripper that sends each request to the next
// of its backends, and on to the one after when a backend refuses the
// connection (its instance is down). A backend that took the request
// answers it, whatever the answer: a request that may have reached an
// instance is never sent to a second one.
type roundRobin struct {
	backends  func() []string
	next      atomic.Uint64
	transport http.RoundTripper
}

func newRoundRobin(backends func() []string) *roundRobin {
	return &roundRobin{backends: backends, transport: &http.Transport{
		// A connection per request: one to a killed instance is refused
		// at once, rather than failing on a kept-alive connection.
		DisableKeepAlives:     true,
		DialContext:           (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		ResponseHeaderTimeout: 30 * time.Second,
	}}
}

// RoundTrip implements http.RoundTripper.
func (rr *roundRobin) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(io.LimitReader(req.Body, maxProxyBody+1))
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		if len(b) > maxProxyBody {
			return nil, fmt.Errorf("request body larger than %d bytes", maxProxyBody)
		}
		body = b
	}
	backends := rr.backends()
	if len(backends) == 0 {
		return nil, errors.New("no instance has started")
	}
	first := rr.next.Add(1)
	var errs []error
	for i := range uint64(len(backends)) {
		addr := backends[(first+i)%uint64(len(backends))]
		out := req.Clone(req.Context())
		out.URL.Scheme, out.URL.Host, out.Host = "http", addr, ""
		if body != nil {
			out.Body = io.NopCloser(bytes.NewReader(body))
			out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
			out.ContentLength = int64(len(body))
		}
		resp, err := rr.transport.RoundTrip(out)
		if err == nil {
			return resp, nil
		}
		var op *net.OpError
		if !errors.As(err, &op) || op.Op != "dial" {
			return nil, err
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("every instance refuses connections: %w", errors.Join(errs...))
}

// gatedHandler passes records to its handler only while on is set.
type gatedHandler struct {
	slog.Handler
	on *atomic.Bool
}

func (g gatedHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return g.on.Load() && g.Handler.Enabled(ctx, l)
}

func (g gatedHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return gatedHandler{g.Handler.WithAttrs(as), g.on}
}

func (g gatedHandler) WithGroup(name string) slog.Handler {
	return gatedHandler{g.Handler.WithGroup(name), g.on}
}
