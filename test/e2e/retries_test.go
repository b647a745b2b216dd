//go:build e2e

package e2e_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"
)

// webhookAttempt is one webhook attempt the fake recorded.
type webhookAttempt struct {
	Delivery        int             `json:"delivery"`
	Kind            string          `json:"kind"`
	MerchantOrderID string          `json:"merchantOrderId"`
	OrderStatus     string          `json:"orderStatus"`
	Body            json.RawMessage `json:"body"`
	Signature       string          `json:"signature"`
	Attempt         int             `json:"attempt"`
	Status          int             `json:"status"`
	Err             string          `json:"err"`
	At              time.Time       `json:"at"`
}

func (f *fakeProvider) webhooks() []webhookAttempt {
	f.t.Helper()
	var out []webhookAttempt
	f.control(http.MethodGet, "webhooks", nil, &out)
	return out
}

// deliveriesDone reports whether the fake has made want[moid] logical
// deliveries to each order in want, each answered 200 at last.
func deliveriesDone(atts []webhookAttempt, want map[string]int) bool {
	ok := map[int]bool{}
	of := map[int]string{}
	for _, a := range atts {
		of[a.Delivery] = a.MerchantOrderID
		if a.Status == http.StatusOK {
			ok[a.Delivery] = true
		}
	}
	got := map[string]int{}
	for d, moid := range of {
		if !ok[d] {
			return false
		}
		got[moid]++
	}
	for moid, n := range want {
		if got[moid] != n {
			return false
		}
	}
	return true
}

// TestReceiver_WebhookRetrySchedule lets the fake provider deliver every
// webhook twice and follow each final one with the order's older
// processing state, retrying on its doubling schedule while orderd is not
// yet running; then it replays one order's webhook 21 times on that
// schedule, with a burst of concurrent duplicates, the older state in
// between and re-formatted copies. The stream must hold exactly one event
// per distinct state of each order, in order.
func TestReceiver_WebhookRetrySchedule(t *testing.T) {
	const (
		baseDelay = 50 * time.Millisecond
		maxDelay  = 200 * time.Millisecond
	)
	e := newEnv(t, envOptions{publicURL: true, fakeFlags: []string{
		"-webhook-base-delay", baseDelay.String(), "-max-webhook-delay", maxDelay.String(),
		"-max-webhook-retries", "20", "-duplicate-webhooks", "1", "-out-of-order", "-refund-webhooks",
	}})
	ns := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	wantEvents := map[string][]string{} // merchantOrderId → event types in order
	wantDeliveries := map[string]int{}  // merchantOrderId → logical deliveries by the fake

	// Orders that finish while orderd is down: the fake retries.
	early := make([]string, 6)
	for i := range early {
		moid := fmt.Sprintf("early-%s-%d", ns, i)
		early[i] = moid
		e.fake.control(http.MethodPost, "create-order", map[string]string{"merchantOrderId": moid, "type": "payin",
			"amount": fmt.Sprintf("%d.00", 10+i), "currency": "brl", "webhookUrl": e.od.webhooks}, nil)
		if i%3 == 2 {
			e.fake.control(http.MethodPost, "reject", map[string]string{"merchantOrderId": moid, "reason": "declined"}, nil)
			wantEvents[moid] = []string{"order.rejected"}
		} else {
			e.fake.control(http.MethodPost, "complete", map[string]string{"merchantOrderId": moid}, nil)
			wantEvents[moid] = []string{"order.completed"}
		}
		wantDeliveries[moid] = 3 // final, duplicate, older state
	}
	if !waitFor(10*time.Second, 20*time.Millisecond, func() bool {
		failed := map[string]int{}
		for _, a := range e.fake.webhooks() {
			if a.Status == 0 && a.Err != "" {
				failed[a.MerchantOrderID]++
			}
		}
		for _, moid := range early {
			if failed[moid] < 3 {
				return false
			}
		}
		return true
	}) {
		t.Fatal("the fake did not retry each webhook 3 times within 10s")
	}
	e.od.startReady()

	// Orders created through orderd's gateway (webhookUrl is orderd's
	// receiver.public_url), then finished at the provider.
	late := make([]string, 4)
	for i := range late {
		moid := fmt.Sprintf("late-%s-%d", ns, i)
		late[i] = moid
		code, body := adminPost(t, e.od, "/v1/payins", payinBody(moid, fmt.Sprintf("%d.00", 20+i)))
		if code != http.StatusCreated {
			t.Fatalf("create %s: %d %s", moid, code, body)
		}
		if i == 3 {
			e.fake.control(http.MethodPost, "reject", map[string]string{"merchantOrderId": moid, "reason": "declined"}, nil)
			wantEvents[moid] = []string{"order.processing", "order.rejected"}
		} else {
			e.fake.control(http.MethodPost, "complete", map[string]string{"merchantOrderId": moid}, nil)
			wantEvents[moid] = []string{"order.processing", "order.completed"}
		}
		wantDeliveries[moid] = 3
	}
	// A full refund of a completed order is a new state of a final order.
	refunded := late[0]
	if !waitFor(10*time.Second, 50*time.Millisecond, func() bool { return deliveriesDone(e.fake.webhooks(), wantDeliveries) }) {
		t.Fatal("the fake's deliveries were not all acknowledged within 10s")
	}
	code, body := adminPost(t, e.od, "/v1/refunds", `{"merchantOrderId":"`+refunded+`","amount":"20.00","refundReason":"customer asked"}`)
	if code != http.StatusCreated {
		t.Fatalf("refund %s: %d %s", refunded, code, body)
	}
	var fo struct {
		Transactions []struct {
			ID   string `json:"id"`
			Type string `json:"type"`
		} `json:"transactions"`
	}
	e.fake.control(http.MethodGet, "order?merchantOrderId="+refunded, nil, &fo)
	refundID := ""
	for _, tx := range fo.Transactions {
		if tx.Type == "refund" {
			refundID = tx.ID
		}
	}
	if refundID == "" {
		t.Fatalf("the fake shows no refund transaction on %s", refunded)
	}
	e.fake.control(http.MethodPost, "complete-refund", map[string]any{"merchantOrderId": refunded, "refundId": refundID, "ok": true}, nil)
	wantEvents[refunded] = append(wantEvents[refunded], "order.updated")
	wantDeliveries[refunded] += 2 // the refund webhook and its duplicate
	if !waitFor(10*time.Second, 50*time.Millisecond, func() bool { return deliveriesDone(e.fake.webhooks(), wantDeliveries) }) {
		t.Fatal("the fake's deliveries were not all acknowledged within 10s")
	}

	// Replay one order's final webhook as the provider's schedule would
	// deliver it 21 times (first try and 20 retries), with its older state
	// in between and a burst of concurrent duplicates.
	target := early[0]
	var final, older *webhookAttempt
	var delays []time.Duration
	var prevAt time.Time
	atts := e.fake.webhooks()
	for i := range atts {
		a := &atts[i]
		if a.MerchantOrderID != target {
			continue
		}
		switch a.Kind {
		case "final":
			final = a
			if a.Attempt > 1 {
				delays = append(delays, a.At.Sub(prevAt))
			}
			prevAt = a.At
		case "stale":
			older = a
		}
	}
	if final == nil || older == nil || older.OrderStatus != "processing" {
		t.Fatalf("the fake recorded no final and older webhook for %s", target)
	}
	d := baseDelay
	for len(delays) < 20 {
		if len(delays) > 0 {
			d = min(delays[len(delays)-1]*2, maxDelay)
		}
		delays = append(delays, d)
	}
	c := newWebhookClient(t, e.od.webhooks)
	ctx := context.WithoutCancel(t.Context())
	expectWord := func(what string, a answer, word string) {
		t.Helper()
		if a.status != http.StatusOK || a.word != word {
			t.Errorf("%s: answer %d %q (%v); want 200 %q", what, a.status, a.word, a.err, word)
		}
	}
	for i := range 21 {
		if i > 0 {
			time.Sleep(delays[i-1])
		}
		expectWord(fmt.Sprintf("delivery %d of the final webhook", i+1), c.post(ctx, final.Body, final.Signature), "duplicate")
		if i == 6 || i == 13 {
			expectWord("the older processing state", c.post(ctx, older.Body, older.Signature), "stale")
		}
	}
	const burst = 5
	var wg sync.WaitGroup
	answers := make([]answer, burst)
	for i := range burst {
		wg.Go(func() { answers[i] = c.post(ctx, final.Body, final.Signature) })
	}
	wg.Wait()
	for i, a := range answers {
		expectWord(fmt.Sprintf("concurrent duplicate %d", i+1), a, "duplicate")
	}
	// The same states in another JSON formatting are the same states.
	var indented bytes.Buffer
	if err := json.Indent(&indented, final.Body, "", "  "); err != nil {
		t.Fatal(err)
	}
	expectWord("the final state re-formatted", c.post(ctx, indented.Bytes(), e.signer.sign(t, indented.Bytes())), "duplicate")
	indented.Reset()
	if err := json.Indent(&indented, older.Body, "", "\t"); err != nil {
		t.Fatal(err)
	}
	expectWord("the older state re-formatted", c.post(ctx, indented.Bytes(), e.signer.sign(t, indented.Bytes())), "stale")

	waitDrained(t, e.od.dbPath, e.nats.URL(), 30*time.Second)
	events := readStream(t, e.nats.URL())
	byOrder := checkStreamUnique(t, events)
	for moid, want := range wantEvents {
		if got := eventTypes(byOrder[moid]); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("order %s: events %v; want %v", moid, got, want)
		}
	}
	if len(byOrder) != len(wantEvents) {
		t.Errorf("stream has events of %d orders; want %d", len(byOrder), len(wantEvents))
	}

	// The store counted every delivery of the exact body, and kept the
	// older state in the order's history without acting on it.
	db := openDB(t, e.od.dbPath)
	fakeOK := 0
	for _, a := range e.fake.webhooks() {
		if a.MerchantOrderID == target && a.Status == http.StatusOK && bytes.Equal(a.Body, final.Body) {
			fakeOK++
		}
	}
	sum := sha256.Sum256(final.Body)
	seen := queryInt(t, db, `SELECT d.times_seen FROM webhook_deliveries d JOIN orders o ON o.id = d.order_id
		WHERE o.merchant_order_id = ? AND d.body_sha256 = ?`, target, sum[:])
	if want := fakeOK + 21 + burst; seen != want {
		t.Errorf("order %s: the final body's delivery row has times_seen %d; want %d (%d from the fake, 21 replays, %d concurrent)",
			target, seen, want, fakeOK, burst)
	}
	stale := queryInt(t, db, `SELECT count(*) FROM order_history h JOIN orders o ON o.id = h.order_id
		WHERE o.merchant_order_id = ? AND h.outcome = 'stale' AND h.status = 'processing'`, target)
	if stale == 0 {
		t.Errorf("order %s: the older processing state is not in its history as stale", target)
	}
	if st := queryInt(t, db, `SELECT count(*) FROM orders WHERE merchant_order_id = ? AND status = 'completed'`, target); st != 1 {
		t.Errorf("order %s is not completed in the store after its older state arrived", target)
	}
	attempts := len(e.fake.webhooks())
	t.Logf("%d orders; the fake made %d webhook attempts; order %s delivered %d times by the fake, 21 times on its schedule and %d at once, its older state 3 more times; stream events %d, duplicates in the stream %d",
		len(wantEvents), attempts, target, fakeOK, burst, len(events), len(events)-countUnique(events))
	e.od.stop()
}
