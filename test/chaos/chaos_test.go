//go:build chaos

package chaos_test

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// settings are the suite's knobs, from the environment (the Makefile's
// CHAOS_* variables).
type settings struct {
	runs    int
	seconds int
	seed    uint64
	// only, when set, limits the runs to these fault kinds (and "mixed").
	only map[string]bool
	rate float64 // new orders a second
}

func loadSettings(t *testing.T) settings {
	t.Helper()
	s := settings{runs: len(faults) + 2, seconds: 60, seed: uint64(time.Now().UnixNano()), rate: 40}
	num := func(key string, dst *int) {
		if v := os.Getenv(key); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				t.Fatalf("%s=%q: want a positive number", key, v)
			}
			*dst = n
		}
	}
	num("CHAOS_RUNS", &s.runs)
	num("CHAOS_SECONDS", &s.seconds)
	if v := os.Getenv("CHAOS_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED=%q: %v", v, err)
		}
		s.seed = n
	}
	if v := os.Getenv("CHAOS_FAULTS"); v != "" {
		s.only = map[string]bool{}
		for _, f := range strings.Split(v, ",") {
			f = strings.TrimSpace(f)
			known := f == "mixed"
			for _, k := range append(faults[:len(faults):len(faults)], optInFaults...) {
				known = known || k.name == f
			}
			if !known {
				t.Fatalf("CHAOS_FAULTS: unknown fault %q", f)
			}
			s.only[f] = true
		}
	}
	return s
}

// kinds lists, per run, the fault kind (an index into faults) or -1 for
// a mixed run: each kind once, in the catalogue's order, then mixed runs.
func (s settings) kinds() []int {
	var cycle []int
	for i, f := range faults {
		if s.only == nil || s.only[f.name] {
			cycle = append(cycle, i)
		}
	}
	for i, f := range optInFaults {
		if s.only[f.name] {
			cycle = append(cycle, len(faults)+i)
		}
	}
	if s.only == nil || s.only["mixed"] {
		cycle = append(cycle, -1)
	}
	out := make([]int, s.runs)
	for i := range out {
		if i < len(cycle) {
			out[i] = cycle[i]
		} else {
			out[i] = -1
		}
	}
	return out
}

// runSeed derives run i's seed from the suite's (splitmix64), so one run
// can be repeated alone: CHAOS_RUNS=1 with the printed seed.
func runSeed(base uint64, i int) uint64 {
	if i == 0 {
		return base
	}
	z := base + uint64(i)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// result is one run's figures.
type result struct {
	acked, lost, duplicated, unleased, divergent int
	natsLost                                     bool
	refused                                      []string
	failed                                       bool
}

// TestChaosNet is make chaos-net: CHAOS_RUNS runs of CHAOS_SECONDS of
// load and faults each, a line per run, and the summary line last.
func TestChaosNet(t *testing.T) {
	s := loadSettings(t)
	l := newLab(t)
	kinds := s.kinds()
	var total result
	runs := 0
	for i, kind := range kinds {
		seed := runSeed(s.seed, i)
		name := "mixed"
		if kind >= 0 {
			name = faultKind(kind).name
		}
		var r result
		t.Run(fmt.Sprintf("run%d-%s", i+1, name), func(t *testing.T) {
			r = runOnce(t, l, i+1, seed, kind, s)
		})
		runs++
		total.acked += r.acked
		total.lost += r.lost
		total.duplicated += r.duplicated
		total.unleased += r.unleased
		total.divergent += r.divergent
	}
	line := fmt.Sprintf("chaos-net: runs %d, acked %d, lost %d, duplicated %d, unleased provider calls %d, silent divergence %d",
		runs, total.acked, total.lost, total.duplicated, total.unleased, total.divergent)
	// make chaos-net prints the line last, after go test's own lines,
	// from the file CHAOS_SUMMARY names; a plain go test prints it here.
	if p := os.Getenv("CHAOS_SUMMARY"); p != "" {
		if err := os.WriteFile(p, []byte(line+"\n"), 0o644); err != nil {
			t.Error(err)
		}
	} else {
		fmt.Println(line)
	}
}

// step is one step of a run's schedule: its faults and when they held.
type step struct {
	what     string
	from, to time.Time
}

// chaosRun is one run's state, shared by its faults.
type chaosRun struct {
	w     *world
	rng   *rand.Rand
	lease *leaseLog
}

// runOnce builds a world, loads it under faults for s.seconds, heals,
// settles and checks. It prints the run's line and fails the (sub)test
// when the run breaks a guarantee.
func runOnce(t *testing.T, l *lab, n int, seed uint64, kind int, s settings) (r result) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	label := "mixed"
	if kind >= 0 {
		label = faultKind(kind).name
	}
	var steps []step
	var notes []string
	var ld *load
	var since time.Time
	var w *world
	defer func() {
		refused := "none"
		if len(r.refused) > 0 {
			refused = strings.Join(r.refused, "; ")
		}
		status := "ok"
		switch {
		case r.natsLost && len(r.refused) > 0:
			status = "NATS LOST ACKED LOG ENTRIES, orderd refused"
		case r.natsLost:
			status = "NATS LOST ACKED LOG ENTRIES, orderd did not refuse"
		case r.failed || t.Failed():
			status = "FAILED"
		}
		fmt.Printf("chaos-net run %d seed %d %s [%s]: acked %d, lost %d, duplicated %d, unleased %d, silent divergence %d; refused: %s; %s\n",
			n, seed, label, status, r.acked, r.lost, r.duplicated, r.unleased, r.divergent, refused, strings.Join(notes, "; "))
		for _, st := range steps {
			// The webhooks answered during the step and one lease after
			// it: how much of the load the fault turned away (503) or
			// left unanswered.
			ok, notOK := ld.answeredBetween(st.from, st.to.Add(leaseTTL))
			fmt.Printf("    +%5.1fs %s for %s (webhooks answered meanwhile: %d ok, %d not)\n",
				st.from.Sub(since).Seconds(), st.what, st.to.Sub(st.from).Round(time.Millisecond), ok, notOK)
		}
		if status != "ok" && w != nil {
			// What CI keeps of a failed run is this output: each
			// instance's last leadership changes and errors.
			for _, o := range w.ods {
				for _, line := range leadershipTrail(o.logPath, 12) {
					fmt.Printf("    %s| %s\n", o.name, line)
				}
			}
		}
	}()
	if err := l.heal(); err != nil {
		t.Fatalf("heal before the run: %v", err)
	}
	w = newWorld(t, l, seed)
	if dir := os.Getenv("CHAOS_LOGS"); dir != "" {
		// Registered after the world's own cleanups, so it runs before
		// them: the logs are copied before the temporary directory goes.
		t.Cleanup(func() { keepLogs(t, w.dir, filepath.Join(dir, fmt.Sprintf("run%d-seed%d", n, seed))) })
	}
	c := &chaosRun{w: w, rng: rng}
	c.lease = watchLease(w)
	defer c.lease.stop()
	t.Cleanup(func() { _ = l.heal() })

	// Load: bounded by the orders prepared and by the run's length.
	ld = &load{w: w, rng: rand.New(rand.NewPCG(seed+1, seed)), ns: uint32(seed)}
	since = c.lease.since
	orders := ld.prepare(t, int(s.rate)*s.seconds)
	lctx, stopLoad := context.WithTimeout(context.Background(), time.Duration(s.seconds)*time.Second)
	defer stopLoad()
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		ld.run(lctx, orders, s.rate, 16, 400*time.Millisecond, 3*s.seconds)
	}()

	// Faults, one step after another, until two seconds before the end.
	next := schedule(rng, kind)
	deadline := time.Now().Add(time.Duration(s.seconds)*time.Second - 2*time.Second)
	time.Sleep(time.Second)
	for time.Until(deadline) > time.Second {
		var undos []func()
		var whats []string
		started := time.Now()
		for _, f := range next() {
			what, undo, err := f.apply(c)
			if err != nil {
				whats = append(whats, f.name+": not applied: "+err.Error())
				continue
			}
			whats = append(whats, what)
			if undo != nil {
				undos = append(undos, undo)
			}
		}
		d := min(c.duration(), time.Until(deadline))
		time.Sleep(d)
		for i := len(undos) - 1; i >= 0; i-- {
			undos[i]()
		}
		if err := l.heal(); err != nil {
			t.Errorf("heal: %v", err)
		}
		steps = append(steps, step{what: strings.Join(whats, " + "), from: started, to: time.Now()})
		gap := 500*time.Millisecond + time.Duration(rng.Int64N(int64(1500*time.Millisecond)))
		time.Sleep(min(gap, max(0, time.Until(deadline))))
	}
	<-loadDone
	if !l.netem {
		notes = append(notes, "no netem in this kernel")
	}

	rr, more := settle(t, w, c.lease, ld)
	r = rr
	notes = append(notes, more...)

	for _, o := range w.ods {
		o.p.stop(20 * time.Second)
	}
	bad := r.lost > 0 || r.duplicated > 0 || r.unleased > 0 || r.divergent > 0
	if r.natsLost && len(r.refused) > 0 {
		// NATS lost an acknowledged entry and orderd noticed and
		// refused: the outcome the design asks for, reported above.
		bad = false
	}
	if bad || r.failed || (r.natsLost && len(r.refused) == 0) {
		r.failed = true
		t.Errorf("run %d (seed %d) broke a guarantee or could not be checked; see its line", n, seed)
	}
	if r.acked == 0 {
		t.Errorf("run %d: nothing was acked; the load did not reach the cluster", n)
	}
	return r
}

// settle heals every fault, waits until the cluster settles and the
// leader's outbox is drained, and checks every guarantee: silent
// divergence, NATS's own loss, acked writes lost, events duplicated,
// provider calls without the lease. The instances keep running.
func settle(t *testing.T, w *world, lease *leaseLog, ld *load) (r result, notes []string) {
	// Heal everything and let the cluster settle.
	if err := w.lab.heal(); err != nil {
		t.Errorf("heal: %v", err)
	}
	for _, nn := range w.nats {
		nn.p.resume()
	}
	for _, o := range w.ods {
		o.p.resume()
	}
	for i, nn := range w.nats {
		if !nn.p.running() {
			w.startNATS(i)
		}
		if err := w.waitNATS(i, 60*time.Second); err != nil {
			notes = append(notes, err.Error())
		}
	}
	var ready []*instance
	var maxApplied uint64
	for _, o := range w.ods {
		err := w.waitReady(o, 60*time.Second)
		if v, ok := o.view(); ok && v.AppliedSeq > maxApplied {
			maxApplied = v.AppliedSeq
		}
		if err == nil {
			ready = append(ready, o)
			continue
		}
		r.refused = append(r.refused, refusal(o))
	}

	// The events: the leader publishes what it has not yet published;
	// wait until its outbox is drained and the stream holds every row.
	var leader *instance
	waitFor(6*leaseTTL+10*time.Second, 100*time.Millisecond, func() bool {
		for _, o := range ready {
			if v, ok := o.view(); ok && v.Leading {
				leader = o
				return true
			}
		}
		return false
	})
	drained := false
	if leader != nil {
		var pending, rows int
		var inStream uint64
		drained = waitFor(90*time.Second, 200*time.Millisecond, func() bool {
			var err error
			pending, rows, err = pendingEvents(leader.dbPath)
			st, ok := streamState(w, eventsStream)
			inStream = st.Msgs
			return err == nil && ok && pending == 0 && inStream >= uint64(rows)
		})
		if !drained {
			notes = append(notes, fmt.Sprintf("leader %s's outbox not drained in 90s: %d of %d rows pending, stream %d", leader.name, pending, rows, inStream))
			r.failed = true
		}
	} else if len(ready) > 0 {
		notes = append(notes, "no leader among the ready instances within "+(6*leaseTTL+10*time.Second).String())
		r.failed = true
	}

	// Silent divergence: both ready, frozen at the same applied sequence,
	// different digests.
	if len(ready) == 2 {
		d, seq, same, err := frozenDigests(ready)
		switch {
		case err != nil:
			notes = append(notes, "digests: "+err.Error())
			r.failed = true
		case !same:
			r.divergent++
			notes = append(notes, fmt.Sprintf("DIVERGED at seq %d: %s", seq, d))
		default:
			notes = append(notes, fmt.Sprintf("digests equal at seq %d", seq))
		}
		if seq > maxApplied {
			maxApplied = seq
		}
	}

	// NATS's own loss: an instance applied a log entry the log no longer
	// has, or the log has holes. The applied sequences are read first:
	// the log read after them can only be longer, unless it lost entries.
	for _, o := range w.ods {
		if _, seq, err := digest(o.dbPath); err == nil && seq > maxApplied {
			maxApplied = seq
		}
	}
	if st, ok := streamState(w, logStream); ok {
		if st.LastSeq < maxApplied {
			r.natsLost = true
			notes = append(notes, fmt.Sprintf("log stream ends at %d below the applied %d", st.LastSeq, maxApplied))
		}
		// orderd never deletes a log entry, and the log's age limit
		// (a week) only moves its start: a hole inside it is an entry
		// the stream stored, and so acknowledged, and then lost.
		if st.NumDeleted > 0 {
			r.natsLost = true
		}
		if st.NumDeleted > 0 || st.FirstSeq > 1 {
			notes = append(notes, fmt.Sprintf("log stream first %d last %d, %d missing inside", st.FirstSeq, st.LastSeq, st.NumDeleted))
		}
	} else {
		notes = append(notes, "log stream unreadable")
	}

	// Lost and duplicated.
	var events []event
	if drained {
		var err error
		if events, err = readEvents(w); err != nil {
			notes = append(notes, "events: "+err.Error())
			r.failed = true
			drained = false
		}
	}
	have := map[[2]string]bool{}
	ids := map[string]int{}
	for _, e := range events {
		ids[e.ID]++
		if e.MerchantOrderID != "" {
			have[[2]string{e.MerchantOrderID, strings.TrimPrefix(e.Type, "order.")}] = true
		}
	}
	for _, k := range ids {
		if k > 1 {
			r.duplicated += k - 1
		}
	}
	// The databases to hold every acked write: the ready instances', or
	// when none is ready, any instance's.
	var dbs []dbState
	holders := ready
	if len(holders) == 0 {
		holders = w.ods
		notes = append(notes, "no instance ready: acked writes checked in the databases only")
	}
	for _, o := range holders {
		st, err := readDB(o.dbPath)
		if err != nil {
			notes = append(notes, fmt.Sprintf("read %s's database: %v", o.name, err))
			r.failed = true
			continue
		}
		dbs = append(dbs, st)
	}
	inDBs := func(moid, state string) bool {
		for _, db := range dbs {
			ok := rank[db.orders[moid]] >= rank[state]
			if len(ready) > 0 && !ok {
				return false // every ready instance must hold it
			}
			if len(ready) == 0 && ok {
				return true // any instance will do
			}
		}
		return len(ready) > 0 && len(dbs) > 0
	}
	var lostEx []string
	ld.mu.Lock()
	deliveries, creations := append([]delivery(nil), ld.deliveries...), append([]creation(nil), ld.creations...)
	ld.mu.Unlock()
	codes := map[int]int{}
	perInstance := map[string]map[int]int{}
	for _, d := range deliveries {
		codes[d.status]++
		if perInstance[d.to] == nil {
			perInstance[d.to] = map[int]int{}
		}
		perInstance[d.to][d.status]++
		if d.status != http.StatusOK {
			continue
		}
		r.acked++
		ok := inDBs(d.moid, d.state)
		if ok && drained {
			ok = have[[2]string{d.moid, d.state}]
		}
		if !ok {
			r.lost++
			if len(lostEx) < 3 {
				lostEx = append(lostEx, fmt.Sprintf("%s %s (acked by %s)", d.moid, d.state, d.to))
			}
		}
	}
	gwCodes := map[int]int{}
	for _, cr := range creations {
		gwCodes[cr.status]++
		if cr.status != http.StatusCreated && cr.status != http.StatusOK && cr.status != http.StatusAccepted {
			continue
		}
		r.acked++
		found := len(dbs) > 0
		for _, db := range dbs {
			if !db.attempts[cr.moid] {
				found = false
			}
		}
		if !found {
			r.lost++
			if len(lostEx) < 3 {
				lostEx = append(lostEx, fmt.Sprintf("creation %s (answered %d by %s)", cr.moid, cr.status, cr.to))
			}
		}
	}
	if len(lostEx) > 0 {
		notes = append(notes, "lost e.g. "+strings.Join(lostEx, ", "))
	}
	notes = append(notes, fmt.Sprintf("webhooks %d %s (a %s, b %s), creations %d %s, events %d", len(deliveries), fmtCodes(codes),
		fmtCodes(perInstance["a"]), fmtCodes(perInstance["b"]), len(creations), fmtCodes(gwCodes), len(events)))

	// Unleased provider calls. Faults that left no instance leading for
	// a job's interval leave no leader-only call to check; the healed
	// leader's balances job makes one within its interval. Wait for one,
	// bounded, so that the check has a call to judge (a leader that makes
	// none still fails the run below).
	if leader != nil {
		start := time.Now()
		seen := waitFor(3*balancesEvery+leaseTTL, 250*time.Millisecond, func() bool {
			calls, err := providerCalls(w)
			return err == nil && checkLease(w, lease, calls).calls > 0
		})
		if waited := time.Since(start); seen && waited > time.Second {
			notes = append(notes, fmt.Sprintf("first leader-only call after the heal, %s into the wait", waited.Round(100*time.Millisecond)))
		}
	}
	lease.stop()
	calls, err := providerCalls(w)
	if err != nil {
		notes = append(notes, "provider calls: "+err.Error())
		r.failed = true
	}
	lv := checkLease(w, lease, calls)
	r.unleased = lv.unleased
	notes = append(notes, fmt.Sprintf("leader-only provider calls %d %v, lease moves %d, unverifiable %d", lv.calls, lv.byNode, lv.moves, lv.unverifiable))
	if len(lv.examples) > 0 {
		notes = append(notes, "unleased e.g. "+strings.Join(lv.examples, ", "))
	}
	if lv.calls == 0 && len(r.refused) == 0 {
		// Without a refusal a leader ran the jobs all along: no call to
		// check means the check did not work.
		notes = append(notes, "no leader-only provider call was checked")
		r.failed = true
	}

	return r, notes
}

// refusal says why an instance is not ready at the end: its exit status,
// its /readyz answer, GET /v1/cluster's error and its last error line.
func refusal(o *instance) string {
	if !o.p.running() {
		return fmt.Sprintf("%s exited %d: %s", o.name, o.p.exitCode(), lastError(o.logPath))
	}
	code, body := get(o.admin() + "/readyz")
	why := fmt.Sprintf("%s readyz %d %s", o.name, code, strings.TrimSpace(body))
	if v, ok := o.view(); ok && v.Error != "" {
		why += "; cluster error: " + v.Error
	}
	return why
}

// leadershipTrail is the last n lines of an instance's log that say it
// became leader or stepped down, or that are warnings or errors other
// than a webhook's answer (the run's line counts those), shortened: what
// a failed run's reader needs first.
func leadershipTrail(path string, n int) []string {
	var out []string
	for _, s := range strings.Split(tail(path, 5000), "\n") {
		leadership := strings.Contains(s, `"msg":"became leader"`) || strings.Contains(s, `"msg":"stepped down as leader"`)
		trouble := (strings.Contains(s, `"level":"warn"`) || strings.Contains(s, `"level":"error"`)) &&
			!strings.Contains(s, `"msg":"webhook"`)
		if !leadership && !trouble {
			continue
		}
		if len(s) > 240 {
			s = s[:240] + "…"
		}
		out = append(out, s)
	}
	return out[max(0, len(out)-n):]
}

// lastError is the last log line of level error, shortened.
func lastError(path string) string {
	lines := strings.Split(tail(path, 200), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], `"level":"error"`) || strings.Contains(lines[i], "orderd:") {
			s := lines[i]
			if len(s) > 300 {
				s = s[:300] + "…"
			}
			return s
		}
	}
	return "(no error line)"
}

// frozenDigests waits until both instances have applied the log's end,
// pauses both (so neither writes), reads both digests and resumes them;
// it tries again while their sequences differ (a write slipped in). The
// pause is kept well inside 9/10 of a lease so a leader stays one.
func frozenDigests(ods []*instance) (detail string, seq uint64, same bool, err error) {
	for attempt := 0; attempt < 30; attempt++ {
		waitFor(10*time.Second, 50*time.Millisecond, func() bool {
			var end uint64
			for _, o := range ods {
				v, ok := o.view()
				if !ok || v.AppliedSeq != v.LogLastSeq || (end != 0 && v.LogLastSeq != end) {
					return false
				}
				end = v.LogLastSeq
			}
			return true
		})
		for _, o := range ods {
			o.p.pause()
		}
		type dg struct {
			d   string
			seq uint64
			err error
		}
		out := make([]dg, len(ods))
		var wg sync.WaitGroup
		for i, o := range ods {
			wg.Go(func() {
				out[i].d, out[i].seq, out[i].err = digest(o.dbPath)
			})
		}
		wg.Wait()
		for _, o := range ods {
			o.p.resume()
		}
		for _, x := range out {
			if x.err != nil {
				return "", 0, false, x.err
			}
		}
		if out[0].seq != out[1].seq {
			time.Sleep(time.Duration(50+attempt*20) * time.Millisecond)
			continue
		}
		return fmt.Sprintf("%s %.12s, %s %.12s", ods[0].name, out[0].d, ods[1].name, out[1].d), out[0].seq, out[0].d == out[1].d, nil
	}
	return "", 0, false, fmt.Errorf("the instances were never at the same applied sequence when paused (30 tries)")
}

// fmtCodes prints answer counts by status, 0 meaning no answer.
func fmtCodes(m map[int]int) string {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d:%d", k, m[k]))
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// keepLogs copies every *.log below src into dst (CHAOS_LOGS), keeping the
// relative paths, so a run's evidence outlives its temporary directory.
func keepLogs(t *testing.T, src, dst string) {
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".log") {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o644)
	})
	if err != nil {
		t.Logf("keep logs: %v", err)
	}
}
