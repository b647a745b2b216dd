package store_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"orderd/store"
)

// crashChildEnv names the database a re-executed test binary applies to
// until it is killed.
const crashChildEnv = "ORDERD_STORE_CRASH_CHILD_DB"

// TestStore_Apply_crash kills a process that is applying orders with
// SIGKILL, twice, and checks that every Apply that returned nil before the
// kill survived, and that the database is intact.
func TestStore_Apply_crash(t *testing.T) {
	if path := os.Getenv(crashChildEnv); path != "" {
		crashChild(path)
		return
	}
	path := filepath.Join(t.TempDir(), "orderd.db")
	var acked []string
	for round := range 2 {
		acked = append(acked, crashRound(t, path, 150+round*100)...)
	}
	if len(acked) < 250 {
		t.Fatalf("only %d acknowledged applies before the kills", len(acked))
	}
	s, _ := openStoreAt(t, path, store.Options{})
	if err := s.IntegrityCheck(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, mid := range acked {
		v, err := s.OrderByMerchantID(t.Context(), mid)
		if err != nil {
			t.Errorf("acknowledged order %s lost: %v", mid, err)
			continue
		}
		if len(v.History) != 1 || v.Status != "completed" {
			t.Errorf("order %s stored as %+v", mid, v)
		}
	}
	// Every stored order kept its event: state and outbox commit together.
	if orders, events := count(t, s, `SELECT count(*) FROM orders`), count(t, s, `SELECT count(*) FROM outbox`); orders != events || orders < len(acked) {
		t.Errorf("%d orders, %d events, %d acknowledged", orders, events, len(acked))
	}
}

// crashRound starts a child applying to path, kills it once it has
// acknowledged at least n applies, and returns what it acknowledged.
func crashRound(t *testing.T, path string, n int) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestStore_Apply_crash$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		acked []string
		done  = make(chan struct{})
	)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if mid, ok := strings.CutPrefix(sc.Text(), "ack "); ok {
				mu.Lock()
				acked = append(acked, mid)
				mu.Unlock()
			}
		}
	}()
	deadline := time.Now().Add(60 * time.Second)
	for {
		mu.Lock()
		got := len(acked)
		mu.Unlock()
		if got >= n || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no chance to clean up
		t.Fatal(err)
	}
	<-done // every ack written before the kill is in the pipe
	if err := cmd.Wait(); err == nil {
		t.Fatal("child exited cleanly; it should have been killed")
	}
	mu.Lock()
	defer mu.Unlock()
	return acked
}

// crashChild applies new orders from several goroutines and prints
// "ack <merchantOrderId>" after each Apply that returned nil. It stops on
// its own only after a bound, in case nobody kills it.
func crashChild(path string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(3)
	}
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for range 16 {
		wg.Go(func() {
			for i := 0; i < 20000 && ctx.Err() == nil; i++ {
				o := newOrder("12.34")
				ob := obs(nopTB{}, store.SourceWebhook, o.json(false))
				if _, err := s.Apply(ctx, ob); err != nil {
					continue
				}
				mu.Lock()
				fmt.Fprintf(os.Stdout, "ack %s\n", o.mid)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	os.Exit(4)
}

// nopTB lets the child use the test helpers outside a test.
type nopTB struct{ testing.TB }

func (nopTB) Helper()                   {}
func (nopTB) Fatalf(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...); os.Exit(5) }
