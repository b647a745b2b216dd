package providertest_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"orderd/provider/providertest"
)

// BenchmarkServer_API measures how many calls per second the fake answers
// over loopback HTTP, so suites that lean on it (reconciler load, gateway
// benchmarks) know its ceiling. The "empty" case answers from a plain
// net/http handler on the same machine: the ceiling of the transport.
func BenchmarkServer_API(b *testing.B) {
	s, err := providertest.Start(providertest.Options{Key: sharedKey(), Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for i := range 1000 {
		if _, err := s.CreateOrder(providertest.NewOrder{MerchantOrderID: fmt.Sprintf("b-%d", i), Amount: "10", Currency: "brl"}); err != nil {
			b.Fatal(err)
		}
	}
	empty := http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, `{"data":{},"error":null}`)
	})}
	emptyURL := serveLoopback(b, &empty)

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	created := 0 // numbers new orders across runs, so every create is new
	cases := []struct {
		name string
		url  func(i int) (string, string)
	}{
		{"empty", func(int) (string, string) { return emptyURL, `{}` }},
		{"get-status", func(i int) (string, string) {
			return s.URL() + providertest.PathGetStatus, fmt.Sprintf(`{"merchantOrderId":"b-%d"}`, i%1000)
		}},
		{"payment-create", func(i int) (string, string) {
			return s.URL() + providertest.PathPaymentCreate,
				fmt.Sprintf(`{"merchantOrderId":"c-%d","invoice":{"amount":"10.00","currency":"brl"}}`, created+i)
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			begin := time.Now()
			i := 0
			for b.Loop() {
				url, body := c.url(i)
				i++
				req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
				req.Header.Set("Authorization", s.APIKey())
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			created += i
			b.ReportMetric(float64(i)/time.Since(begin).Seconds(), "calls/s")
		})
	}
}

func serveLoopback(b *testing.B, srv *http.Server) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String() + "/"
}
