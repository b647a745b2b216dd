package scale

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"orderd/cmd/orderd-bench/internal/corpus"
	"orderd/provider/providertest"
)

// The -migration measurement: start-up on a database whose every order
// waits for a row-rewriting background migration (report_columns, as
// after an upgrade from a release that filled those columns in one SQL
// step), and webhook ingest while that migration runs beside ingest once
// it finished, in the same run.

// migrationOptions bound the ingest windows.
type migrationOptions struct {
	window   time.Duration // each ingest window
	senders  int           // concurrent webhook senders
	perRound int           // signed webhooks ready per window (a bound)
}

var (
	webhooksAddr  = regexp.MustCompile(`"webhooks":"([^"]+)"`)
	progressValue = regexp.MustCompile(`(?m)^orderd_migration_progress\{migration="report_columns"\} (\S+)$`)
)

// pendMigration makes the report_columns migration pending on the
// database at path: every order's report columns emptied and the
// migration that schedules it (0015) unrecorded, so the start applies it
// and the daemon rewrites every order after it is ready.
func pendMigration(ctx context.Context, path string) (orders int64, err error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return 0, err
	}
	defer db.Close()
	for _, q := range []string{
		`UPDATE orders SET authorized_amount = NULL, authorized_currency = NULL, own_wallet_amount = NULL,
			own_wallet_currency = NULL, refunds = NULL`,
		`DELETE FROM background_migrations`,
		`DELETE FROM schema_migrations WHERE version = 15`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return 0, fmt.Errorf("%s: %w", strings.Fields(q)[0], err)
		}
	}
	err = db.QueryRowContext(ctx, `SELECT count(*) FROM orders`).Scan(&orders)
	return orders, err
}

// ingestResult is one ingest window.
type ingestResult struct {
	acked, failed int
	elapsed       time.Duration
	p50, p99      time.Duration
}

func (r ingestResult) rate() float64 { return float64(r.acked) / r.elapsed.Seconds() }

// ingest posts the webhooks from senders at once until they are all sent
// or the window ends, and counts the 200s.
func ingest(ctx context.Context, url string, hooks []corpus.Webhook, senders int, window time.Duration) ingestResult {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: senders}}
	defer client.CloseIdleConnections()
	var (
		next          atomic.Int64
		acked, failed atomic.Int64
		mu            sync.Mutex
		lat           []time.Duration
		wg            sync.WaitGroup
	)
	t0 := time.Now()
	end := t0.Add(window)
	for range senders {
		wg.Go(func() {
			var mine []time.Duration
			for time.Now().Before(end) && ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= len(hooks) {
					break
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(hooks[i].Body))
				req.Header.Set("Signature", hooks[i].Sig)
				req.Header.Set("Content-Type", "application/json")
				s := time.Now()
				resp, err := client.Do(req)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				if err != nil || resp.StatusCode != http.StatusOK {
					failed.Add(1)
					continue
				}
				mine = append(mine, time.Since(s))
				acked.Add(1)
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	r := ingestResult{acked: int(acked.Load()), failed: int(failed.Load()), elapsed: time.Since(t0)}
	if len(lat) > 0 {
		slices.Sort(lat)
		r.p50, r.p99 = lat[len(lat)/2], lat[len(lat)*99/100]
	}
	return r
}

// migrationProgress reads orderd_migration_progress of report_columns
// from the daemon's metrics (-1 when it is not there).
func migrationProgress(ctx context.Context, admin string) float64 {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, admin+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := progressValue.FindSubmatch(b)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		return -1
	}
	return v
}

// measureMigration runs the -migration measurement on the database at db.
func measureMigration(ctx context.Context, bin, dir, db string, mo migrationOptions, stdout io.Writer) error {
	orders, err := pendMigration(ctx, db)
	if err != nil {
		return fmt.Errorf("make the migration pending: %w", err)
	}
	fmt.Fprintf(stdout, "pending: the report_columns background migration over %d orders (every order's report columns to write)\n", orders)
	cfg, err := writeConfig(dir, db)
	if err != nil {
		return err
	}
	// The daemon verifies webhooks signed with a key of this run.
	key, pubPEM, err := providertest.GenerateKey(providertest.KeyRSA)
	if err != nil {
		return err
	}
	// writeConfig named a key file of its own making; this one's public
	// key takes its place.
	if err := os.WriteFile(filepath.Join(dir, "provider.pub.pem"), pubPEM, 0o600); err != nil {
		return err
	}
	runID := rand.Uint32()
	during, err := corpus.Sign(ctx, key, "scale", runID, 0, mo.perRound)
	if err != nil {
		return err
	}
	after, err := corpus.Sign(ctx, key, "scale", runID, mo.perRound, mo.perRound)
	if err != nil {
		return err
	}

	d, startup, err := startDaemon(ctx, bin, cfg, dir)
	if err != nil {
		return err
	}
	defer d.stop()
	started := time.Now().Add(-startup)
	fmt.Fprintf(stdout, "start-up with the migration pending (exec to /readyz 200): %s; migration at %.1f %%\n",
		ms(startup), 100*migrationProgress(ctx, d.admin))
	logb, _ := os.ReadFile(d.logPath)
	m := webhooksAddr.FindSubmatch(logb)
	if m == nil {
		return fmt.Errorf("no webhooks address in the log: %s", logTail(d.logPath))
	}
	url := "http://" + string(m[1]) + "/webhooks/orders"

	r := ingest(ctx, url, during, mo.senders, mo.window)
	p := migrationProgress(ctx, d.admin)
	fmt.Fprintf(stdout, "ingest while the migration runs: %d acked (%d failed) in %s: %.0f webhooks/s, p50 %s, p99 %s; migration at %.1f %% after it\n",
		r.acked, r.failed, r.elapsed.Round(time.Millisecond), r.rate(), ms(r.p50), ms(r.p99), 100*p)
	if p >= 1 {
		fmt.Fprintln(stdout, "  (the migration finished inside the window: the figure above is partly without it)")
	}
	for p < 1 {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Since(started) > 30*time.Minute {
			return errors.New("the migration did not finish within 30 minutes")
		}
		time.Sleep(250 * time.Millisecond)
		p = migrationProgress(ctx, d.admin)
	}
	took := time.Since(started)
	fmt.Fprintf(stdout, "migration finished within %s of the exec (%.0f orders/s, ingest included)\n",
		took.Round(100*time.Millisecond), float64(orders)/took.Seconds())
	r = ingest(ctx, url, after, mo.senders, mo.window)
	fmt.Fprintf(stdout, "ingest once it finished (the reference, same run): %d acked (%d failed) in %s: %.0f webhooks/s, p50 %s, p99 %s\n",
		r.acked, r.failed, r.elapsed.Round(time.Millisecond), r.rate(), ms(r.p50), ms(r.p99))
	return d.stop()
}
