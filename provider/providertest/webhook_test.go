package providertest_test

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"orderd/provider"
	"orderd/provider/providertest"
	"orderd/test/support/testaddr"
)

func parsePublicKey(t *testing.T, pemBytes []byte) crypto.PublicKey {
	t.Helper()
	block, _ := pem.Decode(pemBytes)
	if block == nil || block.Type != "PUBLIC KEY" {
		t.Fatalf("public key PEM: %q", pemBytes)
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// verify checks a Signature header with the standard library alone.
func verify(pub crypto.PublicKey, body []byte, signature string) bool {
	sig, err := base64.StdEncoding.DecodeString(signature)
	if err != nil {
		return false
	}
	sum := sha512.Sum512(body)
	switch k := pub.(type) {
	case *rsa.PublicKey:
		return rsa.VerifyPKCS1v15(k, crypto.SHA512, sum[:], sig) == nil
	case *ecdsa.PublicKey:
		return ecdsa.VerifyASN1(k, sum[:], sig)
	}
	return false
}

func TestServer_WebhookSigned(t *testing.T) {
	for _, kind := range []string{providertest.KeyRSA, providertest.KeyECDSA} {
		t.Run(kind, func(t *testing.T) {
			rcv := newReceiver(t)
			s := start(t, providertest.Options{KeyType: kind})
			createPayin(t, s, "m-1", "10", rcv.URL())
			if err := s.Complete("m-1"); err != nil {
				t.Fatal(err)
			}
			want, _ := s.OrderJSON("m-1")
			h := rcv.waitHits(t, 1, 5*time.Second)[0]

			if !bytes.Equal(h.body, want) {
				t.Errorf("webhook body differs from get-status data:\n%s\n%s", h.body, want)
			}
			if _, raw := getStatus(t, s, "m-1"); !bytes.Equal(h.body, raw) {
				t.Errorf("webhook body differs from the get-status answer")
			}
			if ct := h.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			pub := parsePublicKey(t, s.PublicKeyPEM())
			if !verify(pub, h.body, h.signature) {
				t.Fatalf("signature %q does not verify", h.signature)
			}
			tampered := bytes.Replace(h.body, []byte(`"completed"`), []byte(`"rejected"`), 1)
			if verify(pub, tampered, h.signature) {
				t.Error("signature verifies a tampered body")
			}
			o := decodeOrder(t, h.body)
			if o.Status != provider.StatusCompleted {
				t.Errorf("webhook status %s", o.Status)
			}
		})
	}
}

func TestServer_WebhookOnlyWithURL(t *testing.T) {
	rcv := newReceiver(t)
	s := start(t, providertest.Options{})
	createPayin(t, s, "quiet", "10", "")
	createPayin(t, s, "loud", "10", rcv.URL())
	if err := s.Complete("quiet"); err != nil {
		t.Fatal(err)
	}
	if err := s.Reject("loud", "declined"); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, s)
	hits := rcv.Hits()
	if len(hits) != 1 || decodeOrder(t, hits[0].body).MerchantOrderID != "loud" {
		t.Fatalf("hits = %d, want only the order with a webhookUrl", len(hits))
	}
	if o := decodeOrder(t, hits[0].body); o.Status != provider.StatusRejected || *o.RejectReason != "declined" {
		t.Errorf("webhook = %s", hits[0].body)
	}
}

func TestServer_WebhookRetries(t *testing.T) {
	const base = 20 * time.Millisecond
	rcv := newReceiver(t, 500, 503, 404, 301, 200)
	s := start(t, providertest.Options{WebhookBaseDelay: base})
	createPayin(t, s, "m-1", "10", rcv.URL())
	if err := s.Complete("m-1"); err != nil {
		t.Fatal(err)
	}
	hits := rcv.waitHits(t, 5, 10*time.Second)
	waitIdle(t, s)
	if len(rcv.Hits()) != 5 {
		t.Fatalf("%d attempts, want 5 (stop after the 200)", len(rcv.Hits()))
	}
	attempts := s.Webhooks()
	for i := 1; i < len(hits); i++ {
		want := base << (i - 1)
		if attempts[i].Delay != want {
			t.Errorf("delay before retry %d = %v, want %v", i, attempts[i].Delay, want)
		}
		// A timer never fires early, so the receiver sees each gap at least
		// as long as the delay; the upper bound only guards against a stuck
		// retry, since a loaded machine stretches gaps.
		gap := hits[i].at.Sub(hits[i-1].at)
		if gap < want || gap > want+3*time.Second {
			t.Errorf("gap before retry %d = %v, want about %v", i, gap, want)
		}
		if !bytes.Equal(hits[i].body, hits[0].body) || hits[i].signature != hits[0].signature {
			t.Errorf("retry %d sent another body or signature", i)
		}
	}
	if len(attempts) != 5 {
		t.Fatalf("%d recorded attempts", len(attempts))
	}
	for i, a := range attempts {
		if a.Attempt != i+1 || a.Delivery != attempts[0].Delivery || a.Kind != providertest.WebhookFinal ||
			a.MerchantOrderID != "m-1" || a.OrderStatus != provider.StatusCompleted || a.URL != rcv.URL() {
			t.Errorf("attempt %d = %+v", i, a)
		}
		if wantOK := i == 4; a.OK() != wantOK {
			t.Errorf("attempt %d status %d", i, a.Status)
		}
	}
}

func TestServer_WebhookGivesUp(t *testing.T) {
	tests := []struct {
		name string
		opts providertest.Options
		want int
		// lastDelay is the wait before the last attempt.
		lastDelay time.Duration
	}{
		// 1µs doubled 19 times is about half a second: the whole spec
		// schedule, uncapped, in a second.
		{"spec maximum", providertest.Options{WebhookBaseDelay: time.Microsecond}, 21, time.Microsecond << 19},
		{"capped delay", providertest.Options{WebhookBaseDelay: time.Millisecond, MaxWebhookDelay: 2 * time.Millisecond}, 21, 2 * time.Millisecond},
		{"three retries", providertest.Options{WebhookBaseDelay: time.Millisecond, MaxWebhookRetries: 3}, 4, 4 * time.Millisecond},
		{"no retry", providertest.Options{MaxWebhookRetries: -1}, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			failing := make([]int, 100)
			for i := range failing {
				failing[i] = http.StatusInternalServerError
			}
			rcv := newReceiver(t, failing...)
			s := start(t, tt.opts)
			createPayin(t, s, "m-1", "10", rcv.URL())
			if err := s.Complete("m-1"); err != nil {
				t.Fatal(err)
			}
			waitIdle(t, s)
			time.Sleep(20 * time.Millisecond)
			if n := len(rcv.Hits()); n != tt.want {
				t.Errorf("%d attempts, want %d", n, tt.want)
			}
			attempts := s.Webhooks()
			if len(attempts) != tt.want {
				t.Fatalf("recorded %d attempts", len(attempts))
			}
			last := attempts[len(attempts)-1]
			if last.Attempt != tt.want || last.Delay != tt.lastDelay || last.OK() {
				t.Errorf("last attempt %d after %v (status %d), want attempt %d after %v",
					last.Attempt, last.Delay, last.Status, tt.want, tt.lastDelay)
			}
		})
	}
}

func TestServer_WebhookNetworkFaults(t *testing.T) {
	t.Run("connection refused", func(t *testing.T) {
		// A reserved port nothing listens on refuses every connection.
		dead := "http://" + testaddr.Loopback(t) + "/hook"
		s := start(t, providertest.Options{WebhookBaseDelay: time.Millisecond, MaxWebhookRetries: 2})
		createPayin(t, s, "m-1", "10", dead)
		if err := s.Complete("m-1"); err != nil {
			t.Fatal(err)
		}
		waitIdle(t, s)
		attempts := s.Webhooks()
		if len(attempts) != 3 {
			t.Fatalf("%d attempts, want 3", len(attempts))
		}
		for _, a := range attempts {
			if a.Status != 0 || a.Err == "" {
				t.Errorf("attempt = %+v, want a network error", a)
			}
		}
	})
	t.Run("receiver slower than the timeout", func(t *testing.T) {
		var calls atomic.Int32
		slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body) // lets the server notice the client hanging up
			if calls.Add(1) == 1 {
				select {
				case <-time.After(2 * time.Second):
				case <-r.Context().Done():
				}
			}
			w.WriteHeader(http.StatusOK)
		}))
		t.Cleanup(slow.Close)
		s := start(t, providertest.Options{WebhookBaseDelay: time.Millisecond, WebhookTimeout: 100 * time.Millisecond})
		createPayin(t, s, "m-1", "10", slow.URL)
		if err := s.Complete("m-1"); err != nil {
			t.Fatal(err)
		}
		waitIdle(t, s)
		attempts := s.Webhooks()
		if len(attempts) != 2 || attempts[0].Err == "" || !attempts[1].OK() {
			t.Fatalf("attempts = %+v, want a timeout then a success", attempts)
		}
	})
}

func TestServer_WebhookDuplicate(t *testing.T) {
	rcv := newReceiver(t)
	s := start(t, providertest.Options{DuplicateWebhooks: 1})
	createPayin(t, s, "m-1", "10", rcv.URL())
	if err := s.Complete("m-1"); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, s)
	hits := rcv.Hits()
	if len(hits) != 2 {
		t.Fatalf("%d deliveries, want 2", len(hits))
	}
	if !bytes.Equal(hits[0].body, hits[1].body) {
		t.Error("the duplicate carries another body")
	}
	attempts := s.Webhooks()
	if attempts[0].Kind != providertest.WebhookFinal || attempts[1].Kind != providertest.WebhookDuplicate ||
		attempts[0].Delivery == attempts[1].Delivery {
		t.Errorf("attempts = %+v", attempts)
	}
}

func TestServer_WebhookOutOfOrder(t *testing.T) {
	rcv := newReceiver(t)
	s := start(t, providertest.Options{OutOfOrder: true})
	createPayin(t, s, "m-1", "10", rcv.URL())
	if err := s.Complete("m-1"); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, s)
	hits := rcv.Hits()
	if len(hits) != 2 {
		t.Fatalf("%d deliveries, want 2", len(hits))
	}
	first, second := decodeOrder(t, hits[0].body), decodeOrder(t, hits[1].body)
	if first.Status != provider.StatusCompleted || second.Status != provider.StatusProcessing || first.ID != second.ID {
		t.Errorf("deliveries: %s then %s, want completed then processing", first.Status, second.Status)
	}
	if !verify(parsePublicKey(t, s.PublicKeyPEM()), hits[1].body, hits[1].signature) {
		t.Error("the stale delivery is not signed")
	}
	if k := s.Webhooks()[1].Kind; k != providertest.WebhookStale {
		t.Errorf("kind %s", k)
	}
}

func TestServer_WebhookURLOverride(t *testing.T) {
	rcv := newReceiver(t)
	s := start(t, providertest.Options{})
	s.SetWebhookURLOverride(rcv.URL())
	createPayin(t, s, "m-1", "10", "https://unreachable.example/hook")
	createPayin(t, s, "m-2", "10", "")
	for _, id := range []string{"m-1", "m-2"} {
		if err := s.Complete(id); err != nil {
			t.Fatal(err)
		}
	}
	waitIdle(t, s)
	if hits := rcv.Hits(); len(hits) != 1 || decodeOrder(t, hits[0].body).MerchantOrderID != "m-1" {
		t.Fatalf("override got %d webhooks, want the one for m-1", len(hits))
	}
}

func TestServer_CloseStopsDeliveries(t *testing.T) {
	rcv := newReceiver(t, 500, 500, 500)
	s, err := providertest.Start(providertest.Options{Key: sharedKey(), WebhookBaseDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	createPayin(t, s, "m-1", "10", rcv.URL())
	if err := s.Complete("m-1"); err != nil {
		t.Fatal(err)
	}
	rcv.waitHits(t, 1, 5*time.Second)
	begin := time.Now()
	s.Close()
	if d := time.Since(begin); d > 2*time.Second {
		t.Errorf("Close took %v with a retry pending", d)
	}
	if err := s.WaitIdle(t.Context()); err != nil {
		t.Errorf("WaitIdle after Close: %v", err)
	}
	if n := len(rcv.Hits()); n != 1 {
		t.Errorf("%d attempts, want 1", n)
	}
	s.Close() // a second Close is harmless
	if _, err := http.Post(s.URL()+providertest.PathBalances, "application/json", nil); err == nil {
		t.Error("the listener still answers after Close")
	}
}
