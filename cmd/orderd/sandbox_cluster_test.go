package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"orderd/test/support/testaddr"
)

// TestSandbox_ClusterProcess runs the real binary's "sandbox -cluster",
// kills the leading instance's process with SIGKILL as the banner says,
// and sees the other instance take the lease and new demo orders still
// complete on the events stream; the killed instance comes back as a
// follower that has applied the log, and Ctrl-C leaves no process behind.
func TestSandbox_ClusterProcess(t *testing.T) {
	dir := t.TempDir()
	cmd, stderr := startProcess(t, dir, "sandbox", "-cluster", "-every", "300ms")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := &syncBuffer{}
	exited := make(chan error, 1)
	go func() {
		_, _ = io.Copy(out, stdout)
		exited <- cmd.Wait()
	}()
	stopped := false
	t.Cleanup(func() {
		// The instances die with the sandbox (they are killed when it
		// is), so stopping it by its PID stops everything.
		if !stopped {
			_ = cmd.Process.Kill()
			select {
			case <-exited:
			case <-time.After(30 * time.Second):
				t.Error("the sandbox did not exit within 30s of SIGKILL")
			}
		}
	})
	// waitOut waits until the sandbox's stdout matches re, for at most d.
	waitOut := func(re *regexp.Regexp, d time.Duration) []string {
		t.Helper()
		for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if m := re.FindStringSubmatch(out.String()); m != nil {
				return m
			}
			select {
			case err := <-exited:
				stopped = true
				t.Fatalf("the sandbox exited (%v); stdout:\n%s\nstderr:\n%s", err, out, stderr)
			default:
			}
		}
		t.Fatalf("the sandbox printed nothing matching %q within %s; stdout:\n%s\nstderr:\n%s", re, d, out, stderr)
		return nil
	}

	waitOut(regexp.MustCompile(`(?m)^See it:`), 3*time.Minute)
	natsURL := waitOut(regexp.MustCompile(`NATS cluster\s+(\S+)`), time.Second)[1]
	type instance struct {
		name, admin string
		pid         int
	}
	var insts []instance
	for _, m := range regexp.MustCompile(`instance (\w+)\s+pid (\d+)\s+admin http://(\S+)`).FindAllStringSubmatch(out.String(), -1) {
		pid, _ := strconv.Atoi(m[2])
		insts = append(insts, instance{name: m[1], pid: pid, admin: m[3]})
	}
	if len(insts) != 2 {
		t.Fatalf("the banner names %d instances, want 2:\n%s", len(insts), out)
	}
	pids := []int{insts[0].pid, insts[1].pid}

	var leader, follower instance
	switch a, b := clusterStatus(t, insts[0].admin), clusterStatus(t, insts[1].admin); {
	case a.Leading && !b.Leading && b.Leader == insts[0].name:
		leader, follower = insts[0], insts[1]
	case b.Leading && !a.Leading && a.Leader == insts[1].name:
		leader, follower = insts[1], insts[0]
	default:
		t.Fatalf("GET /v1/cluster: %s says %+v, %s says %+v; want one agreed leader", insts[0].name, a, insts[1].name, b)
	}
	for _, want := range []string{
		fmt.Sprintf("kill -9 %d", leader.pid),
		fmt.Sprintf("sandbox         pid %d", cmd.Process.Pid),
		fmt.Sprintf("again %s\nafter it died", sandboxRestartAfter),
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the banner does not say %q:\n%s", want, out)
		}
	}

	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.SubscribeSync("orderd.orders.*.completed")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	killed := time.Now()
	if err := syscall.Kill(leader.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for !clusterStatus(t, follower.admin).Leading {
		if time.Since(killed) > 30*time.Second {
			t.Fatalf("%s did not take the lease within 30s of %s's SIGKILL; stdout:\n%s", follower.name, leader.name, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%s leads %s after %s's SIGKILL", follower.name, time.Since(killed).Round(time.Millisecond), leader.name)
	waitOut(regexp.MustCompile(fmt.Sprintf(`instance %s \(pid %d\) died: signal: killed`, leader.name, leader.pid)), 10*time.Second)
	waitOut(regexp.MustCompile(fmt.Sprintf(`instance %s holds the lease`, follower.name)), 10*time.Second)

	// An order created after the kill (through the gateway of the
	// instance left, its webhooks through the proxy) completes, and the
	// new leader's relay publishes it.
	for deadline := time.Now().Add(60 * time.Second); ; {
		msg, err := sub.NextMsg(time.Until(deadline))
		if err != nil {
			t.Fatalf("no order created after the kill completed on the events stream within 60s: %v", err)
		}
		var ev struct {
			Type string
			Data struct{ MerchantOrderID, CreatedAt string }
		}
		if err := json.Unmarshal(msg.Data, &ev); err != nil {
			t.Fatalf("event on %s: %v", msg.Subject, err)
		}
		created, err := time.Parse(time.RFC3339Nano, ev.Data.CreatedAt)
		if err != nil {
			t.Fatalf("event on %s: createdAt: %v", msg.Subject, err)
		}
		if ev.Type == "order.completed" && created.After(killed) {
			t.Logf("%s, created %s after the kill, completed", ev.Data.MerchantOrderID, created.Sub(killed).Round(time.Millisecond))
			break
		}
	}

	// The restart is announced with the same delay as the banner's.
	waitOut(regexp.MustCompile(fmt.Sprintf(`instance %s starts again in \d+s \(%s after it died\)`, leader.name, sandboxRestartAfter)), time.Minute)
	// The killed instance comes back as a follower and applies the log
	// it missed.
	m := waitOut(regexp.MustCompile(fmt.Sprintf(`instance %s is back: pid (\d+), admin http://([^\s;]+)`, leader.name)), 2*time.Minute)
	back, _ := strconv.Atoi(m[1])
	pids = append(pids, back)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		st := clusterStatus(t, m[2])
		if st.Leader == follower.name && !st.Leading && st.AppliedSeq > 0 && st.Lag == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s after its restart: %+v; want a follower of %s that has applied the log", leader.name, st, follower.name)
		}
	}

	// Ctrl-C stops everything the sandbox started.
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Fatalf("the sandbox exited with %v after SIGINT; stderr:\n%s", err, stderr)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the sandbox did not stop within 60s of SIGINT; stdout:\n%s", out)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("instance pid %d still exists after the sandbox stopped (kill -0: %v)", pid, err)
		}
	}
}

// TestRoundRobin sends requests through the sandbox's round-robin
// transport: an instance that refuses connections is skipped, with the
// request's body intact; one that answers is never skipped, even with a
// 503; none answering is an error saying so.
func TestRoundRobin(t *testing.T) {
	refusing := testaddr.Loopback(t)
	echo := func(status int, hits *atomic.Int64) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			b, _ := io.ReadAll(r.Body)
			w.WriteHeader(status)
			_, _ = w.Write(b)
		}))
		t.Cleanup(s.Close)
		return s
	}
	post := func(rr *roundRobin, body string) (int, string, error) {
		t.Helper()
		resp, err := (&http.Client{Transport: rr, Timeout: 10 * time.Second}).Post("http://instances/webhooks/orders", "application/json", strings.NewReader(body))
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}

	t.Run("skips a refusing instance", func(t *testing.T) {
		var hits atomic.Int64
		live := echo(http.StatusOK, &hits)
		rr := newRoundRobin(func() []string { return []string{refusing, live.Listener.Addr().String()} })
		for i := range 4 {
			body := fmt.Sprintf(`{"n":%d}`, i)
			code, got, err := post(rr, body)
			if err != nil || code != http.StatusOK || got != body {
				t.Fatalf("request %d: %d %q %v; want 200 and the body %q", i, code, got, err, body)
			}
		}
		if hits.Load() != 4 {
			t.Errorf("the live instance took %d requests, want 4", hits.Load())
		}
	})
	t.Run("an answer is final", func(t *testing.T) {
		var okHits, busyHits atomic.Int64
		ok, busy := echo(http.StatusOK, &okHits), echo(http.StatusServiceUnavailable, &busyHits)
		rr := newRoundRobin(func() []string { return []string{ok.Listener.Addr().String(), busy.Listener.Addr().String()} })
		codes := map[int]int{}
		for range 4 {
			code, _, err := post(rr, `{}`)
			if err != nil {
				t.Fatal(err)
			}
			codes[code]++
		}
		if codes[http.StatusOK] != 2 || codes[http.StatusServiceUnavailable] != 2 || okHits.Load() != 2 || busyHits.Load() != 2 {
			t.Errorf("answers %v, hits ok %d busy %d; want each instance twice, each answer passed on", codes, okHits.Load(), busyHits.Load())
		}
	})
	t.Run("every instance refusing", func(t *testing.T) {
		rr := newRoundRobin(func() []string { return []string{refusing} })
		if _, _, err := post(rr, `{}`); err == nil || !strings.Contains(err.Error(), "every instance refuses connections") {
			t.Errorf("error %v; want one saying every instance refuses connections", err)
		}
	})
}
