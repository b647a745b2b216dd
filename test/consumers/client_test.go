//go:build consumers

package consumers_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"orderd/test/support/testbin"
)

// TestClient_GeneratedPayin runs examples/client/node as its README
// comment says: its client is generated from the current api/openapi.json
// (openapi-typescript) and type-checked with it (tsc), so a change to the
// document that breaks the client fails here; then, against "orderd
// sandbox", it creates a payin through the gateway, waits for its event on
// NATS and reads the order back. The test checks what it printed and the
// order through the admin API.
func TestClient_GeneratedPayin(t *testing.T) {
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm is not installed (make consumers-check installs node and npm)")
	}
	root, err := testbin.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	orderd := filepath.Join(t.TempDir(), "orderd")
	if err := testbin.Orderd(orderd); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "examples", "client", "node")
	// The generated types and the build are made afresh from the document.
	for _, gen := range []string{"generated", "dist"} {
		if err := os.RemoveAll(filepath.Join(dir, gen)); err != nil {
			t.Fatal(err)
		}
	}
	for _, argv := range [][]string{
		{"npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts"},
		{"npm", "run", "build"},
	} {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s in %s: %v\n%s", strings.Join(argv, " "), dir, err, out)
		}
	}

	sb := startSandbox(t, orderd, t.TempDir(), "-demo=false")
	const moid = "client-example-1"
	p := startProc(t, dir, "client", []string{"node", "dist/payin.js", "--admin", sb.admin, "--nats", sb.nats,
		"--merchant-order-id", moid, "--amount", "12.34", "--currency", "brl"})
	if code := p.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("the client exited %d; output:\n%s", code, p.output())
	}
	out := p.output()
	for _, want := range []string{
		"created payin " + moid + ": HTTP 201, state created",
		"event order.processing ",
		"learnedvia=gateway status=processing",
		"order " + moid + ": status processing, learned via gateway",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the client did not print %q; output:\n%s", want, out)
		}
	}

	// The order is there for anyone who asks, with the amount sent.
	resp, err := http.Get(sb.admin + "/v1/orders/" + moid)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/orders/%s: %d %s", moid, resp.StatusCode, body)
	}
	var got struct {
		Order struct {
			MerchantOrderID string `json:"merchantOrderId"`
			Status          string `json:"status"`
		} `json:"order"`
		Attempts []struct {
			Origin  string `json:"origin"`
			Request struct {
				Invoice struct{ Amount, Currency string } `json:"invoice"`
			} `json:"request"`
		} `json:"attempts"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if got.Order.MerchantOrderID != moid || got.Order.Status != "processing" || len(got.Attempts) != 1 ||
		got.Attempts[0].Origin != "gateway" || fmt.Sprint(got.Attempts[0].Request.Invoice) != "{12.34 brl}" {
		t.Errorf("stored order = %s, want %s processing, from one gateway attempt for 12.34 brl", body, moid)
	}
}
