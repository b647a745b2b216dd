package main

import (
	"bytes"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// startNATS runs a JetStream nats-server in this process on a free
// loopback port, its files under a test directory.
func startNATS(t *testing.T) *server.Server {
	t.Helper()
	srv, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(srv.Shutdown)
	return srv
}

// A raw round publishes to a scratch stream over one connection shared by
// its -c publishers, waiting for each PubAck, reports what it measured,
// the NATS server's CPU among it, and leaves no stream behind.
func TestRawRound(t *testing.T) {
	srv := startNATS(t)
	b := &bench{out: io.Discard, o: options{
		rawNATS: []string{srv.ClientURL()}, rawReplicas: 1, rawSize: 1200, conns: 8,
		duration: 500 * time.Millisecond, timeout: 5 * time.Second,
		// The server runs in this process.
		natsPIDs: []int{os.Getpid()},
	}}
	rr, err := b.rawRound(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if rr.target != "raw" || rr.answers == 0 || rr.rate <= 0 || rr.p50 <= 0 || rr.p99 < rr.p50 || rr.non2xx != 0 {
		t.Errorf("raw round = %+v", rr)
	}
	if rr.natsCPUPer1k <= 0 {
		t.Errorf("NATS CPU per 1,000 publishes = %v, want it measured", rr.natsCPUPer1k)
	}
	// The publishers wait for their acks at the same time: publishes in
	// flight (the rate times the time one waits, Little's law; the median
	// for the mean) about 8, where publishers taking turns would have 1.
	if inFlight := rr.rate * rr.p50.Seconds(); inFlight < 2 {
		t.Errorf("%.0f publishes/s with a median of %s for its PubAck: %.1f in flight, want most of the 8 publishers'", rr.rate, rr.p50, inFlight)
	}

	// Every connection the round opened, closed now: one, which carried
	// every publish (and the stream's creation and deletion besides).
	raw := connsNamed(t, srv, "orderd-bench raw", 1)
	if len(raw) != 1 {
		t.Fatalf("the raw round opened %d connections, want 1 shared by its 8 publishers", len(raw))
	}
	if raw[0].InMsgs < rr.answers {
		t.Errorf("the connection carried %d messages, fewer than the %d acked publishes", raw[0].InMsgs, rr.answers)
	}
	noStreamsLeft(t, srv)
}

// noStreamsLeft fails t for every stream srv still has.
func noStreamsLeft(t *testing.T, srv *server.Server) {
	t.Helper()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for name := range js.StreamNames(t.Context()).Name() {
		t.Errorf("stream %s left behind", name)
	}
}

// connsNamed is every connection srv has had, open or closed, whose name
// starts with prefix, once there are want of them (a connection closed a
// moment ago may not be listed yet) or after five seconds.
func connsNamed(t *testing.T, srv *server.Server, prefix string, want int) []*server.ConnInfo {
	t.Helper()
	var named []*server.ConnInfo
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		cz, err := srv.Connz(&server.ConnzOptions{State: server.ConnAll})
		if err != nil {
			t.Fatal(err)
		}
		named = named[:0]
		for _, c := range cz.Conns {
			if strings.HasPrefix(c.Name, prefix) {
				named = append(named, c)
			}
		}
		if len(named) >= want || time.Now().After(deadline) {
			return named
		}
	}
}

// The summary prints the CPU of every process per acked webhook over the
// daemon rounds beside the NATS servers' per raw publish over the raw
// rounds, measured here on a NATS server, and their multiple.
func TestSummary_cpuMultiple(t *testing.T) {
	srv := startNATS(t)
	var out bytes.Buffer
	b := &bench{out: &out, o: options{
		rawNATS: []string{srv.ClientURL()}, rawReplicas: 1, rawSize: 1200, conns: 8,
		duration: 300 * time.Millisecond, timeout: 5 * time.Second, rounds: 2, threads: 2,
		natsPIDs: []int{os.Getpid()},
	}}
	var results []roundResult
	for r := range 2 {
		rr, err := b.rawRound(t.Context(), r+1)
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, rr)
	}
	raw := (results[0].natsCPUPer1k*float64(results[0].answers) + results[1].natsCPUPer1k*float64(results[1].answers)) /
		float64(results[0].answers+results[1].answers)
	if raw <= 0 {
		t.Fatalf("raw rounds = %+v, want their NATS CPU measured", results)
	}
	// Two daemon rounds: 1,000 acked at 1.0 + 1.0 ms, 3,000 at 0.6 + 0.6
	// ms (and 500 refused, which count for nothing): 1.4 ms a webhook.
	results = append(results,
		roundResult{target: "orderd", round: 1, rate: 500, answers: 1000, cpuPer1k: 1.0, natsCPUPer1k: 1.0},
		roundResult{target: "orderd", round: 2, rate: 900, answers: 3500, non2xx: 500, cpuPer1k: 0.6, natsCPUPer1k: 0.6},
		// Paced: not a measured round of the multiple.
		roundResult{target: "paced", answers: 1000, cpuPer1k: 9, natsCPUPer1k: 9},
	)
	b.summary(results, -1, -1)
	want := "result cluster_cpu_ms_per_webhook=1.400 raw_nats_cpu_ms_per_publish=" + strconv.FormatFloat(raw, 'f', 3, 64) +
		" cpu_multiple=" + strconv.FormatFloat(1.4/raw, 'f', 2, 64) + "\n"
	if !strings.Contains(out.String(), want) {
		t.Errorf("summary:\n%s\nwant the line %q", out.String(), want)
	}
	if !strings.Contains(out.String(), "result raw_ratio=") {
		t.Errorf("summary:\n%s\nwant the raw ratio", out.String())
	}

	// Without the NATS servers' CPU of the daemon rounds there is no
	// figure for every process: no line rather than a wrong one.
	out.Reset()
	for i := range results {
		if results[i].target == "orderd" {
			results[i].natsCPUPer1k = 0
		}
	}
	b.summary(results, -1, -1)
	if strings.Contains(out.String(), "cpu_multiple") {
		t.Errorf("summary without the NATS CPU of the daemon rounds:\n%s", out.String())
	}
}
