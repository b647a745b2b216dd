package scale

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"database/sql"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	_ "modernc.org/sqlite"

	"orderd/cmd/orderd-bench/internal/orderdconfig"
)

// timing is one measured step: its median (of runs, or the single run)
// and what it produced.
type timing struct {
	Name   string
	Median time.Duration
	First  time.Duration
	Runs   int
	Bytes  int64
	Status int
}

// daemon is an "orderd run" on the built database.
type daemon struct {
	cmd     *exec.Cmd
	done    chan error
	logPath string
	admin   string
}

var adminAddr = regexp.MustCompile(`"admin":"([^"]+)"`)

// writeConfig writes the daemon's configuration: loopback listeners on
// free ports, the database, an embedded NATS server in dir, every
// reconcile schedule off (the measurement is of what a person opens, not
// of jobs running meanwhile), the provider never called.
func writeConfig(dir, dbPath string) (string, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", err
	}
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", err
	}
	pub := filepath.Join(dir, "provider.pub.pem")
	if err := os.WriteFile(pub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		return "", err
	}
	cfg := orderdconfig.YAML(orderdconfig.Options{
		PublicKey: pub,
		Database:  dbPath,
		NATSDir:   filepath.Join(dir, "nats"),
		Level:     "info",
		Extra:     fmt.Sprintf("reports:\n  dir: %q\n", filepath.Join(dir, "reports")),
	})
	path := filepath.Join(dir, "orderd.yaml")
	return path, os.WriteFile(path, []byte(cfg), 0o600)
}

// startDaemon starts bin on the configuration and returns once /readyz
// answers 200, with the time that took (open, migrate, start every part).
func startDaemon(ctx context.Context, bin, cfgPath, dir string) (*daemon, time.Duration, error) {
	d := &daemon{logPath: filepath.Join(dir, "orderd.log"), done: make(chan error, 1)}
	logf, err := os.Create(d.logPath)
	if err != nil {
		return nil, 0, err
	}
	defer logf.Close()
	t0 := time.Now()
	d.cmd = exec.Command(bin, "run", "-config", cfgPath)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	if err := d.cmd.Start(); err != nil {
		return nil, 0, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() { d.done <- d.cmd.Wait() }()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		select {
		case err := <-d.done:
			d.done <- err
			return nil, 0, fmt.Errorf("orderd exited before it was ready (%v): %s", err, logTail(d.logPath))
		case <-ctx.Done():
			d.stop()
			return nil, 0, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			d.stop()
			return nil, 0, fmt.Errorf("orderd was not ready within 5 minutes: %s", logTail(d.logPath))
		}
		if d.admin == "" {
			b, _ := os.ReadFile(d.logPath)
			if m := adminAddr.FindSubmatch(b); m != nil {
				d.admin = "http://" + string(m[1])
			}
			continue
		}
		if status, _, err := get(ctx, d.admin+"/readyz"); err == nil && status == http.StatusOK {
			return d, time.Since(t0), nil
		}
	}
}

// stop sends SIGTERM and waits a minute at most, then kills.
func (d *daemon) stop() error {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.done:
		d.done <- err // a second stop sees the same
		return err
	case <-time.After(time.Minute):
		_ = d.cmd.Process.Kill()
		err := <-d.done
		d.done <- err
		return errors.New("orderd did not stop within a minute of SIGTERM; killed")
	}
}

// peakRSS is the daemon's peak resident set (VmHWM), in bytes.
func (d *daemon) peakRSS() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kib * 1024
		}
	}
	return 0
}

func logTail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 1500 {
		b = b[len(b)-1500:]
	}
	return string(b)
}

var client = &http.Client{Timeout: 10 * time.Minute}

// get fetches url and reads the whole body, returning its status and size.
func get(ctx context.Context, url string) (int, int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, n, err
}

// timeGet fetches url runs times and returns the median, the first, the
// size and status of the last answer. An answer other than 200 is an error.
func timeGet(ctx context.Context, name, url string, runs int) (timing, error) {
	return timeGetWant(ctx, name, url, runs, http.StatusOK)
}

// timeGetWant is timeGet for a request whose answer is want.
func timeGetWant(ctx context.Context, name, url string, runs, want int) (timing, error) {
	tm := timing{Name: name, Runs: runs}
	var all []time.Duration
	for i := range runs {
		t0 := time.Now()
		status, n, err := get(ctx, url)
		d := time.Since(t0)
		if err != nil {
			return tm, fmt.Errorf("%s: %w", name, err)
		}
		if status != want {
			return tm, fmt.Errorf("%s: GET %s answered %d, want %d", name, url, status, want)
		}
		if i == 0 {
			tm.First = d
		}
		all = append(all, d)
		tm.Bytes, tm.Status = n, status
	}
	slices.Sort(all)
	tm.Median = all[len(all)/2]
	return tm, nil
}

// interactive times every request a person opens, runs times each.
// The filters of the order listing include values no order has (no order
// of this database is new, nor of another status or type), which walk the
// most: the first page of each.
func interactive(ctx context.Context, admin string, size, runs int) ([]timing, error) {
	mid := merchantOrderID(size / 2)
	reqs := []struct {
		name, path string
		want       int
	}{
		{"GET /", "/", http.StatusOK},
		{"GET /?q=<prefix>", "/?q=" + url.QueryEscape(mid[:len(mid)-2]), http.StatusOK},
		{"GET /v1/orders", "/v1/orders", http.StatusOK},
		{"GET /v1/orders?status=processing", "/v1/orders?status=processing", http.StatusOK},
		{"GET /v1/orders?status=new (none)", "/v1/orders?status=new", http.StatusOK},
		{"GET /v1/orders?status=<no order's> (400)", "/v1/orders?status=refunded", http.StatusBadRequest},
		{"GET /v1/orders?type=<no order's> (400)", "/v1/orders?type=transfer", http.StatusBadRequest},
		{"GET /v1/orders?type=payout&status=rejected", "/v1/orders?type=payout&status=rejected", http.StatusOK},
		{"GET /v1/orders?from=&to= (a year before)", "/v1/orders?from=2000-01-01T00:00:00Z&to=2001-01-01T00:00:00Z", http.StatusOK},
		{"GET /v1/orders/{id}", "/v1/orders/" + url.PathEscape(mid), http.StatusOK},
		{"GET /v1/findings", "/v1/findings", http.StatusOK},
		{"GET /metrics", "/metrics", http.StatusOK},
		{"GET /readyz", "/readyz", http.StatusOK},
	}
	var out []timing
	for _, r := range reqs {
		tm, err := timeGetWant(ctx, r.name, admin+r.path, runs, r.want)
		if err != nil {
			return out, err
		}
		out = append(out, tm)
	}
	return out, nil
}

// reports times the report of the period in each format, once each.
func reports(ctx context.Context, admin string, from, to time.Time) ([]timing, error) {
	var out []timing
	for _, f := range []string{"csv", "json", "html"} {
		v := url.Values{"from": {from.Format(time.RFC3339)}, "to": {to.Format(time.RFC3339)}, "format": {f}}
		tm, err := timeGet(ctx, "report "+f, admin+"/v1/reports/reconciliation?"+v.Encode(), 1)
		if err != nil {
			return out, err
		}
		out = append(out, tm)
	}
	return out, nil
}

// runCLI times one orderd command.
func runCLI(ctx context.Context, name string, bin string, args ...string) (timing, error) {
	t0 := time.Now()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	d := time.Since(t0)
	if err != nil {
		return timing{}, fmt.Errorf("%s: %v: %s", name, err, out)
	}
	return timing{Name: name, Median: d, First: d, Runs: 1}, nil
}

// sizes is how the database's bytes divide.
type sizes struct {
	File       int64 // the database file after a checkpoint
	BodyBytes  int64 // webhook bodies kept (history and deliveries)
	OtherBytes int64 // headers kept with them
	Webhooks   int64 // bodies kept
	Orders     int64
	Tables     map[string]int64 // bytes per table and index (dbstat), when SQLite has it
}

// measureSizes checkpoints the database and reads its file size and what
// the kept webhook bodies take.
func measureSizes(ctx context.Context, path string) (sizes, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return sizes{}, err
	}
	defer db.Close()
	var s sizes
	if _, err := db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return s, err
	}
	err = db.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM orders),
		(SELECT coalesce(sum(length(raw)), 0) + (SELECT coalesce(sum(length(raw)), 0) FROM deliveries) FROM order_history WHERE body_sha256 IS NOT NULL),
		(SELECT coalesce(sum(length(headers)), 0) + (SELECT coalesce(sum(length(headers)), 0) FROM deliveries) FROM order_history),
		(SELECT count(*) FROM order_history WHERE body_sha256 IS NOT NULL) + (SELECT count(*) FROM deliveries)`).
		Scan(&s.Orders, &s.BodyBytes, &s.OtherBytes, &s.Webhooks)
	if err != nil {
		return s, err
	}
	s.Tables = map[string]int64{}
	rows, err := db.QueryContext(ctx, `SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC`)
	if err == nil {
		for rows.Next() {
			var (
				name string
				n    int64
			)
			if rows.Scan(&name, &n) == nil {
				s.Tables[name] = n
			}
		}
		rows.Close()
	}
	st, err := os.Stat(path)
	if err != nil {
		return s, err
	}
	s.File = st.Size()
	return s, nil
}
