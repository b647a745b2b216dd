//go:build chaos

package chaos_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The rolling upgrade (make upgrade-test): a cluster of two instances of
// the previous release, under webhooks and gateway creations, upgraded
// one instance at a time to this tree's orderd, with the upgraded lease
// holder killed (kill -9) while the other still runs the previous
// release. Twice: the follower upgraded first, then the lease holder
// first.

// defaultUpgradeFrom is the release the test upgrades from unless
// UPGRADE_FROM names another commit: the last commit whose log entries
// were all of version 2, before log entries of version 3 existed.
const defaultUpgradeFrom = "5d84e9718366cb69968d728789d93d865d7dfdc5"

var prevOnce struct {
	sync.Once
	bin, err string
}

// prevBinary builds the previous release from this repository's history
// (or takes UPGRADE_FROM_ORDERD, a binary built already).
func prevBinary(t *testing.T) string {
	t.Helper()
	prevOnce.Do(func() {
		if p := os.Getenv("UPGRADE_FROM_ORDERD"); p != "" {
			prevOnce.bin = p
			return
		}
		commit := os.Getenv("UPGRADE_FROM")
		if commit == "" {
			commit = defaultUpgradeFrom
		}
		root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
		if err != nil {
			prevOnce.err = "git rev-parse --show-toplevel: " + err.Error()
			return
		}
		dir, err := os.MkdirTemp("", "orderd-upgrade-from-")
		if err != nil {
			prevOnce.err = err.Error()
			return
		}
		src := filepath.Join(dir, "src")
		if err := os.Mkdir(src, 0o755); err != nil {
			prevOnce.err = err.Error()
			return
		}
		top := strings.TrimSpace(string(root))
		archive := fmt.Sprintf("git -C %q archive %s | tar -x -C %q", top, commit, src)
		if out, err := exec.Command("bash", "-o", "pipefail", "-c", archive).CombinedOutput(); err != nil {
			prevOnce.err = fmt.Sprintf("%s: %v: %s (the test builds the previous release from this repository's history: a clone with it, or UPGRADE_FROM_ORDERD=binary)", archive, err, out)
			return
		}
		bin := filepath.Join(dir, "orderd-prev")
		build := exec.Command("go", "build", "-ldflags", "-X main.version=prev-"+commit[:min(12, len(commit))], "-o", bin, "./cmd/orderd")
		build.Dir = src
		if out, err := build.CombinedOutput(); err != nil {
			prevOnce.err = fmt.Sprintf("build %s: %v: %s", commit, err, out)
			return
		}
		_ = os.RemoveAll(src)
		prevOnce.bin = bin
	})
	if prevOnce.err != "" {
		t.Fatal(prevOnce.err)
	}
	return prevOnce.bin
}

// holderSample is one look at who holds the lease and whether it is
// ready.
type holderSample struct {
	at      time.Time
	holder  string // "" when no ready instance leads
	version int    // the log version in force, as an upgraded instance says (0: none says)
}

// watchHolders samples every instance every 200 ms until stop.
func watchHolders(w *world) (stop func() []holderSample) {
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var out []holderSample
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			s := holderSample{at: time.Now()}
			for _, o := range w.ods {
				if !o.p.running() {
					continue
				}
				v, ok := o.view()
				if !ok {
					continue
				}
				if v.LogVersion != nil && v.LogVersion.InForce > s.version {
					s.version = v.LogVersion.InForce
				}
				if v.Leading && s.holder == "" {
					if code, _ := get(o.admin() + "/readyz"); code == http.StatusOK {
						s.holder = o.name
					}
				}
			}
			mu.Lock()
			out = append(out, s)
			mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	return func() []holderSample {
		cancel()
		wg.Wait()
		return out
	}
}

// longestWithoutHolder is the longest stretch between two samples with
// a ready lease holder.
func longestWithoutHolder(ss []holderSample) (time.Duration, time.Time) {
	var worst time.Duration
	var when time.Time
	last := time.Time{}
	for _, s := range ss {
		if s.holder == "" {
			continue
		}
		if !last.IsZero() && s.at.Sub(last) > worst {
			worst, when = s.at.Sub(last), last
		}
		last = s.at
	}
	return worst, when
}

// logVersions counts the log's entries by their version byte, and the
// highest sequence holding a version other than 2 at or below upTo.
func logVersions(w *world, upTo uint64) (count map[byte]int, newerBelow uint64, err error) {
	nc, js, err := connect(w)
	if err != nil {
		return nil, 0, err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, logStream)
	if err != nil {
		return nil, 0, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, 0, err
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, 0, err
	}
	count = map[byte]int{}
	for seen := uint64(0); seen < info.State.Msgs; {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, 0, err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				return nil, 0, err
			}
			v := byte(0)
			if d := m.Data(); len(d) > 0 {
				v = d[0]
			}
			count[v]++
			if v != 2 && md.Sequence.Stream <= upTo && md.Sequence.Stream > newerBelow {
				newerBelow = md.Sequence.Stream
			}
		}
		if batch.Error() != nil {
			return nil, 0, batch.Error()
		}
		if n == 0 {
			return nil, 0, fmt.Errorf("the log's entries stopped at %d of %d", seen, info.State.Msgs)
		}
		seen += uint64(n)
	}
	return count, newerBelow, nil
}

// cannotRead is what a log line says when an instance stopped at an
// entry it cannot decode: the previous release's and this one's words.
var cannotRead = []string{"unknown version", "does not read", "a newer orderd wrote it"}

func TestRollingUpgrade(t *testing.T) {
	prev := prevBinary(t)
	l := newLab(t)
	seconds := 50
	if v := os.Getenv("UPGRADE_SECONDS"); v != "" {
		if _, err := fmt.Sscan(v, &seconds); err != nil || seconds < 30 {
			t.Fatalf("UPGRADE_SECONDS=%q: want 30 or more", v)
		}
	}
	for i, order := range []string{"follower-first", "holder-first"} {
		t.Run(order, func(t *testing.T) {
			upgradeOnce(t, l, prev, order, uint64(time.Now().UnixNano())+uint64(i), seconds, i == 1)
		})
	}
}

// upgradeOnce runs one rolling upgrade and checks it. waitRaise: wait
// for the log version to rise once every instance runs this tree.
func upgradeOnce(t *testing.T, l *lab, prev, order string, seed uint64, seconds int, waitRaise bool) {
	var notes []string
	started := time.Now()
	step := func(format string, args ...any) {
		line := fmt.Sprintf("    +%5.1fs ", time.Since(started).Seconds()) + fmt.Sprintf(format, args...)
		fmt.Println(line)
	}
	if err := l.heal(); err != nil {
		t.Fatalf("heal before the run: %v", err)
	}
	w := newWorldOn(t, l, seed, prev)
	if dir := os.Getenv("CHAOS_LOGS"); dir != "" {
		t.Cleanup(func() { keepLogs(t, w.dir, filepath.Join(dir, "upgrade-"+order)) })
	}
	lease := watchLease(w)
	defer lease.stop()
	holders := watchHolders(w)
	ld := &load{w: w, rng: rand.New(rand.NewPCG(seed+1, seed)), ns: uint32(seed)}
	const rate = 30
	orders := ld.prepare(t, rate*seconds)
	lctx, stopLoad := context.WithTimeout(context.Background(), time.Duration(seconds)*time.Second)
	defer stopLoad()
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		ld.run(lctx, orders, rate, 16, 400*time.Millisecond, 3*seconds)
	}()

	fatal := func(format string, args ...any) {
		stopLoad()
		<-loadDone
		holders()
		t.Fatalf(format, args...)
	}
	holder := func() *instance {
		var h *instance
		waitFor(15*time.Second, 100*time.Millisecond, func() bool {
			for _, o := range w.ods {
				if v, ok := o.view(); ok && v.Leading && o.p.running() {
					h = o
					return true
				}
			}
			return false
		})
		return h
	}
	other := func(o *instance) *instance {
		if o == w.ods[0] {
			return w.ods[1]
		}
		return w.ods[0]
	}
	restart := func(o *instance, bin, why string) {
		o.p.stop(20 * time.Second)
		o.bin = bin
		o.p = w.startInstance(o)
		if err := w.waitReady(o, 90*time.Second); err != nil {
			fatal("%s: %v\n%s", why, err, tail(o.logPath, 20))
		}
		step("%s: %s ready on %s", why, o.name, filepath.Base(bin))
	}

	time.Sleep(6 * time.Second)
	h := holder()
	if h == nil {
		fatal("no lease holder on the previous release")
	}
	first := other(h)
	if order == "holder-first" {
		first = h
	}
	// 1. One instance upgraded; the other still runs the previous
	// release.
	restart(first, bins.orderd, "upgrade "+map[bool]string{true: "the lease holder", false: "the follower"}[first == h])
	old := other(first)
	time.Sleep(4 * time.Second)
	// GET /v1/cluster leaves out what it could not read within its bound
	// (a busy host): asked again for a while before it counts.
	var v clusterView
	if !waitFor(20*time.Second, 500*time.Millisecond, func() bool {
		var ok bool
		v, ok = first.view()
		return ok && v.LogVersion != nil && v.LogVersion.InForce == 2 && len(v.LogVersion.HeldBy) > 0
	}) {
		fatal("mixed cluster: the upgraded instance says log version %+v; want 2 in force, held by the old instance", v.LogVersion)
	}
	// 2. The upgraded instance takes the lease: the old one stops, which
	// hands the lease over, and starts again on its release once the
	// upgraded one leads.
	if hh := holder(); hh != first {
		old.p.stop(20 * time.Second)
		if !waitFor(15*time.Second, 100*time.Millisecond, func() bool { v, ok := first.view(); return ok && v.Leading }) {
			fatal("the upgraded instance did not take the lease")
		}
		old.p = w.startInstance(old)
		if err := w.waitReady(old, 90*time.Second); err != nil {
			fatal("restart %s: %v\n%s", old.name, err, tail(old.logPath, 20))
		}
		step("hand the lease over: %s stopped and started again on %s", old.name, filepath.Base(prev))
	}
	step("%s (upgraded) holds the lease; %s runs the previous release", first.name, old.name)
	time.Sleep(5 * time.Second)
	// 3. kill -9 of the upgraded lease holder: the old release takes
	// over and applies everything the upgraded one wrote.
	first.p.kill()
	step("kill -9 %s, the upgraded lease holder", first.name)
	if !waitFor(3*leaseTTL+5*time.Second, 100*time.Millisecond, func() bool { v, ok := old.view(); return ok && v.Leading }) {
		fatal("%s (previous release) did not take the lease over:\n%s", old.name, tail(old.logPath, 20))
	}
	if err := w.waitReady(old, 10*time.Second); err != nil {
		fatal("%s after the takeover: %v", old.name, err)
	}
	step("%s (previous release) took the lease over and is ready", old.name)
	time.Sleep(4 * time.Second)
	first.p = w.startInstance(first)
	if err := w.waitReady(first, 90*time.Second); err != nil {
		fatal("restart %s: %v\n%s", first.name, err, tail(first.logPath, 20))
	}
	step("%s started again (this tree) and is ready", first.name)
	time.Sleep(3 * time.Second)
	// 4. The second instance upgraded.
	mixedUntil := time.Now()
	restart(old, bins.orderd, "upgrade the other")
	lastMixed := uint64(0)
	if st, ok := streamState(w, logStream); ok {
		lastMixed = st.LastSeq
	}
	<-loadDone
	step("load done")

	raised := false
	newest := 0
	if v, ok := first.view(); ok && v.LogVersion != nil {
		newest = v.LogVersion.Reads.Newest
	}
	if newest <= 2 {
		t.Errorf("the upgraded instance reads log versions up to %d; want one newer than the previous release's 2", newest)
	}
	if waitRaise {
		// Every reader reads the newest version now; the old release's
		// consumers count for two minutes after their last delivery.
		raised = waitFor(4*time.Minute, time.Second, func() bool {
			v, ok := first.view()
			return ok && v.LogVersion != nil && v.LogVersion.InForce == newest
		})
		if !raised {
			v, _ := first.view()
			notes = append(notes, fmt.Sprintf("log version not raised within 4 minutes: %+v", v.LogVersion))
			t.Errorf("the log version was not raised once both instances ran this tree")
		} else {
			step("log version raised to %d", newest)
			// An entry or two in the new form before the checks.
			time.Sleep(2 * time.Second)
		}
	}
	samples := holders()
	r, more := settle(t, w, lease, ld)
	notes = append(notes, more...)

	gap, at := longestWithoutHolder(samples)
	// docs/replicated-mode.md: a takeover within 2 × lease_ttl; the
	// samples are 200 ms apart and each reads two instances.
	if gap > 2*leaseTTL+time.Second {
		t.Errorf("no ready lease holder for %s from %s (+%.1fs); documented takeover within %s", gap.Round(time.Millisecond), at.Format(time.RFC3339Nano), at.Sub(started).Seconds(), 2*leaseTTL)
	}
	for _, s := range samples {
		if s.version > 2 && s.at.Before(mixedUntil) {
			t.Errorf("log version %d in force at +%.1fs while an instance ran the previous release", s.version, s.at.Sub(started).Seconds())
			break
		}
	}
	// The read is the suite's own, through a NATS that has just seen
	// elections: a transient refusal (no responders) is tried again.
	count, newer, err := logVersions(w, lastMixed)
	for try := 0; err != nil && try < 10; try++ {
		time.Sleep(time.Second)
		count, newer, err = logVersions(w, lastMixed)
	}
	if err != nil {
		t.Errorf("read the log: %v", err)
	}
	if newer > 0 {
		t.Errorf("entry %d, written while the previous release still ran, is not of version 2", newer)
	}
	if waitRaise && raised && count[byte(newest)] == 0 {
		t.Errorf("no entry of version %d after the version was raised", newest)
	}
	for _, o := range w.ods {
		b, _ := os.ReadFile(o.logPath)
		for _, line := range strings.Split(string(b), "\n") {
			for _, word := range cannotRead {
				if strings.Contains(line, word) {
					t.Errorf("%s stopped at an entry it could not read: %.300s", o.name, line)
				}
			}
		}
	}
	for _, o := range w.ods {
		o.p.stop(20 * time.Second)
	}
	fmt.Printf("rolling upgrade %s: acked %d, lost %d, duplicated %d, unleased %d, silent divergence %d; longest without a ready lease holder %s; log entries v2 %d, v%d %d (every entry to %d of v2); refused: %v; %s\n",
		order, r.acked, r.lost, r.duplicated, r.unleased, r.divergent, gap.Round(time.Millisecond), count[2], newest, count[byte(newest)], lastMixed, r.refused, strings.Join(notes, "; "))
	if r.lost > 0 || r.duplicated > 0 || r.unleased > 0 || r.divergent > 0 || r.failed || len(r.refused) > 0 || r.natsLost {
		t.Errorf("the rolling upgrade (%s) broke a guarantee; see its line", order)
	}
	if r.acked == 0 {
		t.Errorf("nothing was acked")
	}
}
