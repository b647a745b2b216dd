package receiver_test

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"orderd/receiver"
)

// FuzzHandler sends random bodies, signatures and forwarding headers. The
// handler must never panic, never answer 200 to a body the key did not
// sign, never store anything of an unsigned body, and always answer a small
// JSON object.
func FuzzHandler(f *testing.F) {
	key, otherKey := testKeys(f)
	valid := newOrder(1, "completed").JSON()
	f.Add(valid, "", true, "")
	f.Add(valid, "", false, "")
	f.Add(valid, sign(f, otherKey, valid), false, "")
	f.Add(valid, sign(f, key, valid), false, "")         // the key's own signature, passed through the fuzzed header
	f.Add([]byte(`{"hello":"world"}`), "", true, "")     // signed, not an order
	f.Add([]byte("\xff\xfe{}"), "", true, "203.0.113.1") // invalid UTF-8
	f.Add([]byte(strings.Repeat("[", 20000)), "", true, "")
	f.Add([]byte(`{"merchantOrderId":"m-9"}`), "not base64!", false, "198.51.100.1, 203.0.113.1")
	f.Add(bytes.Replace(valid, []byte(`"100.00"`), []byte(`100.00`), 1), "", true, "garbage")

	dbPath := filepath.Join(f.TempDir(), "fuzz.db")
	st := openStore(f, dbPath)
	h := receiver.New(receiver.Config{
		AllowedIPs:     prefixes(f, "203.0.113.0/24", "10.0.0.0/8"),
		TrustedProxies: prefixes(f, "10.0.0.0/8"),
	}, receiver.Deps{Store: st, Verifier: newVerifier(f, key), Logger: slog.New(slog.DiscardHandler)})
	db, err := sql.Open("sqlite", "file:"+dbPath+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	verifier := newVerifier(f, key)

	f.Fuzz(func(t *testing.T, body []byte, sig string, signIt bool, xff string) {
		if signIt {
			sig = sign(t, key, body)
		}
		// The fuzzer may hand back a valid signature it was seeded with.
		signed := verifier.Verify(body, sig) == nil

		before := stored(t, db)
		req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, receiver.DefaultPath, bytes.NewReader(body))
		req.RemoteAddr = "10.0.0.1:5000"
		if xff != "" {
			req.Header.Set("X-Forwarded-For", xff)
		}
		if sig != "" {
			req.Header.Set("Signature", sig)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)

		var answer struct {
			Status string `json:"status"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil || answer.Status == "" || rec.Body.Len() > 512 {
			t.Fatalf("answer %d is not a small JSON status: %q", rec.Code, rec.Body)
		}
		if signed {
			return
		}
		if rec.Code == http.StatusOK {
			t.Fatalf("unsigned body answered 200: %s", rec.Body)
		}
		if after := stored(t, db); after != before {
			t.Fatalf("unsigned body changed the store: %s -> %s", before, after)
		}
	})
}

// stored summarises the rows that hold order data.
func stored(t *testing.T, db *sql.DB) string {
	t.Helper()
	var orders, deliveries, history, outbox, quarantine int
	err := db.QueryRowContext(t.Context(), `SELECT
		(SELECT count(*) FROM orders), (SELECT count(*) FROM webhook_deliveries),
		(SELECT count(*) FROM order_history), (SELECT count(*) FROM outbox),
		(SELECT count(*) FROM quarantine)`).Scan(&orders, &deliveries, &history, &outbox, &quarantine)
	if err != nil {
		t.Fatalf("count rows: %v", err)
	}
	b, _ := json.Marshal([]int{orders, deliveries, history, outbox, quarantine})
	return string(b)
}
