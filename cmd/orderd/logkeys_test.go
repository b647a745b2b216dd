package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"orderd/provider/providertest"
)

// duplicateKeys returns the keys that appear more than once in one object
// of the JSON line, at any depth, or an error when the line is not JSON.
// Strict log shippers refuse such lines (RFC 8259 leaves duplicates
// undefined).
func duplicateKeys(line []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var dups []string
	var walk func() error
	walk = func() error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		d, ok := tok.(json.Delim)
		if !ok {
			return nil
		}
		seen := map[string]bool{}
		for dec.More() {
			if d == '{' {
				kt, err := dec.Token()
				if err != nil {
					return err
				}
				if k := kt.(string); seen[k] {
					dups = append(dups, k)
				} else {
					seen[k] = true
				}
			}
			if err := walk(); err != nil {
				return err
			}
		}
		_, err = dec.Token()
		return err
	}
	return dups, walk()
}

// TestRun_LogLinesHaveUniqueKeys runs the daemon at debug level through
// webhooks of every kind of outcome and a reconcile schedule, and checks
// that no log line names a key twice (each component is tagged once).
func TestRun_LogLinesHaveUniqueKeys(t *testing.T) {
	de := newDaemonEnv(t, "")
	cfg := strings.Replace(readFile(t, de.cfgPath), "level: info", "level: debug", 1)
	cfg = strings.Replace(cfg, `stale: "off"`, `stale: "@every 1s"`, 1)
	de.cfgPath = writeFile(t, t.TempDir(), "config.yaml", cfg)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout bytes.Buffer
	var stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"orderd", "run", "-config", de.cfgPath}, func(string) string { return "" }, nil, &stdout, &stderr)
	}()
	addrs := waitStarted(t, &stderr, done)
	waitReady(t, addrs.Admin, done)

	url := "http://" + addrs.Webhooks + "/webhooks/orders"
	post := func(body []byte, sign bool) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if sign {
			sig, err := providertest.Sign(de.fake.Signer(), body)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Signature", sig)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	order := func(status string) []byte {
		return fmt.Appendf(nil, `{"id":"6a1f0c6e-0000-4000-8000-000000000001","merchantOrderId":"logs-1","type":"payin",`+
			`"createdAt":"2026-01-02T03:04:05Z","status":%q,"rejectReason":null,"merchantSourceWallet":null,`+
			`"merchantTargetWallet":null,"transactions":[]}`, status)
	}
	post(order("processing"), true) // accepted (debug)
	post(order("processing"), true) // duplicate (debug)
	post(order("new"), true)        // stale (info)
	post([]byte(`{"id":1}`), true)  // quarantined (error)
	post(order("completed"), false) // bad signature (warn)
	if got := waitMetric(t, addrs.Admin, `orderd_webhooks_total{outcome="bad_signature"}`, func(v string) bool { return v == "1" }); got != "1" {
		t.Fatalf("bad_signature = %q, want 1", got)
	}
	// A stale run or two, for the scheduler's and the job's lines.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) &&
		!strings.Contains(stderr.String(), `"msg":"cron run"`); time.Sleep(50 * time.Millisecond) {
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run returned %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("run did not return within 20s of cancellation")
	}

	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	components := map[string]bool{}
	for _, line := range lines {
		dups, err := duplicateKeys([]byte(line))
		if err != nil {
			t.Errorf("log line is not JSON: %v\n%s", err, line)
			continue
		}
		if len(dups) > 0 {
			t.Errorf("log line names %q more than once:\n%s", dups, line)
		}
		var l struct{ Component string }
		if json.Unmarshal([]byte(line), &l) == nil {
			components[l.Component] = true
		}
	}
	for _, c := range []string{"receiver", "reconcile", "store", "publish"} {
		if !components[c] {
			t.Errorf("no line of component %q among %d lines; the test did not exercise it", c, len(lines))
		}
	}
	if !strings.Contains(stderr.String(), `"msg":"cron run"`) {
		t.Error("no scheduler line: the stale job never ran")
	}
	for _, outcome := range []string{"accepted", "duplicate", "stale", "quarantined", "bad_signature"} {
		if !strings.Contains(stderr.String(), `"outcome":"`+outcome+`"`) {
			t.Errorf("no webhook line with outcome %s", outcome)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
