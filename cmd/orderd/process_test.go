package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"orderd/provider/providertest"
	"orderd/store"
)

var (
	buildOnce sync.Once
	binDir    string // removed by TestMain once the tests are done
	binPath   string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// orderdBinary builds the real orderd binary once per test run.
func orderdBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "orderd-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binDir = dir
		binPath = filepath.Join(dir, "orderd")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// startProcess prepares the binary with args; its stderr is collected in
// the buffer returned.
func startProcess(t *testing.T, dir string, args ...string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(orderdBinary(t), args...)
	cmd.Dir = dir
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	return cmd, stderr
}

func TestSandbox_Process(t *testing.T) {
	dir := t.TempDir()
	cmd, stderr := startProcess(t, dir, "sandbox", "-every", "300ms")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	natsURL := make(chan string, 1)
	go func() {
		// Keep reading so the sandbox never blocks on a full pipe.
		sc := bufio.NewScanner(stdout)
		urls := regexp.MustCompile(`nats://[0-9.]+:[0-9]+`)
		found := false
		for sc.Scan() {
			if u := urls.FindString(sc.Text()); u != "" && !found {
				found = true
				natsURL <- u
			}
		}
		exited <- cmd.Wait()
	}()
	defer func() {
		_ = cmd.Process.Kill()
	}()

	var url string
	select {
	case url = <-natsURL:
	case <-time.After(30 * time.Second):
		t.Fatalf("sandbox printed no nats:// URL; stderr:\n%s", stderr)
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.SubscribeSync("orderd.orders.>")
	if err != nil {
		t.Fatal(err)
	}
	msg, err := sub.NextMsg(20 * time.Second)
	if err != nil {
		t.Fatalf("no event on %s within 20s: %v", url, err)
	}
	if msg.Header.Get("Nats-Msg-Id") == "" {
		t.Errorf("event on %s has no Nats-Msg-Id", msg.Subject)
	}
	if _, err := os.Stat(filepath.Join(dir, sandboxDir, "orderd.db")); err != nil {
		t.Errorf("sandbox database: %v", err)
	}

	// Ctrl-C stops it cleanly.
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("sandbox exited with %v after SIGINT; stderr:\n%s", err, stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("sandbox did not stop within 30s of SIGINT")
	}
}

// TestRun_CrashLosesNoAckedWebhook kills the real daemon with SIGKILL while
// a few hundred concurrent webhooks are in flight, and proves that every
// delivery that was answered 200 is in the database afterwards.
func TestRun_CrashLosesNoAckedWebhook(t *testing.T) {
	de := newDaemonEnv(t, "")
	dbPath := filepath.Join(filepath.Dir(de.cfgPath), "orderd.db")
	cmd, stderr := startProcess(t, filepath.Dir(de.cfgPath), "run", "-config", de.cfgPath)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() }()
	done := make(chan error, 1)
	addrs := waitStarted(t, stderr, done)
	waitReady(t, addrs.Admin, done)

	const total = 400
	var (
		mu     sync.Mutex
		ok     []string
		sent   atomic.Int64
		client = &http.Client{Timeout: 5 * time.Second}
	)
	signer := de.fake.Signer()
	var wg sync.WaitGroup
	work := make(chan int)
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				id := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
				body := []byte(fmt.Sprintf(`{"id":%q,"merchantOrderId":"crash-%d","type":"payin","createdAt":"2026-11-20T10:00:00Z","status":"completed","rejectReason":null,"merchantSourceWallet":null,"merchantTargetWallet":{"amount":"%d.50","currency":"brl"},"transactions":[]}`, id, i, i+1))
				sig, err := providertest.Sign(signer, body)
				if err != nil {
					t.Error(err)
					return
				}
				req, _ := http.NewRequest(http.MethodPost, "http://"+addrs.Webhooks+"/webhooks/orders", bytes.NewReader(body))
				req.Header.Set("Signature", sig)
				req.Header.Set("Content-Type", "application/json")
				sent.Add(1)
				resp, err := client.Do(req)
				if err != nil {
					continue
				}
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					mu.Lock()
					ok = append(ok, id)
					mu.Unlock()
				}
			}
		}()
	}
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		// Kill mid-stream: after some deliveries were acked, not all.
		for {
			mu.Lock()
			n := len(ok)
			mu.Unlock()
			if n >= total/4 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		_ = cmd.Process.Signal(syscall.SIGKILL)
	}()
	for i := 0; i < total; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	<-killed
	_, _ = cmd.Process.Wait()
	if len(ok) == 0 || len(ok) == total {
		t.Logf("acked %d of %d (kill timing did not land mid-stream)", len(ok), total)
	}

	st, err := store.Open(context.Background(), dbPath, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("reopen after SIGKILL: %v\n%s", err, stderr)
	}
	defer st.Close(context.Background())
	if err := st.IntegrityCheck(t.Context()); err != nil {
		t.Fatalf("integrity_check: %v", err)
	}
	missing := 0
	for _, id := range ok {
		var n int
		if err := st.DB().QueryRowContext(t.Context(), `SELECT count(*) FROM orders WHERE provider_id = ?`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d acked webhooks are missing after SIGKILL", missing, len(ok))
	}
	t.Logf("sent %d, acked %d, all acked present after SIGKILL", sent.Load(), len(ok))

	// The daemon starts again on the same files.
	cmd2, stderr2 := startProcess(t, filepath.Dir(de.cfgPath), "run", "-config", de.cfgPath)
	if err := cmd2.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd2.Process.Kill(); _, _ = cmd2.Process.Wait() }()
	waitReady(t, waitStarted(t, stderr2, done).Admin, done)
	_ = cmd2.Process.Signal(os.Interrupt)
	if err := cmd2.Wait(); err != nil {
		t.Fatalf("restarted daemon exited with %v:\n%s", err, stderr2)
	}
}
