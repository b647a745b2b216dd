package api_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"orderd/api"
	"orderd/provider"
	"orderd/provider/providertest"
	"orderd/store"
)

// Environment of the crash test's child process.
const (
	crashChildEnv    = "ORDERD_API_CRASH_CHILD"
	crashDBEnv       = "ORDERD_API_CRASH_DB"
	crashProviderEnv = "ORDERD_API_CRASH_PROVIDER"
	crashKeyEnv      = "ORDERD_API_CRASH_KEY"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) == "1" {
		os.Exit(crashChild())
	}
	os.Exit(m.Run())
}

// crashChild serves the admin API on a store and a provider named by the
// environment, prints its address, and runs until it is killed or its
// stdin closes (so it never outlives the test).
func crashChild() int {
	ctx := context.Background()
	st, err := store.Open(ctx, os.Getenv(crashDBEnv), store.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open store:", err)
		return 1
	}
	client, err := provider.NewClient(provider.Options{BaseURL: os.Getenv(crashProviderEnv),
		APIKey: os.Getenv(crashKeyEnv), Timeout: 30 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 1
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "listen:", err)
		return 1
	}
	h := api.New(api.Config{Logger: slog.New(slog.DiscardHandler)}, api.Deps{Store: st, Provider: client})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }() // the process ends by being killed
	fmt.Printf("listening %s\n", ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// TestAPI_Payins_crashBetweenCommitAndAnswer kills the gateway (SIGKILL)
// after it committed an attempt and while the provider is still answering:
// after a restart the attempt is in doubt — not lost, and not silently
// retried.
func TestAPI_Payins_crashBetweenCommitAndAnswer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	const slow = 2 * time.Second
	fake := providertest.NewServer(providertest.Options{KeyType: "ecdsa"})
	t.Cleanup(fake.Close)
	if err := fake.InjectFault(providertest.Fault{Endpoint: providertest.PathPaymentCreate,
		Kind: providertest.Slow, Delay: slow}); err != nil {
		t.Fatal(err)
	}
	dbPath := t.TempDir() + "/orderd.db"

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"=1", crashDBEnv+"="+dbPath,
		crashProviderEnv+"="+fake.URL(), crashKeyEnv+"="+fake.APIKey())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addrCh := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		addrCh <- strings.TrimSpace(strings.TrimPrefix(line, "listening "))
	}()
	var addr string
	select {
	case addr = <-addrCh:
	case <-time.After(20 * time.Second):
		t.Fatal("the child did not start")
	}
	if addr == "" {
		t.Fatal("the child printed no address")
	}

	body := payinBody("m-crash", "42.00")
	answered := make(chan error, 1)
	go func() {
		resp, err := http.Post("http://"+addr+"/v1/payins", "application/json", strings.NewReader(body))
		if err == nil {
			resp.Body.Close()
			err = fmt.Errorf("the gateway answered %s before it was killed", resp.Status)
		}
		answered <- err
	}()

	// Wait until the attempt is committed, as another process sees it.
	ro := waitForReadOnlyStore(t, dbPath)
	deadline := time.Now().Add(10 * time.Second)
	for {
		as, err := ro.ListAttempts(t.Context(), store.AttemptQuery{})
		if err == nil && len(as) == 1 && as[0].State == store.AttemptPending {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pending attempt was committed: %+v, %v", as, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	closeStore(t, ro)
	time.Sleep(200 * time.Millisecond) // the create call is now at the slow provider

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if err := <-answered; err == nil || strings.Contains(err.Error(), "answered") {
		t.Fatalf("client outcome: %v, want a broken connection", err)
	}

	// The provider finishes the slow call and creates the order.
	deadline = time.Now().Add(slow + 5*time.Second)
	for len(fake.Calls(providertest.PathPaymentCreate)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the create call never reached the provider")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, ok := fake.Order("m-crash"); !ok {
		t.Fatal("the provider did not create the order")
	}

	// Restart: the pending attempt becomes in doubt.
	st, err := store.Open(t.Context(), dbPath, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeStore(t, st) })
	if n, err := st.RecoverPendingAttempts(t.Context()); err != nil || n != 1 {
		t.Fatalf("recovered %d pending attempts, %v; want 1", n, err)
	}
	as, err := st.AttemptsByMerchantID(t.Context(), "m-crash")
	if err != nil || len(as) != 1 || as[0].State != store.AttemptInDoubt {
		t.Fatalf("attempts after restart = %+v, %v; want one in doubt", as, err)
	}

	// A repeat through the restarted gateway reports the doubt and does
	// not create the order a second time.
	client, err := provider.NewClient(provider.Options{BaseURL: fake.URL(), APIKey: fake.APIKey()})
	if err != nil {
		t.Fatal(err)
	}
	h := api.New(api.Config{}, api.Deps{Store: st, Provider: client})
	srv := &http.Server{Handler: h}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }() // closed by the cleanup below
	t.Cleanup(func() { srv.Close() })
	resp, err := http.Post("http://"+ln.Addr().String()+"/v1/payins", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"state":"in_doubt"`) {
		t.Errorf("repeat after restart: %d %s, want 200 in_doubt", resp.StatusCode, b)
	}
	if n := len(fake.Calls(providertest.PathPaymentCreate)); n != 1 {
		t.Errorf("the provider got %d create calls, want exactly 1", n)
	}

	// get-status settles it, as the reconciler does.
	o, raw, err := client.GetStatus(t.Context(), "m-crash")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SettleAttemptCreated(t.Context(), as[0].ID,
		store.Observation{Source: store.SourcePoll, Order: o, Raw: raw}); err != nil {
		t.Fatal(err)
	}
	v, err := st.OrderByMerchantID(t.Context(), "m-crash")
	if err != nil || v.ProviderID != o.ID {
		t.Errorf("settled order = %+v, %v", v, err)
	}
}

// waitForReadOnlyStore opens the database another process is creating.
func waitForReadOnlyStore(t *testing.T, path string) *store.Store {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := store.Open(t.Context(), path, store.Options{ReadOnly: true})
		if err == nil {
			if _, err = st.ListAttempts(t.Context(), store.AttemptQuery{}); err == nil {
				return st
			}
			closeStore(t, st)
		}
		if time.Now().After(deadline) {
			t.Fatalf("open %s read-only: %v", path, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func closeStore(t *testing.T, st *store.Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := st.Close(ctx); err != nil {
		t.Errorf("close store: %v", err)
	}
}
