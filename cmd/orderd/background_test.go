package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"orderd/provider"
	"orderd/provider/providertest"
	"orderd/store"
)

// scaleOrder is a completed payin's webhook body, numbered i.
func scaleOrder(i int) []byte {
	return fmt.Appendf(nil, `{"id":"0c000000-0000-4000-8000-%012d","merchantOrderId":"bg-%d","type":"payin","createdAt":"2026-03-01T10:00:00Z","status":"completed","rejectReason":null,"merchantSourceWallet":null,"merchantTargetWallet":{"amount":"%d.50","currency":"brl"},"transactions":[{"id":"t-%d","type":"payin","status":"completed","authorized":{"amount":"%d.50","currency":"brl"},"merchantWallet":{"amount":"%d.50","currency":"brl"},"createdAt":"2026-03-01T10:00:00Z","completedAt":"2026-03-01T10:00:05+00:00","rejectReason":null}]}`,
		i, i, i, i, i, i)
}

// databaseWithPendingRewrite builds a database of n orders through the
// write path whose report columns wait for the report_columns background
// migration, as after an upgrade from a release without it.
func databaseWithPendingRewrite(t *testing.T, path string, n int) {
	t.Helper()
	st, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				raw := scaleOrder(i)
				o, err := provider.DecodeOrder(raw)
				if err == nil {
					_, err = st.Apply(context.Background(), store.Observation{Source: store.SourcePoll, Order: o, Raw: raw, ObservedAt: time.Now()})
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := st.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		`UPDATE orders SET authorized_amount = NULL, authorized_currency = NULL, own_wallet_amount = NULL, own_wallet_currency = NULL, refunds = NULL`,
		`INSERT INTO background_migrations (name, scheduled_at) VALUES ('report_columns', 0)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// TestRun_servesDuringBackgroundMigration: with a background migration to
// run (a table's rows to rewrite after an upgrade), orderd is ready at
// once, acks webhooks while it runs, shows its progress in /readyz and
// the metrics, and finishes it.
func TestRun_servesDuringBackgroundMigration(t *testing.T) {
	dir := t.TempDir()
	const rows = 600
	databaseWithPendingRewrite(t, filepath.Join(dir, "orderd.db"), rows)
	fake := providertest.NewServer(providertest.Options{})
	t.Cleanup(fake.Close)
	cfgPath := daemonConfig(t, dir, fake, fmt.Sprintf("  embedded:\n    listen: 127.0.0.1:0\n    store_dir: %s\n", filepath.Join(dir, "nats")),
		quietJobs)
	// Ten rows a batch and a pause after each: about three seconds of
	// migration to watch.
	withStoreKeys(t, cfgPath, "  migration_batch: 10\n  migration_pause: 50ms\n")

	cancel, done, stderr := runInProcess(t, cfgPath)
	defer cancel()
	addrs := waitStarted(t, stderr, done)
	waitReady(t, addrs.Admin, done)

	var ready struct {
		Status     string
		Migrations []store.MigrationProgress
	}
	resp, err := http.Get("http://" + addrs.Admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&ready)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/readyz: %d %v", resp.StatusCode, err)
	}
	if len(ready.Migrations) != 1 || ready.Migrations[0].Name != "report_columns" || ready.Migrations[0].Done ||
		ready.Migrations[0].RowsDone >= rows {
		t.Fatalf("/readyz's migrations while one runs: %+v", ready.Migrations)
	}

	// Webhooks are acked while the migration runs.
	for i := rows; i < rows+20; i++ {
		body := scaleOrder(i)
		sig, err := providertest.Sign(fake.Signer(), body)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+addrs.Webhooks+"/webhooks/orders", bytes.NewReader(body))
		req.Header.Set("Signature", sig)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("webhook %d during the migration: %d, want 200", i, resp.StatusCode)
		}
	}
	sample := `orderd_migration_progress{migration="report_columns"}`
	if v, err := strconv.ParseFloat(metric(t, addrs.Admin, sample), 64); err != nil || v >= 1 {
		t.Errorf("%s = %v (%v) after the webhooks, want below 1: the migration should still run", sample, v, err)
	}
	if v := metric(t, addrs.Admin, `orderd_migration_rows_total{migration="report_columns"}`); v != strconv.Itoa(rows) {
		t.Errorf("orderd_migration_rows_total = %q, want %d", v, rows)
	}

	// It finishes by itself.
	for deadline := time.Now().Add(30 * time.Second); metric(t, addrs.Admin, sample) != "1"; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s is %s after 30s, want 1", sample, metric(t, addrs.Admin, sample))
		}
	}
	resp, err = http.Get("http://" + addrs.Admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body := new(bytes.Buffer)
	body.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.Contains(body.String(), "migrations") {
		t.Errorf("/readyz once the migration finished: %d %s", resp.StatusCode, body)
	}
	if !strings.Contains(stderr.String(), "background migration finished") {
		t.Errorf("the log does not say the migration finished:\n%s", stderr)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	st, err := store.Open(t.Context(), filepath.Join(dir, "orderd.db"), store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close(context.Background())
	var orders, filled int
	if err := st.DB().QueryRow(`SELECT count(*), count(*) FILTER (WHERE authorized_amount = ltrim(substr(merchant_order_id, 4), '0') || '.50' OR (merchant_order_id = 'bg-0' AND authorized_amount = '0.50'))
		FROM orders`).Scan(&orders, &filled); err != nil {
		t.Fatal(err)
	}
	if orders != rows+20 || filled != orders {
		t.Errorf("%d orders, %d with the write path's authorized amount; want %d of each", orders, filled, rows+20)
	}
}

// withStoreKeys adds keys (indented lines) to the store section of the
// config file at path.
func withStoreKeys(t *testing.T, path, keys string) {
	t.Helper()
	b := readFile(t, path)
	i := strings.Index(b, "store:\n")
	if i < 0 {
		t.Fatalf("no store section in %s", b)
	}
	writeFile(t, filepath.Dir(path), filepath.Base(path), b[:i+len("store:\n")]+keys+b[i+len("store:\n"):])
}

// TestMigrate_runsBackgroundMigrations: orderd migrate runs a pending
// background migration to its end before a start, and says so.
func TestMigrate_runsBackgroundMigrations(t *testing.T) {
	dir := t.TempDir()
	databaseWithPendingRewrite(t, filepath.Join(dir, "orderd.db"), 50)
	cfg := writeFile(t, dir, "config.yaml", withLines("store:\n  path: "+filepath.Join(dir, "orderd.db")))
	r := runOrderd(t, nil, nil, "migrate", "-config", cfg)
	if r.code != 0 || !strings.Contains(r.stdout, "ran background migration report_columns (50 rows) in ") {
		t.Fatalf("migrate: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = runOrderd(t, nil, nil, "migrate", "-config", cfg)
	if r.code != 0 || !strings.Contains(r.stdout, "nothing to apply") {
		t.Errorf("a second migrate: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}
