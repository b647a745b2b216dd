//go:build e2e

package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"testing"
	"time"
)

// TestOrderd_KillUnderLoad kills orderd with SIGKILL at random moments, 20
// times, while signed webhooks for distinct orders (and repeats of acked
// ones) arrive at a steady rate, restarting it each time on the same
// database and NATS. Every delivery answered 200 must be in the store right
// after the last kill, and, once the restarted daemon has drained its
// outbox, appear exactly once as an event in the stream.
func TestOrderd_KillUnderLoad(t *testing.T) {
	const (
		kills   = 20
		earlyUp = 50 * time.Millisecond
		maxUp   = 3000 * time.Millisecond // uptime before a kill, from process start
		maxDown = 300 * time.Millisecond
		rate    = 200 // orders per second
	)
	rng := seed(t)
	e := newEnv(t, envOptions{})
	e.od.startReady()

	gen := &loadGen{t: t, c: newWebhookClient(e.od.webhooks), s: e.signer, ns: rng.Uint32(),
		rate: rate, workers: 16, max: rate * 120, repeatEvery: 10, statuses: []string{"completed"}}
	ctx, stopLoad := context.WithCancel(t.Context())
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		gen.run(ctx)
	}()
	t.Cleanup(func() { stopLoad(); <-loadDone })

	began := time.Now()
	serving := 0 // kills that hit a daemon answering /healthz
	for i := range kills {
		// One kill in four lands early (orderd serves within a few tens
		// of milliseconds), while it opens the store, recovers the WAL
		// and republishes what the last one left.
		if rng.IntN(4) == 0 {
			time.Sleep(time.Duration(rng.Int64N(int64(earlyUp))))
		} else {
			time.Sleep(earlyUp + time.Duration(rng.Int64N(int64(maxUp-earlyUp))))
		}
		if !e.od.p.running() {
			t.Fatalf("orderd exited on its own before kill %d: %v", i+1, e.od.p.err)
		}
		if code, _ := httpStatus("http://" + e.od.admin + "/healthz"); code == http.StatusOK {
			serving++
		}
		e.od.kill()
		if i == kills-1 {
			break
		}
		time.Sleep(time.Duration(rng.Int64N(int64(maxDown))))
		e.od.start()
	}
	stopLoad()
	<-loadDone
	loadTime := time.Since(began)

	log, skipped := gen.results()
	acked := map[string]bool{} // provider order id → acked at least once
	var fresh, repeats, ackedFresh, ackedRepeats, noAnswer int
	statuses := map[int]int{}
	for _, s := range log {
		statuses[s.ans.status]++
		if s.repeat {
			repeats++
		} else {
			fresh++
		}
		switch s.ans.status {
		case http.StatusOK:
			acked[s.id] = true
			if s.repeat {
				ackedRepeats++
			} else {
				ackedFresh++
			}
		case 0:
			noAnswer++
		case http.StatusServiceUnavailable:
		default:
			t.Errorf("order %s: answer %d %q; want 200 or 503", s.moid, s.ans.status, s.ans.word)
		}
	}
	if ackedFresh < 100 || serving < kills/3 {
		t.Fatalf("the load did not reach a serving daemon often enough: %d acked, %d of %d kills while serving", ackedFresh, serving, kills)
	}

	// Right after the last kill, before anything recovers: every acked
	// delivery is in the file, and the file is sound.
	integrityCheck(t, e.od.dbPath)
	stored := storedOrders(t, openDB(t, e.od.dbPath))
	lost := 0
	for id := range acked {
		if stored[id] != "completed" {
			lost++
			if lost <= 10 {
				t.Errorf("acked order %s is not stored as completed after SIGKILL (stored: %q)", id, stored[id])
			}
		}
	}

	// Restarted, the daemon publishes what the killed ones left behind.
	e.od.startReady()
	total := waitDrained(t, e.od.dbPath, e.nats.URL(), 60*time.Second)
	events := readStream(t, e.nats.URL())
	byOrder := checkStreamUnique(t, events)
	stored = storedOrders(t, openDB(t, e.od.dbPath))
	idOf := map[string]string{} // merchantOrderId → provider id
	for _, s := range log {
		idOf[s.moid] = s.id
	}
	for moid, evs := range byOrder {
		if len(evs) != 1 || evs[0].Type != "order.completed" || evs[0].CESubject != idOf[moid] {
			t.Errorf("order %s: events %v; want one order.completed", moid, eventTypes(evs))
		}
	}
	missingEvents := 0
	for _, s := range log {
		if s.repeat || stored[s.id] == "" {
			continue
		}
		if len(byOrder[s.moid]) == 0 {
			missingEvents++
			if missingEvents <= 10 {
				t.Errorf("stored order %s (%s, acked %v) has no event in the stream", s.moid, s.id, acked[s.id])
			}
		}
	}
	if len(events) != total || len(events) != len(stored) {
		t.Errorf("stream has %d events, outbox %d rows, store %d orders; want all equal", len(events), total, len(stored))
	}
	e.od.stop()
	integrityCheck(t, e.od.dbPath)

	codes := make([]int, 0, len(statuses))
	for c := range statuses {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	byCode := ""
	for _, c := range codes {
		byCode += fmt.Sprintf(" %d:%d", c, statuses[c])
	}
	t.Logf("kills %d (%d while serving) over %s; sent %d fresh + %d repeats (%d ticks skipped); acked %d fresh + %d repeats; no answer %d; answers (status:count):%s",
		kills, serving, loadTime.Round(time.Millisecond), fresh, repeats, skipped, ackedFresh, ackedRepeats, noAnswer, byCode)
	t.Logf("stored orders %d, stream events %d, outbox rows %d; acked-and-lost %d; duplicates in the stream %d; stored without event %d",
		len(stored), len(events), total, lost, len(events)-countUnique(events), missingEvents)
}
