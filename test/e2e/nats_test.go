//go:build e2e

package e2e_test

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// checkTwoStates checks that every order sent by gen has exactly its
// processing and then its completed event in the stream, and that every
// delivery was answered 200.
func checkTwoStates(t *testing.T, gen *loadGen, byOrder map[string][]event) (orders int) {
	t.Helper()
	log, _ := gen.results()
	seen := map[string]bool{}
	for _, s := range log {
		if s.ans.status != http.StatusOK {
			t.Errorf("order %s: answer %d %q (%v); want 200 while NATS is down", s.moid, s.ans.status, s.ans.word, s.ans.err)
		}
		if seen[s.moid] {
			continue
		}
		seen[s.moid] = true
		evs := byOrder[s.moid]
		if len(evs) != 2 || evs[0].Type != "order.processing" || evs[1].Type != "order.completed" ||
			evs[0].status() != "processing" || evs[1].status() != "completed" {
			t.Errorf("order %s: events %v; want [order.processing order.completed] in that order", s.moid, eventTypes(evs))
		}
	}
	if len(byOrder) != len(seen) {
		t.Errorf("stream has events of %d orders; %d were sent", len(byOrder), len(seen))
	}
	return len(seen)
}

// TestNATS_KilledUnderLoad kills nats-server with SIGKILL twice while
// orders arrive as two webhooks each (processing, then completed). Every
// webhook is still answered 200, /readyz reports the outage, and once NATS
// is back every event is in the stream exactly once, in order per order.
func TestNATS_KilledUnderLoad(t *testing.T) {
	rng := seed(t)
	e := newEnv(t, envOptions{})
	e.od.startReady()

	gen := &loadGen{t: t, c: newWebhookClient(t, e.od.webhooks), s: e.signer, ns: rng.Uint32(),
		rate: 100, workers: 8, max: 100 * 60, statuses: []string{"processing", "completed"}}
	stopLoad := gen.start()

	var outage time.Duration
	for range 2 {
		time.Sleep(time.Second + time.Duration(rng.Int64N(int64(time.Second))))
		down := time.Now()
		e.nats.kill()
		// unreachable_ready_after is 1s.
		var body string
		if !waitFor(10*time.Second, 50*time.Millisecond, func() bool {
			var code int
			code, body = httpStatus("http://" + e.od.admin + "/readyz")
			return code == http.StatusServiceUnavailable
		}) {
			t.Fatalf("/readyz did not report NATS down within 10s: %s", body)
		}
		if !strings.Contains(body, "nats") {
			t.Errorf("/readyz while NATS is down does not name it: %s", body)
		}
		time.Sleep(time.Second)
		e.nats.start()
		e.od.waitReady()
		outage += time.Since(down)
	}
	time.Sleep(time.Second)
	stopLoad()

	total := waitDrained(t, e.od.dbPath, e.nats.URL(), 60*time.Second)
	events := readStream(t, e.nats.URL())
	byOrder := checkStreamUnique(t, events)
	orders := checkTwoStates(t, gen, byOrder)
	if len(events) != total {
		t.Errorf("stream has %d events, outbox %d rows", len(events), total)
	}
	log, skipped := gen.results()
	t.Logf("NATS down %s in 2 outages; %d orders, %d webhooks (%d ticks skipped), stream events %d, duplicates in the stream %d",
		outage.Round(time.Millisecond), orders, len(log), skipped, len(events), len(events)-countUnique(events))
	e.od.stop()
}

// TestNATS_DownAtStart starts orderd while NATS is not running: orderd
// serves, /readyz turns not ready after nats.unreachable_ready_after,
// webhooks are answered 200, and everything is published once NATS comes up.
func TestNATS_DownAtStart(t *testing.T) {
	rng := seed(t)
	e := newEnv(t, envOptions{natsDown: true})
	e.od.start()
	e.od.waitHealthy()

	var body string
	if !waitFor(10*time.Second, 50*time.Millisecond, func() bool {
		var code int
		code, body = httpStatus("http://" + e.od.admin + "/readyz")
		return code == http.StatusServiceUnavailable
	}) {
		t.Fatalf("/readyz did not report NATS unreachable within 10s: %s", body)
	}
	if !strings.Contains(body, "nats") {
		t.Errorf("/readyz does not name NATS: %s", body)
	}

	gen := &loadGen{t: t, c: newWebhookClient(t, e.od.webhooks), s: e.signer, ns: rng.Uint32(),
		rate: 100, workers: 4, max: 100, statuses: []string{"processing", "completed"}}
	gen.run(t.Context())

	e.nats.start()
	e.od.waitReady()
	total := waitDrained(t, e.od.dbPath, e.nats.URL(), 60*time.Second)
	events := readStream(t, e.nats.URL())
	byOrder := checkStreamUnique(t, events)
	orders := checkTwoStates(t, gen, byOrder)
	if len(events) != total || len(events) != 2*orders {
		t.Errorf("stream has %d events, outbox %d rows, %d orders sent; want 2 events per order", len(events), total, orders)
	}
	t.Logf("%d orders taken while NATS was down; %d events published once it came up", orders, len(events))
	e.od.stop()
}
