package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"orderd/provider/providertest"
	"orderd/store"
	"orderd/test/support/syncbuf"
	"orderd/test/support/testaddr"
)

// daemonEnv is a temp config for a real daemon against the fake provider.
// Every listener is on port 0: waitStarted reads the bound addresses back
// from the daemon's "orderd started" line, as a user of port 0 would.
type daemonEnv struct {
	cfgPath string
	fake    *providertest.Server
}

func newDaemonEnv(t *testing.T, extraYAML string) *daemonEnv {
	t.Helper()
	dir := t.TempDir()
	fake := providertest.NewServer(providertest.Options{WebhookBaseDelay: 20 * time.Millisecond})
	t.Cleanup(fake.Close)
	de := &daemonEnv{fake: fake}
	de.cfgPath = daemonConfig(t, dir, fake, fmt.Sprintf("  embedded:\n    listen: 127.0.0.1:0\n    store_dir: %s\n", filepath.Join(dir, "nats")),
		quietJobs+extraYAML)
	return de
}

// syncBuffer collects a daemon's log for a test that reads it while the
// daemon writes it.
type syncBuffer = syncbuf.Buffer

// listenAddrs are the addresses a daemon bound, as its "orderd started"
// line reports them: host:port of the webhook and admin listeners and the
// NATS URL.
type listenAddrs struct {
	Webhooks, Admin, NATS string
}

// waitStarted polls a daemon's JSON log for its "orderd started" line and
// returns the addresses in it.
func waitStarted(t testing.TB, log *syncBuffer, done <-chan error) listenAddrs {
	t.Helper()
	return waitStartedWithin(t, log, done, 20*time.Second)
}

// waitStartedWithin is waitStarted with a bound of its own (a start that
// restores a large snapshot takes longer).
func waitStartedWithin(t testing.TB, log *syncBuffer, done <-chan error, within time.Duration) listenAddrs {
	t.Helper()
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("orderd returned before it started: %v\n%s", err, log)
		default:
		}
		for _, line := range strings.Split(log.String(), "\n") {
			var started struct {
				Msg string
				listenAddrs
			}
			if json.Unmarshal([]byte(line), &started) == nil && started.Msg == "orderd started" {
				if started.Webhooks == "" || started.Admin == "" || started.NATS == "" {
					t.Fatalf("the started line lacks an address: %s", line)
				}
				return started.listenAddrs
			}
		}
	}
	t.Fatalf("orderd logged no \"orderd started\" line within %s:\n%s", within, log)
	return listenAddrs{}
}

// runInProcess runs "orderd run -config cfg" in this process until cancel
// (also called at the end of the test); done receives what run returned,
// and stderr collects its log.
func runInProcess(t *testing.T, cfg string) (cancel context.CancelFunc, done <-chan error, stderr *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	stderr = &syncBuffer{}
	ch := make(chan error, 1)
	go func() {
		ch <- run(ctx, []string{"orderd", "run", "-config", cfg}, func(string) string { return "" }, nil, io.Discard, stderr)
	}()
	return cancel, ch, stderr
}

// waitReady polls GET /readyz until it answers 200.
func waitReady(t testing.TB, admin string, done <-chan error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			t.Fatalf("orderd returned before it was ready: %v", err)
		default:
		}
		resp, err := http.Get("http://" + admin + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("orderd did not become ready within 20s")
}

// metric returns the value of one sample line of GET /metrics, or "".
func metric(t *testing.T, admin, sample string) string {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			return v
		}
	}
	return ""
}

// waitMetric polls a sample for up to 10s until ok accepts it, and returns
// the last value read.
func waitMetric(t *testing.T, admin, sample string, ok func(string) bool) string {
	t.Helper()
	v := ""
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if v = metric(t, admin, sample); ok(v) {
			break
		}
	}
	return v
}

func TestRun_EndToEnd(t *testing.T) {
	de := newDaemonEnv(t, "")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout bytes.Buffer
	var stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"orderd", "run", "-config", de.cfgPath}, func(string) string { return "" }, nil, &stdout, &stderr)
	}()
	addrs := waitStarted(t, &stderr, done)
	waitReady(t, addrs.Admin, done)

	nc, err := nats.Connect(addrs.NATS)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	events, err := nc.SubscribeSync("orderd.orders.>")
	if err != nil {
		t.Fatal(err)
	}

	// The fake provider creates an order that names orderd's receiver and
	// completes it: its signed webhook goes through the real listener.
	if _, err := de.fake.CreateOrder(providertest.NewOrder{
		MerchantOrderID: "e2e-1", Amount: "25.00", Currency: "brl", WebhookURL: "http://" + addrs.Webhooks + "/webhooks/orders",
	}); err != nil {
		t.Fatal(err)
	}
	if err := de.fake.Complete("e2e-1"); err != nil {
		t.Fatal(err)
	}
	msg, err := events.NextMsg(15 * time.Second)
	if err != nil {
		t.Fatalf("no event on NATS: %v", err)
	}
	if msg.Subject != "orderd.orders.payin.completed" {
		t.Errorf("subject = %q, want orderd.orders.payin.completed", msg.Subject)
	}
	var ev struct {
		ID, Type, MerchantOrderID, LearnedVia string
		Data                                  struct{ Status string }
	}
	if err := json.Unmarshal(msg.Data, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Type != "order.completed" || ev.Data.Status != "completed" || msg.Header.Get("Nats-Msg-Id") != ev.ID {
		t.Errorf("event = %+v, Nats-Msg-Id %q", ev, msg.Header.Get("Nats-Msg-Id"))
	}
	// The event can reach the subscriber before the handler has counted
	// its answer, and before the relay has its JetStream ack and counts it,
	// so the counters may lag the event a moment.
	if got := waitMetric(t, addrs.Admin, `orderd_webhooks_total{outcome="accepted"}`, func(v string) bool { return v == "1" }); got != "1" {
		t.Errorf(`orderd_webhooks_total{outcome="accepted"} = %q, want 1`, got)
	}
	if got := waitMetric(t, addrs.Admin, `orderd_publish_events_total`, func(v string) bool { return v != "" && v != "0" }); got == "" || got == "0" {
		t.Errorf("orderd_publish_events_total = %q, want > 0", got)
	}
	// The webhook's write and the relay's marking at least; nothing failed.
	if got := waitMetric(t, addrs.Admin, `orderd_store_writes_total{result="committed"}`, func(v string) bool { return v != "" && v != "0" }); got == "" || got == "0" {
		t.Errorf(`orderd_store_writes_total{result="committed"} = %q, want > 0`, got)
	}
	for _, m := range []string{`orderd_store_writes_total{result="failed"}`, `orderd_store_writes_total{result="overloaded"}`, `orderd_store_batch_reruns_total`} {
		if got := metric(t, addrs.Admin, m); got != "0" {
			t.Errorf("%s = %q, want 0", m, got)
		}
	}
	resp, err := http.Get("http://" + addrs.Admin + "/v1/orders/e2e-1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"learnedVia":"webhook"`) {
		t.Errorf("GET /v1/orders/e2e-1 = %d %s", resp.StatusCode, body)
	}
	// admin.pprof is off unless set: no profiles on the admin listener.
	resp, err = http.Get("http://" + addrs.Admin + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /debug/pprof/cmdline without admin.pprof = %d, want 404", resp.StatusCode)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run returned %v; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("run did not return within 20s of cancellation")
	}
	// The database is closed: a second daemon can open it at once.
	if _, err := os.Stat(filepath.Dir(de.cfgPath)); err != nil {
		t.Fatal(err)
	}
}

// TestRun_StopWhileNATSIsDown stops a daemon whose NATS server cannot be
// reached: with nothing to publish it stops at once and cleanly; with an
// event waiting, the flush gives up within shutdown_timeout and the
// database still closes, the event kept for the next start.
func TestRun_StopWhileNATSIsDown(t *testing.T) {
	for _, tc := range []struct {
		name    string
		webhook bool
	}{
		{name: "nothing to publish"},
		{name: "an event waiting", webhook: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			fake := providertest.NewServer(providertest.Options{WebhookBaseDelay: 20 * time.Millisecond})
			t.Cleanup(fake.Close)
			cfg := daemonConfig(t, dir, fake, "  url: nats://"+testaddr.Loopback(t)+"\n", quietJobs+"shutdown_timeout: 2s\n")
			cancel, done, stderr := runInProcess(t, cfg)
			addrs := waitStarted(t, stderr, done)
			if tc.webhook {
				if _, err := fake.CreateOrder(providertest.NewOrder{
					MerchantOrderID: "kept-1", Amount: "25.00", Currency: "brl", WebhookURL: "http://" + addrs.Webhooks + "/webhooks/orders",
				}); err != nil {
					t.Fatal(err)
				}
				if err := fake.Complete("kept-1"); err != nil {
					t.Fatal(err)
				}
				if got := waitMetric(t, addrs.Admin, `orderd_webhooks_total{outcome="accepted"}`, func(v string) bool { return v == "1" }); got != "1" {
					t.Fatalf(`orderd_webhooks_total{outcome="accepted"} = %q, want 1`, got)
				}
			}

			start := time.Now()
			cancel()
			var err error
			select {
			case err = <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("run did not return within 20s of cancellation")
			}
			took := time.Since(start)
			if !tc.webhook {
				if err != nil {
					t.Errorf("run = %v, want a clean stop; stderr:\n%s", err, stderr.String())
				}
				if took > time.Second {
					t.Errorf("stop took %s with nothing to publish", took)
				}
			} else {
				if err == nil || !strings.Contains(err.Error(), "flush outbox") {
					t.Errorf("run = %v, want the flush's error", err)
				}
				if err != nil && strings.Contains(err.Error(), "close store") {
					t.Errorf("run = %v: the database did not close", err)
				}
				if took > 3*time.Second {
					t.Errorf("stop took %s with shutdown_timeout 2s", took)
				}
			}
			// A database closed by its last connection has no log left.
			if _, err := os.Stat(filepath.Join(dir, "orderd.db-wal")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("orderd.db-wal after the stop: %v, want it gone (the database closed)", err)
			}
			if tc.webhook {
				st, err := store.Open(t.Context(), filepath.Join(dir, "orderd.db"), store.Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close(context.Background())
				if n, _, err := st.OutboxStats(t.Context()); err != nil || n != 1 {
					t.Errorf("outbox backlog = %d (%v), want the event kept for the next start", n, err)
				}
			}
		})
	}
}

func TestRun_ConfigErrorsExit2(t *testing.T) {
	de := newDaemonEnv(t, "publish:\n  retention: soon\n")
	r := runOrderd(t, nil, nil, "run", "-config", de.cfgPath)
	if r.code != 2 || !strings.Contains(r.stderr, "publish.retention") {
		t.Errorf("exit %d, stderr %q; want 2 naming the key", r.code, r.stderr)
	}
}

// orderd tail refuses a -subject that is not one, or that the stream can
// never carry, with exit 2 naming the flag, instead of an unnamed NATS
// error or a silent wait for ever.
func TestTail_SubjectRefused(t *testing.T) {
	de := newDaemonEnv(t, "")
	cancel, done, stderr := runInProcess(t, de.cfgPath)
	addrs := waitStarted(t, stderr, done)
	waitReady(t, addrs.Admin, done)
	// Ready does not wait for the relay to create the stream, and the
	// subject is checked against the stream's subjects.
	nc, err := nats.Connect(addrs.NATS)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := js.Stream(t.Context(), "ORDERD"); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("stream ORDERD not there 15s after ready: %v", err)
		}
	}
	for _, subject := range []string{"orderd..x", "foo.bar"} {
		r := runOrderd(t, nil, nil, "tail", "-server", addrs.NATS, "-subject", subject)
		if r.code != 2 || !strings.Contains(r.stderr, "-subject") || !strings.Contains(r.stderr, subject) {
			t.Errorf("tail -subject %q: exit %d, stderr %q; want 2 naming -subject", subject, r.code, r.stderr)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
}
