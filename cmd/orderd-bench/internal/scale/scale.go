// Package scale is "orderd-bench scale": it measures orderd on a database of a long life: it
// builds a database of -size orders through the store's real write path
// (each order a processing and a final webhook applied with store.Apply by
// many callers at once, so group commit batches them; some final webhooks
// delivered twice, refunds an hour later, some orders left processing,
// findings opened and resolved, balance snapshots every 15 minutes, every
// event published), creations spread over -days days, then starts the
// real daemon ("orderd run", -orderd) on it and prints:
//
//   - bytes per order, and what the kept webhook bodies take of them;
//   - start-up: from exec until /readyz answers 200 (open, migrate, every
//     part started);
//   - each interactive request (the dashboard, the order listing and one
//     order, findings, metrics, readiness), the median of -runs through
//     the daemon's admin listener, and the first (cold) one;
//   - the report of the whole span and of its last day in CSV, JSON and
//     HTML (time and size), and the daemon's peak RSS after them;
//   - "orderd backup" and "orderd migrate" on the database.
//
// With -scenario busy the database is instead a busy day's last minutes:
// -size orders arriving through the same write path as fast as it takes
// them, with the real clock, one webhook each, then every body delivered
// once more (byte-identical repeats); the requests are timed once the
// dashboard's window of the last 5 minutes starts in the middle of that
// burst (-wait; at once when that moment has passed), when its first
// minute holds the most rows, and the hour's holds all of it. The reports
// are not timed there (the month measures them).
//
// With -dir the database stays there for another run (-dir an existing
// database is measured without being rebuilt).
//
// Usage:
//
//	orderd-bench scale -orderd bin/orderd [-scenario month|busy] [-wait=false] [-size 1000000] [-days 30] [-dir DIR] [-runs 5]
//	orderd-bench scale -orderd bin/orderd -migration [-size 1000000] [-dir DIR] [-window 10s] [-senders 32]
//
// With -migration it measures an upgrade instead: every order's report
// columns emptied and the background migration that writes them
// (report_columns) pending, as after an upgrade from a release that
// filled them in one SQL step; then start-up (exec until /readyz answers
// 200), webhook ingest for -window while the migration runs, how long the
// migration took, and ingest for -window once it finished (the reference,
// in the same run).
//
// Exit status: 0 after a run, 1 when a step failed, 2 on a usage error.
package scale

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// options are the command line's.
type options struct {
	orderd   string
	scenario string
	size     int
	days     int
	dir      string
	runs     int
	workers  int
	build    bool
	wait     bool
	// migration measures start-up and ingest with a pending background
	// migration instead (migration.go).
	migration bool
	mig       migrationOptions
}

// Run runs "orderd-bench scale" with args (those after the subcommand) and
// returns its exit status: 0 after a run, 1 when a step failed, 2 on a
// usage error.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("orderd-bench scale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.orderd, "orderd", "bin/orderd", "the orderd binary to measure")
	fs.StringVar(&o.scenario, "scenario", scenarioMonth, "month: orders created over -days days, ending now; busy: -size orders and as many repeats arriving in the minutes before the measurement")
	fs.IntVar(&o.size, "size", 1_000_000, "orders in the database")
	fs.IntVar(&o.days, "days", 30, "days over which the orders were created")
	fs.StringVar(&o.dir, "dir", "", "directory of the database (kept); empty means a temporary one, removed after")
	fs.IntVar(&o.runs, "runs", 5, "times each interactive request is made (the median is printed)")
	fs.IntVar(&o.workers, "workers", 32, "concurrent callers of the write path while building")
	fs.BoolVar(&o.wait, "wait", true, "busy: before timing the requests, wait until the dashboard's 5-minute window starts in the middle of the burst")
	fs.BoolVar(&o.build, "build-only", false, "build the database in -dir and stop (to measure it later, or another binary on it)")
	fs.BoolVar(&o.migration, "migration", false, "measure start-up and ingest with a pending background migration over every order instead")
	fs.DurationVar(&o.mig.window, "window", 10*time.Second, "with -migration: each ingest window")
	fs.IntVar(&o.mig.senders, "senders", 32, "with -migration: concurrent webhook senders")
	fs.IntVar(&o.mig.perRound, "webhooks", 30000, "with -migration: at most this many webhooks per window")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.size < 100 || o.days < 1 || o.runs < 1 || o.workers < 1 || fs.NArg() > 0 || o.build && o.dir == "" ||
		o.mig.window <= 0 || o.mig.senders < 1 || o.mig.perRound < 1 {
		fmt.Fprintln(stderr, "orderd-bench scale: -size must be at least 100, -days, -runs, -workers, -senders and -webhooks at least 1, -window positive, -build-only needs -dir, and no arguments")
		return 2
	}
	if o.scenario != scenarioMonth && o.scenario != scenarioBusy {
		fmt.Fprintf(stderr, "orderd-bench scale: -scenario must be %s or %s, not %q\n", scenarioMonth, scenarioBusy, o.scenario)
		return 2
	}
	if err := measure(ctx, o, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "orderd-bench scale:", err)
		return 1
	}
	return 0
}

func measure(ctx context.Context, o options, stdout, progress io.Writer) error {
	bin, err := filepath.Abs(o.orderd)
	if err != nil {
		return err
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("-orderd: %w", err)
	}
	dir := o.dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "orderd-bench-scale-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	db := filepath.Join(dir, "orderd.db")
	// The span ends at the start of this minute, so the dashboard's
	// windows (the last 5 and 60 minutes) hold the traffic of a busy
	// moment, as they would on a live system. A database kept from an
	// earlier run keeps its span (spanFile).
	end := time.Now().UTC().Truncate(time.Minute)
	start := end.Add(-time.Duration(o.days) * 24 * time.Hour)
	if _, err := os.Stat(db); err == nil {
		fmt.Fprintf(stdout, "database: %s exists; measured as it is\n", db)
		if b, err := os.ReadFile(filepath.Join(dir, spanFile)); err == nil {
			if s, e, ok := strings.Cut(strings.TrimSpace(string(b)), "/"); ok {
				start, _ = time.Parse(time.RFC3339, s)
				end, _ = time.Parse(time.RFC3339, e)
			}
		}
	} else {
		if err := os.WriteFile(filepath.Join(dir, spanFile), []byte(start.Format(time.RFC3339)+"/"+end.Format(time.RFC3339)+"\n"), 0o600); err != nil {
			return err
		}
		if o.scenario == scenarioBusy {
			st, first, last, err := buildBusy(ctx, db, o.size, o.workers, progress)
			if err != nil {
				return fmt.Errorf("build: %w", err)
			}
			// The burst's span, for the wait below and a later run's.
			start, end = first, last
			if err := os.WriteFile(filepath.Join(dir, spanFile), []byte(start.Format(time.RFC3339)+"/"+end.Format(time.RFC3339)+"\n"), 0o600); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "built a busy day: %d orders in %s, then as many repeats (%d applies through the write path in %s: %.0f applies/s)\n",
				o.size, last.Sub(first).Round(time.Second), st.Applies, st.Elapsed.Round(time.Second), float64(st.Applies)/st.Elapsed.Seconds())
		} else {
			st, err := build(ctx, db, buildConfig{Size: o.size, Start: start, Span: end.Sub(start), Workers: o.workers}, progress)
			if err != nil {
				return fmt.Errorf("build: %w", err)
			}
			fmt.Fprintf(stdout, "built %d orders (%d applies, %d findings, %d balance snapshots) through the write path in %s: %.0f applies/s\n",
				o.size, st.Applies, st.Findings, st.Snapshots, st.Elapsed.Round(time.Second), float64(st.Applies)/st.Elapsed.Seconds())
		}
	}

	if o.build {
		return nil
	}
	if o.migration {
		return measureMigration(ctx, bin, dir, db, o.mig, stdout)
	}
	sz, err := measureSizes(ctx, db)
	if err != nil {
		return fmt.Errorf("sizes: %w", err)
	}
	perOrder := func(n int64) float64 { return float64(n) / float64(max(sz.Orders, 1)) }
	fmt.Fprintf(stdout, "database: %d orders, %.1f MiB, %.0f bytes per order\n", sz.Orders, float64(sz.File)/(1<<20), perOrder(sz.File))
	fmt.Fprintf(stdout, "webhook bodies kept: %d, %.1f MiB (%.0f bytes per order, %.0f %% of the file); their headers %.0f bytes per order\n",
		sz.Webhooks, float64(sz.BodyBytes)/(1<<20), perOrder(sz.BodyBytes), 100*float64(sz.BodyBytes)/float64(max(sz.File, 1)), perOrder(sz.OtherBytes))
	names := make([]string, 0, len(sz.Tables))
	for n := range sz.Tables {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return sz.Tables[names[i]] > sz.Tables[names[j]] })
	for i, n := range names {
		if i == 8 {
			break
		}
		fmt.Fprintf(stdout, "  %-28s %8.1f MiB  %6.0f bytes per order\n", n, float64(sz.Tables[n])/(1<<20), perOrder(sz.Tables[n]))
	}

	if o.scenario == scenarioBusy && o.wait {
		// A person opens the dashboard a few minutes after the burst: its
		// window of the last 5 minutes then starts inside it, where a
		// minute holds the most rows. Wait for that moment, if it is
		// still to come.
		at := start.Add(end.Sub(start)/2 + 5*time.Minute)
		if d := time.Until(at); d > 0 {
			fmt.Fprintf(progress, "waiting %s, until the dashboard's 5-minute window starts in the middle of the burst\n", d.Round(time.Second))
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		fmt.Fprintf(stdout, "the burst: %s to %s; the requests timed from %s (the 5-minute window from %s)\n",
			start.Format(time.TimeOnly), end.Format(time.TimeOnly), time.Now().UTC().Format(time.TimeOnly),
			time.Now().UTC().Add(-5*time.Minute).Format(time.TimeOnly))
	}
	cfg, err := writeConfig(dir, db)
	if err != nil {
		return err
	}
	// On a database built by an older orderd this applies the newer
	// migrations: their cost on a database of this size.
	mig, err := runCLI(ctx, "orderd migrate", bin, "migrate", "-config", cfg)
	if err != nil {
		return err
	}
	d, startup, err := startDaemon(ctx, bin, cfg, dir)
	if err != nil {
		return err
	}
	defer d.stop()
	fmt.Fprintf(stdout, "\n%-38s %10s %10s %12s\n", "step", "median", "first", "bytes")
	line := func(t timing) {
		fmt.Fprintf(stdout, "%-38s %10s %10s %12d\n", t.Name, ms(t.Median), ms(t.First), t.Bytes)
	}
	line(timing{Name: "start-up (exec to /readyz 200)", Median: startup, First: startup})
	reqs, err := interactive(ctx, d.admin, o.size, o.runs)
	for _, t := range reqs {
		line(t)
	}
	if err != nil {
		return err
	}
	type period struct {
		name     string
		from, to time.Time
	}
	var periods []period
	if o.scenario == scenarioMonth { // the busy day's reports are the month's, smaller
		periods = append(periods, period{fmt.Sprintf("the %gh span", end.Sub(start).Round(time.Hour).Hours()), start, end})
	}
	if o.scenario == scenarioMonth && end.Sub(start) > 24*time.Hour {
		periods = append(periods, period{"last 24h", end.Add(-24 * time.Hour), end})
	}
	for _, p := range periods {
		rs, err := reports(ctx, d.admin, p.from, p.to)
		for _, t := range rs {
			t.Name += ", " + p.name
			line(t)
		}
		if err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "%-38s %10s\n", "daemon peak RSS (VmHWM)", fmt.Sprintf("%.0f MiB", float64(d.peakRSS())/(1<<20)))
	if err := d.stop(); err != nil {
		return fmt.Errorf("stop orderd: %w", err)
	}
	backupPath := filepath.Join(dir, "backup.db")
	os.Remove(backupPath)
	bk, err := runCLI(ctx, "orderd backup", bin, "backup", "-config", cfg, "-o", backupPath)
	if err != nil {
		return err
	}
	if st, err := os.Stat(backupPath); err == nil {
		bk.Bytes = st.Size()
	}
	os.Remove(backupPath)
	line(bk)
	line(mig)
	fmt.Fprintf(stdout, "%-38s %10s\n", "snapshot (full, after 1 % change)", "see make bench-snapshot")
	return nil
}

// The scenarios of -scenario.
const (
	scenarioMonth = "month"
	scenarioBusy  = "busy"
)

// spanFile, in -dir, records the span of the orders built there.
const spanFile = "span.txt"

func ms(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
}
