package receiver_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"orderd/receiver"
)

// TestHandler_ServeHTTP_Refused covers every answer given before a body is
// trusted: none of them may store order data.
func TestHandler_ServeHTTP_Refused(t *testing.T) {
	_, otherKey := testKeys(t)
	const maxBody = 4096
	cfg := receiver.Config{
		MaxBodyBytes:   maxBody,
		AllowedIPs:     prefixes(t, "203.0.113.0/24", "2001:db8:1::/48"),
		TrustedProxies: prefixes(t, "10.0.0.0/8"),
	}
	body := newOrder(1, "completed").JSON()
	big := bytes.Repeat([]byte(" "), maxBody+1)
	copy(big, body)

	tests := []struct {
		name    string
		req     func(f *fixture) request
		code    int
		status  string
		errText string
	}{
		{
			name: "GET is not allowed",
			req: func(f *fixture) request {
				return request{method: http.MethodGet, remote: "203.0.113.5:4000", body: body, sig: sign(t, f.key, body)}
			},
			code: http.StatusMethodNotAllowed, status: receiver.OutcomeBadMethod,
		},
		{
			name: "PUT is not allowed",
			req: func(f *fixture) request {
				return request{method: http.MethodPut, remote: "203.0.113.5:4000", body: body, sig: sign(t, f.key, body)}
			},
			code: http.StatusMethodNotAllowed, status: receiver.OutcomeBadMethod,
		},
		{
			name: "other path",
			req: func(f *fixture) request {
				return request{path: "/webhooks/other", remote: "203.0.113.5:4000", body: body, sig: sign(t, f.key, body)}
			},
			code: http.StatusNotFound, status: receiver.OutcomeNotFound,
		},
		{
			name: "peer not in allow-list",
			req: func(f *fixture) request {
				return request{remote: "198.51.100.7:4000", body: body, sig: sign(t, f.key, body)}
			},
			code: http.StatusForbidden, status: receiver.OutcomeForbidden,
		},
		{
			name: "IPv6 peer not in allow-list",
			req: func(f *fixture) request {
				return request{remote: "[2001:db8:2::1]:4000", body: body, sig: sign(t, f.key, body)}
			},
			code: http.StatusForbidden, status: receiver.OutcomeForbidden,
		},
		{
			name: "allowed address in X-Forwarded-For from an untrusted peer",
			req: func(f *fixture) request {
				return request{remote: "198.51.100.7:4000", xff: []string{"203.0.113.5"}, body: body, sig: sign(t, f.key, body)}
			},
			code: http.StatusForbidden, status: receiver.OutcomeForbidden,
		},
		{
			name: "trusted proxy forwarding a sender not allowed",
			req: func(f *fixture) request {
				return request{remote: "10.1.2.3:4000", xff: []string{"198.51.100.7"}, body: body, sig: sign(t, f.key, body)}
			},
			code: http.StatusForbidden, status: receiver.OutcomeForbidden,
		},
		{
			name: "spoofed allowed hop left of the real sender",
			req: func(f *fixture) request {
				return request{remote: "10.1.2.3:4000", xff: []string{"203.0.113.5, 198.51.100.7"}, body: body, sig: sign(t, f.key, body)}
			},
			code: http.StatusForbidden, status: receiver.OutcomeForbidden,
		},
		{
			name: "garbage X-Forwarded-For from a trusted proxy",
			req: func(f *fixture) request {
				return request{remote: "10.1.2.3:4000", xff: []string{"not-an-address"}, body: body, sig: sign(t, f.key, body)}
			},
			code: http.StatusForbidden, status: receiver.OutcomeForbidden,
		},
		{
			name: "body one byte over the limit",
			req: func(f *fixture) request {
				return request{remote: "203.0.113.5:4000", body: big, sig: sign(t, f.key, big)}
			},
			code: http.StatusRequestEntityTooLarge, status: receiver.OutcomeTooLarge, errText: "4096 bytes",
		},
		{
			name: "Signature missing",
			req: func(f *fixture) request {
				return request{remote: "203.0.113.5:4000", body: body}
			},
			code: http.StatusUnauthorized, status: receiver.OutcomeBadSig, errText: "missing",
		},
		{
			name: "Signature garbage",
			req: func(f *fixture) request {
				return request{remote: "203.0.113.5:4000", body: body, sig: "%%% not base64 %%%"}
			},
			code: http.StatusUnauthorized, status: receiver.OutcomeBadSig, errText: "not a base64",
		},
		{
			name: "Signature of the right size but random",
			req: func(f *fixture) request {
				return request{remote: "203.0.113.5:4000", body: body, sig: base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 256))}
			},
			code: http.StatusUnauthorized, status: receiver.OutcomeBadSig, errText: "does not verify",
		},
		{
			name: "Signature by another key",
			req: func(f *fixture) request {
				return request{remote: "203.0.113.5:4000", body: body, sig: sign(t, otherKey, body)}
			},
			code: http.StatusUnauthorized, status: receiver.OutcomeBadSig, errText: "does not verify",
		},
		{
			name: "Signature of another body",
			req: func(f *fixture) request {
				return request{remote: "203.0.113.5:4000", body: body, sig: sign(t, f.key, newOrder(2, "completed").JSON())}
			},
			code: http.StatusUnauthorized, status: receiver.OutcomeBadSig, errText: "does not verify",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, cfg)
			rec := f.do(tt.req(f))
			wantReply(t, rec, tt.code, tt.status)
			if !strings.Contains(rec.Body.String(), tt.errText) {
				t.Errorf("body = %s, want it to mention %q", rec.Body, tt.errText)
			}
			if tt.code == http.StatusMethodNotAllowed && rec.Header().Get("Allow") != http.MethodPost {
				t.Errorf("Allow = %q, want POST", rec.Header().Get("Allow"))
			}
			if got := f.orderData(); got != noOrderData {
				t.Errorf("stored after %d: %s", tt.code, got)
			}
			if got := f.counter(tt.status); got != 1 {
				t.Errorf("orderd_webhooks_total{outcome=%q} = %v, want 1", tt.status, got)
			}
		})
	}
}

// TestHandler_ServeHTTP_Allowed shows the requests the allow-list lets in,
// so the refusals above are refusals of the address and not of everything.
func TestHandler_ServeHTTP_Allowed(t *testing.T) {
	const maxBody = 4096
	cfg := receiver.Config{
		MaxBodyBytes:   maxBody,
		AllowedIPs:     prefixes(t, "203.0.113.0/24", "2001:db8:1::/48"),
		TrustedProxies: prefixes(t, "10.0.0.0/8", "127.0.0.1/32"),
	}
	tests := []struct {
		name   string
		remote string
		xff    []string
	}{
		{name: "allowed peer", remote: "203.0.113.5:4000"},
		{name: "allowed IPv6 peer", remote: "[2001:db8:1::9]:4000"},
		{name: "IPv4-mapped IPv6 peer", remote: "[::ffff:203.0.113.5]:4000"},
		{name: "X-Forwarded-For of an allowed peer is ignored", remote: "203.0.113.5:4000", xff: []string{"198.51.100.7"}},
		{name: "trusted proxy forwarding an allowed sender", remote: "10.1.2.3:4000", xff: []string{"203.0.113.5"}},
		{name: "chain of trusted proxies", remote: "127.0.0.1:4000", xff: []string{"198.51.100.7, 203.0.113.5, 10.9.9.9"}},
		{name: "hops in several headers, with ports", remote: "10.1.2.3:4000", xff: []string{"198.51.100.7", "[2001:db8:1::9]:443, 10.2.2.2:80"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, cfg)
			body := newOrder(i, "completed").JSON()
			rec := f.do(request{remote: tt.remote, xff: tt.xff, body: body, sig: sign(t, f.key, body)})
			wantReply(t, rec, http.StatusOK, receiver.OutcomeAccepted)
			if n := f.count("orders", "merchant_order_id = ?", newOrder(i, "").moid); n != 1 {
				t.Errorf("orders with the merchantOrderId = %d, want 1", n)
			}
		})
	}

	t.Run("body of exactly the limit", func(t *testing.T) {
		f := newFixture(t, cfg)
		body := bytes.Repeat([]byte(" "), maxBody)
		copy(body, newOrder(1, "completed").JSON())
		rec := f.do(request{remote: "203.0.113.5:4000", body: body, sig: sign(t, f.key, body)})
		wantReply(t, rec, http.StatusOK, receiver.OutcomeAccepted)
	})
	t.Run("empty allow-list allows everyone", func(t *testing.T) {
		f := newFixture(t, receiver.Config{})
		body := newOrder(1, "completed").JSON()
		rec := f.do(request{remote: "198.51.100.7:4000", body: body, sig: sign(t, f.key, body)})
		wantReply(t, rec, http.StatusOK, receiver.OutcomeAccepted)
	})
}

// TestHandler_ServeHTTP_BadSignatureMarksForPoll: the merchantOrderId of an
// unverified body is only a hint to poll; nothing of it is stored as order
// data.
func TestHandler_ServeHTTP_BadSignatureMarksForPoll(t *testing.T) {
	_, otherKey := testKeys(t)
	f := newFixture(t, receiver.Config{})
	body := newOrder(7, "completed").JSON()
	rec := f.do(request{body: body, sig: sign(t, otherKey, body)})
	wantReply(t, rec, http.StatusUnauthorized, receiver.OutcomeBadSig)
	if got := f.orderData(); got != noOrderData {
		t.Errorf("stored after 401: %s", got)
	}
	if n := f.count("watches", "merchant_order_id = ? AND resolved_at IS NULL", "m-7"); n != 1 {
		t.Errorf("open watches for m-7 = %d, want 1", n)
	}

	// A body without a readable merchantOrderId leaves no hint.
	rec = f.do(request{body: []byte(`{"merchantOrderId": 42}`), sig: sign(t, otherKey, body)})
	wantReply(t, rec, http.StatusUnauthorized, receiver.OutcomeBadSig)
	if n := f.count("watches", ""); n != 1 {
		t.Errorf("watches = %d, want still 1", n)
	}
}

// TestHandler_ServeHTTP_Quarantined: signed bodies that are not usable
// orders are kept and acknowledged, with a reason naming the problem.
func TestHandler_ServeHTTP_Quarantined(t *testing.T) {
	valid := string(newOrder(3, "completed").JSON())
	deep := strings.Repeat(`{"a":`, 20000) + "1" + strings.Repeat("}", 20000)
	tests := []struct {
		name   string
		body   string
		reason string // part of the stored reason
		moid   string // merchantOrderId read for polling, if any
	}{
		{name: "JSON that is not an order", body: `{"hello":"world"}`, reason: "id is missing"},
		{name: "not JSON", body: `this is not json`, reason: "invalid"},
		{name: "JSON array", body: `[1,2,3]`, reason: "the body must be a JSON object"},
		{name: "status missing", body: `{"id":"x","merchantOrderId":"m-q1","type":"payin"}`, reason: "status is missing", moid: "m-q1"},
		{name: "number where the id string is expected", body: strings.Replace(valid, `"id":"8d1f0c6e-0000-4000-8000-000000000003"`, `"id":12345`, 1), reason: "id: must be a string, got 12345", moid: "m-3"},
		{name: "number where an amount string is expected", body: strings.Replace(valid, `"amount":"100.00"`, `"amount":100.00`, 1), reason: "transactions[0].authorized.amount: must be a numeric string, got 100.00", moid: "m-3"},
		{name: "amount that is not a decimal", body: strings.Replace(valid, `"amount":"100.00"`, `"amount":"1e5"`, 1), reason: `transactions[0].authorized.amount: "1e5" is not a decimal number`, moid: "m-3"},
		{name: "bad timestamp", body: strings.Replace(valid, `"createdAt":"2024-05-01T10:00:00Z"`, `"createdAt":"yesterday"`, 1), reason: `createdAt: "yesterday" is not ISO 8601`, moid: "m-3"},
		{name: "invalid UTF-8", body: strings.Replace(valid, `"m-3"`, "\"m-\xff\xfe\"", 1), reason: "UTF-8"},
		{name: "deeply nested JSON", body: deep, reason: "depth"},
		// Go's decoder would take the last of two keys, or match a key in
		// another case, while the raw body (the event's data) says both.
		{name: "status twice", body: strings.Replace(valid, `"status":"completed"`, `"status":"rejected","status":"completed"`, 1),
			reason: `key "status" appears more than once`, moid: "m-3"},
		{name: "Status beside status", body: strings.Replace(valid, `"status":"completed"`, `"status":"rejected","Status":"completed"`, 1),
			reason: `key "Status" is "status" in another case`, moid: "m-3"},
		{name: "id twice", body: strings.Replace(valid, `"id":"8d1f0c6e-0000-4000-8000-000000000003"`,
			`"id":"8d1f0c6e-0000-4000-8000-000000000003","id":"8d1f0c6e-0000-4000-8000-000000000009"`, 1),
			reason: `key "id" appears more than once`, moid: "m-3"},
		{name: "wallet amount in another case", body: strings.Replace(valid, `"merchantTargetWallet":{"amount":"98.00"`,
			`"merchantTargetWallet":{"amount":"98.00","Amount":"9800.00"`, 1),
			reason: `merchantTargetWallet: key "Amount" is "amount" in another case`, moid: "m-3"},
		// Money outside the spec's form is not trusted.
		{name: "negative amount", body: strings.Replace(valid, `"amount":"98.00"`, `"amount":"-98.00"`, 1),
			reason: `merchantTargetWallet.amount: "-98.00" has a sign`, moid: "m-3"},
		{name: "signed amount", body: strings.Replace(valid, `"amount":"100.00"`, `"amount":"+100.00"`, 1),
			reason: `transactions[0].authorized.amount: "+100.00" has a sign`, moid: "m-3"},
		{name: "minus zero", body: strings.Replace(valid, `"amount":"98.00"`, `"amount":"-0"`, 1),
			reason: `"-0" has a sign`, moid: "m-3"},
		{name: "uppercase currency", body: strings.Replace(valid, `"currency":"brl"`, `"currency":"BRL"`, 1),
			reason: `merchantTargetWallet.currency: "BRL" is not a lowercase three-letter ISO code`, moid: "m-3"},
		{name: "empty currency", body: strings.Replace(valid, `"currency":"brl"`, `"currency":""`, 1),
			reason: `merchantTargetWallet.currency: "" is not a lowercase three-letter ISO code`, moid: "m-3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, receiver.Config{})
			rec := f.post([]byte(tt.body))
			wantReply(t, rec, http.StatusOK, receiver.OutcomeQuarantined)

			var raw []byte
			var reason string
			err := f.db().QueryRowContext(t.Context(), `SELECT raw, reason FROM quarantine`).Scan(&raw, &reason)
			if err != nil {
				t.Fatalf("quarantine row: %v", err)
			}
			if !bytes.Equal(raw, []byte(tt.body)) {
				t.Errorf("quarantined raw differs from the body (%d vs %d bytes)", len(raw), len(tt.body))
			}
			if !strings.Contains(reason, tt.reason) {
				t.Errorf("reason = %q, want it to mention %q", reason, tt.reason)
			}
			if n := f.count("orders", ""); n != 0 {
				t.Errorf("orders = %d, want 0", n)
			}
			if tt.moid != "" {
				if n := f.count("watches", "merchant_order_id = ?", tt.moid); n != 1 {
					t.Errorf("watches for %s = %d, want 1", tt.moid, n)
				}
			}
			if got := f.counter(receiver.OutcomeQuarantined); got != 1 {
				t.Errorf("quarantined counter = %v, want 1", got)
			}
			if logs := f.logs.String(); !strings.Contains(logs, `"level":"ERROR"`) || !strings.Contains(logs, `"outcome":"quarantined"`) {
				t.Errorf("want an error-level log line for the quarantine, got %s", logs)
			}
		})
	}
}

// TestHandler_ServeHTTP_EmptyBody: a signed empty body has nothing to keep
// and gets a clear 400.
func TestHandler_ServeHTTP_EmptyBody(t *testing.T) {
	f := newFixture(t, receiver.Config{})
	rec := f.post(nil)
	wantReply(t, rec, http.StatusBadRequest, receiver.OutcomeBadRequest)
	if !strings.Contains(rec.Body.String(), "body is empty") {
		t.Errorf("body = %s", rec.Body)
	}
	if got := f.orderData(); got != noOrderData {
		t.Errorf("stored: %s", got)
	}
}

// TestHandler_ServeHTTP_Outcomes walks one order through its life: new,
// a repeat in other formatting, completion, a late older state, and a
// refund added after completion.
func TestHandler_ServeHTTP_Outcomes(t *testing.T) {
	f := newFixture(t, receiver.Config{})
	processing := newOrder(1, "processing")
	processing.net = "5"
	completed := newOrder(1, "completed")
	completed.net = "5"
	completedReformatted := reformat(t, completed.JSON())
	refunded := completed
	refunded.refunds = []refund{{id: "9a9a9a9a-0000-4000-8000-000000000001", status: "new", amount: "10.00"}}

	steps := []struct {
		name       string
		body       []byte
		status     string
		wantStatus string // the order's stored status afterwards
		wantEvents int    // outbox rows afterwards
	}{
		{"new order", processing.JSON(), receiver.OutcomeAccepted, "processing", 1},
		{"same state again", processing.JSON(), receiver.OutcomeDuplicate, "processing", 1},
		{"completed", completed.JSON(), receiver.OutcomeAccepted, "completed", 2},
		{"completed, other key order and amount scale", completedReformatted, receiver.OutcomeDuplicate, "completed", 2},
		{"late processing after completed", processing.JSON(), receiver.OutcomeStale, "completed", 2},
		{"refund transaction added to the completed order", refunded.JSON(), receiver.OutcomeAccepted, "completed", 3},
		{"refund repeated", refunded.JSON(), receiver.OutcomeDuplicate, "completed", 3},
	}
	for _, s := range steps {
		rec := f.post(s.body)
		wantReply(t, rec, http.StatusOK, s.status)
		var status string
		if err := f.db().QueryRowContext(t.Context(), `SELECT status FROM orders WHERE merchant_order_id = 'm-1'`).Scan(&status); err != nil {
			t.Fatalf("%s: order row: %v", s.name, err)
		}
		if status != s.wantStatus {
			t.Errorf("%s: stored status = %q, want %q", s.name, status, s.wantStatus)
		}
		if n := f.count("outbox", ""); n != s.wantEvents {
			t.Errorf("%s: outbox rows = %d, want %d", s.name, n, s.wantEvents)
		}
	}
	if n := f.count("orders", ""); n != 1 {
		t.Errorf("orders = %d, want 1", n)
	}
	for outcome, want := range map[string]float64{
		receiver.OutcomeAccepted: 3, receiver.OutcomeDuplicate: 3, receiver.OutcomeStale: 1,
	} {
		if got := f.counter(outcome); got != want {
			t.Errorf("counter %s = %v, want %v", outcome, got, want)
		}
	}
}

// reformat rewrites an order body with its keys in reverse order, amounts
// with two more decimal places ("5" becomes "5.00", "98.00" becomes
// "98.0000") and other white space: the same state in another formatting.
func reformat(t *testing.T, body []byte) []byte {
	t.Helper()
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	writeReversed(&b, v, "")
	return b.Bytes()
}

func writeReversed(b *bytes.Buffer, v any, key string) {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		// Reverse lexical order differs from the provider's order.
		for i := 0; i < len(keys); i++ {
			for j := i + 1; j < len(keys); j++ {
				if keys[j] > keys[i] {
					keys[i], keys[j] = keys[j], keys[i]
				}
			}
		}
		b.WriteString("{\n")
		for i, k := range keys {
			if i > 0 {
				b.WriteString(",\n")
			}
			kb, _ := json.Marshal(k)
			b.Write(kb)
			b.WriteString(" : ")
			writeReversed(b, v[k], k)
		}
		b.WriteString("\n}")
	case []any:
		b.WriteString("[ ")
		for i, e := range v {
			if i > 0 {
				b.WriteString(" , ")
			}
			writeReversed(b, e, "")
		}
		b.WriteString(" ]")
	case string:
		if key == "amount" {
			if strings.Contains(v, ".") {
				v += "00"
			} else {
				v += ".00"
			}
		}
		sb, _ := json.Marshal(v)
		b.Write(sb)
	default:
		vb, _ := json.Marshal(v)
		b.Write(vb)
	}
}

// TestHandler_ServeHTTP_ExactAmounts: amounts beyond float64 precision are
// stored and passed on exactly as sent.
func TestHandler_ServeHTTP_ExactAmounts(t *testing.T) {
	f := newFixture(t, receiver.Config{})
	o := newOrder(1, "completed")
	o.authorized = "123456789012345678901234567890.123456789012345678"
	o.net = "999999999999999999999999999999.99"
	body := o.JSON()
	wantReply(t, f.post(body), http.StatusOK, receiver.OutcomeAccepted)

	var amount string
	if err := f.db().QueryRowContext(t.Context(), `SELECT target_amount FROM orders`).Scan(&amount); err != nil {
		t.Fatal(err)
	}
	if amount != o.net {
		t.Errorf("stored target amount = %q, want %q", amount, o.net)
	}
	var raw []byte
	if err := f.db().QueryRowContext(t.Context(), `SELECT raw FROM webhook_deliveries`).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw, body) {
		t.Errorf("stored body differs from what was sent")
	}
	// The same state with the amounts at another scale is the same state.
	wantReply(t, f.post(reformat(t, body)), http.StatusOK, receiver.OutcomeDuplicate)
	// One cent less in 30 digits is a different state.
	o.net = "999999999999999999999999999999.98"
	wantReply(t, f.post(o.JSON()), http.StatusOK, receiver.OutcomeAccepted)
}

// slowReader hands out its first half, then waits before the rest, as a
// sender on a slow link does.
type slowReader struct {
	b     []byte
	pause time.Duration
	half  bool
}

func (s *slowReader) Read(p []byte) (int, error) {
	if len(s.b) == 0 {
		return 0, io.EOF
	}
	if s.half {
		time.Sleep(s.pause)
	}
	n := len(s.b)
	if !s.half {
		n = len(s.b) / 2
		s.half = true
	}
	n = copy(p, s.b[:n])
	s.b = s.b[n:]
	return n, nil
}

// TestHandler_ServeHTTP_SlowUploadIsNotOverload: the ack budget bounds the
// store's time, not the sender's upload. A body that took longer than the
// budget to arrive is still stored and acknowledged, not refused as if the
// store were overloaded.
func TestHandler_ServeHTTP_SlowUploadIsNotOverload(t *testing.T) {
	f := newFixture(t, receiver.Config{AckBudget: 200 * time.Millisecond})
	o := newOrder(1, "completed")
	body := o.JSON()
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, receiver.DefaultPath,
		&slowReader{b: body, pause: 400 * time.Millisecond})
	req.Header.Set("Signature", sign(t, f.key, body))
	rec := httptest.NewRecorder()
	f.handler.ServeHTTP(rec, req)
	wantReply(t, rec, http.StatusOK, receiver.OutcomeAccepted)
	if got := f.counter(receiver.OutcomeOverloaded); got != 0 {
		t.Errorf("overloaded counter = %v, want 0", got)
	}
	if n := f.count("orders", "provider_id = ?", o.id); n != 1 {
		t.Errorf("%d orders stored, want 1", n)
	}
}

// TestHandler_ServeHTTP_Overloaded: when the store cannot commit within the
// ack budget the answer is 503 with Retry-After, never 200; once the store
// is free the provider's retry is accepted.
func TestHandler_ServeHTTP_Overloaded(t *testing.T) {
	f := newFixture(t, receiver.Config{AckBudget: 300 * time.Millisecond})
	// Another connection takes the database's write lock, as a long
	// transaction of another process would.
	lock := holdWriteLock(t, f.dbPath)

	body := newOrder(1, "completed").JSON()
	start := time.Now()
	rec := f.post(body)
	elapsed := time.Since(start)
	wantReply(t, rec, http.StatusServiceUnavailable, receiver.OutcomeOverloaded)
	if rec.Header().Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
	if elapsed > 2*time.Second {
		t.Errorf("answered after %v, want about the 300ms budget", elapsed)
	}
	if got := f.counter(receiver.OutcomeOverloaded); got != 1 {
		t.Errorf("overloaded counter = %v, want 1", got)
	}

	lock.release()
	// The provider retries: the delivery is stored now (or was, late, by
	// the first attempt, in which case it is a duplicate).
	deadline := time.Now().Add(10 * time.Second)
	for {
		rec = f.post(body)
		if rec.Code == http.StatusOK || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if rec.Code != http.StatusOK {
		t.Fatalf("retry after the lock was released: %d %s", rec.Code, rec.Body)
	}
	if n := f.count("orders", "merchant_order_id = 'm-1'"); n != 1 {
		t.Errorf("orders = %d, want 1", n)
	}
}

// TestHandler_SetVerifier: keys are replaced while the handler serves.
func TestHandler_SetVerifier(t *testing.T) {
	_, newKey := testKeys(t)
	f := newFixture(t, receiver.Config{})
	b1, b2 := newOrder(1, "completed").JSON(), newOrder(2, "completed").JSON()

	wantReply(t, f.do(request{body: b1, sig: sign(t, newKey, b1)}), http.StatusUnauthorized, receiver.OutcomeBadSig)
	f.handler.SetVerifier(newVerifier(t, newKey))
	wantReply(t, f.do(request{body: b1, sig: sign(t, newKey, b1)}), http.StatusOK, receiver.OutcomeAccepted)
	wantReply(t, f.do(request{body: b2, sig: sign(t, f.key, b2)}), http.StatusUnauthorized, receiver.OutcomeBadSig)

	f.handler.SetVerifier(nil)
	rec := f.do(request{body: b2, sig: sign(t, f.key, b2)})
	wantReply(t, rec, http.StatusServiceUnavailable, receiver.OutcomeUnavailable)
	if n := f.count("orders", ""); n != 1 {
		t.Errorf("orders = %d, want 1", n)
	}
}

// TestHandler_SetAllowedIPs: allow-lists are replaced while the handler
// serves.
func TestHandler_SetAllowedIPs(t *testing.T) {
	f := newFixture(t, receiver.Config{AllowedIPs: prefixes(t, "203.0.113.0/24")})
	b1 := newOrder(1, "completed").JSON()
	req := request{remote: "10.1.2.3:5000", xff: []string{"203.0.113.9"}, body: b1, sig: sign(t, f.key, b1)}

	wantReply(t, f.do(req), http.StatusForbidden, receiver.OutcomeForbidden)
	f.handler.SetTrustedProxies(prefixes(t, "10.0.0.0/8"))
	wantReply(t, f.do(req), http.StatusOK, receiver.OutcomeAccepted)
	f.handler.SetAllowedIPs(prefixes(t, "192.0.2.0/24"))
	wantReply(t, f.do(req), http.StatusForbidden, receiver.OutcomeForbidden)
	f.handler.SetAllowedIPs(nil)
	wantReply(t, f.do(req), http.StatusOK, receiver.OutcomeDuplicate)
}

// TestHandler_ServeHTTP_Logs: one line per delivery with the order's ids,
// status, outcome and latency, and never the body or the signature.
func TestHandler_ServeHTTP_Logs(t *testing.T) {
	_, otherKey := testKeys(t)
	f := newFixture(t, receiver.Config{})
	body := newOrder(5, "completed").JSON()
	sig := sign(t, f.key, body)
	wantReply(t, f.do(request{body: body, sig: sig}), http.StatusOK, receiver.OutcomeAccepted)
	badSig := sign(t, otherKey, body)
	wantReply(t, f.do(request{body: body, sig: badSig}), http.StatusUnauthorized, receiver.OutcomeBadSig)

	lines := strings.Split(strings.TrimSpace(f.logs.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("log lines = %d, want 2:\n%s", len(lines), f.logs)
	}
	var first struct {
		Component       string  `json:"component"`
		Status          int     `json:"status"`
		Outcome         string  `json:"outcome"`
		OrderID         string  `json:"order_id"`
		MerchantOrderID string  `json:"merchant_order_id"`
		Latency         float64 `json:"latency"`
		EventID         string  `json:"event_id"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if first.Component != "receiver" || first.Status != 200 || first.Outcome != "accepted" ||
		first.OrderID != newOrder(5, "").id || first.MerchantOrderID != "m-5" || first.Latency <= 0 || first.EventID == "" {
		t.Errorf("log line = %s", lines[0])
	}
	if !strings.Contains(lines[1], `"status":401`) || !strings.Contains(lines[1], `"merchant_order_id":"m-5"`) ||
		!strings.Contains(lines[1], `"unverified":true`) {
		t.Errorf("401 log line = %s", lines[1])
	}
	for _, secret := range []string{sig, badSig, `"merchantTargetWallet"`, "98.00"} {
		if strings.Contains(f.logs.String(), secret) {
			t.Errorf("logs contain %q", secret)
		}
	}
}

// TestHandler_ServeHTTP_LogRoutine: accepted and repeated webhooks log at
// debug, so a deployment at info sees only what needs a look, and at info
// with Config.LogRoutine, so a person watching the sandbox sees them.
func TestHandler_ServeHTTP_LogRoutine(t *testing.T) {
	for _, routine := range []bool{false, true} {
		f := newFixture(t, receiver.Config{LogRoutine: routine})
		body := newOrder(7, "completed").JSON()
		sig := sign(t, f.key, body)
		wantReply(t, f.do(request{body: body, sig: sig}), http.StatusOK, receiver.OutcomeAccepted)
		wantReply(t, f.do(request{body: body, sig: sig}), http.StatusOK, receiver.OutcomeDuplicate)
		want := `"level":"DEBUG"`
		if routine {
			want = `"level":"INFO"`
		}
		lines := strings.Split(strings.TrimSpace(f.logs.String()), "\n")
		if len(lines) != 2 {
			t.Fatalf("LogRoutine %v: %d log lines, want 2:\n%s", routine, len(lines), f.logs)
		}
		for i, outcome := range []string{"accepted", "duplicate"} {
			if !strings.Contains(lines[i], want) || !strings.Contains(lines[i], `"outcome":"`+outcome+`"`) {
				t.Errorf("LogRoutine %v: line %q; want %s, outcome %s", routine, lines[i], want, outcome)
			}
		}
	}
}

// TestHandler_ServeHTTP_IdentityConflict: a signed order that contradicts a
// stored identity is not applied but kept in quarantine, raised as a
// finding and counted: another provider id under a known merchantOrderId,
// a known provider id under another merchantOrderId (whether free or
// another order's), or a known order with another type.
func TestHandler_ServeHTTP_IdentityConflict(t *testing.T) {
	other := newOrder(2, "completed")
	tests := []struct {
		name     string
		impostor func() []byte
		reason   string
	}{
		{"another provider id under a known merchantOrderId", func() []byte {
			o := newOrder(3, "completed")
			o.moid = "m-1"
			return o.JSON()
		}, "belongs to another order"},
		{"a known provider id under a new merchantOrderId", func() []byte {
			o := newOrder(1, "completed")
			o.moid = "m-new"
			return o.JSON()
		}, `merchantOrderId "m-new", stored as "m-1"`},
		{"a known provider id under another order's merchantOrderId", func() []byte {
			o := newOrder(1, "completed")
			o.moid = other.moid
			return o.JSON()
		}, `merchantOrderId "m-2", stored as "m-1"`},
		{"a known order with another type", func() []byte {
			return bytes.Replace(newOrder(1, "completed").JSON(), []byte(`"type":"payin","createdAt"`),
				[]byte(`"type":"payout","createdAt"`), 1)
		}, `type "payout", stored as "payin"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, receiver.Config{})
			wantReply(t, f.post(newOrder(1, "processing").JSON()), http.StatusOK, receiver.OutcomeAccepted)
			wantReply(t, f.post(other.JSON()), http.StatusOK, receiver.OutcomeAccepted)
			body := tt.impostor()
			wantReply(t, f.post(body), http.StatusOK, receiver.OutcomeQuarantined)
			for table, want := range map[string]int{"orders": 2, "webhook_deliveries": 2, "order_history": 2, "quarantine": 1} {
				if n := f.count(table, ""); n != want {
					t.Errorf("%s has %d rows, want %d", table, n, want)
				}
			}
			if n := f.count("quarantine", "raw = ? AND reason LIKE ?", body, "%"+tt.reason+"%"); n != 1 {
				t.Errorf("quarantine rows of the body with reason %q = %d, want 1", tt.reason, n)
			}
			if n := f.count("findings", "kind = 'quarantined_webhook' AND resolved_at IS NULL"); n != 1 {
				t.Errorf("open quarantined_webhook findings = %d, want 1", n)
			}
			if n := f.count("orders", "provider_id = ? AND merchant_order_id = 'm-1' AND type = 'payin' AND status = 'processing'",
				newOrder(1, "").id); n != 1 {
				t.Errorf("order 1 changed: %s", f.orderData())
			}
			if n := f.count("outbox", "type LIKE 'order.%'"); n != 2 {
				t.Errorf("order events = %d, want the 2 of the genuine orders", n)
			}
			if got := f.counter(receiver.OutcomeQuarantined); got != 1 {
				t.Errorf("orderd_webhooks_total{outcome=quarantined} = %v, want 1", got)
			}
		})
	}
}

// TestHandler_ServeHTTP_AnnouncedLength: a Content-Length is only a claim
// of the sender, made before any byte arrives and before the signature is
// checked. A request that announces a body of the limit and then sends
// nothing must not cost that much memory, or a thousand connections that
// send only headers would hold a gigabyte; a body that really is large is
// still read whole, and one announced over the limit is refused unread.
func TestHandler_ServeHTTP_AnnouncedLength(t *testing.T) {
	const limit = 1 << 20
	f := newFixture(t, receiver.Config{MaxBodyBytes: limit})

	t.Run("headers only", func(t *testing.T) {
		headerOnly := func() *httptest.ResponseRecorder {
			req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, receiver.DefaultPath, nil)
			req.Body = cutBody{}
			req.ContentLength = limit
			req.Header.Set("Signature", sign(t, f.key, nil))
			rec := httptest.NewRecorder()
			f.handler.ServeHTTP(rec, req)
			return rec
		}
		wantReply(t, headerOnly(), http.StatusBadRequest, receiver.OutcomeBadRequest)
		const runs = 20
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range runs {
			headerOnly()
		}
		runtime.ReadMemStats(&after)
		if perCall := (after.TotalAlloc - before.TotalAlloc) / runs; perCall > 256<<10 {
			t.Errorf("a request announcing %d bytes and sending none allocated %d bytes, want at most 256 KiB", limit, perCall)
		}
	})
	t.Run("large body", func(t *testing.T) {
		body := bytes.Repeat([]byte(" "), limit)
		copy(body, newOrder(1, "completed").JSON())
		wantReply(t, f.post(body), http.StatusOK, receiver.OutcomeAccepted)
	})
	t.Run("large body of unknown length", func(t *testing.T) {
		body := bytes.Repeat([]byte(" "), limit)
		copy(body, newOrder(2, "completed").JSON())
		req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, receiver.DefaultPath, io.NopCloser(bytes.NewReader(body)))
		req.ContentLength = -1
		req.Header.Set("Signature", sign(t, f.key, body))
		rec := httptest.NewRecorder()
		f.handler.ServeHTTP(rec, req)
		wantReply(t, rec, http.StatusOK, receiver.OutcomeAccepted)
	})
	t.Run("announced over the limit", func(t *testing.T) {
		req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, receiver.DefaultPath, nil)
		req.Body = unreadBody{t}
		req.ContentLength = limit + 1
		rec := httptest.NewRecorder()
		f.handler.ServeHTTP(rec, req)
		wantReply(t, rec, http.StatusRequestEntityTooLarge, receiver.OutcomeTooLarge)
	})
}

// cutBody is a body whose sender went away before sending a byte.
type cutBody struct{}

func (cutBody) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }
func (cutBody) Close() error             { return nil }

// unreadBody is a body that must not be read.
type unreadBody struct{ t *testing.T }

func (b unreadBody) Read([]byte) (int, error) {
	b.t.Error("the body was read")
	return 0, io.EOF
}
func (unreadBody) Close() error { return nil }
