package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"orderd/cmd/orderd-bench/internal/orderdconfig"
)

// orderdProc is an "orderd run" this tool started.
type orderdProc struct {
	cmd     *exec.Cmd
	done    chan error
	cfgPath string
	logPath string
	webhook string // webhook URL
	admin   string // admin base URL
}

// orderdConfig is the daemon's configuration for the run (see
// orderdconfig): a fresh database and JetStream directory in dir; with
// pprof, Go's profiles on the admin listener (loopback, no token).
func orderdConfig(dir, pubKey, level, extra string, pprof bool) string {
	return orderdconfig.YAML(orderdconfig.Options{
		PublicKey: pubKey,
		Database:  filepath.Join(dir, "orderd.db"),
		NATSDir:   filepath.Join(dir, "nats"),
		Level:     level,
		Pprof:     pprof,
		Extra:     extra,
	})
}

var (
	webhookAddr = regexp.MustCompile(`"webhooks":"([^"]+)"`)
	adminAddr   = regexp.MustCompile(`"admin":"([^"]+)"`)
)

// startOrderd starts bin with the benchmark's configuration in dir and
// waits until it has logged its addresses. It starts at log level info,
// the level that logs them, and then lowers the level to warn with a
// reload (SIGHUP), as an operator would run it under load.
func startOrderd(ctx context.Context, bin, dir, pubKey, extra string, pprof bool) (*orderdProc, error) {
	p := &orderdProc{
		cfgPath: filepath.Join(dir, "orderd.yaml"),
		logPath: filepath.Join(dir, "orderd.log"),
		done:    make(chan error, 1),
	}
	if err := os.WriteFile(p.cfgPath, []byte(orderdConfig(dir, pubKey, "info", extra, pprof)), 0o600); err != nil {
		return nil, err
	}
	logf, err := os.Create(p.logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	p.cmd = exec.Command(bin, "run", "-config", p.cfgPath)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() { p.done <- p.cmd.Wait() }()

	deadline := time.Now().Add(60 * time.Second)
	for p.webhook == "" || p.admin == "" {
		select {
		case err := <-p.done:
			p.done <- err
			return nil, fmt.Errorf("orderd exited before it was ready (%v): %s", err, readTail(p.logPath))
		case <-ctx.Done():
			p.stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("orderd did not log its addresses within 60s: %s", readTail(p.logPath))
		}
		b, _ := os.ReadFile(p.logPath)
		if m := webhookAddr.FindSubmatch(b); m != nil {
			p.webhook = "http://" + string(m[1]) + "/webhooks/orders"
		}
		if m := adminAddr.FindSubmatch(b); m != nil {
			p.admin = "http://" + string(m[1])
		}
	}
	if err := os.WriteFile(p.cfgPath, []byte(orderdConfig(dir, pubKey, "warn", extra, pprof)), 0o600); err != nil {
		p.stop()
		return nil, err
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		p.stop()
		return nil, fmt.Errorf("reload orderd: %w", err)
	}
	// The reload is logged at info, which it has just switched off; a
	// failed one at error. Give it a moment, then look.
	time.Sleep(500 * time.Millisecond)
	if b, _ := os.ReadFile(p.logPath); strings.Contains(string(b), "reload failed") {
		p.stop()
		return nil, fmt.Errorf("orderd refused the reload to log.level warn: %s", readTail(p.logPath))
	}
	return p, nil
}

func (p *orderdProc) pid() int { return p.cmd.Process.Pid }

// stop sends SIGTERM and waits (a minute at most, then SIGKILL). It returns
// an error when orderd did not exit cleanly.
func (p *orderdProc) stop() error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err
		if err != nil {
			return fmt.Errorf("orderd did not stop cleanly (%v): %s", err, readTail(p.logPath))
		}
		return nil
	case <-time.After(time.Minute):
		_ = p.cmd.Process.Kill()
		err := <-p.done
		p.done <- err
		return fmt.Errorf("orderd did not stop within a minute of SIGTERM; killed: %s", readTail(p.logPath))
	}
}

func readTail(path string) string {
	b, _ := os.ReadFile(path)
	return tail(b, 1500)
}

// metrics is one scrape of a /metrics page: each series by its exact text
// (name and labels), and each name's sum over its labels.
type metrics struct {
	series map[string]float64
	sums   map[string]float64
}

func (m metrics) sum(name string) float64 { return m.sums[name] }

var httpc = &http.Client{Timeout: 10 * time.Second}

// adminToken is sent as a bearer token to admin listeners that need one.
func adminToken() string { return strings.TrimSpace(os.Getenv("ORDERD_ADMIN_TOKEN")) }

func adminGet(ctx context.Context, url string, timeout time.Duration) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if tok := adminToken(); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	c := httpc
	if timeout > 0 {
		c = &http.Client{Timeout: timeout}
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(b)))
	}
	return resp, nil
}

// scrape reads admin's /metrics.
func scrape(ctx context.Context, admin string) (metrics, error) {
	resp, err := adminGet(ctx, strings.TrimSuffix(admin, "/")+"/metrics", 0)
	if err != nil {
		return metrics{}, err
	}
	defer resp.Body.Close()
	return parseMetrics(resp.Body)
}

// parseMetrics reads the Prometheus text format, enough for counters and
// gauges: "name{labels} value" lines, comments skipped.
func parseMetrics(r io.Reader) (metrics, error) {
	m := metrics{series: map[string]float64{}, sums: map[string]float64{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		series := line[:i]
		name := series
		if j := strings.IndexByte(series, '{'); j >= 0 {
			name = series[:j]
		}
		m.series[series] = v
		m.sums[name] += v
	}
	return m, sc.Err()
}

// scrapeAll scrapes every admin listener; the sums add up over them.
func scrapeAll(ctx context.Context, admins []string) (metrics, error) {
	total := metrics{series: map[string]float64{}, sums: map[string]float64{}}
	for _, a := range admins {
		m, err := scrape(ctx, a)
		if err != nil {
			return metrics{}, err
		}
		for k, v := range m.series {
			total.series[k] += v
		}
		for k, v := range m.sums {
			total.sums[k] += v
		}
	}
	return total, nil
}

// procStatus reads a "Vm..." field of /proc/PID/status, in bytes.
func procStatus(pid int, field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), field+":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/status %s: %w", pid, field, err)
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("/proc/" + strconv.Itoa(pid) + "/status has no " + field)
}
