package provider_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"orderd/provider"

	"github.com/shopspring/decimal"
)

// The tests in this file use small httptest servers to play transport faults
// and malformed answers that a faithful fake provider never gives. The
// provider's own behaviour is tested against providertest in
// client_fake_test.go.

const testKey = "sk_live_0123456789abcdefSECRET"

// orderJSON is a get-status answer's data for merchant order "m-1".
const orderJSON = `{"id":"7f7c3a4e-0000-4000-8000-000000000001","merchantOrderId":"m-1","type":"payin",` +
	`"createdAt":"2026-01-02T03:04:05Z","status":"processing","rejectReason":null,` +
	`"merchantSourceWallet":null,"merchantTargetWallet":null,"transactions":[]}`

func envelope(data string) string { return `{"data":` + data + `,"error":null}` }

// newClient starts h on a loopback server and returns a client for it.
func newClient(t *testing.T, h http.HandlerFunc, opts ...func(*provider.Options)) *provider.Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	o := provider.Options{BaseURL: srv.URL, APIKey: testKey, HTTPClient: srv.Client()}
	for _, f := range opts {
		f(&o)
	}
	c, err := provider.NewClient(o)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	return c
}

func answer(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

func TestClient_GetStatusClassification(t *testing.T) {
	tests := []struct {
		name       string
		handler    http.HandlerFunc
		timeout    time.Duration
		wantStatus int    // for in-doubt answers: InDoubtError.StatusCode
		wantCode   string // for definite errors: the provider code
		wantIn     string // substring of the error message
	}{
		{name: "502 bad gateway", handler: answer(502, "<html>Bad Gateway</html>"), wantStatus: 502, wantIn: "502"},
		{name: "500 with an error envelope", handler: answer(500, `{"data":null,"error":{"code":"UNKNOWN"}}`), wantStatus: 500, wantIn: "500"},
		{name: "404 status", handler: answer(404, "not found"), wantStatus: 404, wantIn: "404"},
		{name: "201 with a success envelope", handler: answer(201, envelope(orderJSON)), wantStatus: 201, wantIn: "201"},
		{name: "non-JSON body", handler: answer(200, "<html>maintenance</html>"), wantStatus: 200, wantIn: "not a JSON object"},
		{name: "empty body", handler: answer(200, ""), wantStatus: 200, wantIn: "not a JSON object"},
		{name: "truncated JSON", handler: answer(200, `{"data":{"id":"x"`), wantStatus: 200, wantIn: "not an envelope"},
		{name: "object without envelope keys", handler: answer(200, `{"status":"ok"}`), wantStatus: 200, wantIn: "neither data nor error"},
		{name: "error object without code", handler: answer(200, `{"data":null,"error":{"message":"x"}}`), wantStatus: 200, wantIn: "no code"},
		{name: "error that is a string", handler: answer(200, `{"data":null,"error":"boom"}`), wantStatus: 200, wantIn: "error object does not decode"},
		{name: "data null", handler: answer(200, envelope("null")), wantStatus: 200, wantIn: "data is null"},
		{name: "data not an order", handler: answer(200, envelope(`{"foo":1}`)), wantStatus: 200, wantIn: "id is missing"},
		{name: "amount as a JSON number", handler: answer(200, envelope(strings.Replace(orderJSON,
			`"merchantTargetWallet":null`, `"merchantTargetWallet":{"amount":5.1,"currency":"brl"}`, 1))),
			wantStatus: 200, wantIn: "numeric string"},
		{name: "answer about another order", handler: answer(200, envelope(strings.Replace(orderJSON, `"m-1"`, `"m-2"`, 1))),
			wantStatus: 200, wantIn: `"m-2"`},
		{name: "body over 8 MiB", handler: func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, `{"data":"`)
			io.WriteString(w, strings.Repeat("x", provider.MaxResponseBytes))
			io.WriteString(w, `","error":null}`)
		}, wantStatus: 200, wantIn: "larger than"},
		{name: "connection closed before answering", handler: hijack(""), wantIn: "EOF"},
		{name: "connection closed mid-body", handler: hijack("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" +
			"Content-Length: 500\r\n\r\n" + `{"data":{"id":"7f7c`), wantStatus: 200, wantIn: "unexpected EOF"},
		{name: "timeout", timeout: 50 * time.Millisecond, handler: hang, wantIn: "deadline exceeded"},
		{name: "headers then stall past the timeout", timeout: 100 * time.Millisecond, handler: func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(200)
			io.WriteString(w, `{"data":`)
			w.(http.Flusher).Flush()
			hang(w, r)
		}, wantStatus: 200, wantIn: "deadline exceeded"},

		{name: "ORDER_NOT_FOUND", handler: answer(200, `{"data":null,"error":{"code":"ORDER_NOT_FOUND","validationErrors":null}}`),
			wantCode: "ORDER_NOT_FOUND"},
		{name: "unknown code kept verbatim", handler: answer(200, `{"data":null,"error":{"code":"BRAND_NEW_CODE"}}`),
			wantCode: "BRAND_NEW_CODE"},
		{name: "error wins over data", handler: answer(200, `{"data":`+orderJSON+`,"error":{"code":"UNKNOWN"}}`),
			wantCode: "UNKNOWN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient(t, tt.handler, func(o *provider.Options) { o.Timeout = tt.timeout })
			start := time.Now()
			o, raw, err := c.GetStatus(t.Context(), "m-1")
			if err == nil {
				t.Fatalf("GetStatus succeeded with %+v (%s); want an error", o, raw)
			}
			t.Logf("error: %v", err)
			if o != nil || raw != nil {
				t.Errorf("GetStatus returned an order beside the error %v", err)
			}
			if tt.timeout > 0 && time.Since(start) > 2*time.Second {
				t.Errorf("GetStatus took %v with a %v timeout", time.Since(start), tt.timeout)
			}
			if !strings.Contains(err.Error(), tt.wantIn) {
				t.Errorf("error %q does not mention %q", err, tt.wantIn)
			}
			var perr *provider.Error
			if tt.wantCode != "" {
				if !errors.As(err, &perr) || string(perr.Code) != tt.wantCode {
					t.Fatalf("error %v: want *provider.Error with code %s", err, tt.wantCode)
				}
				if errors.Is(err, provider.ErrInDoubt) {
					t.Errorf("definite error %v also matches ErrInDoubt", err)
				}
				return
			}
			if !errors.Is(err, provider.ErrInDoubt) {
				t.Fatalf("error %v does not match ErrInDoubt", err)
			}
			if errors.As(err, &perr) {
				t.Errorf("in-doubt error %v also carries a definite *provider.Error", err)
			}
			var de *provider.InDoubtError
			if !errors.As(err, &de) {
				t.Fatalf("error %v is not an *InDoubtError", err)
			}
			if de.StatusCode != tt.wantStatus || de.Endpoint != provider.EndpointGetStatus {
				t.Errorf("InDoubtError status %d endpoint %q, want %d %q", de.StatusCode, de.Endpoint, tt.wantStatus, provider.EndpointGetStatus)
			}
			if len(err.Error()) > 400 {
				t.Errorf("error message is %d bytes long; the body must be cut to a prefix: %.100s…", len(err.Error()), err)
			}
		})
	}
}

// hang reads the request and waits until the client goes away (the server
// notices only once the body is read) or five seconds pass.
func hang(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	select {
	case <-r.Context().Done():
	case <-time.After(5 * time.Second):
	}
}

// hijack takes over the connection, writes raw (possibly nothing) and closes
// it, as a crashing server or a dropped link would.
func hijack(raw string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			panic(err)
		}
		io.WriteString(buf, raw)
		buf.Flush()
		conn.Close()
	}
}

func TestClient_TimeoutUnwrapsToDeadline(t *testing.T) {
	c := newClient(t, hang,
		func(o *provider.Options) { o.Timeout = 20 * time.Millisecond })
	_, _, err := c.GetStatus(t.Context(), "m-1")
	if !errors.Is(err, provider.ErrInDoubt) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v: want both ErrInDoubt and context.DeadlineExceeded", err)
	}
	if !strings.Contains(err.Error(), "within the 20ms timeout") {
		t.Errorf("error %q does not name the timeout", err)
	}
}

func TestClient_ValidationError(t *testing.T) {
	c := newClient(t, answer(200, `{"data":null,"error":{"code":"VALIDATION","validationErrors":[`+
		`{"field":"invoice.amount","message":"must be a positive number"},`+
		`{"field":"merchantOrderId","message":"is required"}]}}`))
	_, _, err := c.CreatePayment(t.Context(), provider.PaymentRequest{Invoice: provider.MustMoney("-1", "brl")})
	var perr *provider.Error
	if !errors.As(err, &perr) {
		t.Fatalf("CreatePayment error %v: want *provider.Error", err)
	}
	want := []provider.ValidationError{
		{Field: "invoice.amount", Message: "must be a positive number"},
		{Field: "merchantOrderId", Message: "is required"},
	}
	if perr.Code != provider.CodeValidation || !reflect.DeepEqual(perr.ValidationErrors, want) {
		t.Errorf("got %s %+v, want VALIDATION %+v", perr.Code, perr.ValidationErrors, want)
	}
	if provider.ErrorCode(err) != provider.CodeValidation {
		t.Errorf("ErrorCode(%v) = %q", err, provider.ErrorCode(err))
	}
	for _, s := range []string{"invoice.amount", "is required", string(provider.EndpointPaymentCreate)} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
}

// request is what a test server saw.
type request struct {
	method, path string
	header       http.Header
	body         string
}

// recorder answers every request with answers[path] and records it.
type recorder struct {
	mu   sync.Mutex
	reqs []request
}

func (rec *recorder) handler(answers map[string]string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, request{r.Method, r.URL.Path, r.Header.Clone(), string(b)})
		rec.mu.Unlock()
		a, ok := answers[r.URL.Path]
		if !ok {
			http.Error(w, "no answer for "+r.URL.Path, http.StatusNotFound)
			return
		}
		io.WriteString(w, a)
	}
}

func (rec *recorder) last(t *testing.T) request {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.reqs) == 0 {
		t.Fatal("the server saw no request")
	}
	return rec.reqs[len(rec.reqs)-1]
}

func (rec *recorder) count() int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return len(rec.reqs)
}

// jsonEqual compares two JSON texts by value, keeping strings as strings.
func jsonEqual(t *testing.T, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("request body %q is not JSON: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want %q: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("request body\n got %s\nwant %s", got, want)
	}
}

func TestClient_Requests(t *testing.T) {
	refundJSON := `{"id":"7f7c3a4e-0000-4000-8000-000000000001","merchantOrderId":"m-1","type":"payin",` +
		`"createdAt":"2026-01-02T03:04:05+00:00","status":"completed","refundTransaction":{"id":"r-1","status":"new",` +
		`"type":"refund","amount":{"amount":"0.10","currency":"brl"},"createdAt":"2026-01-02T03:05:00Z"}}`
	requisiteJSON := `{"id":"q-1","requisite":{"clabe":"646180000000000000","reference":null,"type":"clabe"},` +
		`"expiresAt":"2026-02-01T00:00:00Z","minAmount":"10.00"}`
	rec := &recorder{}
	c := newClient(t, rec.handler(map[string]string{
		"/api/v3/balances":                         envelope(`[{"currency":"brl","amount":"1000000000000.01"},{"currency":"mxn","amount":"0.10"}]`),
		"/api/v3/order/payment-form/create":        envelope(orderJSON),
		"/api/v3/order/get-status":                 envelope(orderJSON),
		"/api/v3/order/refund/create":              envelope(refundJSON),
		"/api/v3/client-requisite/create":          envelope(requisiteJSON),
		"/api/v3/client-requisite/deactivate":      envelope(`{"id":"q-1","status":"expired"}`),
		"/api/v3/client-requisite/get-orders-list": envelope(`[` + orderJSON + `]`),
		"/api/v3/order/withdrawal/create":          envelope(`{"id":"w-1","anything":[1,2]}`),
	}))
	ctx := t.Context()
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	tests := []struct {
		name     string
		call     func() (any, error)
		wantPath string
		wantBody string
		check    func(t *testing.T, got any)
	}{
		{
			name:     "balances",
			call:     func() (any, error) { return c.Balances(ctx) },
			wantPath: "/api/v3/balances",
			wantBody: `{}`,
			check: func(t *testing.T, got any) {
				want := []provider.Balance{{Currency: "brl", Amount: "1000000000000.01"}, {Currency: "mxn", Amount: "0.10"}}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("balances %+v, want %+v", got, want)
				}
			},
		},
		{
			name: "payment regular variant",
			call: func() (any, error) {
				o, raw, err := c.CreatePayment(ctx, provider.PaymentRequest{
					MerchantOrderID: "m-1", Invoice: provider.MustMoney("0.10", "BRL"),
					ReturnURL: "https://shop.example/return", WebhookURL: "https://shop.example/hook",
				})
				return [2]any{o, string(raw)}, err
			},
			wantPath: "/api/v3/order/payment-form/create",
			wantBody: `{"merchantOrderId":"m-1","invoice":{"amount":"0.10","currency":"brl"},` +
				`"returnUrl":"https://shop.example/return","webhookUrl":"https://shop.example/hook"}`,
			check: checkOrderAndRaw(orderJSON),
		},
		{
			name: "payment extended variant",
			call: func() (any, error) {
				o, raw, err := c.CreatePayment(ctx, provider.PaymentRequest{
					MerchantOrderID: "m-1", Invoice: provider.MustMoney("1000000000000.01", "brl"),
					Client: &provider.PaymentClient{Name: "Ana Lima", Email: "ana@example.com", Phone: "5511999990000",
						Taxpayer: &provider.Taxpayer{Number: "12345678909"}},
					Attributes: &provider.PaymentAttributes{RoutingKey: provider.RoutingKeyExtended},
				})
				return [2]any{o, string(raw)}, err
			},
			wantPath: "/api/v3/order/payment-form/create",
			wantBody: `{"merchantOrderId":"m-1","invoice":{"amount":"1000000000000.01","currency":"brl"},` +
				`"client":{"name":"Ana Lima","email":"ana@example.com","phone":"5511999990000","taxpayer":{"number":"12345678909"}},` +
				`"attributes":{"routingKey":"EXTENDED"}}`,
			check: checkOrderAndRaw(orderJSON),
		},
		{
			name: "get-status",
			call: func() (any, error) {
				o, raw, err := c.GetStatus(ctx, "m-1")
				return [2]any{o, string(raw)}, err
			},
			wantPath: "/api/v3/order/get-status",
			wantBody: `{"merchantOrderId":"m-1"}`,
			check:    checkOrderAndRaw(orderJSON),
		},
		{
			name: "refund",
			call: func() (any, error) {
				o, raw, err := c.CreateRefund(ctx, provider.RefundRequest{
					Amount: decimal.RequireFromString("0.10"), RefundReason: "customer asked",
					ID: "7f7c3a4e-0000-4000-8000-000000000001", MerchantOrderID: "m-1",
				})
				return [2]any{o, string(raw)}, err
			},
			wantPath: "/api/v3/order/refund/create",
			wantBody: `{"amount":"0.10","refundReason":"customer asked","id":"7f7c3a4e-0000-4000-8000-000000000001","merchantOrderId":"m-1"}`,
			check: func(t *testing.T, got any) {
				o := got.([2]any)[0].(*provider.Order)
				if o.RefundTransaction == nil || o.RefundTransaction.Status != provider.StatusNew ||
					provider.FormatAmount(o.RefundTransaction.Amount.Amount) != "0.10" {
					t.Errorf("refund transaction %+v, want new 0.10", o.RefundTransaction)
				}
				if got.([2]any)[1] != refundJSON {
					t.Errorf("raw data %s, want the provider's exact JSON", got.([2]any)[1])
				}
			},
		},
		{
			name: "requisite create",
			call: func() (any, error) {
				r, raw, err := c.CreateRequisite(ctx, provider.RequisiteRequest{
					Client: provider.RequisiteClient{ID: "client-7"}, Currency: "mxn",
					MerchantOrderIDPrefix: "dep-", Type: provider.RequisiteLongTerm,
					WebhookURL: "https://shop.example/hook",
				})
				return [2]any{r, string(raw)}, err
			},
			wantPath: "/api/v3/client-requisite/create",
			wantBody: `{"client":{"id":"client-7"},"currency":"mxn","merchantOrderIdPrefix":"dep-","type":"long_term","webhookUrl":"https://shop.example/hook"}`,
			check: func(t *testing.T, got any) {
				r := got.([2]any)[0].(*provider.Requisite)
				if r.ID != "q-1" || r.Requisite.Clabe != "646180000000000000" || r.MinAmount != "10.00" || r.ExpiresAt.IsZero() {
					t.Errorf("requisite %+v", r)
				}
				if got.([2]any)[1] != requisiteJSON {
					t.Errorf("raw data %s, want the provider's exact JSON", got.([2]any)[1])
				}
			},
		},
		{
			name: "requisite deactivate",
			call: func() (any, error) {
				raw, err := c.DeactivateRequisite(ctx, "q-1")
				return string(raw), err
			},
			wantPath: "/api/v3/client-requisite/deactivate",
			wantBody: `{"id":"q-1"}`,
			check: func(t *testing.T, got any) {
				if got != `{"id":"q-1","status":"expired"}` {
					t.Errorf("raw data %s", got)
				}
			},
		},
		{
			name: "requisite orders",
			call: func() (any, error) {
				return c.RequisiteOrders(ctx, provider.RequisiteOrdersRequest{
					ID: "q-1", CreatedAtFrom: from, CreatedAtTo: from.Add(36 * time.Hour).In(time.FixedZone("x", 3600)), Limit: 50, Offset: 100,
				})
			},
			wantPath: "/api/v3/client-requisite/get-orders-list",
			wantBody: `{"id":"q-1","createdAtFrom":"2026-01-01T00:00:00Z","createdAtTo":"2026-01-02T12:00:00Z","limit":50,"offset":100}`,
			check: func(t *testing.T, got any) {
				list := got.([]provider.RawOrder)
				if len(list) != 1 || list[0].Order.MerchantOrderID != "m-1" || string(list[0].Raw) != orderJSON {
					t.Errorf("orders %+v", list)
				}
			},
		},
		{
			name: "withdrawal passes the caller's JSON through",
			call: func() (any, error) {
				raw, err := c.CreateWithdrawal(ctx, json.RawMessage(`{"merchantOrderId":"p-1","amount":"12.30","extra":{"k":[true]}}`))
				return string(raw), err
			},
			wantPath: "/api/v3/order/withdrawal/create",
			wantBody: `{"merchantOrderId":"p-1","amount":"12.30","extra":{"k":[true]}}`,
			check: func(t *testing.T, got any) {
				if got != `{"id":"w-1","anything":[1,2]}` {
					t.Errorf("raw data %s", got)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.call()
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			r := rec.last(t)
			if r.method != http.MethodPost || r.path != tt.wantPath {
				t.Errorf("request %s %s, want POST %s", r.method, r.path, tt.wantPath)
			}
			for k, want := range map[string]string{
				"Content-Type":  "application/json",
				"Accept":        "application/json; charset=utf-8",
				"Authorization": testKey,
			} {
				if got := r.header.Values(k); len(got) != 1 || got[0] != want {
					t.Errorf("header %s = %q, want %q", k, got, want)
				}
			}
			jsonEqual(t, r.body, tt.wantBody)
			tt.check(t, got)
		})
	}
}

func checkOrderAndRaw(wantRaw string) func(t *testing.T, got any) {
	return func(t *testing.T, got any) {
		pair := got.([2]any)
		o := pair[0].(*provider.Order)
		if o.MerchantOrderID != "m-1" || o.Status != provider.StatusProcessing || o.Type != provider.TypePayin {
			t.Errorf("order %+v", o)
		}
		if pair[1] != wantRaw {
			t.Errorf("raw data %s, want the provider's exact JSON %s", pair[1], wantRaw)
		}
	}
}

func TestClient_BaseURLWithPath(t *testing.T) {
	rec := &recorder{}
	srv := httptest.NewServer(rec.handler(map[string]string{"/gw/api/v3/balances": envelope(`[]`)}))
	t.Cleanup(srv.Close)
	c, err := provider.NewClient(provider.Options{BaseURL: srv.URL + "/gw/", APIKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	bs, err := c.Balances(t.Context())
	if err != nil || len(bs) != 0 {
		t.Fatalf("Balances = %v, %v; want an empty list", bs, err)
	}
	if p := rec.last(t).path; p != "/gw/api/v3/balances" {
		t.Errorf("path %s, want /gw/api/v3/balances", p)
	}
}

func TestClient_RequisiteOrdersShapes(t *testing.T) {
	second := strings.Replace(orderJSON, `"m-1"`, `"m-2"`, 1)
	tests := []struct {
		name    string
		data    string
		want    []string // merchantOrderIds
		inDoubt bool
	}{
		{name: "array", data: `[` + orderJSON + `,` + second + `]`, want: []string{"m-1", "m-2"}},
		{name: "empty array", data: `[]`, want: []string{}},
		{name: "object with orders", data: `{"orders":[` + second + `],"total":1}`, want: []string{"m-2"}},
		{name: "object with items", data: `{"items":[` + orderJSON + `],"limit":10,"offset":0}`, want: []string{"m-1"}},
		{name: "object without a list", data: `{"total":3}`, inDoubt: true},
		{name: "null", data: `null`, inDoubt: true},
		{name: "element not an order", data: `[` + orderJSON + `,{"id":"x"}]`, inDoubt: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient(t, answer(200, envelope(tt.data)))
			list, err := c.RequisiteOrders(t.Context(), provider.RequisiteOrdersRequest{ID: "q-1"})
			if tt.inDoubt {
				if !errors.Is(err, provider.ErrInDoubt) {
					t.Fatalf("RequisiteOrders = %v, %v; want ErrInDoubt", list, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := []string{}
			for _, o := range list {
				got = append(got, o.Order.MerchantOrderID)
				var back provider.Order
				if err := json.Unmarshal(o.Raw, &back); err != nil || back.MerchantOrderID != o.Order.MerchantOrderID {
					t.Errorf("raw %s does not match the decoded order %s", o.Raw, o.Order.MerchantOrderID)
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("orders %v, want %v", got, tt.want)
			}
		})
	}
}

func TestClient_BalancesBadData(t *testing.T) {
	for name, data := range map[string]string{
		"null":              `null`,
		"object":            `{"brl":"5"}`,
		"number amount":     `[{"currency":"brl","amount":5}]`,
		"non-numeric":       `[{"currency":"brl","amount":"five"}]`,
		"missing currency":  `[{"amount":"5"}]`,
		"exponent notation": `[{"currency":"brl","amount":"1e3"}]`,
	} {
		t.Run(name, func(t *testing.T) {
			c := newClient(t, answer(200, envelope(data)))
			bs, err := c.Balances(t.Context())
			if !errors.Is(err, provider.ErrInDoubt) {
				t.Fatalf("Balances = %v, %v; want ErrInDoubt", bs, err)
			}
		})
	}
}

func TestClient_CreateWithdrawalNotAnObject(t *testing.T) {
	rec := &recorder{}
	c := newClient(t, rec.handler(nil))
	for _, req := range []string{``, `[]`, `"x"`, `{"a":`, `null`} {
		_, err := c.CreateWithdrawal(t.Context(), json.RawMessage(req))
		if !errors.Is(err, provider.ErrNotSent) {
			t.Errorf("CreateWithdrawal(%q) = %v; want ErrNotSent", req, err)
		}
	}
	if n := rec.count(); n != 0 {
		t.Errorf("the server saw %d requests; want none", n)
	}
}

func TestClient_ContextCancel(t *testing.T) {
	t.Run("while waiting for the answer", func(t *testing.T) {
		arrived := make(chan struct{})
		c := newClient(t, func(w http.ResponseWriter, r *http.Request) {
			close(arrived)
			hang(w, r)
		})
		ctx, cancel := context.WithCancel(t.Context())
		go func() { <-arrived; cancel() }()
		start := time.Now()
		_, _, err := c.GetStatus(ctx, "m-1")
		if !errors.Is(err, provider.ErrInDoubt) || !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v: want ErrInDoubt and context.Canceled", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("cancellation took %v", d)
		}
	})
	t.Run("before sending", func(t *testing.T) {
		rec := &recorder{}
		c := newClient(t, rec.handler(map[string]string{"/api/v3/order/get-status": envelope(orderJSON)}))
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, _, err := c.GetStatus(ctx, "m-1")
		if !errors.Is(err, provider.ErrNotSent) || !errors.Is(err, context.Canceled) || errors.Is(err, provider.ErrInDoubt) {
			t.Fatalf("error %v: want ErrNotSent and context.Canceled, not ErrInDoubt", err)
		}
		if n := rec.count(); n != 0 {
			t.Errorf("the server saw %d requests; want none", n)
		}
	})
}

// countingLimiter admits calls until its budget runs out.
type countingLimiter struct {
	mu     sync.Mutex
	waits  int
	budget int
}

func (l *countingLimiter) Wait(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waits++
	if l.waits > l.budget {
		return errors.New("rate: Wait(n=1) would exceed context deadline")
	}
	return nil
}

func TestClient_Limiter(t *testing.T) {
	rec := &recorder{}
	lim := &countingLimiter{budget: 2}
	c := newClient(t, rec.handler(map[string]string{"/api/v3/balances": envelope(`[]`)}),
		func(o *provider.Options) { o.Limiter = lim })
	for i := range 2 {
		if _, err := c.Balances(t.Context()); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	_, err := c.Balances(t.Context())
	if !errors.Is(err, provider.ErrNotSent) || !strings.Contains(err.Error(), "rate limiter") {
		t.Fatalf("third call: %v; want ErrNotSent from the rate limiter", err)
	}
	if lim.waits != 3 || rec.count() != 2 {
		t.Errorf("limiter waited %d times and the server saw %d requests; want 3 and 2", lim.waits, rec.count())
	}
}

func TestClient_Observe(t *testing.T) {
	type obs struct{ endpoint, outcome string }
	var mu sync.Mutex
	var got []obs
	answers := map[string]string{
		"/api/v3/balances":         envelope(`[]`),
		"/api/v3/order/get-status": `{"data":null,"error":{"code":"ORDER_NOT_FOUND"}}`,
	}
	c := newClient(t, func(w http.ResponseWriter, r *http.Request) {
		a, ok := answers[r.URL.Path]
		if !ok {
			http.Error(w, "boom", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, a)
	}, func(o *provider.Options) {
		o.Observe = func(endpoint, outcome string, d time.Duration) {
			if d <= 0 {
				t.Errorf("observed duration %v", d)
			}
			mu.Lock()
			got = append(got, obs{endpoint, outcome})
			mu.Unlock()
		}
	})
	c.Balances(t.Context())
	c.GetStatus(t.Context(), "m-1")
	c.DeactivateRequisite(t.Context(), "q-1")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	c.Balances(ctx) // not sent: not observed
	want := []obs{
		{provider.EndpointBalances, provider.OutcomeOK},
		{provider.EndpointGetStatus, provider.OutcomeError},
		{provider.EndpointRequisiteDeactivate, provider.OutcomeInDoubt},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("observed %v, want %v", got, want)
	}
}

// TestClient_APIKeyNeverInErrors has a server echo the Authorization header
// back in every kind of bad answer; no error message may carry it.
func TestClient_APIKeyNeverInErrors(t *testing.T) {
	bodies := map[string]func(key string) (int, string){
		"5xx echo":      func(k string) (int, string) { return 500, "auth was " + k },
		"non-JSON echo": func(k string) (int, string) { return 200, "<p>" + k + "</p>" },
		"validation echo": func(k string) (int, string) {
			return 200, `{"data":null,"error":{"code":"VALIDATION","validationErrors":[{"field":"` + k + `","message":"bad key ` + k + `"}]}}`
		},
		"bad data echo": func(k string) (int, string) { return 200, envelope(`{"id":"` + k + `"}`) },
		"other order":   func(k string) (int, string) { return 200, envelope(strings.Replace(orderJSON, `"m-1"`, `"`+k+`"`, 1)) },
		"bad status echo": func(k string) (int, string) {
			return 200, envelope(strings.Replace(orderJSON, `"createdAt":"2026-01-02T03:04:05Z"`, `"createdAt":"`+k+`"`, 1))
		},
	}
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			c := newClient(t, func(w http.ResponseWriter, r *http.Request) {
				status, b := body(r.Header.Get("Authorization"))
				w.WriteHeader(status)
				io.WriteString(w, b)
			})
			_, _, err := c.GetStatus(t.Context(), "m-1")
			if err == nil {
				t.Fatal("GetStatus succeeded")
			}
			msg := fmt.Sprintf("%v %+v %s", err, err, c)
			if strings.Contains(msg, testKey) {
				t.Errorf("error text carries the API key: %s", msg)
			}
		})
	}
}

func TestNewClient(t *testing.T) {
	tests := []struct {
		name string
		opts provider.Options
		want string // substring of the error
	}{
		{"empty base URL", provider.Options{APIKey: "k"}, "base URL is empty"},
		{"relative base URL", provider.Options{BaseURL: "pay.example.com", APIKey: "k"}, "scheme"},
		{"ftp base URL", provider.Options{BaseURL: "ftp://pay.example.com", APIKey: "k"}, "scheme"},
		{"no host", provider.Options{BaseURL: "https://", APIKey: "k"}, "host"},
		{"query", provider.Options{BaseURL: "https://pay.example.com/?x=1", APIKey: "k"}, "query"},
		{"empty key", provider.Options{BaseURL: "https://pay.example.com"}, "API key is empty"},
		{"key with newline", provider.Options{BaseURL: "https://pay.example.com", APIKey: "abc\ndef"}, "API key contains"},
		{"key with spaces around", provider.Options{BaseURL: "https://pay.example.com", APIKey: " abc "}, "API key contains"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := provider.NewClient(tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewClient = %v, %v; want an error mentioning %q", c, err, tt.want)
			}
			if tt.opts.APIKey != "" && strings.Contains(err.Error(), tt.opts.APIKey) {
				t.Errorf("error %q carries the API key", err)
			}
		})
	}
	c, err := provider.NewClient(provider.Options{BaseURL: "https://user:pw@pay.example.com/", APIKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	if s := fmt.Sprint(c); strings.Contains(s, testKey) || strings.Contains(s, "pw@") || !strings.Contains(s, "pay.example.com") {
		t.Errorf("client prints as %q", s)
	}
}

// The client must read a keep-alive connection's answer fully so the next
// call reuses it; a broken reuse would show as a second dial.
func TestClient_ReusesConnections(t *testing.T) {
	var mu sync.Mutex
	conns := map[string]bool{}
	srv := httptest.NewUnstartedServer(answer(200, envelope(`[]`)))
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			mu.Lock()
			conns[c.RemoteAddr().String()] = true
			mu.Unlock()
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	c, err := provider.NewClient(provider.Options{BaseURL: srv.URL, APIKey: testKey, HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := c.Balances(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(conns) != 1 {
		t.Errorf("5 sequential calls used %d connections; want 1", len(conns))
	}
}
