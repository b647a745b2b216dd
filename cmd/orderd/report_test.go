package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"orderd/api"
	"orderd/provider"
	"orderd/provider/providertest"
	"orderd/reconcile"
	"orderd/store"
	"orderd/test/support/reportschema"
)

// checkReportSchema fails the test when a JSON report the command or the
// daemon made does not follow the published schema (api/report.schema.json).
func checkReportSchema(t *testing.T, report []byte) {
	t.Helper()
	v, err := reportschema.New(api.ReportSchema())
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Validate(report); err != nil {
		t.Errorf("%v\n%s", err, report)
	}
}

// reportStore opens a store as a running daemon would hold it, with two
// orders of 2026-11-01 applied through the write path, and returns it and
// a config file pointing at it.
func reportStore(t *testing.T) (*store.Store, string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "orderd.db")
	st, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = st.Close(ctx)
	})
	for i, o := range []struct{ mid, status, completed string }{
		{"cli-1", "completed", `"2026-11-01T10:00:00Z"`},
		{"cli-2", "processing", "null"},
	} {
		target := "null"
		if o.status == "completed" {
			target = `{"amount":"19.40","currency":"brl"}`
		}
		raw := fmt.Appendf(nil, `{"id":"0d000000-0000-4000-8000-00000000000%d","merchantOrderId":%q,"type":"payin",`+
			`"createdAt":"2026-11-01T09:00:00Z","status":%q,"rejectReason":null,"merchantSourceWallet":null,`+
			`"merchantTargetWallet":%s,"transactions":[{"id":"t%d","type":"payin","status":%q,`+
			`"authorized":{"amount":"20.00","currency":"brl"},"merchantWallet":{"amount":"19.40","currency":"brl"},`+
			`"createdAt":"2026-11-01T09:00:00Z","completedAt":%s,"rejectReason":null}]}`,
			i, o.mid, o.status, target, i, o.status, o.completed)
		ord, err := provider.DecodeOrder(raw)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Apply(t.Context(), store.Observation{Source: store.SourceWebhook, Order: ord, Raw: raw,
			ObservedAt: time.Date(2026, 11, 1, 10, 0, 1, 0, time.UTC)}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := writeFile(t, dir, "config.yaml", withLines("store:\n  path: "+path, "log:\n  level: warn"))
	return st, cfg
}

func TestReport_usage(t *testing.T) {
	_, cfg := reportStore(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"from missing", []string{"-to", "2026-11-02"}, "orderd report: -from is required"},
		{"to missing", []string{"-from", "2026-11-01"}, "orderd report: -to is required"},
		{"from not a date", []string{"-from", "2026-11-31", "-to", "2026-12-02"}, `orderd report: -from "2026-11-31" is not a date (2006-01-02) or an RFC 3339 time`},
		{"to not a time", []string{"-from", "2026-11-01", "-to", "2026-11-02 10:00"}, `orderd report: -to "2026-11-02 10:00" is not a date`},
		{"empty period", []string{"-from", "2026-11-01", "-to", "2026-11-01"}, `orderd report: -to "2026-11-01" is not after from 2026-11-01`},
		{"format unknown", []string{"-from", "2026-11-01", "-to", "2026-11-02", "-format", "xlsx"}, `orderd report: -format "xlsx" is not one of csv, json, html`},
		{"an argument", []string{"-from", "2026-11-01", "-to", "2026-11-02", "extra"}, `orderd report: unexpected argument "extra"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runOrderd(t, nil, nil, append([]string{"report", "-config", cfg}, tc.args...)...)
			if r.code != 2 || !strings.Contains(r.stderr, tc.want) || r.stdout != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2 and %q", r.code, r.stdout, r.stderr, tc.want)
			}
		})
	}
	t.Run("a store that does not exist", func(t *testing.T) {
		missing := writeFile(t, t.TempDir(), "config.yaml", withLines("store:\n  path: /nonexistent/orderd.db"))
		r := runOrderd(t, nil, nil, "report", "-config", missing, "-from", "2026-11-01", "-to", "2026-11-02")
		if r.code != 2 || !strings.Contains(r.stderr, "store.path: directory /nonexistent does not exist") {
			t.Errorf("exit %d, stderr %q; want 2 naming store.path", r.code, r.stderr)
		}
	})
}

// TestReport_run writes reports from a store a daemon holds open, to
// standard output and to files.
func TestReport_run(t *testing.T) {
	st, cfg := reportStore(t)
	period := []string{"-from", "2026-11-01", "-to", "2026-11-02"}

	t.Run("json to standard output", func(t *testing.T) {
		r := runOrderd(t, nil, nil, append([]string{"report", "-config", cfg, "-format", "json"}, period...)...)
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		var rep struct {
			Currencies []struct {
				Currency string
				Payins   struct{ Count int }
			}
			Orders []struct{ MerchantOrderID, Membership string }
		}
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("stdout is not JSON: %v\n%s", err, r.stdout)
		}
		checkReportSchema(t, []byte(r.stdout))
		if len(rep.Orders) != 2 || rep.Orders[0].MerchantOrderID != "cli-1" || rep.Orders[1].Membership != "open" ||
			len(rep.Currencies) != 1 || rep.Currencies[0].Payins.Count != 1 {
			t.Errorf("report %+v", rep)
		}
	})

	// orderd report opens the database read-only: it records no first
	// issue of the period itself, and compares with the one the daemon
	// recorded.
	t.Run("first issue recorded by the daemon", func(t *testing.T) {
		type firstIssue struct {
			Digest     string
			FirstIssue *struct{ Digest, IssuedAt string }
		}
		cli := func() firstIssue {
			t.Helper()
			r := runOrderd(t, nil, nil, append([]string{"report", "-config", cfg, "-format", "json"}, period...)...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			var rep firstIssue
			if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
				t.Fatal(err)
			}
			return rep
		}
		if rep := cli(); rep.FirstIssue != nil {
			t.Fatalf("the read-only report has a first issue nobody recorded: %+v", rep.FirstIssue)
		}
		if rep := cli(); rep.FirstIssue != nil {
			t.Fatalf("the read-only report recorded its digest: %+v", rep.FirstIssue)
		}
		issued := time.Date(2026, 11, 3, 1, 0, 0, 0, time.UTC)
		daemon := reconcile.NewReporter(st, reconcile.ReportConfig{Now: func() time.Time { return issued }})
		if err := daemon.WriteJSON(t.Context(), io.Discard, reconcile.Period{
			From: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)}); err != nil {
			t.Fatal(err)
		}
		if rep := cli(); rep.FirstIssue == nil || rep.FirstIssue.Digest != rep.Digest || rep.FirstIssue.IssuedAt != "2026-11-03T01:00:00.000Z" {
			t.Fatalf("the read-only report after the daemon's: digest %s, first issue %+v", rep.Digest, rep.FirstIssue)
		}
	})

	t.Run("csv to files", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "nov.csv")
		r := runOrderd(t, nil, nil, append([]string{"report", "-config", cfg, "-o", out}, period...)...)
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		summary := filepath.Join(filepath.Dir(out), "nov-summary.csv")
		findings := filepath.Join(filepath.Dir(out), "nov-findings.csv")
		if r.stdout != out+"\n"+summary+"\n"+findings+"\n" {
			t.Errorf("stdout %q, want the three paths", r.stdout)
		}
		// The period has no findings: the findings file is its header.
		for path, want := range map[string]int{out: 3, summary: 2, findings: 1} {
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			recs, err := csv.NewReader(f).ReadAll()
			f.Close()
			if err != nil || len(recs) != want {
				t.Errorf("%s: %d records (%v), want %d", path, len(recs), err, want)
			}
		}
	})

	// reports.csv_guard_formulas reaches the report: its summary says so.
	t.Run("csv with reports.csv_guard_formulas", func(t *testing.T) {
		dir := t.TempDir()
		b, err := os.ReadFile(cfg)
		if err != nil {
			t.Fatal(err)
		}
		guarded := writeFile(t, dir, "config.yaml", string(b)+"reports:\n  csv_guard_formulas: true\n")
		r := runOrderd(t, nil, nil, append([]string{"report", "-config", guarded}, period...)...)
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		if !strings.Contains(r.stdout, ",formulas_guarded\r\n") {
			t.Errorf("the summary does not say the guard is on:\n%s", r.stdout)
		}
	})

	t.Run("html to a file", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "nov.html")
		r := runOrderd(t, nil, nil, append([]string{"report", "-config", cfg, "-format", "html", "-o", out}, period...)...)
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		b, err := os.ReadFile(out)
		if err != nil || !strings.Contains(string(b), `<table id="orders" class="lines">`) || !strings.Contains(string(b), `href="nov.csv"`) {
			t.Errorf("html file (%v):\n%s", err, b)
		}
	})

	// -o onto something that is not a regular file is refused, naming -o,
	// and leaves it as it was: writing renames a new file over the path,
	// which would replace a FIFO or a device node (as root, /dev/null).
	t.Run("-o not a regular file", func(t *testing.T) {
		dir := t.TempDir()
		fifo := filepath.Join(dir, "pipe")
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, out := range []string{fifo, dir} {
			r := runOrderd(t, nil, nil, append([]string{"report", "-config", cfg, "-format", "json", "-o", out}, period...)...)
			if r.code != 2 || !strings.Contains(r.stderr, "-o") || !strings.Contains(r.stderr, "not a regular file") {
				t.Errorf("-o %s: exit %d, stderr %q; want 2 naming -o", out, r.code, r.stderr)
			}
		}
		if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
			t.Errorf("the FIFO after the refused report: %v %v", fi.Mode(), err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 1 {
			t.Errorf("the directory holds %d entries after the refusals, want only the FIFO", len(entries))
		}
	})

	// -o onto a symbolic link writes the file it points to; the link stays.
	t.Run("-o a symbolic link", func(t *testing.T) {
		dir := t.TempDir()
		target := filepath.Join(dir, "nov.json")
		if err := os.WriteFile(target, []byte("old"), 0o600); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(dir, "latest.json")
		if err := os.Symlink("nov.json", link); err != nil {
			t.Fatal(err)
		}
		r := runOrderd(t, nil, nil, append([]string{"report", "-config", cfg, "-format", "json", "-o", link}, period...)...)
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
		if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("the link after the report: %v %v, want still a link", fi.Mode(), err)
		}
		b, err := os.ReadFile(target)
		if err != nil || !strings.Contains(string(b), `"currencies"`) {
			t.Errorf("the link's target after the report (%v): %.80s", err, b)
		}
		checkReportSchema(t, b)
	})

	// The daemon's store is still open and still takes writes.
	if err := st.Ready(t.Context()); err != nil {
		t.Errorf("the daemon's store after the reports: %v", err)
	}
}

// TestRun_reports starts the real daemon with the report schedule every
// second and checks the wiring: the scheduled job writes yesterday's
// report in every format to reports.dir and records its runs, and the
// admin listener serves the reports and the dashboard behind the token.
func TestRun_reports(t *testing.T) {
	dir := t.TempDir()
	fake := providertest.NewServer(providertest.Options{})
	t.Cleanup(fake.Close)
	key := writeFile(t, dir, "provider.pem", string(fake.PublicKeyPEM()))
	token := writeFile(t, dir, "admin.token", "report-test-token\n")
	reports := filepath.Join(dir, "reports")
	cfg := writeFile(t, dir, "config.yaml", fmt.Sprintf(`provider:
  base_url: %s
  api_key: %s
  public_keys: [%s]
receiver:
  listen: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
  token_file: %s
store:
  path: %s
nats:
  embedded:
    listen: 127.0.0.1:0
    store_dir: %s
reconcile:
  schedules: {stale: "off", doubt: "off", balances: "off", requisites: "off", report: "@every 1s"}
reports:
  dir: %s
log:
  level: info
  format: json
`, fake.URL(), fake.APIKey(), key, token, filepath.Join(dir, "orderd.db"), filepath.Join(dir, "nats"), reports))

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	var stdout strings.Builder
	var stderr syncBuffer
	go func() {
		done <- run(ctx, []string{"orderd", "run", "-config", cfg}, func(string) string { return "" }, nil, &stdout, &stderr)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("orderd did not stop")
		}
	})
	admin := waitStarted(t, &stderr, done).Admin
	waitReady(t, admin, done)

	yesterday := reconcile.Day(time.Now().UTC().Add(-24 * time.Hour))
	want := []string{yesterday.FileName("csv"), yesterday.FileName("html"), yesterday.FileName("json"),
		strings.TrimSuffix(yesterday.FileName("csv"), ".csv") + "-summary.csv",
		strings.TrimSuffix(yesterday.FileName("csv"), ".csv") + "-findings.csv"}
	deadline := time.Now().Add(15 * time.Second)
	for {
		missing := ""
		for _, name := range want {
			if _, err := os.Stat(filepath.Join(reports, name)); err != nil {
				missing = name
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			entries, _ := os.ReadDir(reports)
			t.Fatalf("the report job did not write %s within 15s (dir holds %v); stderr:\n%s", missing, entries, stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}

	get := func(path, tok string) (int, string, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), "GET", "http://"+admin+path, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
	}
	today := reconcile.Day(time.Now().UTC())
	q := "/v1/reports/reconciliation?format=json&from=" + today.From.Format(time.DateOnly) + "&to=" + today.To.Format(time.DateOnly)
	if code, _, _ := get(q, ""); code != http.StatusUnauthorized {
		t.Errorf("report without the token: %d", code)
	}
	code, ct, body := get(q, "report-test-token")
	if code != http.StatusOK || ct != "application/json" || !strings.Contains(body, `"job":"report"`) {
		t.Errorf("today's report: %d %s, want the report job's runs in it:\n%s", code, ct, body)
	}
	checkReportSchema(t, []byte(body))
	if b, err := os.ReadFile(filepath.Join(reports, yesterday.FileName("json"))); err != nil {
		t.Error(err)
	} else {
		checkReportSchema(t, b)
	}
	code, ct, body = get("/", "report-test-token")
	if code != http.StatusOK || ct != "text/html; charset=utf-8" || !strings.Contains(body, `<p class="big ok">ready</p>`) ||
		!strings.Contains(body, "✓</span> nats") || !strings.Contains(body, `href="/v1/reports/files/`+yesterday.FileName("html")+`"`) {
		t.Errorf("dashboard: %d %s\n%s", code, ct, body)
	}

	// The files the job wrote, over the admin API: how finance reaches
	// them when reports.dir is private to the service.
	if code, _, _ := get("/v1/reports/files", ""); code != http.StatusUnauthorized {
		t.Errorf("report files without the token: %d", code)
	}
	code, _, body = get("/v1/reports/files", "report-test-token")
	var list struct{ Files []struct{ Name, Href string } }
	if err := json.Unmarshal([]byte(body), &list); code != http.StatusOK || err != nil || len(list.Files) < len(want) {
		t.Fatalf("report files: %d %v\n%s", code, err, body)
	}
	for _, f := range list.Files[:len(want)] {
		if !slices.Contains(want, f.Name) {
			t.Errorf("listed %s first, want yesterday's files %v", f.Name, want)
		}
	}
	onDisk, err := os.ReadFile(filepath.Join(reports, yesterday.FileName("csv")))
	if err != nil {
		t.Fatal(err)
	}
	code, ct, body = get("/v1/reports/files/"+yesterday.FileName("csv"), "report-test-token")
	if code != http.StatusOK || ct != "text/csv; charset=utf-8" || body != string(onDisk) {
		t.Errorf("yesterday's CSV file over the API: %d %s, %d bytes (%d on disk)", code, ct, len(body), len(onDisk))
	}
}

// TestReconcile_Summary: a one-off run whose items failed is not reported
// as ok, a failed job's error is said once, without the job's name
// repeated in front of it, and either makes the exit status 1.
func TestReconcile_Summary(t *testing.T) {
	_, cfg := reportStore(t) // cli-2 is processing since 2026-11-01: stale
	fake := providertest.NewServer(providertest.Options{})
	t.Cleanup(fake.Close)
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	y := strings.Replace(string(b), "https://api.provider.example", fake.URL(), 1)
	y = strings.Replace(y, "inline-key", fake.APIKey(), 1)
	if err := os.WriteFile(cfg, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []providertest.Fault{
		{Endpoint: providertest.PathGetStatus, Kind: providertest.FailBefore},
		{Endpoint: providertest.PathBalances, Kind: providertest.FailBefore},
	} {
		if err := fake.InjectFault(f); err != nil {
			t.Fatal(err)
		}
	}

	r := runOrderd(t, nil, nil, "reconcile", "-config", cfg, "-job", "all")
	if r.code != 1 {
		t.Errorf("exit %d, want 1", r.code)
	}
	lines := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if f := strings.Fields(l); len(f) > 1 {
			lines[f[0]] = l
		}
	}
	if l := lines["stale"]; !strings.Contains(l, " partial ") || !strings.Contains(l, "errors=1") {
		t.Errorf("stale line %q, want partial with errors=1", l)
	}
	if l := lines["doubt"]; !strings.Contains(l, " ok ") {
		t.Errorf("doubt line %q, want ok", l)
	}
	if l := lines["balances"]; !strings.Contains(l, " failed ") || !strings.Contains(l, "error: balances: provider: ") {
		t.Errorf("balances line %q, want failed with the provider's error once", l)
	}
	for _, out := range []string{r.stdout, r.stderr} {
		if strings.Contains(out, "balances: balances:") || strings.Contains(out, "reconcile: reconcile:") {
			t.Errorf("a prefix is repeated:\n%s", out)
		}
	}
	for _, want := range []string{
		"orderd reconcile: job stale: 1 item failed",
		"orderd reconcile: job balances failed: balances: provider: ",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
		}
	}

	// With the faults used up, the same run is ok everywhere and exits 0.
	r = runOrderd(t, nil, nil, "reconcile", "-config", cfg, "-job", "balances")
	if r.code != 0 || !strings.Contains(r.stdout, "balances    ok ") {
		t.Errorf("second run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
