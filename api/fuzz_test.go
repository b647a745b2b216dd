package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"orderd/api"
	"orderd/provider"
	"orderd/provider/providertest"
	"orderd/store"
)

// FuzzAPI_gatewayDecode sends arbitrary bodies to every gateway route and
// the watch route. It must never panic or fail with a 500; a body answered
// 400 or 413, or a 422 that never reached the provider, must leave no
// attempt behind; and every new attempt is exactly one provider call.
func FuzzAPI_gatewayDecode(f *testing.F) {
	paths := []string{"/v1/payins", "/v1/payouts", "/v1/refunds", "/v1/requisites", "/v1/requisites/deactivate", "/v1/watch"}
	seeds := []string{
		payinBody("f-1", "10.00"),
		`{"merchantOrderId":"f-2","invoice":{"amount":"1e3","currency":"brl"}}`,
		`{"merchantOrderId":"f-3","invoice":{"amount":10,"currency":"brl"}}`,
		`{"merchantOrderId":"f-4","amount":{"amount":"5.00","currency":"brl"},"extra":[1,2,{"a":null}]}`,
		`{"merchantOrderId":"x","amount":"1.00"}`,
		`{"client":{"id":"c"},"currency":"mxn"}`,
		`{"id":"0f5e2a9c-3b1d-4c8e-9f7a-1234567890ab"}`,
		`{"merchantOrderId":"w","type":"payin","state":"in_doubt"}`,
		`{"merchantOrderId":"m","unknown":true}`,
		`{"merchantOrderId":"m",`,
		`[]`, `null`, `""`, `{}{}`, "\x00\xff", `{"merchantOrderId":"\u0000"}`,
		`{"merchantOrderId":"d","MerchantOrderId":"e","amount":"1.00","AMOUNT":"2.00","x":{"a":1,"a":2}}`,
	}
	for i, s := range seeds {
		f.Add(uint8(i), []byte(s))
	}

	fake := providertest.NewServer(providertest.Options{KeyType: "ecdsa",
		InitialBalances: map[string]string{"brl": "1000000.00", "mxn": "1000000.00"}})
	f.Cleanup(fake.Close)
	st := openStore(f, store.Options{})
	var calls atomic.Int64
	client, err := provider.NewClient(provider.Options{BaseURL: fake.URL(), APIKey: fake.APIKey(),
		Observe: func(string, string, time.Duration) { calls.Add(1) }})
	if err != nil {
		f.Fatal(err)
	}
	h := api.New(api.Config{PublicURL: testPublicURL, MaxBodyBytes: 1 << 16, Logger: slog.New(slog.DiscardHandler)},
		api.Deps{Store: st, Provider: client})
	count := func(t *testing.T) int64 {
		var n int64
		if err := st.DB().QueryRowContext(context.Background(), `SELECT count(*) FROM attempts`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		path := paths[int(route)%len(paths)]
		beforeAttempts, beforeCalls := count(t), calls.Load()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
		attempts, sent := count(t)-beforeAttempts, calls.Load()-beforeCalls

		if rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("%s: status %d: %s", path, rec.Code, rec.Body)
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("%s: answer is not JSON: %q", path, rec.Body)
		}
		switch {
		case rec.Code == http.StatusBadRequest || rec.Code == http.StatusRequestEntityTooLarge:
			if attempts != 0 || sent != 0 {
				t.Fatalf("%s: %d answer left %d attempts and %d provider calls for %q", path, rec.Code, attempts, sent, body)
			}
		case rec.Code == http.StatusUnprocessableEntity && sent == 0:
			if attempts != 0 {
				t.Fatalf("%s: local validation left %d attempts for %q", path, attempts, body)
			}
		}
		if path != "/v1/watch" && attempts != sent {
			t.Fatalf("%s: %d new attempts but %d provider calls for %q", path, attempts, sent, body)
		}
	})
}
