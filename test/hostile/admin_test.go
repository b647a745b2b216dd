package hostile_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"orderd/provider/providertest"
)

// TestAdmin_Token: with a token configured, the admin API refuses every
// request without it — also from another host's address when the listener
// is bound beyond loopback — and changes nothing. Health and metrics stay
// public so that probes and scrapers need no secret.
func TestAdmin_Token(t *testing.T) {
	d := theDaemon(t)
	if d.adminHost.IsLoopback() {
		t.Log("this host has no non-loopback IPv4 address: the admin API is tested on loopback only")
	} else {
		t.Logf("admin API bound to %s; requests come from that address", d.adminURL)
	}
	o := d.newOrder("completed")
	wantReply(t, d.postSigned(t, o.JSON()), http.StatusOK, "accepted")
	payin := `{"merchantOrderId":"` + d.newOrder("").moid + `","invoice":{"amount":"10.00","currency":"brl"},"client":{"name":"Ana"}}`

	tests := []struct {
		name, method, path, auth, body string
		code                           int
	}{
		{"order without a token", "GET", "/v1/orders/" + o.moid, "", "", 401},
		{"order with a wrong token", "GET", "/v1/orders/" + o.moid, "Bearer not-the-token", "", 401},
		{"order with the token as Basic", "GET", "/v1/orders/" + o.moid, "Basic " + d.token, "", 401},
		{"order with a token prefix", "GET", "/v1/orders/" + o.moid, "Bearer " + d.token[:len(d.token)-1], "", 401},
		{"order listing without a token", "GET", "/v1/orders", "", "", 401},
		{"gateway payin without a token", "POST", "/v1/payins", "", payin, 401},
		{"gateway payout without a token", "POST", "/v1/payouts", "", `{"merchantOrderId":"x"}`, 401},
		{"attempts without a token", "GET", "/v1/attempts", "", "", 401},
		{"findings without a token", "GET", "/v1/findings", "", "", 401},
		{"watch without a token", "POST", "/v1/watch", "", `{"merchantOrderId":"x"}`, 401},
		{"reports without a token", "GET", "/v1/reports/reconciliation?from=2024-01-01&to=2024-02-01", "", "", 401},
		{"report files without a token", "GET", "/v1/reports/files", "", "", 401},
		{"a report file without a token", "GET", "/v1/reports/files/orderd-reconciliation-2024-01-01-2024-01-02.csv", "", "", 401},
		{"healthz is public", "GET", "/healthz", "", "", 200},
		{"readyz is public", "GET", "/readyz", "", "", 200},
		{"metrics are public", "GET", "/metrics", "", "", 200},
		{"order with the token", "GET", "/v1/orders/" + o.moid, d.bearer(), "", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := d.rows(t)
			calls := len(d.fake.Calls(""))
			r := d.admin(t, tt.method, tt.path, tt.auth, tt.body)
			if r.code != tt.code {
				t.Fatalf("answer %d (%.300s), want %d", r.code, r.body, tt.code)
			}
			if tt.code == http.StatusUnauthorized {
				var e struct {
					Error any `json:"error"`
				}
				if json.Unmarshal([]byte(r.body), &e) != nil || e.Error == nil {
					t.Errorf("401 answer is not a JSON error: %s", r.body)
				}
				if strings.Contains(r.body, o.moid) {
					t.Errorf("401 answer reveals order data: %s", r.body)
				}
			}
			if after := d.rows(t); after != before {
				t.Errorf("rows changed: %+v -> %+v", before, after)
			}
			if n := len(d.fake.Calls("")); n != calls {
				t.Errorf("the provider was called %d times", n-calls)
			}
		})
	}
	if strings.Contains(d.log(t), "beyond loopback without a token") {
		t.Error("the exposure warning was logged although a token is configured")
	}
}

// TestAdmin_CrossSite: a state-changing request a browser makes on behalf
// of another site is refused (403) before it reaches the gateway — even one
// that somehow carried the token — while the same request from a tool
// without browser headers goes through.
func TestAdmin_CrossSite(t *testing.T) {
	d := theDaemon(t)
	moid := d.newOrder("").moid
	payin := `{"merchantOrderId":"` + moid + `","invoice":{"amount":"10.00","currency":"brl"},"client":{"name":"Ana"}}`
	before := d.rows(t)
	calls := len(d.fake.Calls(""))

	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, d.adminURL+"/v1/payins", strings.NewReader(payin))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "text/plain;charset=UTF-8")
	req.Header.Set("Origin", "https://shop-reviews.example")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.Header.Set("Authorization", d.bearer())
	r := do(t, http.DefaultClient, req)
	if r.code != http.StatusForbidden || !strings.Contains(r.body, "cross-origin") {
		t.Fatalf("cross-site POST: %d %s, want 403", r.code, r.body)
	}
	if after := d.rows(t); after != before {
		t.Errorf("rows changed: %+v -> %+v", before, after)
	}
	if n := len(d.fake.Calls("")); n != calls {
		t.Errorf("the provider was called %d times", n-calls)
	}

	r = d.admin(t, http.MethodPost, "/v1/payins", d.bearer(), payin)
	if r.code != http.StatusCreated {
		t.Fatalf("the same POST without browser headers: %d %s, want 201", r.code, r.body)
	}
}

// TestGateway_UnknownErrorCode: an error code the provider's documentation
// does not list is stored verbatim on the attempt and answered as a
// rejection the merchant may retry (503), not as a creation and not as in
// doubt.
func TestGateway_UnknownErrorCode(t *testing.T) {
	d := theDaemon(t)
	const code = "MERCHANT_ON_VACATION_2031"
	if err := d.fake.InjectFault(providertest.Fault{Endpoint: providertest.PathPaymentCreate,
		Kind: providertest.ErrorAnswer, Code: code}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.fake.ClearFaults)
	moid := d.newOrder("").moid
	payin := `{"merchantOrderId":"` + moid + `","invoice":{"amount":"10.00","currency":"brl"},"client":{"name":"Ana"}}`

	r := d.admin(t, http.MethodPost, "/v1/payins", d.bearer(), payin)
	if r.code != http.StatusServiceUnavailable || r.status != "rejected" || !strings.Contains(r.body, code) {
		t.Fatalf("answer %d %q %s, want 503 rejected naming %s", r.code, r.status, r.body, code)
	}
	state := d.queryString(t, `SELECT state FROM attempts WHERE merchant_order_id = ? ORDER BY id DESC LIMIT 1`, moid)
	stored := d.queryString(t, `SELECT error_code FROM attempts WHERE merchant_order_id = ? ORDER BY id DESC LIMIT 1`, moid)
	if state != "rejected" || stored != code {
		t.Errorf("attempt state %q code %q, want rejected %q", state, stored, code)
	}
	if n := d.queryInt(t, `SELECT count(*) FROM orders WHERE merchant_order_id = ?`, moid); n != 0 {
		t.Errorf("orders for the rejected creation = %d, want 0", n)
	}

	// The cause lies with the provider, so the same request may be tried
	// again, and now succeeds.
	r = d.admin(t, http.MethodPost, "/v1/payins", d.bearer(), payin)
	if r.code != http.StatusCreated || r.status != "created" {
		t.Fatalf("retry: %d %s, want 201 created", r.code, r.body)
	}
}

// TestDaemon_LogsHoldNoSecrets: what this suite sent — the admin token,
// the provider's API key, webhook signatures — never appears in the log.
func TestDaemon_LogsHoldNoSecrets(t *testing.T) {
	d := theDaemon(t)
	body := d.newOrder("completed").JSON()
	sig := d.sign(t, body)
	wantReply(t, d.post(t, body, sig), http.StatusOK, "accepted")
	forged := signWith(t, d.otherKey, body)
	wantReply(t, d.post(t, body, forged), http.StatusUnauthorized, "bad_signature")
	if r := d.admin(t, http.MethodGet, "/v1/attempts", d.bearer(), ""); r.code != http.StatusOK {
		t.Fatalf("attempts: %d %s", r.code, r.body)
	}
	if r := d.admin(t, http.MethodGet, "/v1/attempts", "Bearer guess-"+d.token, ""); r.code != http.StatusUnauthorized {
		t.Fatalf("attempts with a wrong token: %d", r.code)
	}

	log := d.log(t)
	if !strings.Contains(log, `"outcome":"bad_signature"`) {
		t.Fatalf("the log does not show the deliveries at all:\n%.2000s", log)
	}
	for name, secret := range map[string]string{
		"admin token": d.token, "provider API key": d.apiKey,
		"signature": sig[:40], "forged signature": forged[:40], "wrong token": "guess-" + d.token,
	} {
		if strings.Contains(log, secret) {
			t.Errorf("the log contains the %s", name)
		}
	}
}

// TestAdmin_ReportFilesTraversal: GET /v1/reports/files/{name} serves the
// scheduled report files and nothing else. Request lines are sent raw, as
// an attacker would, so no client cleans them: dot segments, encoded
// slashes and dots, a backslash, a NUL, and a link planted in the reports
// directory that points at the admin token file. None of them reads
// anything outside the directory; the real report file is served.
func TestAdmin_ReportFilesTraversal(t *testing.T) {
	d := theDaemon(t)
	reports := filepath.Join(d.dir, "reports")
	if err := os.MkdirAll(reports, 0o750); err != nil {
		t.Fatal(err)
	}
	const name = "orderd-reconciliation-2024-01-01-2024-01-02.csv"
	if err := os.WriteFile(filepath.Join(reports, name), []byte("order_id,merchant_order_id\r\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(reports, "orderd-reconciliation-2023-01-01-2023-01-02.csv")
	if err := os.Symlink(filepath.Join(d.dir, "admin-token"), link); err != nil && !os.IsExist(err) {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(d.adminURL, "http://")
	for _, path := range []string{
		"/v1/reports/files/../admin-token",
		"/v1/reports/files/../../admin-token",
		"/v1/reports/files/..%2fadmin-token",
		"/v1/reports/files/..%2F..%2Fadmin-token",
		"/v1/reports/files/%2e%2e/admin-token",
		"/v1/reports/files/%2e%2e%2fadmin-token",
		"/v1/reports/files/..%5cadmin-token",
		"/v1/reports/files/" + name + "%00.csv",
		"/v1/reports/files/reports%2f..%2fadmin-token",
		"/v1/reports/files//admin-token",
		"/v1/reports/files/orderd-reconciliation-2023-01-01-2023-01-02.csv",
		"/v1/reports/files/.%2forderd-reconciliation-2023-01-01-2023-01-02.csv",
	} {
		t.Run(path, func(t *testing.T) {
			code, body := rawGet(t, host, path, d.token)
			if code == http.StatusOK || strings.Contains(body, d.token) {
				t.Fatalf("answer %d: %.300s", code, body)
			}
		})
	}
	code, body := rawGet(t, host, "/v1/reports/files/"+name, d.token)
	if code != http.StatusOK || body != "order_id,merchant_order_id\r\n" {
		t.Errorf("the report file itself: %d %q", code, body)
	}
}

// rawGet sends "GET path HTTP/1.1" exactly as given, with the token, and
// returns the status code and body.
func rawGet(t *testing.T, host, path, token string) (int, string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n", path, host, token); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}
