//go:build consumers

// Package consumers runs the example consumers (examples/consumers/go and
// examples/consumers/node) against "orderd sandbox" as a user would: each
// consumer crashes once midway (after the work of an event, before its
// acknowledgement) and is started again, and the test checks from what
// they wrote and printed that every event of the stream was handled
// exactly once, in order per order, and that every event matches the
// AsyncAPI document. Each consumer validates every event's data against
// the schema its dataschema names, as docs/events.md shows (ajv in Node,
// santhosh-tekuri/jsonschema in Go), and stops at an event that does not
// match. Run it with "make consumers-check" (it needs node and
// npm, and installs the Node consumer's dependencies with npm ci).
package consumers_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"orderd/api"
	"orderd/test/support/eventschema"
	"orderd/test/support/syncbuf"
	"orderd/test/support/testbin"
)

const (
	// crashAfter is the event after whose work each consumer crashes.
	crashAfter = 8
	// minEvents is how many events the stream must hold before the
	// consumers are stopped; all of them must have been handled.
	minEvents = 40
)

// consumer is one example consumer: how to start it, and what it left.
type consumer struct {
	name   string
	dir    string
	ledger string
	argv   func(natsURL string, crash bool) []string
}

func TestConsumers_ExactlyOnceAcrossRestart(t *testing.T) {
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm is not installed (make consumers-check installs node and npm)")
	}
	root, err := testbin.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	orderd, goConsumer := filepath.Join(bin, "orderd"), filepath.Join(bin, "consumer-go")
	if err := testbin.Orderd(orderd); err != nil {
		t.Fatal(err)
	}
	if err := testbin.Build(goConsumer, "orderd/examples/consumers/go"); err != nil {
		t.Fatal(err)
	}
	nodeDir := filepath.Join(root, "examples", "consumers", "node")
	npm := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts")
	npm.Dir = nodeDir
	if out, err := npm.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", nodeDir, err, out)
	}

	work := t.TempDir()
	natsURL := startSandbox(t, orderd, work, "-every", "200ms").nats
	consumers := []*consumer{
		{name: "go", dir: work, ledger: filepath.Join(work, "ledger-go.txt"),
			argv: func(url string, crash bool) []string {
				a := []string{goConsumer, "-server", url, "-durable", "test-go", "-ledger", filepath.Join(work, "ledger-go.txt"), "-ack-wait", "2s"}
				if crash {
					a = append(a, "-crash-after", strconv.Itoa(crashAfter))
				}
				return a
			}},
		{name: "node", dir: nodeDir, ledger: filepath.Join(work, "ledger-node.txt"),
			argv: func(url string, crash bool) []string {
				a := []string{"node", "consumer.mjs", "--server", url, "--durable", "test-node", "--ledger", filepath.Join(work, "ledger-node.txt"), "--ack-wait", "2"}
				if crash {
					a = append(a, "--crash-after", strconv.Itoa(crashAfter))
				}
				return a
			}},
	}

	// First runs: each crashes after the work of its crashAfter-th event,
	// before acknowledging it.
	var first []*proc
	for _, c := range consumers {
		first = append(first, startProc(t, c.dir, c.name+"-1", c.argv(natsURL, true)))
	}
	for _, p := range first {
		if code := p.wait(t, 60*time.Second); code != 3 {
			t.Fatalf("%s exited %d, want 3 (the crash -crash-after asks for); output:\n%s", p.name, code, p.output())
		}
	}

	// Second runs, until the stream holds minEvents and each has handled
	// every one of them.
	var second []*proc
	for _, c := range consumers {
		second = append(second, startProc(t, c.dir, c.name+"-2", c.argv(natsURL, false)))
	}
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream := waitStream(t, js, minEvents)
	for i, c := range consumers {
		waitHandled(t, c, second[i], stream)
	}
	for _, p := range second {
		p.stop(t)
	}

	v, err := eventschema.New(api.AsyncAPI(), eventschema.Published)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range stream {
		if _, err := v.Check(m.Data); err != nil {
			t.Errorf("stream seq %d: %v", m.Sequence, err)
		}
	}
	for i, c := range consumers {
		checkConsumer(t, c, first[i].output()+second[i].output(), stream)
	}

	// An event whose data breaks its schema: each consumer stops at it,
	// says why, and leaves it unacknowledged.
	checkRefusesInvalid(t, js, consumers, natsURL, stream)
}

// checkRefusesInvalid publishes an order event whose data does not match
// the schema its dataschema names, and expects each consumer to stop at it
// with exit code 1, naming it, without writing it to its ledger.
func checkRefusesInvalid(t *testing.T, js jetstream.JetStream, consumers []*consumer, natsURL string, stream []*jetstream.RawStreamMsg) {
	t.Helper()
	m := dataschemaRE.FindSubmatch(stream[0].Data)
	if m == nil {
		t.Fatalf("first event has no dataschema: %s", stream[0].Data)
	}
	orderSchema := regexp.MustCompile(`#.*$`).ReplaceAllString(string(m[1]), "#/components/schemas/Order")
	const badID = "0000000000000000000000000000000000000000000000000000000000000bad"
	bad := `{"specversion":"1.0","id":"` + badID + `","source":"orderd","type":"order.completed",` +
		`"subject":"bad-1","time":"2026-11-28T00:00:00Z","datacontenttype":"application/json",` +
		`"dataschema":"` + orderSchema + `","merchantorderid":"bad-1","learnedvia":"webhook",` +
		`"data":{"id":"bad-1","status":42}}`
	ack, err := js.Publish(t.Context(), "orderd.orders.payin.completed", []byte(bad), jetstream.WithMsgID(badID))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range consumers {
		p := startProc(t, c.dir, c.name+"-3", c.argv(natsURL, false))
		if code := p.wait(t, 60*time.Second); code != 1 {
			t.Errorf("%s consumer exited %d on an event that breaks its schema, want 1; output:\n%s", c.name, code, p.output())
			continue
		}
		if want := "invalid seq=" + strconv.FormatUint(ack.Sequence, 10) + " id=" + badID; !strings.Contains(p.output(), want) {
			t.Errorf("%s consumer did not say %q; output:\n%s", c.name, want, p.output())
		}
		if n := readLedger(t, c.ledger).count[badID]; n != 0 {
			t.Errorf("%s consumer handled the invalid event (%d times in its ledger)", c.name, n)
		}
	}
}

var dataschemaRE = regexp.MustCompile(`"dataschema":"([^"]+)"`)

// sandboxURLs are where a sandbox's banner says its NATS server and admin
// API listen.
type sandboxURLs struct{ nats, admin string }

// startSandbox starts "orderd sandbox" in dir with the given flags and
// returns where it listens.
func startSandbox(t *testing.T, orderd, dir string, flags ...string) sandboxURLs {
	t.Helper()
	cmd := exec.Command(orderd, append([]string{"sandbox", "-dir", filepath.Join(dir, "sandbox")}, flags...)...)
	cmd.Dir = dir
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	urls := make(chan sandboxURLs, 1)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		natsRE := regexp.MustCompile(`nats://[0-9.]+:[0-9]+`)
		adminRE := regexp.MustCompile(`admin API +(http://\S+)`)
		var u sandboxURLs
		for sc.Scan() {
			if m := adminRE.FindStringSubmatch(sc.Text()); m != nil && u.admin == "" {
				u.admin = m[1]
			}
			if m := natsRE.FindString(sc.Text()); m != "" && u.nats == "" {
				u.nats = m
				select {
				case urls <- u:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		exited := make(chan error, 1)
		go func() { <-done; exited <- cmd.Wait() }()
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("sandbox did not stop within 20s of SIGINT; stderr:\n%s", stderr)
		}
	})
	select {
	case u := <-urls:
		if u.admin == "" {
			t.Fatalf("the sandbox's banner names no admin API before NATS; stderr:\n%s", stderr)
		}
		return u
	case <-time.After(30 * time.Second):
		t.Fatalf("sandbox printed no nats:// URL within 30s; stderr:\n%s", stderr)
		return sandboxURLs{}
	}
}

// waitStream waits (at most 60s) until the ORDERD stream holds at least n
// messages and returns them in order.
func waitStream(t *testing.T, js jetstream.JetStream, n uint64) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	for {
		s, err := js.Stream(ctx, "ORDERD")
		if err == nil {
			var info *jetstream.StreamInfo
			if info, err = s.Info(ctx); err == nil && info.State.LastSeq >= n {
				var msgs []*jetstream.RawStreamMsg
				for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
					m, err := s.GetMsg(ctx, seq)
					if errors.Is(err, jetstream.ErrMsgNotFound) {
						continue
					}
					if err != nil {
						t.Fatalf("stream seq %d: %v", seq, err)
					}
					msgs = append(msgs, m)
				}
				return msgs
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the stream did not reach %d events within 60s (last error: %v)", n, err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// waitHandled waits (at most 60s) until c's ledger holds every event of
// stream.
func waitHandled(t *testing.T, c *consumer, p *proc, stream []*jetstream.RawStreamMsg) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ledger := readLedger(t, c.ledger)
		missing := 0
		for _, m := range stream {
			if ledger.count[eventID(t, m.Data)] == 0 {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s consumer: %d of %d events not handled within 60s; output:\n%s", c.name, missing, len(stream), p.output())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

var lineRE = regexp.MustCompile(`^(handled|duplicate) seq=(\d+) id=([0-9a-f]+) type=(\S+)(?: subject=(\S*))?`)

// checkConsumer checks what c wrote and printed across both runs: every
// event of stream handled exactly once (ledger and output), the crashed
// event delivered again after the restart and recognised as a duplicate,
// and the events of each order handled in stream order.
func checkConsumer(t *testing.T, c *consumer, out string, stream []*jetstream.RawStreamMsg) {
	t.Helper()
	ledger := readLedger(t, c.ledger)
	handled := map[string]int{}
	duplicates := 0
	lastSeq := map[string]uint64{} // per order (the CloudEvents subject)
	for _, line := range strings.Split(out, "\n") {
		m := lineRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		seq, _ := strconv.ParseUint(m[2], 10, 64)
		if m[1] == "duplicate" {
			duplicates++
			continue
		}
		handled[m[3]]++
		if subj := m[5]; subj != "" {
			if seq <= lastSeq[subj] {
				t.Errorf("%s consumer: order %s: seq %d handled after seq %d", c.name, subj, seq, lastSeq[subj])
			}
			lastSeq[subj] = seq
		}
	}
	for _, m := range stream {
		id := eventID(t, m.Data)
		if n := ledger.count[id]; n != 1 {
			t.Errorf("%s consumer: ledger has event %s (seq %d) %d times, want once", c.name, id, m.Sequence, n)
		}
		if n := handled[id]; n != 1 {
			t.Errorf("%s consumer: printed \"handled\" for event %s (seq %d) %d times, want once", c.name, id, m.Sequence, n)
		}
	}
	for id, n := range ledger.count {
		if n > 1 {
			t.Errorf("%s consumer: ledger has event %s %d times", c.name, id, n)
		}
	}
	if duplicates == 0 {
		t.Errorf("%s consumer: no event came again after the crash before its acknowledgement; output:\n%s", c.name, out)
	}
	t.Logf("%s consumer: %d events handled once each, %d redeliveries recognised", c.name, len(stream), duplicates)
}

type ledgerFile struct{ count map[string]int }

func readLedger(t *testing.T, path string) ledgerFile {
	t.Helper()
	l := ledgerFile{count: map[string]int{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return l
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if id, _, _ := strings.Cut(line, " "); id != "" {
			l.count[id]++
		}
	}
	return l
}

var idRE = regexp.MustCompile(`"id":"([0-9a-f]+)"`)

// eventID is the CloudEvents id of an event (the first "id" attribute:
// orderd writes the envelope's attributes before data).
func eventID(t *testing.T, data []byte) string {
	t.Helper()
	m := idRE.FindSubmatch(data)
	if m == nil {
		t.Fatalf("event without an id: %s", data)
	}
	return string(m[1])
}

// proc is a consumer process; its output goes to a buffer.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *syncbuf.Buffer
	done chan struct{}
	err  error
}

func startProc(t *testing.T, dir, name string, argv []string) *proc {
	t.Helper()
	p := &proc{name: name, out: &syncbuf.Buffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Dir = dir
	p.cmd.Stdout = p.out
	p.cmd.Stderr = p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(t *testing.T, limit time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(limit):
		t.Fatalf("%s did not exit within %s; output:\n%s", p.name, limit, p.output())
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		t.Fatalf("%s: %v", p.name, p.err)
	}
	return 0
}

// stop asks the process to stop (SIGTERM) and expects a clean exit.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("signal %s: %v", p.name, err)
	}
	if code := p.wait(t, 15*time.Second); code != 0 {
		t.Errorf("%s exited %d after SIGTERM, want 0; output:\n%s", p.name, code, p.output())
	}
}

func (p *proc) output() string { return p.out.String() }
