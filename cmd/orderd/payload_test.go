package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"orderd/provider/providertest"
	"orderd/publish"
)

// TestRun_BodyLimitFitsNATS: against a NATS server whose max_payload cannot
// carry the event of a webhook of receiver.max_body_bytes, the daemon says
// so at start-up, naming both limits, and lowers its body limit so that
// every webhook it accepts can be published: a larger one is 413 (the
// provider's problem to see), a smaller one is stored and its event reaches
// the stream.
func TestRun_BodyLimitFitsNATS(t *testing.T) {
	dir := t.TempDir()
	ns, err := publish.StartEmbedded(publish.EmbeddedConfig{Listen: "127.0.0.1:0", StoreDir: filepath.Join(dir, "nats"), MaxPayload: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	fake := providertest.NewServer(providertest.Options{})
	t.Cleanup(fake.Close)
	cfgPath := daemonConfig(t, dir, fake, "  url: "+ns.ClientURL()+"\n", quietJobs)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout bytes.Buffer
	var stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"orderd", "run", "-config", cfgPath}, func(string) string { return "" }, nil, &stdout, &stderr)
	}()
	addrs := waitStarted(t, &stderr, done)
	waitReady(t, addrs.Admin, done)
	fit := 256<<10 - publish.EventOverhead
	for _, want := range []string{"receiver.max_body_bytes is 1048576", "at most 262144 bytes (its max_payload)",
		fmt.Sprintf("webhooks over %d bytes are refused with 413", fit)} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("the start-up log does not say %q:\n%s", want, stderr.String())
		}
	}

	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	events, err := nc.SubscribeSync("orderd.orders.>")
	if err != nil {
		t.Fatal(err)
	}
	post := func(moid string, size int) int {
		t.Helper()
		body := []byte(fmt.Sprintf(`{"id":"7c1f0c6e-0000-4000-8000-%012d","merchantOrderId":%q,"type":"payin","status":"processing",`+
			`"createdAt":"2026-01-02T03:04:05Z","rejectReason":null,"merchantSourceWallet":null,"merchantTargetWallet":null,"transactions":[],"note":"`,
			size, moid))
		body = append(body, strings.Repeat("n", size-len(body)-2)...)
		body = append(body, `"}`...)
		sig, err := providertest.Sign(fake.Signer(), body)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+addrs.Webhooks+"/webhooks/orders", bytes.NewReader(body))
		req.Header.Set("Signature", sig)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("too-big", fit+1); code != http.StatusRequestEntityTooLarge {
		t.Errorf("a webhook one byte over the lowered limit: %d, want 413", code)
	}
	if code := post("fits", fit-100); code != http.StatusOK {
		t.Fatalf("a webhook under the lowered limit: %d, want 200", code)
	}
	msg, err := events.NextMsg(15 * time.Second)
	if err != nil {
		t.Fatalf("the accepted webhook's event did not reach the stream: %v", err)
	}
	if !bytes.Contains(msg.Data, []byte(`"merchantorderid":"fits"`)) {
		t.Errorf("event %.200s", msg.Data)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
}
