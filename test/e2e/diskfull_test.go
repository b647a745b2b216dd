//go:build e2e

package e2e_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// mountTmpfs mounts a tmpfs of the given size on a fresh directory and
// unmounts it when the test ends (after the processes the test starts
// later have been stopped). Without permission to mount, the test is
// skipped with the reason.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "size="+size+",mode=0755"); err != nil {
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
			t.Skipf("skipped: mounting a %s tmpfs is not permitted here (%v); the disk-full test needs root or CAP_SYS_ADMIN", size, err)
		}
		t.Fatalf("mount tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fill writes a file in dir until the filesystem has no block left and
// returns its path and size.
func fill(t *testing.T, dir string, limit int64) (string, int64) {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var n int64
	for _, chunk := range []int{64 << 10, 4 << 10, 512} {
		buf := make([]byte, chunk)
		for n < limit {
			w, err := f.Write(buf)
			n += int64(w)
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			if err != nil {
				t.Fatalf("fill: %v", err)
			}
		}
	}
	if n >= limit {
		t.Fatalf("fill: wrote %d bytes without running out of space", n)
	}
	return p, n
}

// restartWAL checkpoints the database and makes the next writer start the
// WAL from its beginning, as SQLite's automatic checkpoints do.
func restartWAL(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var busy, logPages, done int
	if err := db.QueryRowContext(t.Context(), "PRAGMA wal_checkpoint(RESTART)").Scan(&busy, &logPages, &done); err != nil {
		t.Fatal(err)
	}
	if busy != 0 {
		t.Fatalf("wal_checkpoint(RESTART) was blocked (%d of %d pages checkpointed)", done, logPages)
	}
}

// TestStore_DiskFull puts the store on a small tmpfs and fills it while
// orderd runs: once with an external NATS server, once with orderd's
// embedded one keeping its stream on the same tmpfs. Webhooks are then
// answered 503 (the provider retries), never 200 for a delivery that was
// not stored, the provider's own deliveries are retried, and /readyz says
// the store cannot commit. Once space returns, orderd answers 200 again
// without a restart, and everything acknowledged is stored and published
// once. With the embedded server, the events of the deliveries stored while
// the disk was full (in the WAL's space) cannot reach the stream: /readyz
// says so, and once space returns JetStream is restarted inside the running
// process and the events go out.
func TestStore_DiskFull(t *testing.T) {
	t.Run("external NATS", func(t *testing.T) { diskFull(t, false) })
	t.Run("embedded NATS on the same disk", func(t *testing.T) { diskFull(t, true) })
}

func diskFull(t *testing.T, embedded bool) {
	mnt := mountTmpfs(t, "8m")
	opts := envOptions{storePath: filepath.Join(mnt, "orderd.db"),
		fakeFlags: []string{"-webhook-base-delay", "100ms", "-max-webhook-delay", "400ms"}}
	if embedded {
		opts.natsDown, opts.embeddedNATS = true, filepath.Join(mnt, "nats")
	}
	e := newEnv(t, opts)
	e.od.startReady()

	c := newWebhookClient(t, e.od.webhooks)
	ctx := context.WithoutCancel(t.Context())
	type delivery struct {
		id, moid string
		body     []byte
		sig      string
	}
	n := 0
	next := func() delivery {
		n++
		id := uuidN(0xd15cf011, n)
		moid := fmt.Sprintf("full-%d", n)
		body := orderBody(id, moid, "completed", fmt.Sprintf("%d.00", n))
		return delivery{id: id, moid: moid, body: body, sig: e.signer.sign(t, body)}
	}
	acked := map[string]bool{}
	for range 20 {
		d := next()
		if a := c.post(ctx, d.body, d.sig); a.status != http.StatusOK {
			t.Fatalf("before the disk is full: answer %d %q (%v)", a.status, a.word, a.err)
		}
		acked[d.id] = true
	}

	// A checkpoint that restarts the WAL lets the next commits reuse the
	// WAL file's space, so a few deliveries are still stored (and their
	// events queued) once the disk is full: the relay then meets the full
	// disk too, in the NATS store when it shares the disk.
	restartWAL(t, e.od.dbPath)
	filler, size := fill(t, mnt, 64<<20)

	// While the disk is full: each delivery gets 200 only if it was stored
	// (space the database file already holds can still take a few), and
	// from the first 503 on, nothing gets 200 until space returns.
	var refused []delivery
	var okWhileFull int
	first503 := -1
	for i := 0; i < 200 && (first503 < 0 || i < first503+30); i++ {
		d := next()
		a := c.post(ctx, d.body, d.sig)
		switch a.status {
		case http.StatusOK:
			if first503 >= 0 {
				t.Errorf("delivery %d answered 200 after the first 503 while the disk is still full", i)
			}
			acked[d.id] = true
			okWhileFull++
		case http.StatusServiceUnavailable:
			if first503 < 0 {
				first503 = i
			}
			refused = append(refused, d)
		default:
			t.Fatalf("disk full: answer %d %q (%v); want 503", a.status, a.word, a.err)
		}
	}
	if len(refused) == 0 {
		t.Fatalf("200 deliveries with the disk full and not one 503")
	}
	// Concurrent deliveries share the store's commits; none may be acked.
	const burst = 40
	batch := make([]delivery, burst)
	answers := make([]answer, burst)
	for i := range batch {
		batch[i] = next()
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < burst; i += 8 {
				answers[i] = c.post(ctx, batch[i].body, batch[i].sig)
			}
		})
	}
	wg.Wait()
	for i, a := range answers {
		if a.status != http.StatusServiceUnavailable {
			t.Errorf("concurrent delivery %d with the disk full: answer %d %q (%v); want 503", i, a.status, a.word, a.err)
			if a.status == http.StatusOK {
				acked[batch[i].id] = true
			}
			continue
		}
		refused = append(refused, batch[i])
	}
	// The provider's own deliveries meet the full disk too: 503, and it
	// retries on its schedule.
	providerOrders := map[string]int{}
	for i := range 3 {
		moid := fmt.Sprintf("full-provider-%d", i)
		e.fake.control(http.MethodPost, "create-order", map[string]string{"merchantOrderId": moid, "type": "payin",
			"amount": "15.00", "currency": "brl", "webhookUrl": e.od.webhooks}, nil)
		e.fake.control(http.MethodPost, "complete", map[string]string{"merchantOrderId": moid}, nil)
		providerOrders[moid] = 1
	}
	if !waitFor(10*time.Second, 50*time.Millisecond, func() bool {
		refusedAttempts := map[string]int{}
		for _, a := range e.fake.webhooks() {
			if a.Status == http.StatusServiceUnavailable {
				refusedAttempts[a.MerchantOrderID]++
			}
		}
		for moid := range providerOrders {
			if refusedAttempts[moid] < 2 {
				return false
			}
		}
		return true
	}) {
		t.Fatal("the fake's webhooks were not refused with 503 twice each within 10s")
	}
	for _, a := range e.fake.webhooks() {
		if a.Status == http.StatusOK {
			t.Errorf("the fake's webhook for %s was answered 200 with the disk full", a.MerchantOrderID)
		}
	}

	// A small write (the readiness probe's own) may still find room in
	// the WAL a moment after a delivery did not; with the disk staying
	// full, it soon does not.
	var code int
	var body string
	if !waitFor(10*time.Second, 50*time.Millisecond, func() bool {
		code, body = httpStatus("http://" + e.od.admin + "/readyz")
		return code == http.StatusServiceUnavailable
	}) {
		t.Errorf("/readyz with the disk full: %d %s; want 503 within 10s", code, body)
	}
	if embedded {
		// Deliveries stored in the WAL's space queued events, which the
		// full disk keeps out of the stream: readiness must say so, not
		// only that the store is full.
		if okWhileFull == 0 {
			t.Fatal("no delivery was stored once the disk was full, so no event met the full NATS store; the scenario was not reached")
		}
		stuck := func(body string) bool {
			return bytes.Contains([]byte(body), []byte("embedded nats cannot store events")) ||
				bytes.Contains([]byte(body), []byte("events are not getting out"))
		}
		if !waitFor(10*time.Second, 50*time.Millisecond, func() bool {
			code, body = httpStatus("http://" + e.od.admin + "/readyz")
			return code == http.StatusServiceUnavailable && stuck(body)
		}) {
			t.Errorf("/readyz with events stuck behind a full NATS store does not say so within 10s: %d %s", code, body)
		}
		t.Logf("/readyz with events stuck: %s", body)
	}
	logb, _ := os.ReadFile(e.od.logPath)
	if !bytes.Contains(logb, []byte("database or disk is full")) {
		t.Errorf("orderd's log does not say %q; the 503s have another cause", "database or disk is full")
	}
	if !e.od.p.running() {
		t.Fatalf("orderd exited with the disk full: %v", e.od.p.err)
	}

	// Space returns: the refused deliveries, retried as the provider would,
	// and new ones are answered 200 without a restart.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	recovered := time.Now()
	var recoveredAfter time.Duration
	retry := func(d delivery) {
		var a answer
		if !waitFor(10*time.Second, 100*time.Millisecond, func() bool {
			a = c.post(ctx, d.body, d.sig)
			return a.status == http.StatusOK
		}) {
			t.Fatalf("order %s after space returned: answer %d %q (%v); want 200", d.moid, a.status, a.word, a.err)
		}
		if recoveredAfter == 0 {
			recoveredAfter = time.Since(recovered)
		}
		acked[d.id] = true
	}
	for _, d := range refused {
		retry(d)
	}
	for range 20 {
		retry(next())
	}
	// Ready again, in the same process: the store commits, and the events
	// get out (for the embedded server, once its JetStream is restarted).
	e.od.waitReady()
	if !waitFor(10*time.Second, 50*time.Millisecond, func() bool { return deliveriesDone(e.fake.webhooks(), providerOrders) }) {
		t.Fatal("the fake's retried webhooks were not acknowledged within 10s of space returning")
	}
	providerAttempts := len(e.fake.webhooks())

	waitDrained(t, e.od.dbPath, e.od.natsURL, 30*time.Second)
	stored := storedOrders(t, openDB(t, e.od.dbPath))
	lost := 0
	for id := range acked {
		if stored[id] != "completed" {
			lost++
			t.Errorf("acked order %s is not stored (%q)", id, stored[id])
		}
	}
	events := readStream(t, e.od.natsURL)
	byOrder := checkStreamUnique(t, events)
	for i := 1; i <= n; i++ {
		moid := fmt.Sprintf("full-%d", i)
		if acked[uuidN(0xd15cf011, i)] && len(byOrder[moid]) != 1 {
			t.Errorf("order %s: events %v; want one", moid, eventTypes(byOrder[moid]))
		}
	}
	for moid := range providerOrders {
		if evs := byOrder[moid]; len(evs) != 1 || evs[0].Type != "order.completed" {
			t.Errorf("order %s, retried by the provider: events %v; want one order.completed", moid, eventTypes(evs))
		}
	}
	if embedded {
		logb, _ := os.ReadFile(e.od.logPath)
		if !bytes.Contains(logb, []byte("restarting jetstream to clear a write error")) {
			t.Error("orderd's log does not show the embedded JetStream restarted after its write error")
		}
	}
	e.od.stop()
	integrityCheck(t, e.od.dbPath)
	t.Logf("the provider's webhooks for %d orders took %d attempts (503 while full, then 200)", len(providerOrders), providerAttempts)
	t.Logf("tmpfs 8 MiB, filler %d bytes; while full: %d answered 200 (stored), then %d answered 503 (%d of them concurrent); after space returned: 200 again after %s; acked %d, acked-and-lost %d, stream events %d",
		size, okWhileFull, len(refused), burst, recoveredAfter.Round(time.Millisecond), len(acked), lost, len(events))
}
