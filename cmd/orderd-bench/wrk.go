package main

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"orderd/cmd/orderd-bench/internal/cli"
)

// postLua is the wrk script; run writes it into the work directory.
//
//go:embed post.lua
var postLua []byte

// resultPrefix starts the line post.lua's done() prints.
const resultPrefix = "orderd-bench-result "

// wrkResult is one wrk's summary as post.lua prints it. Times in µs.
type wrkResult struct {
	Requests   int64   `json:"requests"`
	DurationUS int64   `json:"duration_us"` // until the last thread ran out, else wall
	WallUS     int64   `json:"wall_us"`
	Sent       int64   `json:"sent"`
	Repeats    int64   `json:"repeats"`
	Connect    int64   `json:"connect"`
	Read       int64   `json:"read"`
	Write      int64   `json:"write"`
	Status     int64   `json:"status"`
	Timeout    int64   `json:"timeout"`
	P50        int64   `json:"p50_us"`
	P90        int64   `json:"p90_us"`
	P99        int64   `json:"p99_us"`
	Max        int64   `json:"max_us"`
	Mean       float64 `json:"mean_us"`
}

// socketErrors are requests that got no answer: connect, read and write
// errors and timeouts.
func (w wrkResult) socketErrors() int64 { return w.Connect + w.Read + w.Write + w.Timeout }

// wrkJob is one wrk process: a URL, its share of threads and connections,
// and the corpus shards its threads read (first, first+1, ...).
type wrkJob struct {
	url     string
	threads int
	conns   int
	first   int
}

// splitJobs shares threads and connections over the URLs, the first URLs
// taking the remainders; shard numbers follow the threads.
func splitJobs(urls []string, threads, conns int) ([]wrkJob, error) {
	jobs := make([]wrkJob, len(urls))
	first := 0
	for i, u := range urls {
		t := threads / len(urls)
		if i < threads%len(urls) {
			t++
		}
		c := conns / len(urls)
		if i < conns%len(urls) {
			c++
		}
		if c < t {
			return nil, cli.Usagef("-c %d over %d URLs leaves %s %d connections for %d threads", conns, len(urls), u, c, t)
		}
		jobs[i] = wrkJob{url: u, threads: t, conns: c, first: first}
		first += t
	}
	return jobs, nil
}

// wrkRun is one round against one target: every job at once.
type wrkRun struct {
	bin    string
	script string
	prefix string // corpus prefix
	mode   string // "once" or "wrap"
	// threadRate paces each wrk thread at this many requests a second;
	// 0 sends as fast as answers come.
	threadRate float64
	duration   time.Duration
	timeout    time.Duration
	logPath    string // wrk's whole output, appended
}

// run starts one wrk per job and returns their results in job order.
func (wr wrkRun) run(ctx context.Context, jobs []wrkJob) ([]wrkResult, error) {
	res := make([]wrkResult, len(jobs))
	errs := make([]error, len(jobs))
	outs := make([][]byte, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() {
			res[i], outs[i], errs[i] = wr.one(ctx, j)
		})
	}
	wg.Wait()
	if wr.logPath != "" {
		if f, err := os.OpenFile(wr.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644); err == nil {
			for i, j := range jobs {
				fmt.Fprintf(f, "== %s %s (%s)\n%s\n", j.url, wr.prefix, wr.mode, outs[i])
			}
			f.Close()
		}
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return res, nil
}

func (wr wrkRun) one(ctx context.Context, j wrkJob) (wrkResult, []byte, error) {
	args := []string{
		"-t", strconv.Itoa(j.threads), "-c", strconv.Itoa(j.conns),
		"-d", wrkDuration(wr.duration), "--timeout", wrkDuration(wr.timeout),
		"-s", wr.script, j.url, "--", wr.prefix, strconv.Itoa(j.first), wr.mode, strconv.FormatFloat(wr.threadRate, 'f', 3, 64),
	}
	// wrk stops on its own after -d; the context bound is for a wrk that
	// hangs.
	cctx, cancel := context.WithTimeout(ctx, wr.duration+wr.timeout+30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, wr.bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return wrkResult{}, out.Bytes(), fmt.Errorf("wrk %s: %w: %s", strings.Join(args, " "), err, tail(out.Bytes(), 600))
	}
	r, err := parseWrk(out.Bytes())
	if err != nil {
		return wrkResult{}, out.Bytes(), fmt.Errorf("wrk against %s: %w: %s", j.url, err, tail(out.Bytes(), 600))
	}
	return r, out.Bytes(), nil
}

// parseWrk finds post.lua's result line in wrk's output.
func parseWrk(out []byte) (wrkResult, error) {
	for line := range strings.Lines(string(out)) {
		if rest, ok := strings.CutPrefix(line, resultPrefix); ok {
			var r wrkResult
			if err := json.Unmarshal([]byte(rest), &r); err != nil {
				return wrkResult{}, fmt.Errorf("result line: %w", err)
			}
			if r.DurationUS <= 0 {
				return wrkResult{}, fmt.Errorf("result line: duration %d µs", r.DurationUS)
			}
			return r, nil
		}
	}
	return wrkResult{}, fmt.Errorf("no %q line", strings.TrimSpace(resultPrefix))
}

// wrkDuration writes d the way wrk reads it: whole seconds, at least 1.
func wrkDuration(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	return strconv.FormatInt(max(s, 1), 10) + "s"
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}
