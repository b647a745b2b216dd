package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

// A pattern round appends log entries from two connections, follows the
// log on both, publishes an event for every acked webhook in atomic
// batches, reports the NATS server's CPU per webhook, and leaves no stream
// behind.
func TestPatternRound(t *testing.T) {
	srv := startNATS(t)
	var out bytes.Buffer
	b := &bench{out: &out, o: options{
		rawNATS: []string{srv.ClientURL()}, rawReplicas: 1, rawSize: 1200, conns: 8,
		pattern: true, patternGroup: 6, patternOpBytes: 510, patternBatch: 26,
		duration: 500 * time.Millisecond, timeout: 5 * time.Second, rounds: 1, threads: 2,
		natsPIDs: []int{os.Getpid()},
	}}
	pr, err := b.patternRound(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if pr.target != "pattern" || pr.answers == 0 || pr.rate <= 0 || pr.p50 <= 0 || pr.p99 < pr.p50 || pr.non2xx != 0 {
		t.Errorf("pattern round = %+v", pr)
	}
	// Every webhook of every acked entry has its event: the relay sends
	// what is left of a batch at the end.
	if pr.answers%6 != 0 {
		t.Errorf("%d events published for entries of 6 webhooks each", pr.answers)
	}
	if pr.natsCPUPer1k <= 0 {
		t.Errorf("NATS CPU per 1,000 webhooks = %v, want it measured", pr.natsCPUPer1k)
	}

	// Two connections, as two instances have; the first carried the
	// events besides its entries, and each was delivered the log. (A
	// connection the server dropped as a slow consumer on a busy host
	// comes back under its name: the names are counted.)
	carried, delivered := map[string]int64{}, map[string]int64{}
	for _, c := range connsNamed(t, srv, "orderd-bench pattern", 2) {
		carried[c.Name] += c.InMsgs
		delivered[c.Name] += c.OutMsgs
	}
	if len(carried) != 2 {
		t.Fatalf("the pattern round's connections: %v, want 2 names", carried)
	}
	var total int64
	for name, n := range carried {
		total += n
		if delivered[name] == 0 {
			t.Errorf("connection %q was delivered nothing: it follows the log", name)
		}
	}
	if entries := pr.answers / 6; total < pr.answers+entries {
		t.Errorf("the connections carried %d messages, fewer than %d events and %d entries", total, pr.answers, entries)
	}

	rr, err := b.rawRound(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	b.summary([]roundResult{rr, pr}, -1, -1)
	t.Logf("%s", out.String())
	if !strings.Contains(out.String(), "result target=pattern rate=") || !strings.Contains(out.String(), " pattern_multiple=") {
		t.Errorf("summary without the pattern's lines:\n%s", out.String())
	}
	noStreamsLeft(t, srv)
}
