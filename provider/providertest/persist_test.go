package providertest_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"orderd/provider"
	"orderd/provider/providertest"
)

// startState starts a fake keeping its books in file; the caller closes it.
func startState(t *testing.T, file string, balances map[string]string) *providertest.Server {
	t.Helper()
	s, err := providertest.Start(providertest.Options{Key: sharedKey(), StateFile: file, InitialBalances: balances})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return s
}

// TestServer_StateFile: a fake restarted on its state file answers every
// API call about the old orders, requisites and balances as before, and
// goes on from there.
func TestServer_StateFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "provider-state.json")
	s := startState(t, file, map[string]string{"brl": "100.00", "mxn": "0"})
	if s.Restored() {
		t.Error("a fresh start says it restored")
	}
	completedPayin(t, s, "p-done", "50.00")
	createPayin(t, s, "p-open", "20.00", "")
	refund(t, s, "p-done", "5.00") // partial: new, reserved
	if _, err := s.CreateOrder(providertest.NewOrder{MerchantOrderID: "po-1", Type: provider.TypePayout, Amount: "30", Currency: "brl"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AdjustBalance("brl", "-1.23"); err != nil {
		t.Fatal(err)
	}
	req, _ := createRequisite(t, s, `{"client":{"id":"c-1"},"currency":"mxn","merchantOrderIdPrefix":"shop-"}`)
	dep, err := s.Deposit(req.ID, "200")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(dep.MerchantOrderID); err != nil {
		t.Fatal(err)
	}

	// Changes reach the file while the server runs, not only at Close.
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(file)
		if bytes.Contains(b, []byte(dep.MerchantOrderID)) && bytes.Contains(b, []byte(`"completedAt"`)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the deposit is not in the state file within 10s:\n%s", b)
		}
		time.Sleep(20 * time.Millisecond)
	}

	moids := []string{"p-done", "p-open", "po-1", dep.MerchantOrderID}
	before := map[string]string{}
	for _, m := range moids {
		_, raw := getStatus(t, s, m)
		before[m] = string(raw)
	}
	balances := string(mustOK(t, s, providertest.PathBalances, `{}`))
	requisites := string(mustOK(t, s, providertest.PathRequisiteOrders, `{"id":"`+req.ID+`"}`))
	s.Close()

	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "provider-state.json" {
		t.Errorf("the directory holds %v; want the state file alone (no temporary files)", entries)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("state file: %v, mode %v", err, fi.Mode())
	}

	// Started again, on another port, with other initial balances: the
	// books are the file's.
	s = startState(t, file, map[string]string{"brl": "999.00"})
	defer s.Close()
	if !s.Restored() {
		t.Error("Restored() is false after a restart on the file")
	}
	for _, m := range moids {
		if _, raw := getStatus(t, s, m); string(raw) != before[m] {
			t.Errorf("get-status %s after the restart:\n%s\nbefore:\n%s", m, raw, before[m])
		}
	}
	if got := string(mustOK(t, s, providertest.PathBalances, `{}`)); got != balances {
		t.Errorf("balances after the restart %s, before %s", got, balances)
	}
	if got := string(mustOK(t, s, providertest.PathRequisiteOrders, `{"id":"`+req.ID+`"}`)); got != requisites {
		t.Errorf("requisite orders after the restart %s, before %s", got, requisites)
	}

	// It goes on from there: an id already used is still taken, the open
	// order completes and credits the balance, the reserved refund still
	// holds its amount, and the requisite takes deposits.
	mustCode(t, s, providertest.PathPaymentCreate, `{"merchantOrderId":"p-open","invoice":{"amount":"1.00","currency":"brl"}}`, provider.CodeOrderAlreadyExists)
	if err := s.Complete("p-open"); err != nil {
		t.Fatal(err)
	}
	// 100 + 49.00 + 19.60 (2% fee) - 1.23; the payout still reserves 30.
	if got := balance(t, s, "brl"); got != "167.37" {
		t.Errorf("brl balance %s, want 167.37", got)
	}
	// The refund is still known as partial: it may go to processing (a
	// full one may not), and completing it debits the 5.00 it reserved.
	o, _ := getStatus(t, s, "p-done")
	if err := s.AdvanceRefund("p-done", o.Transactions[1].ID); err != nil {
		t.Errorf("advance the restored partial refund: %v", err)
	}
	if err := s.CompleteRefund("p-done", o.Transactions[1].ID, true); err != nil {
		t.Fatal(err)
	}
	if got := balance(t, s, "brl"); got != "162.37" {
		t.Errorf("brl balance after the refund %s, want 162.37", got)
	}
	dep2, err := s.Deposit(req.ID, "300")
	if err != nil {
		t.Fatal(err)
	}
	if dep2.MerchantOrderID == dep.MerchantOrderID || !strings.HasPrefix(dep2.MerchantOrderID, "shop-") {
		t.Errorf("second deposit id %s (first %s)", dep2.MerchantOrderID, dep.MerchantOrderID)
	}
}

func TestServer_StateFileRefused(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"not JSON":      "{",
		"other version": `{"version":99}`,
		"unknown field": `{"version":1,"ordres":[]}`,
	} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".json")
			if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := providertest.Start(providertest.Options{Key: sharedKey(), StateFile: file})
			if err == nil {
				s.Close()
				t.Fatal("Start accepted the file")
			}
			if !strings.Contains(err.Error(), "StateFile "+file) {
				t.Errorf("error %q does not name the option and the file", err)
			}
			if b, _ := os.ReadFile(file); string(b) != content {
				t.Errorf("the refused file was changed to %s", b)
			}
		})
	}
}

// The state file is plain JSON a person can read.
func TestServer_StateFileIsJSON(t *testing.T) {
	file := filepath.Join(t.TempDir(), "state.json")
	s := startState(t, file, map[string]string{"brl": "10"})
	createPayin(t, s, "p-1", "10.00", "")
	s.Close()
	var st struct {
		Version  int
		Balances map[string]string
		Orders   []struct {
			Order struct{ MerchantOrderID, Status string }
		}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &st); err != nil || st.Version != 1 || st.Balances["brl"] != "10" ||
		len(st.Orders) != 1 || st.Orders[0].Order.MerchantOrderID != "p-1" || st.Orders[0].Order.Status != "processing" {
		t.Errorf("state file (%v):\n%s", err, b)
	}
}
