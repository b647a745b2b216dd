package main

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"orderd/cmd/orderd-bench/internal/cli"
	"orderd/cmd/orderd-bench/internal/corpus"
)

// roundResult is one round against one target.
type roundResult struct {
	target  string // "ceiling", "orderd", "paced" or "profile"
	round   int
	rate    float64 // answered requests per second, summed over the URLs
	answers int64
	elapsed time.Duration
	// p50 and p99 are the worst over the URLs.
	p50, p99     time.Duration
	non2xx       int64
	socketErrors int64
	repeats      int64

	// The daemon's side; negative when unknown.
	cpuPer1k float64 // CPU seconds per 1,000 answered webhooks, relay included
	// cpuEach is cpuPer1k of each instance (from -pid), natsCPUPer1k the
	// NATS servers' (from -nats-pid); nil and 0 when unknown.
	cpuEach      []float64
	natsCPUPer1k float64
	peakRSS      int64 // highest RSS seen in the round, bytes (per instance)
	drained      time.Duration
	unpublish    int64 // accepted in the round and not published within -drain
	// From /metrics after the round (summed over instances): the Go
	// heap in use, what the Go runtime holds from the system, and RSS.
	heapInuse, goSys, rssAfter int64
}

// bench is one run's state.
type bench struct {
	o       options
	out     io.Writer
	dir     string
	script  string
	jobs    []wrkJob
	ceilJob []wrkJob
	admins  []string
	pids    []int
	orderd  *orderdProc
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if o.counts {
		return streamCounts(ctx, stdout, o.rawNATS, "ORDERD_LOG", "ORDERD")
	}
	if o.explain != "" {
		return explain(stdout, o.explain)
	}
	if _, err := exec.LookPath(o.wrk); err != nil {
		return fmt.Errorf("%w (install the Debian package wrk; make bench-daemon does)", err)
	}
	b := &bench{o: o, out: stdout}

	b.dir = o.workDir
	if b.dir == "" {
		if b.dir, err = os.MkdirTemp("", "orderd-bench."); err != nil {
			return err
		}
	} else if err := os.MkdirAll(b.dir, 0o755); err != nil {
		return err
	}
	defer func() {
		// A directory given with -work is the caller's: never removed.
		if o.workDir != "" || o.keep {
			b.logf("kept %s", b.dir)
		} else {
			os.RemoveAll(b.dir)
		}
	}()
	b.script = filepath.Join(b.dir, "post.lua")
	if err := os.WriteFile(b.script, postLua, 0o644); err != nil {
		return err
	}

	var key crypto.Signer
	var pubPath string
	want := corpusMeta{Rounds: o.rounds, PerRound: o.perRound, Shards: o.threads, RateN: pacedCount(o)}
	if o.profileDir != "" {
		want.ProfileN = o.profileN
	}
	reused := o.reuse && sameCorpus(b.dir, want)
	if !reused {
		// This run signs anew with a new key: an earlier run's
		// description of the corpus no longer holds.
		if err := os.Remove(filepath.Join(b.dir, "corpus.json")); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	switch {
	case o.keyFile != "":
		key, err = loadKey(o.keyFile)
	case reused:
		key, err = loadKey(filepath.Join(b.dir, "bench-key.pem"))
		pubPath = filepath.Join(b.dir, "bench-key.pem.pub")
	default:
		key, pubPath, err = freshKey(b.dir)
	}
	if err != nil {
		return err
	}
	b.logf("machine: %d CPUs, %s, %s; load average %s", runtime.NumCPU(), uname(), runtime.Version(), loadavg())

	urls := o.urls
	b.admins, b.pids = o.admins, o.pids
	if len(urls) == 0 {
		if _, err := os.Stat(o.orderd); err != nil {
			return cli.Usagef("-orderd: %v (make bench-daemon builds bin/orderd)", err)
		}
		var extra []byte
		if o.extraYAML != "" {
			if extra, err = os.ReadFile(o.extraYAML); err != nil {
				return cli.Usagef("-orderd-yaml: %v", err)
			}
		}
		// A fresh database and JetStream store every run, also in a
		// reused work directory.
		odir := filepath.Join(b.dir, "orderd")
		if err := os.RemoveAll(odir); err != nil {
			return err
		}
		if err := os.Mkdir(odir, 0o700); err != nil {
			return err
		}
		b.orderd, err = startOrderd(ctx, o.orderd, odir, pubPath, string(extra), o.profileDir != "")
		if err != nil {
			return err
		}
		defer func() {
			if b.orderd != nil {
				if serr := b.orderd.stop(); serr != nil && err == nil {
					err = serr
				}
			}
		}()
		urls, b.admins, b.pids = []string{b.orderd.webhook}, []string{b.orderd.admin}, []int{b.orderd.pid()}
		b.logf("orderd (pid %d) takes webhooks at %s, admin at %s", b.orderd.pid(), b.orderd.webhook, b.orderd.admin)
	}
	if b.jobs, err = splitJobs(urls, o.threads, o.conns); err != nil {
		return err
	}

	if o.profileDir != "" {
		if err := os.MkdirAll(o.profileDir, 0o755); err != nil {
			return err
		}
	}
	sets := make([]corpusSet, o.rounds)
	var profSet, pacedSet corpusSet
	if reused {
		for r := range sets {
			sets[r] = corpusSet{prefix: filepath.Join(b.dir, fmt.Sprintf("round%d", r+1)), shards: o.threads, count: o.perRound}
		}
		if o.profileDir != "" {
			profSet = corpusSet{prefix: filepath.Join(b.dir, "profile"), shards: o.threads, count: o.profileN}
		}
		if n := pacedCount(o); n > 0 {
			pacedSet = corpusSet{prefix: filepath.Join(b.dir, "paced"), shards: o.threads, count: n}
		}
		b.logf("reusing the key and the %d signed webhooks in %s", o.rounds*o.perRound+profSet.count+pacedSet.count, b.dir)
	} else {
		runID, err := corpus.NewRunID()
		if err != nil {
			return err
		}
		signStart := time.Now()
		for r := range sets {
			prefix := filepath.Join(b.dir, fmt.Sprintf("round%d", r+1))
			if sets[r], err = writeCorpus(ctx, key, prefix, runID, r*o.perRound, o.perRound, o.threads); err != nil {
				return err
			}
		}
		if o.profileDir != "" {
			prefix := filepath.Join(b.dir, "profile")
			if profSet, err = writeCorpus(ctx, key, prefix, runID, o.rounds*o.perRound, o.profileN, o.threads); err != nil {
				return err
			}
		}
		if n := pacedCount(o); n > 0 {
			prefix := filepath.Join(b.dir, "paced")
			if pacedSet, err = writeCorpus(ctx, key, prefix, runID, o.rounds*o.perRound+o.profileN, n, o.threads); err != nil {
				return err
			}
		}
		b.logf("signed %d distinct webhooks in %s", o.rounds*o.perRound+profSet.count+pacedSet.count, time.Since(signStart).Round(time.Second))
		if o.reuse {
			if err := writeCorpusMeta(b.dir, want); err != nil {
				return err
			}
		}
	}

	if o.ceiling {
		c, err := startCeiling(key.Public())
		if err != nil {
			return fmt.Errorf("ceiling: %w", err)
		}
		defer c.Close()
		b.ceilJob = []wrkJob{{url: c.URL(), threads: o.threads, conns: o.conns}}
		b.logf("ceiling (verify-only, this process) at %s", c.URL())
	}
	b.logf("%d rounds of each, interleaved: wrk -t%d -c%d -d%s, at most %d webhooks per daemon round, load average %s",
		o.rounds, o.threads, o.conns, wrkDuration(o.duration), o.perRound, loadavg())

	var results []roundResult
	for r := range o.rounds {
		if o.ceiling {
			res, err := b.ceilingRound(ctx, r+1, sets[0])
			if err != nil {
				return err
			}
			b.printRound(res)
			results = append(results, res)
		}
		res, err := b.daemonRound(ctx, "orderd", r+1, sets[r], o.duration)
		if err != nil {
			return err
		}
		b.printRound(res)
		results = append(results, res)
		if len(o.rawNATS) > 0 {
			res, err := b.rawRound(ctx, r+1)
			if err != nil {
				return err
			}
			b.printRound(res)
			results = append(results, res)
		}
		if o.pattern {
			res, err := b.patternRound(ctx, r+1)
			if err != nil {
				return err
			}
			b.printRound(res)
			results = append(results, res)
		}
	}
	if pacedSet.count > 0 {
		res, err := b.pacedRound(ctx, pacedSet)
		if err != nil {
			return err
		}
		b.printRound(res)
		results = append(results, res)
	}
	// The peak of the measured rounds, before the profile round (whose
	// profiling costs memory of its own).
	hwm := int64(-1)
	for _, pid := range b.pids {
		if v, err := procStatus(pid, "VmHWM"); err == nil {
			hwm = max(hwm, v)
		}
	}
	if o.profileDir != "" {
		res, err := b.profileRound(ctx, profSet)
		if err != nil {
			return err
		}
		b.printRound(res)
	}

	idle := int64(-1)
	if o.idle > 0 {
		b.logf("waiting %s without load", o.idle)
		select {
		case <-time.After(o.idle):
		case <-ctx.Done():
			return ctx.Err()
		}
		idle = b.rss(ctx)
	}
	b.summary(results, hwm, idle)
	return nil
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.out, "bench: "+format+"\n", args...)
}

// ceilingRound drives the ceiling with the first round's corpus, over and
// over (it keeps nothing, so repeats cost it what fresh bodies do).
func (b *bench) ceilingRound(ctx context.Context, round int, set corpusSet) (roundResult, error) {
	wr := b.wrk(set, "wrap", b.o.duration)
	// The ceiling serves in this process, which does nothing else while
	// wrk runs: its CPU time is the ceiling's.
	before := selfCPU()
	res, err := wr.run(ctx, b.ceilJob)
	if err != nil {
		return roundResult{}, err
	}
	cpu := selfCPU() - before
	rr := combine("ceiling", round, res)
	rr.repeats = 0 // by design
	if ok := rr.answers - rr.non2xx; ok > 0 && cpu > 0 {
		rr.cpuPer1k = cpu.Seconds() / float64(ok) * 1000
	}
	return rr, nil
}

// selfCPU is this process's user and system CPU time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (b *bench) wrk(set corpusSet, mode string, d time.Duration) wrkRun {
	return wrkRun{
		bin: b.o.wrk, script: b.script, prefix: set.prefix, mode: mode,
		duration: d, timeout: b.o.timeout, logPath: filepath.Join(b.dir, "wrk.log"),
	}
}

// pacedCount is how many webhooks the paced round needs: its rate for its
// length, and a fifth more.
func pacedCount(o options) int {
	if o.rate == 0 {
		return 0
	}
	return int(float64(o.rate)*o.rateTime.Seconds()*1.2) + o.threads
}

// pacedRound sends -rate webhooks a second, each wrk thread its share on
// a fixed schedule (open loop while a connection is free).
func (b *bench) pacedRound(ctx context.Context, set corpusSet) (roundResult, error) {
	wr := b.wrk(set, "once", b.o.rateTime)
	wr.threadRate = float64(b.o.rate) / float64(b.o.threads)
	return b.daemonRoundWith(ctx, "paced", 0, wr)
}

// daemonRound posts set once to the receivers, then waits for the relay to
// publish what they accepted, and reads their CPU time across both.
func (b *bench) daemonRound(ctx context.Context, label string, round int, set corpusSet, d time.Duration) (roundResult, error) {
	return b.daemonRoundWith(ctx, label, round, b.wrk(set, "once", d))
}

func (b *bench) daemonRoundWith(ctx context.Context, label string, round int, wr wrkRun) (roundResult, error) {
	before, merr := b.scrape(ctx)
	pidsBefore := make([]time.Duration, len(b.pids))
	for i, pid := range b.pids {
		pidsBefore[i], _ = procCPU(pid)
	}
	natsBefore := procsCPU(b.o.natsPIDs)
	samp := b.startSampler(ctx)
	res, err := wr.run(ctx, b.jobs)
	if err != nil {
		samp.stop()
		return roundResult{}, err
	}
	loadEnd := time.Now()
	rr := combine(label, round, res)
	rr.cpuPer1k, rr.peakRSS, rr.drained, rr.unpublish = -1, -1, -1, -1
	if merr == nil && len(b.admins) > 0 {
		accepted := func(m metrics) float64 { return m.series[`orderd_webhooks_total{outcome="accepted"}`] }
		var after metrics
		for {
			after, err = b.scrape(ctx)
			if err != nil {
				break
			}
			missing := (accepted(after) - accepted(before)) -
				(after.sum("orderd_publish_events_total") - before.sum("orderd_publish_events_total"))
			rr.unpublish = int64(max(missing, 0))
			if missing <= 0 || time.Since(loadEnd) >= b.o.drain {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err == nil {
			rr.drained = time.Since(loadEnd)
			rr.heapInuse = int64(after.sum("go_memstats_heap_inuse_bytes"))
			rr.goSys = int64(after.sum("go_memstats_sys_bytes"))
			rr.rssAfter = int64(after.sum("process_resident_memory_bytes"))
			if ok := rr.answers - rr.non2xx; ok > 0 {
				cpu := after.sum("process_cpu_seconds_total") - before.sum("process_cpu_seconds_total")
				rr.cpuPer1k = cpu / float64(ok) * 1000
				// Until the relay published the round's events, as
				// cpuPer1k: per instance and for the NATS servers.
				if len(b.pids) > 1 {
					for i, pid := range b.pids {
						now, err := procCPU(pid)
						if err != nil {
							rr.cpuEach = nil
							break
						}
						rr.cpuEach = append(rr.cpuEach, (now-pidsBefore[i]).Seconds()/float64(ok)*1000)
					}
				}
				if cpu := procsCPU(b.o.natsPIDs) - natsBefore; cpu > 0 {
					rr.natsCPUPer1k = cpu.Seconds() / float64(ok) * 1000
				}
			}
		}
	}
	rr.peakRSS = samp.stop()
	return rr, nil
}

// profileRound is a daemon round during which the first receiver's CPU
// and allocation profiles are taken, and its heap profile after.
func (b *bench) profileRound(ctx context.Context, set corpusSet) (roundResult, error) {
	admin := strings.TrimSuffix(b.admins[b.o.profileOf-1], "/")
	secs := int((b.o.profileTime + time.Second - 1) / time.Second)
	var wg sync.WaitGroup
	errs := make([]error, 2+len(b.o.natsProf))
	wg.Go(func() {
		// wrk's connections are open and busy after a moment.
		time.Sleep(500 * time.Millisecond)
		var pw sync.WaitGroup
		pw.Go(func() {
			errs[0] = fetchTo(ctx, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", admin, secs), filepath.Join(b.o.profileDir, "cpu.pprof"), b.o.profileTime)
		})
		pw.Go(func() {
			errs[1] = fetchTo(ctx, fmt.Sprintf("%s/debug/pprof/allocs?seconds=%d", admin, secs), filepath.Join(b.o.profileDir, "allocs.pprof"), b.o.profileTime)
		})
		// The NATS servers over the same seconds: what the cluster's
		// log, events stream, lease and consumers cost them.
		for i, u := range b.o.natsProf {
			pw.Go(func() {
				errs[2+i] = fetchTo(ctx, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", strings.TrimSuffix(u, "/"), secs), filepath.Join(b.o.profileDir, fmt.Sprintf("nats-%d.cpu.pprof", i+1)), b.o.profileTime)
			})
		}
		pw.Wait()
	})
	rr, err := b.daemonRound(ctx, "profile", 0, set, b.o.profileTime+2*time.Second)
	wg.Wait()
	if err != nil {
		return rr, err
	}
	if err := errors.Join(errs...); err != nil {
		return rr, fmt.Errorf("profiles: %w", err)
	}
	if err := fetchTo(ctx, admin+"/debug/pprof/heap", filepath.Join(b.o.profileDir, "heap.pprof"), 0); err != nil {
		return rr, fmt.Errorf("profiles: %w", err)
	}
	b.logf("profiles of %s in %s: cpu.pprof and allocs.pprof (the %ds of load), heap.pprof (after it)", admin, b.o.profileDir, secs)
	if rr.cpuPer1k < 0 {
		return rr, nil
	}
	pr := profileRound{CPUPer1k: rr.cpuPer1k, Rate: rr.rate, Seconds: float64(secs)}
	if err := writeProfileRound(b.o.profileDir, pr); err != nil {
		return rr, err
	}
	if err := printBreakdown(b.out, b.o.profileDir, pr); err != nil {
		return rr, fmt.Errorf("profiles: %w", err)
	}
	return rr, nil
}

func fetchTo(ctx context.Context, url, path string, d time.Duration) error {
	resp, err := adminGet(ctx, url, d+30*time.Second)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, resp.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (b *bench) scrape(ctx context.Context) (metrics, error) {
	if len(b.admins) == 0 {
		return metrics{}, errors.New("no admin listener")
	}
	return scrapeAll(ctx, b.admins)
}

// rss is the receivers' resident memory now, the largest instance's; -1
// when it cannot be read.
func (b *bench) rss(ctx context.Context) int64 {
	best := int64(-1)
	if len(b.pids) > 0 {
		for _, pid := range b.pids {
			if v, err := procStatus(pid, "VmRSS"); err == nil {
				best = max(best, v)
			}
		}
		return best
	}
	for _, a := range b.admins {
		if m, err := scrape(ctx, a); err == nil {
			best = max(best, int64(m.sum("process_resident_memory_bytes")))
		}
	}
	return best
}

// sampler records the highest RSS of any receiver while a round runs:
// every 100 ms from /proc with PIDs, else every 500 ms from /metrics.
type sampler struct {
	stopc chan struct{}
	done  chan int64
}

func (b *bench) startSampler(ctx context.Context) *sampler {
	s := &sampler{stopc: make(chan struct{}), done: make(chan int64, 1)}
	every := 100 * time.Millisecond
	if len(b.pids) == 0 {
		every = 500 * time.Millisecond
	}
	go func() {
		peak := int64(-1)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			peak = max(peak, b.rss(ctx))
			select {
			case <-s.stopc:
				s.done <- max(peak, b.rss(ctx))
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *sampler) stop() int64 {
	close(s.stopc)
	return <-s.done
}

// combine adds up the wrk results of one round over the URLs.
func combine(target string, round int, res []wrkResult) roundResult {
	rr := roundResult{target: target, round: round, cpuPer1k: -1, peakRSS: -1, drained: -1, unpublish: -1}
	for _, r := range res {
		d := time.Duration(r.DurationUS) * time.Microsecond
		rr.rate += float64(r.Requests) / d.Seconds()
		rr.answers += r.Requests
		rr.elapsed = max(rr.elapsed, d)
		rr.p50 = max(rr.p50, time.Duration(r.P50)*time.Microsecond)
		rr.p99 = max(rr.p99, time.Duration(r.P99)*time.Microsecond)
		rr.non2xx += r.Status
		rr.socketErrors += r.socketErrors()
		rr.repeats += r.Repeats
	}
	return rr
}

func (b *bench) printRound(r roundResult) {
	name := r.target
	if r.round > 0 {
		name = fmt.Sprintf("round %d %s", r.round, r.target)
	}
	line := fmt.Sprintf("%-16s %8.0f/s  p50 %6.2f ms  p99 %6.2f ms  non-2xx %d  socket errors %d  (%d answers in %.2fs",
		name, r.rate, ms(r.p50), ms(r.p99), r.non2xx, r.socketErrors, r.answers, r.elapsed.Seconds())
	if r.target != "ceiling" && r.target != "raw" && r.target != "pattern" {
		line += fmt.Sprintf(", %d repeats", r.repeats)
	}
	line += ")"
	if r.cpuPer1k >= 0 {
		line += fmt.Sprintf("  cpu %.3f s/1k", r.cpuPer1k)
	}
	for i, c := range r.cpuEach {
		line += fmt.Sprintf(" (instance %d %.3f)", i+1, c)
	}
	if r.natsCPUPer1k > 0 {
		line += fmt.Sprintf("  nats cpu %.3f s/1k", r.natsCPUPer1k)
	}
	if r.peakRSS >= 0 {
		line += fmt.Sprintf("  rss peak %s", mib(r.peakRSS))
	}
	if r.drained >= 0 {
		if r.unpublish > 0 {
			line += fmt.Sprintf("  %d events NOT published %.1fs after the round", r.unpublish, r.drained.Seconds())
		} else {
			line += fmt.Sprintf("  all published +%.2fs", r.drained.Seconds())
		}
	}
	fmt.Fprintln(b.out, line)
	if r.rssAfter > 0 {
		of := ""
		if n := len(b.admins); n > 1 {
			of = fmt.Sprintf(" (summed over the %d instances)", n)
		}
		fmt.Fprintf(b.out, "%-16s memory after the round%s: RSS %s; Go heap in use %s, Go runtime's total from the system %s; the rest (SQLite's page caches, ...) about %s\n",
			"", of, mib(r.rssAfter), mib(r.heapInuse), mib(r.goSys), mib(max(r.rssAfter-r.goSys, 0)))
	}
}

// summary prints the best round of each target and the ratio, then one
// machine-readable line per target.
func (b *bench) summary(results []roundResult, hwm, idle int64) {
	best := map[string]roundResult{}
	totals := map[string][2]int64{}
	for _, r := range results {
		if cur, ok := best[r.target]; !ok || r.rate > cur.rate {
			best[r.target] = r
		}
		t := totals[r.target]
		totals[r.target] = [2]int64{t[0] + r.non2xx, t[1] + r.socketErrors}
	}
	fmt.Fprintf(b.out, "\nbench: summary, best of %d rounds each (wrk -t%d -c%d -d%s; load average now %s)\n",
		b.o.rounds, b.o.threads, b.o.conns, wrkDuration(b.o.duration), loadavg())
	for _, t := range []string{"ceiling", "orderd"} {
		r, ok := best[t]
		if !ok {
			continue
		}
		line := fmt.Sprintf("result target=%s rate=%.0f p50_ms=%.2f p99_ms=%.2f non2xx=%d socket_errors=%d",
			t, r.rate, ms(r.p50), ms(r.p99), totals[t][0], totals[t][1])
		if t == "ceiling" {
			line += " cpu_s_per_1k=" + orDash(minCPU(results, t), "%.3f")
		}
		if t == "orderd" {
			line += fmt.Sprintf(" cpu_s_per_1k=%s peak_rss_mib=%s idle_rss_mib=%s",
				orDash(r.cpuPer1k, "%.3f"), mibNum(max(hwm, maxRSS(results))), mibNum(idle))
			for i, c := range r.cpuEach {
				line += fmt.Sprintf(" cpu_s_per_1k_instance%d=%.3f", i+1, c)
			}
			if r.natsCPUPer1k > 0 {
				line += fmt.Sprintf(" nats_cpu_s_per_1k=%.3f", r.natsCPUPer1k)
			}
		}
		fmt.Fprintln(b.out, line)
	}
	if r, ok := best["raw"]; ok {
		line := fmt.Sprintf("result target=raw rate=%.0f p50_ms=%.2f p99_ms=%.2f failed=%d",
			r.rate, ms(r.p50), ms(r.p99), totals["raw"][0])
		if r.natsCPUPer1k > 0 {
			line += fmt.Sprintf(" nats_cpu_s_per_1k=%.3f", r.natsCPUPer1k)
		}
		fmt.Fprintln(b.out, line)
		if d, ok := best["orderd"]; ok && r.rate > 0 {
			// The acceptance figure: acked webhooks against what the log's
			// transport alone gives to as many waiting publishers.
			fmt.Fprintf(b.out, "result raw_ratio=%.3f\n", d.rate/r.rate)
		}
		if all, raw, ok := cpuMultiple(results); ok {
			// The other acceptance figure: what an acked webhook costs
			// every process (the instances and the NATS servers) against
			// what a raw publish costs the NATS servers.
			fmt.Fprintf(b.out, "result cluster_cpu_ms_per_webhook=%.3f raw_nats_cpu_ms_per_publish=%.3f cpu_multiple=%.2f\n", all, raw, all/raw)
		}
	}
	if p, ok := best["pattern"]; ok {
		fmt.Fprintf(b.out, "result target=pattern rate=%.0f p50_ms=%.2f p99_ms=%.2f failed=%d\n",
			p.rate, ms(p.p50), ms(p.p99), totals["pattern"][0])
		if floor, raw, ok := patternMultiple(results); ok {
			// What the NATS servers alone spend on a webhook's traffic
			// at its most favourable, against a raw publish: the part
			// of cpu_multiple no change inside orderd can take away.
			fmt.Fprintf(b.out, "result pattern_nats_cpu_ms_per_webhook=%.3f raw_nats_cpu_ms_per_publish=%.3f pattern_multiple=%.2f\n", floor, raw, floor/raw)
		}
	}
	if p, ok := best["paced"]; ok {
		fmt.Fprintf(b.out, "result target=paced rate=%.0f p50_ms=%.2f p99_ms=%.2f non2xx=%d socket_errors=%d cpu_s_per_1k=%s\n",
			p.rate, ms(p.p50), ms(p.p99), p.non2xx, p.socketErrors, orDash(p.cpuPer1k, "%.3f"))
	}
	if c, ok := best["ceiling"]; ok && c.rate > 0 {
		if d, ok := best["orderd"]; ok {
			line := fmt.Sprintf("result ratio=%.3f", d.rate/c.rate)
			// CPU per request barely moves with the host's other load,
			// where throughput does: their ratio is what the throughput
			// ratio comes to when both saturate the same cores.
			if cc, dc := minCPU(results, "ceiling"), minCPU(results, "orderd"); cc > 0 && dc > 0 {
				line += fmt.Sprintf(" cpu_ratio=%.3f", cc/dc)
			}
			fmt.Fprintln(b.out, line)
		}
	}
}

// cpuMultiple is the CPU milliseconds of all processes, the receivers
// (from their /metrics) and the NATS servers (-nats-pid), per acked
// webhook over every daemon round, and the NATS servers' CPU milliseconds
// per acked raw publish over every raw round; ok is false unless both
// were measured. Over every round rather than the best one, so that one
// round's noise weighs as much as its webhooks.
func cpuMultiple(results []roundResult) (perWebhook, perPublish float64, ok bool) {
	var cpu, acked, natsCPU, published float64
	for _, r := range results {
		switch {
		case r.target == "orderd" && r.cpuPer1k >= 0 && r.natsCPUPer1k > 0:
			n := float64(r.answers - r.non2xx)
			cpu += (r.cpuPer1k + r.natsCPUPer1k) * n / 1000
			acked += n
		case r.target == "raw" && r.natsCPUPer1k > 0:
			n := float64(r.answers)
			natsCPU += r.natsCPUPer1k * n / 1000
			published += n
		}
	}
	if acked == 0 || published == 0 || cpu <= 0 || natsCPU <= 0 {
		return 0, 0, false
	}
	return cpu / acked * 1000, natsCPU / published * 1000, true
}

// patternMultiple is the NATS servers' CPU milliseconds per webhook over
// every pattern round and per publish over every raw round; ok is false
// unless both were measured.
func patternMultiple(results []roundResult) (perWebhook, perPublish float64, ok bool) {
	var cpu, webhooks, rawCPU, published float64
	for _, r := range results {
		if r.natsCPUPer1k <= 0 {
			continue
		}
		n := float64(r.answers)
		switch r.target {
		case "pattern":
			cpu += r.natsCPUPer1k * n / 1000
			webhooks += n
		case "raw":
			rawCPU += r.natsCPUPer1k * n / 1000
			published += n
		}
	}
	if webhooks == 0 || published == 0 {
		return 0, 0, false
	}
	return cpu / webhooks * 1000, rawCPU / published * 1000, true
}

// minCPU is the lowest CPU seconds per 1,000 of target's rounds, -1 when
// none was measured.
func minCPU(results []roundResult, target string) float64 {
	m := -1.0
	for _, r := range results {
		if r.target == target && r.cpuPer1k > 0 && (m < 0 || r.cpuPer1k < m) {
			m = r.cpuPer1k
		}
	}
	return m
}

func maxRSS(results []roundResult) int64 {
	m := int64(-1)
	for _, r := range results {
		m = max(m, r.peakRSS)
	}
	return m
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

func mibNum(b int64) string {
	if b < 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", float64(b)/(1<<20))
}

func orDash(v float64, format string) string {
	if v < 0 || math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf(format, v)
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func uname() string {
	out, err := exec.Command("uname", "-srm").Output()
	if err != nil {
		return runtime.GOOS + "/" + runtime.GOARCH
	}
	return strings.TrimSpace(string(out))
}
