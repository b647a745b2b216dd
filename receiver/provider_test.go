package receiver_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"orderd/provider/providertest"
	"orderd/receiver"
)

// TestHandler_FromProvider receives the fake provider's real webhooks:
// at-least-once delivery with duplicates and late older states, and a key
// rotation the receiver learns of only later. Every order ends stored in
// its final state with one event per state, and every retry the receiver
// refused is finally accepted.
func TestHandler_FromProvider(t *testing.T) {
	providerKey, oldKey := testKeys(t)
	prov, err := providertest.Start(providertest.Options{
		Key:               providerKey,
		DuplicateWebhooks: 1,
		OutOfOrder:        true,
		WebhookBaseDelay:  20 * time.Millisecond,
		MaxWebhookDelay:   100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}

	f := newFixture(t, receiver.Config{})
	// The receiver still trusts the provider's previous key only.
	f.handler.SetVerifier(newVerifier(t, oldKey))
	srv := startServer(t, receiver.ServerConfig{}, f.handler)
	// Cleanups run last-registered first: the provider closes its client's
	// connections before the server shuts down. A connection its client
	// dialed but never used (it found an idle one first) would otherwise
	// hold the server's graceful shutdown for 5s, as net/http waits that
	// long for a first request on a new connection.
	t.Cleanup(prov.Close)
	url := "http://" + srv.Addr() + receiver.DefaultPath

	const orders = 5
	for i := range orders {
		moid := fmt.Sprintf("e2e-%d", i)
		if _, err := prov.CreateOrder(providertest.NewOrder{MerchantOrderID: moid, Amount: "10.50", Currency: "brl", WebhookURL: url}); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			err = prov.Complete(moid)
		} else {
			err = prov.Reject(moid, "declined")
		}
		if err != nil {
			t.Fatal(err)
		}
	}

	// Refused deliveries mark their orders for polling.
	waitFor(t, func() bool { return f.count("watches", "") == orders })
	if got := f.orderData(); got != noOrderData {
		t.Fatalf("stored with the wrong key: %s", got)
	}

	// The operator reloads the keys; the provider's retries now pass.
	f.handler.SetVerifier(newVerifier(t, providerKey))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := prov.WaitIdle(ctx); err != nil {
		t.Fatalf("webhooks still pending: %v", err)
	}

	delivered := map[int]bool{}
	for _, a := range prov.Webhooks() {
		if a.OK() {
			delivered[a.Delivery] = true
		} else if a.Status != http.StatusUnauthorized {
			t.Errorf("attempt %d of delivery %d answered %d %s", a.Attempt, a.Delivery, a.Status, a.Err)
		}
	}
	for _, a := range prov.Webhooks() {
		if !delivered[a.Delivery] {
			t.Errorf("delivery %d (%s of %s) never accepted", a.Delivery, a.Kind, a.MerchantOrderID)
		}
	}
	if n := f.count("orders", "status IN ('completed', 'rejected')"); n != orders {
		t.Errorf("final orders = %d, want %d", n, orders)
	}
	// One event per order: the final state. The duplicate and the late
	// processing state add none.
	if n := f.count("outbox", "type LIKE 'order.%'"); n != orders {
		t.Errorf("order events = %d, want %d", n, orders)
	}
	if f.counter(receiver.OutcomeDuplicate) < orders || f.counter(receiver.OutcomeStale) < orders {
		t.Errorf("duplicates %v, stale %v; want at least %d each",
			f.counter(receiver.OutcomeDuplicate), f.counter(receiver.OutcomeStale), orders)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
