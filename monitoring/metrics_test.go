package monitoring_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"orderd/provider/providertest"
	"orderd/publish"
	"orderd/test/support/testbin"
)

// Modes of orderd whose metrics a name is checked against.
const (
	single     = "single node"
	replicated = "replicated"
)

// prometheusOwn are series Prometheus itself makes, not orderd.
var prometheusOwn = map[string]bool{
	"up": true, "ALERTS": true, "ALERTS_FOR_STATE": true, "scrape_duration_seconds": true,
	"scrape_samples_scraped": true, "scrape_samples_post_metric_relabeling": true, "scrape_series_added": true,
}

// use is one metric name used by a rule or a panel.
type use struct {
	name  string
	where string // file and alert or panel
	mode  string // single or replicated
}

// ruleFile is the part of a Prometheus rule file the checks read.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			KeepFiring  string            `yaml:"keep_firing_for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// ruleFiles returns the rule files of this directory (not their tests)
// with the mode whose metrics they use.
func ruleFiles(t *testing.T) map[string]string {
	t.Helper()
	paths, err := filepath.Glob("*.rules.yml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no *.rules.yml here (%v)", err)
	}
	files := map[string]string{}
	for _, p := range paths {
		files[p] = single
		if strings.Contains(p, "replicated") {
			files[p] = replicated
		}
	}
	return files
}

func readRules(t *testing.T, path string) ruleFile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && err != io.EOF {
		t.Fatalf("%s: %v", path, err)
	}
	return f
}

// ruleUses lists the metric names every rule of every rule file uses, and
// the names recording rules define.
func ruleUses(t *testing.T) (uses []use, recorded map[string]bool) {
	t.Helper()
	recorded = map[string]bool{}
	for path, mode := range ruleFiles(t) {
		for _, g := range readRules(t, path).Groups {
			for _, r := range g.Rules {
				name := r.Alert
				if r.Record != "" {
					name = r.Record
					recorded[r.Record] = true
				}
				if strings.TrimSpace(r.Expr) == "" {
					t.Errorf("%s: %s has no expr", path, name)
				}
				for _, m := range metricNames(r.Expr) {
					uses = append(uses, use{name: m, where: path + ": " + name, mode: mode})
				}
			}
		}
	}
	return uses, recorded
}

// dashboardUses lists the metric names of every query in the dashboard:
// panel targets, template variables and annotations. Panels below the row
// titled "Replicated mode" use replicated mode's metrics.
func dashboardUses(t *testing.T) []use {
	t.Helper()
	const path = "orderd-dashboard.json"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels     []map[string]any `json:"panels"`
		Templating struct {
			List []map[string]any `json:"list"`
		} `json:"templating"`
		Annotations struct {
			List []map[string]any `json:"list"`
		} `json:"annotations"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var uses []use
	add := func(expr, where, mode string) {
		for _, m := range metricNames(expr) {
			uses = append(uses, use{name: m, where: path + ": " + where, mode: mode})
		}
	}
	mode, queries := single, 0
	var panel func(p map[string]any)
	panel = func(p map[string]any) {
		title, _ := p["title"].(string)
		if p["type"] == "row" {
			mode = single
			if title == "Replicated mode" {
				mode = replicated
			}
		}
		targets, _ := p["targets"].([]any)
		for _, tg := range targets {
			if m, ok := tg.(map[string]any); ok {
				if e, ok := m["expr"].(string); ok {
					add(e, "panel "+title, mode)
					queries++
				}
			}
		}
		nested, _ := p["panels"].([]any)
		for _, n := range nested {
			if m, ok := n.(map[string]any); ok {
				panel(m)
			}
		}
	}
	for _, p := range d.Panels {
		panel(p)
	}
	for _, v := range d.Templating.List {
		switch q := v["query"].(type) {
		case string:
			if v["type"] == "query" {
				add(q, "variable "+fmt.Sprint(v["name"]), single)
			}
		case map[string]any:
			if s, ok := q["query"].(string); ok {
				add(s, "variable "+fmt.Sprint(v["name"]), single)
			}
		}
	}
	for _, a := range d.Annotations.List {
		if e, ok := a["expr"].(string); ok {
			add(e, "annotation "+fmt.Sprint(a["name"]), single)
		}
	}
	if queries < 20 {
		t.Fatalf("%s: only %d panel queries found; is the dashboard's shape still panels[].targets[].expr?", path, queries)
	}
	return uses
}

// TestMonitoring_MetricNamesAreExported checks every metric name the
// alerting rules and the dashboard use against the metrics a real orderd
// process exports on /metrics — the registry the daemon builds, not a
// list kept by hand — and that every orderd_ metric it exports is
// watched by a rule or a panel.
func TestMonitoring_MetricNamesAreExported(t *testing.T) {
	rules, recorded := ruleUses(t)
	uses := append(rules, dashboardUses(t)...)
	need := map[string]map[string][]string{single: {}, replicated: {}} // mode → name → where
	for _, u := range uses {
		if prometheusOwn[u.name] || recorded[u.name] {
			continue
		}
		need[u.mode][u.name] = append(need[u.mode][u.name], u.where)
	}
	used := map[string]bool{}
	for _, u := range uses {
		used[u.name] = true
	}

	bin := buildOrderd(t)
	d := startDaemon(t, bin, "")
	got := d.scrapeUntil(t, slices.Collect(maps.Keys(need[single])), 90*time.Second)
	for _, name := range slices.Sorted(maps.Keys(need[single])) {
		if !got[name] {
			t.Errorf("%s is not exported by orderd (single node); used in %s", name, strings.Join(need[single][name], ", "))
		}
	}
	unwatched(t, d.families, used)
	d.stop(t)

	if len(need[replicated]) == 0 {
		t.Logf("single node: %d names checked; replicated mode: no rule or panel uses its metrics yet", len(need[single]))
		return
	}
	rep := replicatedDaemon(t, bin)
	got = rep.scrapeUntil(t, slices.Collect(maps.Keys(need[replicated])), 90*time.Second)
	for _, name := range slices.Sorted(maps.Keys(need[replicated])) {
		if !got[name] {
			t.Errorf("%s is not exported by orderd in replicated mode; used in %s", name, strings.Join(need[replicated][name], ", "))
		}
	}
	unwatched(t, rep.families, used)
	rep.stop(t)
	t.Logf("single node: %d names checked; replicated mode: %d", len(need[single]), len(need[replicated]))
}

// unwatched fails the test for each orderd_ metric family that no rule or
// panel uses.
func unwatched(t *testing.T, families map[string]string, used map[string]bool) {
	t.Helper()
	for _, family := range slices.Sorted(maps.Keys(families)) {
		if !strings.HasPrefix(family, "orderd_") {
			continue
		}
		if !used[family] && !used[family+"_bucket"] && !used[family+"_sum"] && !used[family+"_count"] {
			t.Errorf("orderd exports %s, but no alerting rule or dashboard panel uses it: add it to orderd-dashboard.json (and an alert with its RUNBOOK.md paragraph if it must wake someone)", family)
		}
	}
}

// buildOrderd builds the orderd binary into the test's directory.
func buildOrderd(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "orderd")
	if err := testbin.Orderd(bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// daemon is an orderd process started by a test.
type daemon struct {
	cmd     *exec.Cmd
	exited  chan struct{}
	logPath string
	admin   string // host:port
	// families of the last scrape: metric family name → type.
	families map[string]string
}

// startDaemon starts "orderd run" with a fake provider, every listener on
// a port the system picks, and the reconcile jobs every second (so that
// the metrics labelled by job, kind and provider endpoint get their
// series); extra is appended to the config. It returns once orderd has
// logged the addresses it bound.
func startDaemon(t *testing.T, bin, extra string) *daemon {
	t.Helper()
	dir := t.TempDir()
	fake := providertest.NewServer(providertest.Options{InitialBalances: map[string]string{"brl": "100.00"}})
	t.Cleanup(fake.Close)
	pub := filepath.Join(dir, "provider-public.pem")
	if err := os.WriteFile(pub, fake.PublicKeyPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`provider:
  base_url: %s
  api_key: %s
  public_keys: [%s]
receiver:
  listen: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
store:
  path: %s
reconcile:
  schedules: {stale: "@every 1s", doubt: "@every 1s", balances: "@every 1s", requisites: "@every 1s", report: "off"}
reports:
  dir: %s
log:
  level: info
  format: json
%s`, fake.URL(), fake.APIKey(), pub, filepath.Join(dir, "orderd.db"), filepath.Join(dir, "reports"), extra)
	if !strings.Contains(extra, "nats:") {
		cfg += fmt.Sprintf("nats:\n  embedded:\n    listen: 127.0.0.1:0\n    store_dir: %s\n", filepath.Join(dir, "nats"))
	}
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	d := &daemon{exited: make(chan struct{}), logPath: filepath.Join(dir, "orderd.log")}
	logf, err := os.Create(d.logPath)
	if err != nil {
		t.Fatal(err)
	}
	d.cmd = exec.Command(bin, "run", "-config", cfgPath)
	d.cmd.Dir = dir
	d.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = d.cmd.Wait()
		logf.Close()
		close(d.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-d.exited:
		default:
			_ = d.cmd.Process.Kill()
			<-d.exited
		}
		if t.Failed() {
			b, _ := os.ReadFile(d.logPath)
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			t.Logf("orderd's log (last 40 lines):\n%s", strings.Join(lines[max(0, len(lines)-40):], "\n"))
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for d.admin == "" {
		select {
		case <-d.exited:
			t.Fatalf("orderd exited at start")
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("orderd did not log \"orderd started\" within 60s")
		}
		d.admin = startedAdmin(d.logPath)
		time.Sleep(50 * time.Millisecond)
	}
	return d
}

// startedAdmin returns the admin address of the "orderd started" log
// line, or "" before it is written.
func startedAdmin(logPath string) string {
	f, err := os.Open(logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var line struct {
			Msg   string `json:"msg"`
			Admin string `json:"admin"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "orderd started" {
			return line.Admin
		}
	}
	return ""
}

// scrapeUntil scrapes /metrics until every name in want is exported or
// the timeout passes, and returns the series names of the last scrape:
// each family's name, and a histogram's _bucket, _sum and _count.
func (d *daemon) scrapeUntil(t *testing.T, want []string, timeout time.Duration) map[string]bool {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(timeout)
	for {
		families, err := scrape(client, "http://"+d.admin+"/metrics")
		if err != nil {
			t.Fatalf("scrape: %v", err)
		}
		d.families = families
		got := seriesNames(families)
		missing := 0
		for _, w := range want {
			if !got[w] {
				missing++
			}
		}
		if missing == 0 || time.Now().After(deadline) {
			return got
		}
		select {
		case <-d.exited:
			t.Fatalf("orderd exited while being scraped")
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// scrape returns the metric families of one scrape, name → type.
func scrape(client *http.Client, url string) (map[string]string, error) {
	resp, err := client.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	families := map[string]string{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			families[f[2]] = f[3]
		}
	}
	return families, sc.Err()
}

// seriesNames are the names a query can select from these families: each
// family's name, and a histogram's or summary's _bucket, _sum and _count.
func seriesNames(families map[string]string) map[string]bool {
	got := map[string]bool{}
	for name, typ := range families {
		got[name] = true
		switch typ {
		case "histogram":
			got[name+"_bucket"], got[name+"_sum"], got[name+"_count"] = true, true, true
		case "summary":
			got[name+"_sum"], got[name+"_count"] = true, true
		}
	}
	return got
}

// stop sends SIGTERM by PID and waits for a clean exit.
func (d *daemon) stop(t *testing.T) {
	t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("orderd did not stop within 30s of SIGTERM")
	}
}

// replicatedDaemon starts orderd in replicated mode (cluster.enabled) as
// the one instance on a three-node NATS cluster in this process; it takes
// the lease, so it exports the leader's metrics too.
func replicatedDaemon(t *testing.T, bin string) *daemon {
	t.Helper()
	c, err := publish.StartEmbeddedCluster(publish.EmbeddedClusterConfig{Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("nats cluster: %v", err)
	}
	t.Cleanup(c.Shutdown)
	return startDaemon(t, bin, fmt.Sprintf("nats:\n  url: %s\ncluster:\n  enabled: true\n  node: monitoring-test\n", c.ClientURL()))
}
