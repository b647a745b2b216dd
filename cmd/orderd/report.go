package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"

	"orderd/api"
	"orderd/reconcile"
	"orderd/store"
)

func reportCommand() command {
	return command{
		Name:    "report",
		Summary: "write the finance reconciliation report for a period",
		Help: "The period is [from, to): from inclusive, to exclusive, each a UTC date (2006-01-02) or an\n" +
			"RFC 3339 time. An order is in the period where it reached its final status; one not final by\n" +
			"the end of the period is listed as open in the period it was created in.\n\n" +
			"Without -o the report goes to standard output; a CSV report there holds the order lines,\n" +
			"an empty line, the per-currency summary, an empty line, then the findings with their trails.\n" +
			"With -o FILE it is written atomically (a temporary file renamed into place; FILE must be a\n" +
			"regular file or missing, and a symbolic link is followed) and a CSV report puts its summary in\n" +
			"FILE-summary.csv and its findings in FILE-findings.csv (report.csv: report-summary.csv,\n" +
			"report-findings.csv); the paths written are printed.\n\n" +
			"The store is opened read-only, so this works beside a running daemon.",
		Setup: func(fs *flag.FlagSet) func(context.Context, *env) error {
			from := fs.String("from", "", "start of the period, inclusive: a `DATE` (2006-01-02) or an RFC 3339 time (required)")
			to := fs.String("to", "", "end of the period, exclusive: a `DATE` or an RFC 3339 time (required)")
			format := fs.String("format", reconcile.FormatCSV, "output format: "+strings.Join(reconcile.Formats, "|"))
			out := fs.String("o", "", "write to `FILE` instead of standard output")
			return func(ctx context.Context, e *env) error {
				p, err := reconcile.ParsePeriod(*from, *to)
				if err != nil {
					var pe *reconcile.PeriodError
					if errors.As(err, &pe) {
						return e.usagef("-%s", pe.Error())
					}
					return e.usagef("%v", err)
				}
				if !slices.Contains(reconcile.Formats, *format) {
					return e.usagef("-format %q is not one of %s", *format, strings.Join(reconcile.Formats, ", "))
				}
				if err := noArgs(e); err != nil {
					return err
				}
				cfg, err := e.LoadConfigFor(configUse{})
				if err != nil {
					return err
				}
				if err := cfg.checkStorePath(true); err != nil {
					return err
				}
				lg, err := e.NewLogging(cfg.Log)
				if err != nil {
					return err
				}
				unlock, err := cfg.lockStore(lockBeside)
				if err != nil {
					return err
				}
				defer unlock()
				st, err := store.Open(ctx, cfg.Store.Path, store.Options{ReadOnly: true, Logger: lg.Logger.With("component", "store")})
				if err != nil {
					return cfg.storeError(err)
				}
				defer st.Close(context.WithoutCancel(ctx))
				rep := reconcile.NewReporter(st, reconcile.ReportConfig{Logger: lg.Logger.With("component", "report"),
					CSVGuardFormulas: cfg.Reports.CSVGuardFormulas})
				if *out == "" {
					return rep.Write(ctx, e.Stdout, p, *format, reconcile.WriteOptions{})
				}
				if err := rep.WriteFile(ctx, *out, p, *format); err != nil {
					if errors.Is(err, reconcile.ErrNotRegularFile) {
						return e.usagef("-o: %v; leave -o out to write to standard output", err)
					}
					return err
				}
				fmt.Fprintln(e.Stdout, *out)
				if *format == reconcile.FormatCSV {
					fmt.Fprintln(e.Stdout, reconcile.SummaryPath(*out))
					fmt.Fprintln(e.Stdout, reconcile.FindingsPath(*out))
				}
				return nil
			}
		},
	}
}

// wireReports adds the finance reports to a daemon: the admin API's
// report endpoint, the scheduled report files' endpoints and the
// dashboard, and the scheduled job that writes the previous UTC day's
// report in every format to reports.dir.
func wireReports(d *daemon, deps *api.Deps) error {
	logger := d.log.With("component", "report")
	rep := reconcile.NewReporter(d.store, reconcile.ReportConfig{Now: d.now, Logger: logger,
		CSVGuardFormulas: d.cfg.Reports.CSVGuardFormulas})
	deps.Reports = api.NewReports(api.ReportsConfig{Writer: rep, Logger: logger})
	files := api.NewReportFiles(api.ReportFilesConfig{Dir: d.cfg.Reports.Dir, Logger: logger})
	deps.ReportFiles = files
	info, _ := debug.ReadBuildInfo()
	dash, err := api.NewDashboard(api.DashboardConfig{
		Store:       d.store,
		Checks:      deps.Checks,
		ReportFiles: files,
		Version:     versionInfo(version, commit, info).Version,
		Now:         d.now,
		Started:     d.started,
		Logger:      d.log.With("component", "dashboard"),
	})
	if err != nil {
		return err
	}
	deps.Dashboard = dash
	if err := d.rec.AddJob(reconcile.JobReport, d.cfg.Reconcile.Schedules.Report, rep.DailyJob(d.cfg.Reports.Dir)); err != nil {
		return &configError{Key: "reconcile.schedules.report", Problem: err.Error()}
	}
	return nil
}
