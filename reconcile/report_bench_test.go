package reconcile_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"orderd/reconcile"
	"orderd/store"
)

// Environment of the benchmark's child process: the database to report
// on, where to write, and what to do ("csv": the report; "scan": read
// every order's row and JSON and nothing else, the ceiling). With
// ORDERD_REPORT_BENCH_KEEP=DIR the benchmark builds its database in DIR
// and keeps it; with ORDERD_REPORT_BENCH_CPUPROFILE=FILE the child writes
// a CPU profile of the report.
const (
	benchChildDB   = "ORDERD_REPORT_BENCH_DB"
	benchChildOut  = "ORDERD_REPORT_BENCH_OUT"
	benchChildMode = "ORDERD_REPORT_BENCH_MODE"
	benchKeep      = "ORDERD_REPORT_BENCH_KEEP"
	benchProfile   = "ORDERD_REPORT_BENCH_CPUPROFILE"
	// benchPeriod, "FROM/TO" in dates, reports on that period instead of
	// benchDay: with ORDERD_REPORT_BENCH_KEEP pointing at a database built
	// by "orderd-bench scale" (make bench-scale), a month of its orders.
	benchPeriod = "ORDERD_REPORT_BENCH_PERIOD"
)

// reportPeriod is the period the children report on.
func reportPeriod() reconcile.Period {
	from, to, ok := strings.Cut(os.Getenv(benchPeriod), "/")
	if !ok {
		return benchDay
	}
	p, err := reconcile.ParsePeriod(from, to)
	if err != nil {
		fmt.Fprintln(os.Stderr, benchPeriod+":", err)
		os.Exit(2)
	}
	return p
}

// benchDay is the period every benchmark order falls in.
var benchDay = reconcile.Day(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))

// BenchmarkReporter_WriteCSV writes the CSV report (lines and summary
// files) and the JSON report of a day with 1,000,000 orders (100,000 with
// -short) and measures time and peak memory of each. The report runs in a child process (this
// test binary again) that reports its own peak RSS (VmHWM of
// /proc/self/status): the report's memory, not the setup's. (getrusage's
// maxrss of a child would not do: Go starts children with a vfork-style
// clone, and Linux keeps the parent's high-water mark across the exec.)
// Beside it, in the same run, a child just scans the same rows (every
// order's columns and JSON, nothing decoded or written): the ceiling of
// what reading the store allows. A last child runs the report's query
// alone (s-cpu/rows): since the amounts are columns of the order
// (migration 0011) a report no longer reads the JSON, and this is what
// reading its rows costs.
//
//	go test ./reconcile -run '^$' -bench BenchmarkReporter_WriteCSV -benchtime 1x
func BenchmarkReporter_WriteCSV(b *testing.B) {
	if db := os.Getenv(benchChildDB); db != "" {
		benchChild(db, os.Getenv(benchChildOut), os.Getenv(benchChildMode))
		return
	}
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	dir := b.TempDir()
	if d := os.Getenv(benchKeep); d != "" {
		dir = d
	}
	db := filepath.Join(dir, "orderd.db")
	if _, err := os.Stat(db); err == nil {
		b.Logf("reusing %s", db)
	} else {
		start := time.Now()
		benchStore(b, db, n)
		b.Logf("setup: %d orders inserted in %s", n, time.Since(start).Round(time.Millisecond))
	}

	// child returns the child's wall time, peak RSS and CPU time (user
	// and system): on a shared machine the wall time carries the others'
	// load, the CPU time much less so.
	child := func(mode string) (time.Duration, int64, time.Duration) {
		out := filepath.Join(dir, "report.csv")
		cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^BenchmarkReporter_WriteCSV$", "-test.benchtime=1x")
		cmd.Env = append(os.Environ(), benchChildDB+"="+db, benchChildOut+"="+out, benchChildMode+"="+mode)
		cmd.Stderr = os.Stderr
		t0 := time.Now()
		outb, err := cmd.Output()
		if err != nil {
			b.Fatalf("child %s: %v\n%s", mode, err, outb)
		}
		elapsed := time.Since(t0)
		var kib int64
		for line := range strings.Lines(string(outb)) {
			if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				kib, err = strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				if err != nil {
					b.Fatalf("child %s: VmHWM %q: %v", mode, v, err)
				}
			}
		}
		if kib == 0 {
			b.Fatalf("child %s did not report its VmHWM:\n%s", mode, outb)
		}
		return elapsed, kib * 1024, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}

	b.ResetTimer()
	var (
		report, scan, jsonT         time.Duration
		reportCPU, scanCPU, jsonCPU time.Duration
		reportRSS, scanR, jsonR     int64
		rowsCPU                     time.Duration
	)
	for range b.N {
		d, rss, cpu := child("csv")
		report += d
		reportCPU += cpu
		reportRSS = max(reportRSS, rss)
		d, rss, cpu = child("json")
		jsonT += d
		jsonCPU += cpu
		jsonR = max(jsonR, rss)
		d, rss, cpu = child("scan")
		scan += d
		scanCPU += cpu
		scanR = max(scanR, rss)
		_, _, cpu = child("rows")
		rowsCPU += cpu
	}
	b.StopTimer()
	st, err := os.Stat(filepath.Join(dir, "report.csv"))
	if err != nil {
		b.Fatal(err)
	}
	perRun := report / time.Duration(b.N)
	b.ReportMetric(float64(n)/perRun.Seconds(), "orders/s")
	b.ReportMetric(perRun.Seconds(), "s/report")
	b.ReportMetric(float64(reportRSS)/(1<<20), "MiB-maxrss")
	b.ReportMetric(float64(st.Size())/(1<<20), "MiB-csv")
	b.ReportMetric((jsonT / time.Duration(b.N)).Seconds(), "s/report-json")
	b.ReportMetric(float64(jsonR)/(1<<20), "MiB-maxrss-json")
	b.ReportMetric((scan / time.Duration(b.N)).Seconds(), "s/scan-ceiling")
	b.ReportMetric(float64(scanR)/(1<<20), "MiB-maxrss-scan")
	perN := func(d time.Duration) float64 { return (d / time.Duration(b.N)).Seconds() }
	b.ReportMetric(perN(reportCPU), "s-cpu/report")
	b.ReportMetric(perN(jsonCPU), "s-cpu/report-json")
	b.ReportMetric(perN(scanCPU), "s-cpu/scan-ceiling")
	b.ReportMetric(perN(rowsCPU), "s-cpu/rows")
	if reportRSS > 100<<20 {
		b.Logf("peak RSS %d MiB is above the 100 MiB budget", reportRSS>>20)
	}
}

// benchChild runs in the child process: one report (or scan), then it
// prints its peak RSS (the VmHWM line of /proc/self/status) and exits.
func benchChild(db, out, mode string) {
	ctx := context.Background()
	if p := os.Getenv(benchProfile); p != "" && mode != "scan" {
		f, err := os.Create(p)
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(3)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(3)
		}
		defer pprof.StopCPUProfile()
	}
	st, err := store.Open(ctx, db, store.Options{ReadOnly: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(3)
	}
	switch mode {
	case "csv":
		r := reconcile.NewReporter(st, reconcile.ReportConfig{})
		err = r.WriteCSVFiles(ctx, out, reportPeriod())
	case "json":
		r := reconcile.NewReporter(st, reconcile.ReportConfig{})
		err = r.WriteFile(ctx, out+".json", reportPeriod(), reconcile.FormatJSON)
	case "scan":
		err = benchScan(ctx, st, out)
	case "rows":
		// The report's query alone, nothing decoded or written: where a
		// report's time goes between the scan and the report.
		var tx *store.ReportTx
		if tx, err = st.BeginReport(ctx); err == nil {
			p := reportPeriod()
			n := 0
			err = tx.Orders(ctx, p.From, p.To, p.From.Add(-48*time.Hour), func(*store.ReportOrder) error { n++; return nil })
			tx.Close()
		}
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(4)
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(5)
	}
	for line := range strings.Lines(string(status)) {
		if strings.HasPrefix(line, "VmHWM:") {
			fmt.Print(line)
		}
	}
	// Returning ends the benchmark function; the parent reads stdout.
}

// benchScan reads what the report reads of every order — its columns and
// its current JSON — and writes the JSON's length, the floor of any
// report over the same rows.
func benchScan(ctx context.Context, st *store.Store, out string) error {
	f, err := os.Create(out + ".scan")
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	rows, err := st.DB().QueryContext(ctx, `SELECT o.id, o.provider_id, o.merchant_order_id, o.type, o.status,
			o.created_at, o.completed_at, o.learned_via, coalesce(h.raw, d.raw)
		FROM orders o LEFT JOIN order_history h ON h.id = o.state_id LEFT JOIN deliveries d ON d.id = h.delivery_id
		ORDER BY o.id`)
	if err != nil {
		return err
	}
	defer rows.Close()
	var (
		id                         int64
		pid, mid, typ, status, via string
		created, completed         *int64
		raw                        []byte
	)
	for rows.Next() {
		if err := rows.Scan(&id, &pid, &mid, &typ, &status, &created, &completed, &via, &raw); err != nil {
			return err
		}
		fmt.Fprintln(w, len(raw))
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return w.Flush()
}

// benchStore creates a store with n orders of benchDay, inserted with
// direct SQL in one transaction: one in twenty rejected, one in twenty
// still processing, the rest completed payins; one in seven in usd; one
// in ten with a completed partial refund. Each has its current state's
// JSON as the provider writes it (about 700 bytes).
func benchStore(b *testing.B, path string, n int) {
	b.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := st.Close(ctx); err != nil {
			b.Fatal(err)
		}
	}()
	from := benchDay.From.UnixMilli()
	err = st.Write(ctx, func(tx *store.Tx) error {
		// Orders first (history rows reference them); state_id points at
		// the history row with the same id.
		if _, err := tx.Exec(`WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < ?)
			INSERT INTO orders (id, provider_id, merchant_order_id, type, status, fingerprint, target_amount, target_currency,
				state_id, learned_via, created_at, first_seen_at, updated_at, completed_at, next_check_at, check_attempts, final_via)
			SELECT n, printf('%08x-0000-4000-8000-%012d', n, n), 'bench-' || n, 'payin',
				CASE n % 20 WHEN 0 THEN 'rejected' WHEN 1 THEN 'processing' ELSE 'completed' END,
				printf('%064x', n), NULL, NULL, n, 'webhook',
				? + n * 86, ? + n * 86 + 500, ? + n * 86 + 60500,
				CASE n % 20 WHEN 1 THEN NULL ELSE ? + n * 86 + 60000 END,
				CASE n % 20 WHEN 1 THEN ? + n * 86 + 300000 END, 0,
				CASE n % 20 WHEN 1 THEN NULL ELSE 'webhook' END
			FROM seq`, n, from, from, from, from, from); err != nil {
			return fmt.Errorf("insert orders: %w", err)
		}
		// Amounts in integer cents: authorized a, net a - 3%.
		if _, err := tx.Exec(`INSERT INTO order_history (id, order_id, fingerprint, status, source, outcome, observed_at, raw)
			SELECT id, id, fingerprint, status, 'webhook', 'new', updated_at,
				printf('{"id":"%s","merchantOrderId":"%s","type":"payin","createdAt":"%s","status":"%s","rejectReason":%s,' ||
					'"merchantSourceWallet":null,"merchantTargetWallet":%s,"transactions":[{"id":"tx-%d","type":"payin","status":"%s",' ||
					'"authorized":{"amount":"%d.%02d","currency":"%s"},"merchantWallet":{"amount":"%d.%02d","currency":"%s"},' ||
					'"counterpartyInfo":null,"paymentInfo":null,"createdAt":"%s","completedAt":%s,"rejectReason":%s}%s]}',
					provider_id, merchant_order_id, strftime('%Y-%m-%dT%H:%M:%fZ', created_at / 1000.0, 'unixepoch'), status,
					CASE status WHEN 'rejected' THEN '"declined"' ELSE 'null' END,
					CASE status WHEN 'completed' THEN printf('{"amount":"%d.%02d","currency":"%s"}', net / 100, net % 100, ccy) ELSE 'null' END,
					id, status, auth / 100, auth % 100, ccy, net / 100, net % 100, ccy,
					strftime('%Y-%m-%dT%H:%M:%fZ', created_at / 1000.0, 'unixepoch'),
					CASE WHEN completed_at IS NULL THEN 'null' ELSE printf('"%s"', strftime('%Y-%m-%dT%H:%M:%fZ', completed_at / 1000.0, 'unixepoch')) END,
					CASE status WHEN 'rejected' THEN '"declined"' ELSE 'null' END,
					CASE WHEN status = 'completed' AND id % 10 = 3 THEN printf(',{"id":"rf-%d","type":"refund","status":"completed",' ||
						'"amount":{"amount":"%d.%02d","currency":"%s"},"counterpartyInfo":null,"paymentInfo":null,' ||
						'"createdAt":"%s","completedAt":"%s","rejectReason":null}', id, auth / 300, auth / 3 % 100, ccy,
						strftime('%Y-%m-%dT%H:%M:%fZ', completed_at / 1000.0 + 10, 'unixepoch'),
						strftime('%Y-%m-%dT%H:%M:%fZ', completed_at / 1000.0 + 20, 'unixepoch')) ELSE '' END)
			FROM (SELECT o.*, (o.id % 5000 + 1) * 100 + o.id % 100 AS auth,
					(o.id % 5000 + 1) * 100 + o.id % 100 - ((o.id % 5000 + 1) * 100 + o.id % 100) * 3 / 100 AS net,
					CASE WHEN o.id % 7 = 0 THEN 'usd' ELSE 'brl' END AS ccy
				FROM orders o)`); err != nil {
			return fmt.Errorf("insert history: %w", err)
		}
		// The columns the write path keeps with each state: the wallets,
		// the own transaction's amounts and the completed refunds, the
		// same values as the JSON above.
		if _, err := tx.Exec(`UPDATE orders SET
				target_amount = CASE x.status WHEN 'completed' THEN printf('%d.%02d', x.net / 100, x.net % 100) END,
				target_currency = CASE x.status WHEN 'completed' THEN x.ccy END,
				authorized_amount = printf('%d.%02d', x.auth / 100, x.auth % 100), authorized_currency = x.ccy,
				own_wallet_amount = printf('%d.%02d', x.net / 100, x.net % 100), own_wallet_currency = x.ccy,
				refunds = CASE WHEN x.status = 'completed' AND x.id % 10 = 3 THEN json_array(json_array(
					printf('%d.%02d', x.auth / 300, x.auth / 3 % 100), x.ccy,
					strftime('%Y-%m-%dT%H:%M:%fZ', x.completed_at / 1000.0 + 20, 'unixepoch'))) ELSE '' END
			FROM (SELECT o.id, o.status, o.completed_at, (o.id % 5000 + 1) * 100 + o.id % 100 AS auth,
					(o.id % 5000 + 1) * 100 + o.id % 100 - ((o.id % 5000 + 1) * 100 + o.id % 100) * 3 / 100 AS net,
					CASE WHEN o.id % 7 = 0 THEN 'usd' ELSE 'brl' END AS ccy
				FROM orders o) x
			WHERE orders.id = x.id`); err != nil {
			return fmt.Errorf("fill columns: %w", err)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}
