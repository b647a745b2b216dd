//go:build e2e

package e2e_test

import (
	"fmt"
	"net/http"
	"sort"
	"testing"
	"time"
)

// TestOrderd_KillUnderLoad kills orderd with SIGKILL at random moments, 20
// times, while signed webhooks arrive at a steady rate — distinct orders,
// each sent as processing and then completed, and repeats of acked
// deliveries — restarting it each time on the same database and NATS.
// Every state answered 200 must be in the store right after the last kill,
// and, once the restarted daemon has drained its outbox, appear exactly
// once as an event in the stream, in order per order.
func TestOrderd_KillUnderLoad(t *testing.T) {
	const (
		kills   = 20
		earlyUp = 50 * time.Millisecond
		maxUp   = 3000 * time.Millisecond // uptime before a kill, from process start
		maxDown = 300 * time.Millisecond
		rate    = 100 // orders per second, two webhooks each
	)
	rng := seed(t)
	e := newEnv(t, envOptions{})
	e.od.startReady()

	gen := &loadGen{t: t, c: newWebhookClient(t, e.od.webhooks), s: e.signer, ns: rng.Uint32(),
		rate: rate, workers: 24, max: rate * 120, repeatEvery: 10, statuses: []string{"processing", "completed"}}
	stopLoad := gen.start()

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
	loadTime := time.Since(began)

	log, skipped := gen.results()
	rank := map[string]int{"processing": 1, "completed": 2}
	ackedState := map[string]string{} // provider order id → latest state acked
	idOf := map[string]string{}       // merchantOrderId → provider id
	var fresh, repeats, ackedFresh, ackedRepeats, noAnswer int
	statuses := map[int]int{}
	for _, s := range log {
		idOf[s.moid] = s.id
		statuses[s.ans.status]++
		if s.repeat {
			repeats++
		} else {
			fresh++
		}
		switch s.ans.status {
		case http.StatusOK:
			if rank[s.state] > rank[ackedState[s.id]] {
				ackedState[s.id] = s.state
			}
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
	// state is in the file (or a later one), and the file is sound.
	integrityCheck(t, e.od.dbPath)
	stored := storedOrders(t, openDB(t, e.od.dbPath))
	lost := 0
	for id, st := range ackedState {
		if rank[stored[id]] < rank[st] {
			lost++
			if lost <= 10 {
				t.Errorf("order %s: %s was acked, but the store has %q after SIGKILL", id, st, stored[id])
			}
		}
	}

	// Restarted, the daemon publishes what the killed ones left behind.
	e.od.startReady()
	total := waitDrained(t, e.od.dbPath, e.nats.URL(), 60*time.Second)
	events := readStream(t, e.nats.URL())
	byOrder := checkStreamUnique(t, events)
	db := openDB(t, e.od.dbPath)
	stored = storedOrders(t, db)
	changes := queryInt(t, db, "SELECT count(*) FROM order_history WHERE outcome IN ('new', 'changed')")
	for moid, evs := range byOrder {
		types := fmt.Sprint(eventTypes(evs))
		switch types {
		case "[order.processing]", "[order.completed]", "[order.processing order.completed]":
		default:
			t.Errorf("order %s: events %s; want its states once each, in order", moid, types)
		}
		last := evs[len(evs)-1]
		if last.CESubject != idOf[moid] || last.Type != "order."+stored[idOf[moid]] {
			t.Errorf("order %s: last event %s for %s; the store has %s for %s", moid, last.Type, last.CESubject, stored[idOf[moid]], idOf[moid])
		}
	}
	missingEvents := 0
	for _, s := range log {
		if s.repeat || s.ans.status != http.StatusOK {
			continue
		}
		if !hasEvent(byOrder, s.moid, s.state) {
			missingEvents++
			if missingEvents <= 10 {
				t.Errorf("acked %s of order %s has no event in the stream", s.state, s.moid)
			}
		}
	}
	if len(byOrder) != len(stored) || len(events) != total || len(events) != changes {
		t.Errorf("stream has %d events of %d orders; outbox %d rows, store %d orders with %d state changes; want them to agree",
			len(events), len(byOrder), total, len(stored), changes)
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
	t.Logf("kills %d (%d while serving) over %s; webhooks sent: %d fresh + %d repeats (%d ticks skipped); acked: %d fresh + %d repeats; no answer %d; answers (status:count):%s",
		kills, serving, loadTime.Round(time.Millisecond), fresh, repeats, skipped, ackedFresh, ackedRepeats, noAnswer, byCode)
	t.Logf("stored orders %d with %d states, stream events %d, outbox rows %d; acked-and-lost %d; duplicates in the stream %d; acked without event %d",
		len(stored), changes, len(events), total, lost, len(events)-countUnique(events), missingEvents)
}
