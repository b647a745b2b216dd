package hostile_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestReceiver_Unauthenticated: webhooks that do not carry the provider's
// signature are refused with 401 and change nothing.
func TestReceiver_Unauthenticated(t *testing.T) {
	d := theDaemon(t)
	body := d.newOrder("completed").JSON()
	tests := []struct {
		name string
		sig  string
	}{
		{"no Signature header", ""},
		{"signed with another key", signWith(t, d.otherKey, body)},
		{"not base64", "%%% not a signature %%%"},
		{"signature of another body", d.sign(t, d.newOrder("completed").JSON())},
		{"empty base64", "===="},
		{"huge Signature header", strings.Repeat("A", 60<<10)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := d.rows(t)
			wantReply(t, d.post(t, body, tt.sig), http.StatusUnauthorized, "bad_signature")
			if after := d.rows(t); after != before {
				t.Errorf("rows changed: %+v -> %+v", before, after)
			}
		})
	}
}

// TestReceiver_Size: a body one byte over 1 MiB is refused with 413 whether
// its length is announced or streamed, and headers beyond the limit with
// 431; a body of exactly 1 MiB is still taken.
func TestReceiver_Size(t *testing.T) {
	d := theDaemon(t)
	const limit = 1 << 20
	padded := func(o order, size int) []byte {
		b := bytes.Repeat([]byte(" "), size)
		copy(b, o.JSON())
		return b
	}
	over := padded(d.newOrder("completed"), limit+1)
	overSig := d.sign(t, over)

	tests := []struct {
		name    string
		req     func() *http.Request
		code    int
		status  string
		changed bool
	}{
		{
			name: "1 MiB + 1 byte with Content-Length",
			req: func() *http.Request {
				r := newRequest(t, d.recvURL, bytes.NewReader(over))
				r.Header.Set("Signature", overSig)
				return r
			},
			code: http.StatusRequestEntityTooLarge, status: "too_large",
		},
		{
			name: "1 MiB + 1 byte chunked, without Content-Length",
			req: func() *http.Request {
				r := newRequest(t, d.recvURL, io.MultiReader(bytes.NewReader(over)))
				r.ContentLength = -1
				r.Header.Set("Signature", overSig)
				return r
			},
			code: http.StatusRequestEntityTooLarge, status: "too_large",
		},
		{
			name: "headers over 64 KiB",
			req: func() *http.Request {
				body := d.newOrder("completed").JSON()
				r := newRequest(t, d.recvURL, bytes.NewReader(body))
				r.Header.Set("Signature", d.sign(t, body))
				r.Header.Set("X-Padding", strings.Repeat("p", 70<<10))
				return r
			},
			code: http.StatusRequestHeaderFieldsTooLarge,
		},
		{
			name: "exactly 1 MiB",
			req: func() *http.Request {
				b := padded(d.newOrder("completed"), limit)
				r := newRequest(t, d.recvURL, bytes.NewReader(b))
				r.Header.Set("Signature", d.sign(t, b))
				return r
			},
			code: http.StatusOK, status: "accepted", changed: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := d.rows(t)
			r := do(t, http.DefaultClient, tt.req())
			if r.code != tt.code || r.status != tt.status {
				t.Fatalf("answer %d %q (%.200s), want %d %q", r.code, r.status, r.body, tt.code, tt.status)
			}
			after := d.rows(t)
			if !tt.changed && after != before {
				t.Errorf("rows changed: %+v -> %+v", before, after)
			}
			if tt.changed && after.Orders != before.Orders+1 {
				t.Errorf("orders %d -> %d, want one more", before.Orders, after.Orders)
			}
		})
	}
	d.healthy(t)
}

func newRequest(t *testing.T, url string, body io.Reader) *http.Request {
	t.Helper()
	r, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, body)
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/json")
	return r
}

// TestReceiver_SignedButUnusable: signed bodies that are not usable orders
// are acknowledged and kept byte for byte in quarantine — never stored as
// order data, never lost, never a crash. Each opens a quarantined_webhook
// finding (an event, so people hear of it) and, when its merchantOrderId
// can be read, a watch so the reconciler polls the order's real state.
//
// Invalid UTF-8 is quarantined rather than stored as an order: an order's
// strings travel on to NATS consumers as JSON, which cannot carry those
// bytes faithfully; the quarantine keeps them exactly as received.
func TestReceiver_SignedButUnusable(t *testing.T) {
	d := theDaemon(t)
	valid := func() (order, string) {
		o := d.newOrder("completed")
		return o, string(o.JSON())
	}
	tests := []struct {
		name string
		body func() (string, string) // body, merchantOrderId a poll can use ("" if none)
		// reason is part of the stored reason.
		reason string
	}{
		{"deeply nested arrays", func() (string, string) {
			return strings.Repeat("[", 200_000) + strings.Repeat("]", 200_000), ""
		}, "depth"},
		{"deeply nested objects", func() (string, string) {
			return strings.Repeat(`{"a":`, 100_000) + "1" + strings.Repeat("}", 100_000), ""
		}, "depth"},
		// Too deep to read even the ids: no watch, the finding remains.
		{"nesting inside a valid order", func() (string, string) {
			_, b := valid()
			return strings.Replace(b, `"paymentInfo":null`, `"paymentInfo":`+strings.Repeat("[", 50_000)+strings.Repeat("]", 50_000), 1), ""
		}, "depth"},
		{"invalid UTF-8 in a string", func() (string, string) {
			o, b := valid()
			return strings.Replace(b, `"createdAt":"2024-05-01T10:00:00Z"`, "\"createdAt\":\"2024-05-01\xff\xfe\"", 1), o.moid
		}, "UTF-8"},
		{"invalid UTF-8 outside strings", func() (string, string) {
			return "\xff\xfe\xfd{}", ""
		}, "UTF-8"},
		{"amount as a JSON number", func() (string, string) {
			o, b := valid()
			return strings.Replace(b, `"amount":"100.00"`, `"amount":100.00`, 1), o.moid
		}, "transactions[0].authorized.amount: must be a numeric string, got 100.00"},
		{"huge amount as a JSON number", func() (string, string) {
			o, b := valid()
			return strings.Replace(b, `"amount":"98.00"`, `"amount":123456789012345678901234567890.123456789012345678901234567890`, 1), o.moid
		}, "merchantTargetWallet.amount: must be a numeric string, got 123456789012345678901234567890.1…"},
		{"id as a JSON number", func() (string, string) {
			o, b := valid()
			return strings.Replace(b, fmt.Sprintf(`"id":%q`, o.id), `"id":4711`, 1), o.moid
		}, "id: must be a string, got 4711"},
		{"status as a JSON number", func() (string, string) {
			o, b := valid()
			return strings.Replace(b, `"status":"completed"`, `"status":3`, 1), o.moid
		}, "status: must be a string, got 3"},
		{"transactions as a string", func() (string, string) {
			o, b := valid()
			i := strings.Index(b, `"transactions":`)
			return b[:i] + `"transactions":"none"}`, o.moid
		}, `transactions: must be an array, got "none"`},
		{"amount in exponent notation", func() (string, string) {
			o, b := valid()
			return strings.Replace(b, `"amount":"100.00"`, `"amount":"1e400"`, 1), o.moid
		}, `transactions[0].authorized.amount: "1e400" is not a decimal number`},
		{"amount of 65 characters", func() (string, string) {
			o, b := valid()
			return strings.Replace(b, `"amount":"100.00"`, `"amount":"`+strings.Repeat("9", 62)+`.00"`, 1), o.moid
		}, "transactions[0].authorized.amount: too long (65 characters; at most 64)"},
		{"NaN amount", func() (string, string) {
			o, b := valid()
			return strings.Replace(b, `"amount":"100.00"`, `"amount":"NaN"`, 1), o.moid
		}, `transactions[0].authorized.amount: "NaN" is not a decimal number`},
		{"not JSON", func() (string, string) { return "status=completed&id=1", "" }, "the body is not valid JSON"},
		{"JSON null", func() (string, string) { return "null", "" }, "missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, moid := tt.body()
			before := d.rows(t)
			// The daemon is shared by the whole run (and by -count=N), so
			// the same bytes may be quarantined already: then the repeat
			// counts on that row instead of adding one.
			seen := d.queryInt(t, `SELECT coalesce(max(times_seen), 0) FROM quarantine WHERE raw = ?`, []byte(body))
			wantReply(t, d.postSigned(t, []byte(body)), http.StatusOK, "quarantined")

			after := d.rows(t)
			want := before.Quarantine
			if seen == 0 {
				want++
			}
			if after.Quarantine != want {
				t.Errorf("quarantine rows %d -> %d, want %d", before.Quarantine, after.Quarantine, want)
			}
			if got := d.queryInt(t, `SELECT coalesce(max(times_seen), 0) FROM quarantine WHERE raw = ?`, []byte(body)); got != seen+1 {
				t.Errorf("times seen %d -> %d, want one more", seen, got)
			}
			if after.Orders != before.Orders || after.Deliveries != before.Deliveries ||
				after.History != before.History || after.OrderEvents != before.OrderEvents {
				t.Errorf("order data changed: %+v -> %+v", before, after)
			}
			qid := d.queryInt(t, `SELECT id FROM quarantine WHERE raw = ?`, []byte(body))
			if n := d.queryInt(t, `SELECT count(*) FROM findings WHERE kind = 'quarantined_webhook'
				AND json_extract(detail, '$.quarantineId') = ?`, qid); n != 1 {
				t.Errorf("quarantined_webhook findings for quarantine row %d = %d, want 1", qid, n)
			}
			raw := d.queryString(t, `SELECT raw FROM quarantine WHERE id = ?`, qid)
			if raw != body {
				t.Errorf("quarantined bytes differ from the body (%d vs %d bytes)", len(raw), len(body))
			}
			if reason := d.queryString(t, `SELECT reason FROM quarantine WHERE id = ?`, qid); !strings.Contains(reason, tt.reason) {
				t.Errorf("reason %q does not mention %q", reason, tt.reason)
			}
			if moid != "" {
				if n := d.queryInt(t, `SELECT count(*) FROM watches WHERE merchant_order_id = ?`, moid); n != 1 {
					t.Errorf("watches for %s = %d, want 1: its real state must be polled", moid, n)
				}
			}
			// The provider retries nothing it got 200 for; a repeat of the
			// same bytes is still one row.
			wantReply(t, d.postSigned(t, []byte(body)), http.StatusOK, "quarantined")
			if again := d.rows(t); again != after {
				t.Errorf("a repeat added rows: %+v -> %+v", after, again)
			}
		})
	}
	d.healthy(t)
}

// TestReceiver_ExactAmounts: huge amounts and 30-digit fractions are stored
// and served exactly as the provider wrote them.
func TestReceiver_ExactAmounts(t *testing.T) {
	d := theDaemon(t)
	tests := []struct {
		name, amount, net string
	}{
		{"30 integer digits", "123456789012345678901234567890.00", "123456789012345678901234567889.99"},
		{"30 fraction digits", "0.000000000000000000000000000001", "0.000000000000000000000000000001"},
		{"30 and 30 digits", "123456789012345678901234567890.123456789012345678901234567890",
			"999999999999999999999999999999.999999999999999999999999999999"},
		{"64 characters", strings.Repeat("9", 61) + ".00", strings.Repeat("9", 61) + ".01"},
		{"zero", "0", "0.00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := d.newOrder("completed")
			o.amount, o.net = tt.amount, tt.net
			body := o.JSON()
			wantReply(t, d.postSigned(t, body), http.StatusOK, "accepted")

			if got := d.queryString(t, `SELECT target_amount FROM orders WHERE merchant_order_id = ?`, o.moid); got != tt.net {
				t.Errorf("stored target_amount = %q, want %q", got, tt.net)
			}
			if got := d.queryString(t, `SELECT raw FROM orders_current WHERE merchant_order_id = ?`, o.moid); got != string(body) {
				t.Errorf("stored body differs from the one received")
			}
			r := d.admin(t, http.MethodGet, "/v1/orders/"+o.moid, d.bearer(), "")
			if r.code != http.StatusOK {
				t.Fatalf("GET order: %d %s", r.code, r.body)
			}
			for _, want := range []string{`"amount":"` + tt.amount + `"`, `"amount":"` + tt.net + `"`} {
				if !strings.Contains(r.body, want) {
					t.Errorf("admin API answer lacks %s: %.400s", want, r.body)
				}
			}
		})
	}
}

// TestReceiver_UnknownValues: statuses, transaction types and fields the
// provider's documentation does not list are stored verbatim and do not
// break the state rules.
func TestReceiver_UnknownValues(t *testing.T) {
	d := theDaemon(t)
	o := d.newOrder("completed")
	completed := o.JSON()
	o.status = "held_for_review"
	held := bytes.Replace(o.JSON(), []byte(`"rejectReason":null,`), []byte(`"rejectReason":null,"riskScore":{"v":0.93,"flags":["new"]},`), 1)

	before := d.rows(t)
	wantReply(t, d.postSigned(t, held), http.StatusOK, "accepted")
	if got := d.queryString(t, `SELECT status FROM orders WHERE merchant_order_id = ?`, o.moid); got != "held_for_review" {
		t.Errorf("stored status = %q, want it verbatim", got)
	}
	if got := d.queryString(t, `SELECT raw FROM orders_current WHERE merchant_order_id = ?`, o.moid); got != string(held) {
		t.Error("stored body lost the unknown fields")
	}
	if after := d.rows(t); after.Outbox != before.Outbox+1 {
		t.Errorf("outbox %d -> %d, want one event for the new state", before.Outbox, after.Outbox)
	}

	// A final status after it is a change; the unknown state once more is
	// older than the final one and does not undo it.
	wantReply(t, d.postSigned(t, completed), http.StatusOK, "accepted")
	wantReply(t, d.postSigned(t, held), http.StatusOK, "stale")
	if got := d.queryString(t, `SELECT status FROM orders WHERE merchant_order_id = ?`, o.moid); got != "completed" {
		t.Errorf("status = %q after a late unknown state, want completed", got)
	}

	// An unknown transaction type and status are kept as sent.
	o2 := d.newOrder("processing")
	odd := bytes.Replace(o2.JSON(), []byte(`"type":"payin","status":"processing","authorized"`),
		[]byte(`"type":"chargeback_reversal","status":"escalated","authorized"`), 1)
	if bytes.Equal(odd, o2.JSON()) {
		t.Fatal("test body was not changed")
	}
	wantReply(t, d.postSigned(t, odd), http.StatusOK, "accepted")
	if got := d.queryString(t, `SELECT raw FROM orders_current WHERE merchant_order_id = ?`, o2.moid); got != string(odd) {
		t.Error("stored body differs from the one received")
	}
}

// TestReceiver_Replay: the same signed webhook sent again later — by an
// attacker who recorded it or by the provider's retries — is a duplicate
// (no second event), also after a restart, and an older state replayed
// after a newer one is recorded as stale and changes nothing. The
// provider's signature carries no timestamp, so age is not what decides.
func TestReceiver_Replay(t *testing.T) {
	d := theDaemon(t)
	o := d.newOrder("processing")
	processing := o.JSON()
	o.status = "completed"
	completed := o.JSON()

	wantReply(t, d.postSigned(t, processing), http.StatusOK, "accepted")
	wantReply(t, d.postSigned(t, completed), http.StatusOK, "accepted")
	before := d.rows(t)

	// The daemon restarts (as it would over days); nothing is remembered
	// only in memory.
	d.restart(t)

	wantReply(t, d.postSigned(t, completed), http.StatusOK, "duplicate")
	wantReply(t, d.postSigned(t, processing), http.StatusOK, "stale")
	after := d.rows(t)
	if after.Outbox != before.Outbox || after.Orders != before.Orders || after.Deliveries != before.Deliveries {
		t.Errorf("replays changed order data or events: %+v -> %+v", before, after)
	}
	if got := d.queryString(t, `SELECT status FROM orders WHERE merchant_order_id = ?`, o.moid); got != "completed" {
		t.Errorf("status = %q after the replays, want completed", got)
	}
	if n := d.queryInt(t, `SELECT max(times_seen) FROM webhook_deliveries d JOIN orders o ON o.id = d.order_id
		WHERE o.merchant_order_id = ?`, o.moid); n != 2 {
		t.Errorf("times_seen of the replayed delivery = %d, want 2", n)
	}
	if n := d.queryInt(t, `SELECT count(*) FROM outbox WHERE merchant_order_id = ?`, o.moid); n != 2 {
		t.Errorf("events for the order = %d, want 2 (processing, completed)", n)
	}
}

// TestReceiver_Slowloris: clients that send their headers one byte a
// second are dropped once the header timeout (5 s) passes, and the
// listener serves other senders all the while.
func TestReceiver_Slowloris(t *testing.T) {
	d := theDaemon(t)
	const slow = 50
	before := d.rows(t)

	type outcome struct {
		held    time.Duration
		written int
	}
	results := make(chan outcome, slow)
	for range slow {
		c, err := net.Dial("tcp", d.recvAddr)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			defer c.Close()
			held, written := dribble(c, 15*time.Second)
			results <- outcome{held, written}
		}()
	}

	// Meanwhile, ordinary deliveries keep being answered within the
	// provider's 3 s.
	const served = 10
	for range served {
		time.Sleep(400 * time.Millisecond)
		start := time.Now()
		wantReply(t, d.postSigned(t, d.newOrder("completed").JSON()), http.StatusOK, "accepted")
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("a delivery during the slowloris took %v, beyond the provider's 3s", took)
		}
	}

	for range slow {
		r := <-results
		if r.held < 4*time.Second || r.held > 9*time.Second {
			t.Errorf("slow client held its connection for %v (%d bytes sent), want about the 5s header timeout", r.held, r.written)
		}
	}
	after := d.rows(t)
	if after.Orders != before.Orders+served || after.Quarantine != before.Quarantine {
		t.Errorf("rows %+v -> %+v, want exactly the %d ordinary deliveries", before, after, served)
	}
}

// dribble writes a request's headers one byte a second until the server
// closes the connection, and returns how long that took and how many bytes
// were written. It gives up after limit.
func dribble(c net.Conn, limit time.Duration) (time.Duration, int) {
	start := time.Now()
	header := "POST /webhooks/orders HTTP/1.1\r\nHost: orderd\r\nContent-Type: application/json\r\nX-Slow: " +
		strings.Repeat("s", 64)
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		_ = c.SetReadDeadline(start.Add(limit))
		_, _ = io.Copy(io.Discard, c)
	}()
	written := 0
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for written < len(header) {
		if _, err := c.Write([]byte{header[written]}); err != nil {
			break
		}
		written++
		select {
		case <-closed:
			return time.Since(start), written
		case <-tick.C:
		}
	}
	<-closed
	return time.Since(start), written
}

// TestReceiver_IdleConnections: 500 idle keep-alive connections do not stop
// the listener from serving new senders, and stay usable themselves.
func TestReceiver_IdleConnections(t *testing.T) {
	d := theDaemon(t)
	const idle = 500
	conns := make([]net.Conn, 0, idle)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	ask := func(c net.Conn) (int, error) {
		if _, err := io.WriteString(c, "GET /webhooks/orders HTTP/1.1\r\nHost: orderd\r\n\r\n"); err != nil {
			return 0, err
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	for range idle {
		c, err := net.Dial("tcp", d.recvAddr)
		if err != nil {
			t.Fatalf("connection %d: %v", len(conns), err)
		}
		conns = append(conns, c)
		if code, err := ask(c); err != nil || code != http.StatusMethodNotAllowed {
			t.Fatalf("connection %d: %d %v, want 405", len(conns), code, err)
		}
	}

	before := d.rows(t)
	for range 20 {
		start := time.Now()
		wantReply(t, d.postSigned(t, d.newOrder("completed").JSON()), http.StatusOK, "accepted")
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("a delivery beside %d idle connections took %v, beyond the provider's 3s", idle, took)
		}
	}
	if after := d.rows(t); after.Orders != before.Orders+20 {
		t.Errorf("orders %d -> %d, want 20 more", before.Orders, after.Orders)
	}
	d.healthy(t)
	// The idle connections are still served when they speak again.
	for i := 0; i < idle; i += 50 {
		if code, err := ask(conns[i]); err != nil || code != http.StatusMethodNotAllowed {
			t.Errorf("idle connection %d: %d %v, want 405", i, code, err)
		}
	}
}
