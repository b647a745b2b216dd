package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"orderd/cmd/orderd-bench/internal/cli"
	"orderd/provider"
	"orderd/provider/providertest"
)

func TestParseFlags_errors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-url", "http://127.0.0.1:1/webhooks/orders"}, "-url needs -key"},
		{[]string{"-key", "k.pem"}, "-key goes with -url"},
		{[]string{"-admin", "http://127.0.0.1:2"}, "-admin and -pid go with -url"},
		{[]string{"-url", "http://a/w,http://b/w", "-key", "k", "-admin", "http://a:1"}, "give one admin URL per receiver"},
		{[]string{"-url", "http://a/w", "-key", "k", "-pid", "x"}, `-pid: "x" is not a process id`},
		{[]string{"-url", "http://a/w", "-key", "k", "-profile", "p"}, "-profile with -url needs -admin"},
		{[]string{"-url", "http://a/w,http://b/w,http://c/w", "-key", "k", "-t", "2"}, "-t 2 is below the 3 URLs"},
		{[]string{"-c", "1", "-t", "2"}, "-c 1 is below -t 2"},
		{[]string{"-rounds", "0"}, "-rounds must be between"},
		{[]string{"-n", "0"}, "-n must be between"},
		{[]string{"-d", "0s"}, "-d must be positive"},
		{[]string{"stray"}, `unexpected argument "stray"`},
		{[]string{"-nats-pid", "0"}, `-nats-pid: "0" is not a process id`},
		{[]string{"-raw-replicas", "0"}, "-raw-replicas must be between 1 and 5"},
		{[]string{"-raw-size", "0"}, "-raw-size between"},
		{[]string{"-profile-of", "2"}, "-profile-of 2"},
		{[]string{"-nats-prof", "http://127.0.0.1:3"}, "-nats-prof goes with -profile"},
		{[]string{"-counts"}, "-counts needs -raw-nats"},
		{[]string{"-pattern"}, "-pattern needs -raw-nats"},
		{[]string{"-raw-nats", "nats://127.0.0.1:1", "-pattern", "-pattern-group", "0"}, "-pattern-group must be between 1 and 256"},
		{[]string{"-raw-nats", "nats://127.0.0.1:1", "-pattern", "-pattern-batch", "1001"}, "-pattern-batch between 1 and 1000"},
		{[]string{"-url", "http://a/w", "-key", "k", "-admin", "http://a:1", "-profile-of", "2"}, "-profile-of 2"},
	}
	for _, tt := range tests {
		_, err := parseFlags(tt.args, io.Discard)
		if _, ok := err.(cli.UsageError); !ok || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("parseFlags(%q) = %v, want a usage error containing %q", tt.args, err, tt.want)
		}
	}
	o, err := parseFlags([]string{"-url", "http://a/w, http://b/w", "-key", "k", "-admin", "http://a:1,http://b:1", "-pid", "10,11"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.urls) != 2 || o.urls[1] != "http://b/w" || len(o.admins) != 2 || len(o.pids) != 2 || o.pids[1] != 11 {
		t.Errorf("lists = %q %q %v", o.urls, o.admins, o.pids)
	}
	o, err = parseFlags([]string{"-raw-nats", "nats://127.0.0.1:1, nats://127.0.0.1:2", "-nats-pid", "7,8,9"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.rawNATS) != 2 || o.rawNATS[1] != "nats://127.0.0.1:2" || len(o.natsPIDs) != 3 || o.natsPIDs[2] != 9 ||
		o.rawReplicas != 3 || o.rawSize != 1200 {
		t.Errorf("raw options = %q %v %d %d", o.rawNATS, o.natsPIDs, o.rawReplicas, o.rawSize)
	}
	if o.pattern || o.patternGroup != 6 || o.patternOpBytes != 510 || o.patternBatch != 26 {
		t.Errorf("pattern options = %v %d %d %d, want off with the sizes of replicated mode's runs", o.pattern, o.patternGroup, o.patternOpBytes, o.patternBatch)
	}
}

func TestSplitJobs(t *testing.T) {
	jobs, err := splitJobs([]string{"a", "b", "c"}, 4, 64)
	if err != nil {
		t.Fatal(err)
	}
	want := []wrkJob{{"a", 2, 22, 0}, {"b", 1, 21, 2}, {"c", 1, 21, 3}}
	for i := range want {
		if jobs[i] != want[i] {
			t.Errorf("job %d = %+v, want %+v", i, jobs[i], want[i])
		}
	}
	if _, err := splitJobs([]string{"a", "b"}, 4, 3); err == nil {
		t.Error("3 connections for 4 threads over 2 URLs: no error")
	}
}

func TestParseMetrics(t *testing.T) {
	m, err := parseMetrics(strings.NewReader(`# HELP orderd_webhooks_total Webhook deliveries by outcome.
# TYPE orderd_webhooks_total counter
orderd_webhooks_total{outcome="accepted"} 120
orderd_webhooks_total{outcome="duplicate"} 3
process_cpu_seconds_total 12.5
process_resident_memory_bytes 1.2345e+08
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := m.series[`orderd_webhooks_total{outcome="accepted"}`]; got != 120 {
		t.Errorf("accepted = %v, want 120", got)
	}
	if got := m.sum("orderd_webhooks_total"); got != 123 {
		t.Errorf("sum of orderd_webhooks_total = %v, want 123", got)
	}
	if got := m.sum("process_resident_memory_bytes"); got != 123450000 {
		t.Errorf("rss = %v", got)
	}
}

func TestParseWrk(t *testing.T) {
	out := "Running 1s test @ http://127.0.0.1:1/\n" + resultPrefix +
		`{"requests":10,"duration_us":1000000,"sent":10,"repeats":0,"connect":0,"read":1,"write":0,"status":2,"timeout":3,"p50_us":100,"p90_us":200,"p99_us":300,"max_us":400,"mean_us":150.0}` + "\n"
	r, err := parseWrk([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests != 10 || r.Status != 2 || r.socketErrors() != 4 || r.P99 != 300 {
		t.Errorf("parsed %+v", r)
	}
	if _, err := parseWrk([]byte("Running 1s test\n")); err == nil {
		t.Error("output without the result line: no error")
	}
}

// sink is a receiver for the Lua script's test: it verifies each request's
// signature like the ceiling and counts the orders it saw.
type sink struct {
	v       *provider.Verifier
	mu      sync.Mutex
	seen    map[string]int
	invalid int
}

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var o struct{ ID string }
	err := s.v.Verify(body, r.Header.Get("Signature"))
	if err == nil {
		err = json.Unmarshal(body, &o)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil || r.Method != http.MethodPost || r.URL.Path != "/webhooks/orders" ||
		r.Header.Get("Content-Type") != "application/json" {
		s.invalid++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	s.seen[o.ID]++
}

func wrkOrSkip(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("wrk")
	if err != nil {
		t.Skip("wrk is not installed; make test installs it (DEBIAN_PACKAGES)")
	}
	return p
}

// TestPostLua drives a verifying server with wrk and post.lua: in "once"
// mode every signed order arrives, none is sent twice but for the few a
// thread sends while it stops (and those are counted), and the measured
// duration ends when the corpus is used up, not at -d; in "wrap" mode the
// corpus goes round again.
func TestPostLua(t *testing.T) {
	bin := wrkOrSkip(t)
	dir := t.TempDir()
	key, _, err := providertest.GenerateKey(providertest.KeyRSA)
	if err != nil {
		t.Fatal(err)
	}
	const n, threads, conns = 300, 2, 8
	set, err := writeCorpus(t.Context(), key, filepath.Join(dir, "c"), 7, 0, n, threads)
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "post.lua")
	if err := os.WriteFile(script, postLua, 0o644); err != nil {
		t.Fatal(err)
	}
	v, err := provider.NewVerifier(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	s := &sink{v: v, seen: map[string]int{}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	jobs := []wrkJob{{url: srv.URL + "/webhooks/orders", threads: threads, conns: conns}}

	wr := wrkRun{bin: bin, script: script, prefix: set.prefix, mode: "once", duration: 5 * time.Second, timeout: 10 * time.Second}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Second)
	defer cancel()
	res, err := wr.run(ctx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	r := res[0]
	s.mu.Lock()
	distinct, total, invalid := len(s.seen), 0, s.invalid
	for _, c := range s.seen {
		total += c
	}
	s.mu.Unlock()
	if invalid != 0 || r.Status != 0 {
		t.Errorf("%d requests failed verification at the server, wrk counted %d error answers", invalid, r.Status)
	}
	// Requests in flight when a thread stops may be cut off, one per
	// connection at most.
	if distinct < n-conns || distinct > n {
		t.Errorf("server saw %d distinct orders, want %d (less at most %d cut off)", distinct, n, conns)
	}
	if r.Repeats > conns || int64(total-distinct) > r.Repeats {
		t.Errorf("repeats: wrk counted %d, the server saw %d; want at most one per connection (%d), every one counted", r.Repeats, total-distinct, conns)
	}
	if r.Requests < n-conns || r.Sent < n {
		t.Errorf("wrk answered %d and sent %d of %d", r.Requests, r.Sent, n)
	}
	// wrk lasts -d whatever its threads do; the script's duration ends
	// when the last thread ran out.
	if r.DurationUS <= 0 || r.DurationUS >= r.WallUS {
		t.Errorf("duration %d µs, wall %d µs: want the time until the corpus ran out, below wrk's -d", r.DurationUS, r.WallUS)
	}

	// wrap: the same bodies again, round and round, for the 1 s asked.
	wr.mode, wr.duration = "wrap", time.Second
	res, err = wr.run(ctx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	if len(s.seen) != n || res[0].Status != 0 || s.invalid != 0 {
		t.Errorf("wrap: %d distinct orders, %d error answers, %d invalid; want %d, 0, 0", len(s.seen), res[0].Status, s.invalid, n)
	}
	s.mu.Unlock()

	// paced: 2 threads at 20 requests a second each send about 40 in the
	// second, where unpaced they send as fast as the server answers.
	wr.threadRate = 20
	res, err = wr.run(ctx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	if got := res[0].Requests; got < 10 || got > 60 {
		t.Errorf("paced at 2×20/s for 1s: %d requests, want about 40", got)
	}
}

// TestWriteCorpus checks the corpus files: shards of distinct, verifiable
// orders, ids disjoint between sets of one run.
func TestWriteCorpus(t *testing.T) {
	dir := t.TempDir()
	key, _, err := providertest.GenerateKey(providertest.KeyECDSA)
	if err != nil {
		t.Fatal(err)
	}
	v, err := provider.NewVerifier(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for set, base := range []int{0, 50} {
		cs, err := writeCorpus(t.Context(), key, filepath.Join(dir, "s"+string(rune('a'+set))), 9, base, 50, 3)
		if err != nil {
			t.Fatal(err)
		}
		lines := 0
		for shard := range cs.shards {
			b, err := os.ReadFile(filepath.Join(dir, "s"+string(rune('a'+set))+"-"+string(rune('0'+shard))+".txt"))
			if err != nil {
				t.Fatal(err)
			}
			for line := range bytes.Lines(b) {
				sig, body, ok := bytes.Cut(bytes.TrimSuffix(line, []byte("\n")), []byte("\t"))
				if !ok {
					t.Fatalf("line without a tab: %q", line)
				}
				if err := v.Verify(body, string(sig)); err != nil {
					t.Fatalf("shard %d: %v", shard, err)
				}
				o, err := provider.DecodeOrder(body)
				if err != nil {
					t.Fatalf("shard %d: %v", shard, err)
				}
				if ids[o.ID] || o.Status != provider.StatusCompleted {
					t.Errorf("order %s: repeated or not completed (%s)", o.ID, o.Status)
				}
				ids[o.ID] = true
				lines++
			}
		}
		if lines != 50 {
			t.Errorf("set %d: %d lines, want 50", set, lines)
		}
	}
}

func TestSameCorpus(t *testing.T) {
	dir := t.TempDir()
	m := corpusMeta{Rounds: 2, PerRound: 100, Shards: 2, ProfileN: 50, RateN: 20}
	if sameCorpus(dir, m) {
		t.Fatal("an empty directory holds a corpus")
	}
	if err := writeCorpusMeta(dir, m); err != nil {
		t.Fatal(err)
	}
	if sameCorpus(dir, m) {
		t.Error("a corpus without its key counts")
	}
	if err := os.WriteFile(filepath.Join(dir, "bench-key.pem"), []byte("k"), 0o600); err != nil {
		t.Fatal(err)
	}
	if !sameCorpus(dir, m) {
		t.Error("the same shape does not count")
	}
	noProfile := m
	noProfile.ProfileN, noProfile.RateN = 0, 0
	if !sameCorpus(dir, noProfile) {
		t.Error("a run without profile and paced rounds cannot use a corpus that has them")
	}
	other := m
	other.PerRound = 101
	if sameCorpus(dir, other) {
		t.Error("another -n counts as the same corpus")
	}
}
