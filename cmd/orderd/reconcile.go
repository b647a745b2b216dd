package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"orderd/provider"
	"orderd/reconcile"
	"orderd/store"
)

// reconcileJobs are the values of "orderd reconcile -job".
var reconcileJobs = []string{reconcile.JobStale, reconcile.JobDoubt, reconcile.JobBalances, reconcile.JobRequisites, reconcile.JobAll}

func reconcileCommand() command {
	return command{
		Name:    "reconcile",
		Summary: "run reconcile jobs once now, print a summary and exit",
		Help: "Works on the same database as a running daemon (WAL allows it); events it queues are\n" +
			"published by the daemon's relay within a second. Each job's line says ok, partial (some\n" +
			"orders or attempts could not be checked: errors=N) or failed. Exit status 1 unless every\n" +
			"job is ok.",
		Setup: func(fs *flag.FlagSet) func(context.Context, *env) error {
			job := fs.String("job", "all", "job to run: "+strings.Join(reconcileJobs, "|"))
			rateLimit := fs.Float64("rate", 0, "provider calls per second for this run, at most provider.rate_limit (default: provider.rate_limit);\n"+
				"a running daemon keeps its own budget and the provider sees the sum, so beside one give this run the share the daemon leaves")
			return func(ctx context.Context, e *env) error {
				if !slices.Contains(reconcileJobs, *job) {
					return e.usagef("-job %q is not one of %s", *job, strings.Join(reconcileJobs, ", "))
				}
				if *rateLimit < 0 || math.IsNaN(*rateLimit) {
					return e.usagef("-rate %g must be a positive number", *rateLimit)
				}
				if err := noArgs(e); err != nil {
					return err
				}
				cfg, err := e.LoadConfigFor(configUse{Provider: true})
				if err != nil {
					return err
				}
				if cfg.Cluster.Enabled {
					// It would write to this instance's database alone,
					// outside the replicated log.
					return cfg.errorf("cluster.enabled", "orderd reconcile writes to the local database directly, which replicated mode forbids; the leader runs the jobs on their schedules (GET /v1/cluster names it)")
				}
				if *rateLimit > cfg.Provider.RateLimit {
					return e.usagef("-rate %g is above provider.rate_limit (%g)", *rateLimit, cfg.Provider.RateLimit)
				}
				if *rateLimit > 0 {
					cfg.Provider.RateLimit = *rateLimit
				}
				lg, err := e.NewLogging(cfg.Log)
				if err != nil {
					return err
				}
				return runReconcileOnce(ctx, e, cfg, lg.Logger, *job)
			}
		},
	}
}

func runReconcileOnce(ctx context.Context, e *env, cfg *Config, logger *slog.Logger, job string) error {
	if err := cfg.checkStorePath(false); err != nil {
		return err
	}
	unlock, err := cfg.lockStore(lockBeside)
	if err != nil {
		return err
	}
	defer unlock()
	st, err := store.Open(ctx, cfg.Store.Path, store.Options{
		Logger:     logger.With("component", "store"),
		CheckAfter: cfg.Reconcile.StaleAfter,
	})
	if err != nil {
		return cfg.storeError(err)
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
		defer cancel()
		_ = st.Close(closeCtx)
	}()
	client, err := newProviderClient(cfg, providerHTTPClient(cfg), reconcile.NewLimiter(cfg.Provider.RateLimit, cfg.Provider.RateBurst), nil)
	if err != nil {
		return err
	}
	var bar *reconcile.ProgressBar
	var progress func(reconcile.Progress)
	if isTerminal(e.Stderr) {
		bar = reconcile.NewProgressBar(e.Stderr)
		progress = bar.Update
	}
	rec := newReconciler(cfg, st, client, logger, nil, progress, nil)
	sums, runErr := rec.Run(ctx, job)
	if bar != nil {
		bar.Done()
	}
	if err := reconcile.WriteSummaries(e.Stdout, sums); err != nil {
		return err
	}
	// The summary lines above carry each run's error; the exit message
	// only says which jobs did not finish well, once each.
	var bad []string
	for _, s := range sums {
		switch s.Result() {
		case reconcile.ResultFailed:
			bad = append(bad, "job "+s.Job+" failed: "+s.Error)
		case reconcile.ResultPartial:
			bad = append(bad, fmt.Sprintf("job %s: %d %s (logged; taken up again after their backoff)",
				s.Job, s.Counts["errors"], plural(s.Counts["errors"], "item failed", "items failed")))
		}
	}
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "\n"))
	}
	if runErr != nil {
		// Stopped before a run could start (interrupted, say).
		return runErr
	}
	return nil
}

// plural picks the singular or plural form for n.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// providerHTTPClient keeps enough idle connections to the provider for
// every reconcile worker and the gateway at once; the default of two per
// host would make concurrent polls reopen connections all the time.
func providerHTTPClient(cfg *Config) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = max(16, 2*cfg.Reconcile.Concurrency)
	return &http.Client{Transport: t}
}

// newProviderClient builds the one provider client of a process from the
// provider section; every call waits on limiter.
func newProviderClient(cfg *Config, hc *http.Client, limiter provider.Limiter, observe func(string, string, time.Duration)) (*provider.Client, error) {
	c, err := provider.NewClient(provider.Options{
		BaseURL:    cfg.Provider.BaseURL,
		APIKey:     cfg.Provider.APIKey.Reveal(),
		HTTPClient: hc,
		Timeout:    cfg.Provider.Timeout,
		Limiter:    limiter,
		Observe:    observe,
	})
	if err != nil {
		return nil, &configError{Key: "provider.base_url", Problem: err.Error()}
	}
	return c, nil
}

// newReconciler maps the reconcile section onto the reconciler.
func newReconciler(cfg *Config, st *store.Store, client reconcile.Client, logger *slog.Logger, m *reconcile.Metrics, progress func(reconcile.Progress), tp trace.TracerProvider) *reconcile.Reconciler {
	return reconcile.New(reconcile.Config{
		StaleAfter:      cfg.Reconcile.StaleAfter,
		GiveUpAfter:     cfg.Reconcile.GiveUpAfter,
		DoubtMinAge:     cfg.Reconcile.DoubtMinAge,
		BoundaryWindow:  cfg.Reconcile.BoundaryWindow,
		Concurrency:     cfg.Reconcile.Concurrency,
		DriftTolerance:  cfg.Reconcile.DriftTolerance,
		DriftGrace:      cfg.Reconcile.DriftGrace,
		UnresolvedAfter: cfg.Reconcile.UnresolvedAfter,
		BackoffBase:     cfg.Reconcile.BackoffBase,
		BackoffMax:      cfg.Reconcile.BackoffMax,
		Schedules: reconcile.Schedules{
			Stale:      cfg.Reconcile.Schedules.Stale,
			Doubt:      cfg.Reconcile.Schedules.Doubt,
			Balances:   cfg.Reconcile.Schedules.Balances,
			Requisites: cfg.Reconcile.Schedules.Requisites,
			Report:     cfg.Reconcile.Schedules.Report,
		},
		Logger:         logger.With("component", "reconcile"),
		Progress:       progress,
		TracerProvider: tp,
	}, st, client, m)
}
