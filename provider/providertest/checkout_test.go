package providertest_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"orderd/provider"
	"orderd/provider/providertest"
)

func TestServer_Checkout(t *testing.T) {
	rcv := newReceiver(t)
	s := start(t, providertest.Options{})
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	create := func(moid, returnURL string) *provider.Order {
		body := `{"merchantOrderId":"` + moid + `","invoice":{"amount":"25.50","currency":"brl"},"webhookUrl":"` + rcv.URL() + `"`
		if returnURL != "" {
			body += `,"returnUrl":"` + returnURL + `"`
		}
		return decodeOrder(t, mustOK(t, s, providertest.PathPaymentCreate, body+`}`))
	}
	page := func(url string) string {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
		}
		return string(b)
	}

	t.Run("pay and return", func(t *testing.T) {
		o := create("co-1", "https://shop.example/thanks?o=co-1")
		html := page(o.Auth.RedirectURL)
		if !strings.Contains(html, "25.50 brl") || !strings.Contains(html, `id="pay"`) {
			t.Errorf("page = %s", html)
		}
		resp, err := noRedirect.Post(o.Auth.RedirectURL+"/pay", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "https://shop.example/thanks?o=co-1" {
			t.Errorf("after paying: %d to %q, want 303 to the returnUrl", resp.StatusCode, resp.Header.Get("Location"))
		}
		got, _ := getStatus(t, s, "co-1")
		if got.Status != provider.StatusCompleted {
			t.Errorf("status %s after paying", got.Status)
		}
		if strings.Contains(page(o.Auth.RedirectURL), `id="pay"`) {
			t.Error("a completed order still offers to pay")
		}
		hits := rcv.waitHits(t, 1, 5*time.Second)
		if decodeOrder(t, hits[0].body).Status != provider.StatusCompleted {
			t.Errorf("webhook %s", hits[0].body)
		}
	})

	t.Run("decline", func(t *testing.T) {
		o := create("co-2", "")
		resp, err := noRedirect.Post(o.Auth.RedirectURL+"/decline", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || !strings.HasSuffix(o.Auth.RedirectURL, resp.Header.Get("Location")) {
			t.Errorf("after declining: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
		}
		got, _ := getStatus(t, s, "co-2")
		if got.Status != provider.StatusRejected {
			t.Errorf("status %s after declining", got.Status)
		}
	})

	t.Run("unknown order", func(t *testing.T) {
		resp, err := http.Get(s.URL() + "/checkout/00000000-0000-4000-8000-000000000000")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("HTTP %d, want 404", resp.StatusCode)
		}
	})
}
