package main

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"orderd/store"
)

// backgroundRetry is how long the daemon waits before it runs a background
// migration that failed again.
const backgroundRetry = time.Minute

// startBackgroundMigrations runs the store's background migrations (the
// schema steps that rewrite existing rows) after start, while orderd
// serves; Close stops them before it closes the store, and the next start
// resumes where they stopped. A failure is logged and tried again after
// backgroundRetry: what depends on a migration reads the old form until it
// finishes, so nothing waits for it.
func (d *daemon) startBackgroundMigrations(ctx context.Context) {
	ctx, d.stopMig = context.WithCancel(context.WithoutCancel(ctx))
	d.migDone = make(chan struct{})
	log := d.log.With("component", "store")
	opts := store.BackgroundOptions{BatchRows: d.cfg.Store.MigrationBatch, Pause: d.cfg.Store.MigrationPause}
	go func() {
		defer close(d.migDone)
		for {
			err := d.store.RunBackgroundMigrations(ctx, opts)
			if err == nil || ctx.Err() != nil {
				return
			}
			log.Error("a background migration failed; it is tried again", "err", err, "in", backgroundRetry)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backgroundRetry):
			}
		}
	}()
}

// stopBackgroundMigrations stops them and waits (the batch being committed
// commits or rolls back whole).
func (d *daemon) stopBackgroundMigrations(ctx context.Context) {
	if d.stopMig == nil {
		return
	}
	d.stopMig()
	select {
	case <-d.migDone:
	case <-ctx.Done():
	}
}

// migrationCollector exposes the background migrations' progress, read
// from the database at each scrape (a row per migration):
// orderd_migration_progress{migration} from 0 to 1, and the rows done and
// to do.
type migrationCollector struct {
	list                  func(context.Context) ([]store.MigrationProgress, error)
	progress, done, total *prometheus.Desc
}

func newMigrationCollector(list func(context.Context) ([]store.MigrationProgress, error)) *migrationCollector {
	labels := []string{"migration"}
	return &migrationCollector{
		list: list,
		progress: prometheus.NewDesc("orderd_migration_progress",
			"How far a background migration (a schema step rewriting existing rows after start) has come, from 0 to 1.", labels, nil),
		done:  prometheus.NewDesc("orderd_migration_rows_done", "Rows a background migration has walked.", labels, nil),
		total: prometheus.NewDesc("orderd_migration_rows_total", "Rows a background migration walks (0 until it began).", labels, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *migrationCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.progress
	ch <- c.done
	ch <- c.total
}

// Collect implements prometheus.Collector.
func (c *migrationCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ms, err := c.list(ctx)
	if err != nil {
		return
	}
	for _, m := range ms {
		ch <- prometheus.MustNewConstMetric(c.progress, prometheus.GaugeValue, m.Fraction(), m.Name)
		ch <- prometheus.MustNewConstMetric(c.done, prometheus.GaugeValue, float64(m.RowsDone), m.Name)
		ch <- prometheus.MustNewConstMetric(c.total, prometheus.GaugeValue, float64(m.RowsTotal), m.Name)
	}
}
