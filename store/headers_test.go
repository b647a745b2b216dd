package store_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"orderd/store"
)

// referenceSelectHeaders is selectHeaders as it was: json.Marshal of a map
// of the kept headers. The stored headers column must not change.
func referenceSelectHeaders(h http.Header) []byte {
	if len(h) == 0 {
		return nil
	}
	keptHeaders := [...]string{"Signature", "Content-Type", "User-Agent", "X-Forwarded-For", "X-Real-Ip", "X-Request-Id"}
	var kept map[string][]string
	for _, k := range keptHeaders {
		if v := h.Values(k); len(v) > 0 {
			if kept == nil {
				kept = make(map[string][]string, len(keptHeaders))
			}
			kept[k] = v
		}
	}
	if kept == nil {
		return nil
	}
	b, err := json.Marshal(kept)
	if err != nil {
		return nil
	}
	return b
}

// deliveryHeaders is the header set of a webhook as it arrives behind a
// proxy.
func deliveryHeaders() http.Header {
	return http.Header{
		"Signature":       {"c2lnbmF0dXJlIG9mIHRoZSBib2R5Cg=="},
		"Content-Type":    {"application/json; charset=utf-8"},
		"User-Agent":      {"provider-webhooks/2.1"},
		"X-Forwarded-For": {"203.0.113.7, 10.0.0.2"},
		"X-Real-Ip":       {"203.0.113.7"},
		"X-Request-Id":    {"8c1f0e5a-1b2c-4d3e-9f80-a1b2c3d4e5f6"},
		"Cookie":          {"session=secret"},
		"Authorization":   {"Bearer secret"},
		"Accept-Encoding": {"gzip"},
	}
}

func TestSelectHeaders_MatchesJSONMarshal(t *testing.T) {
	for _, tt := range []struct {
		name string
		h    http.Header
		want string // "" when nothing is kept
	}{
		{"nil", nil, ""},
		{"empty", http.Header{}, ""},
		{"nothing kept", http.Header{"Cookie": {"a=b"}, "Accept": {"*/*"}}, ""},
		{"kept header with no values", http.Header{"Signature": {}}, ""},
		{"signature only", http.Header{"Signature": {"c2ln"}}, `{"Signature":["c2ln"]}`},
		{"behind a proxy", deliveryHeaders(), `{"Content-Type":["application/json; charset=utf-8"],` +
			`"Signature":["c2lnbmF0dXJlIG9mIHRoZSBib2R5Cg=="],"User-Agent":["provider-webhooks/2.1"],` +
			`"X-Forwarded-For":["203.0.113.7, 10.0.0.2"],"X-Real-Ip":["203.0.113.7"],` +
			`"X-Request-Id":["8c1f0e5a-1b2c-4d3e-9f80-a1b2c3d4e5f6"]}`},
		{"several values", http.Header{"X-Forwarded-For": {"a", "b", ""}, "Signature": {"s1", "s2"}},
			`{"Signature":["s1","s2"],"X-Forwarded-For":["a","b",""]}`},
		{"non-ASCII", http.Header{"User-Agent": {"agente/1.0 (São Paulo; 日本; 🚀)"}},
			`{"User-Agent":["agente/1.0 (São Paulo; 日本; 🚀)"]}`},
		{"control characters", http.Header{"X-Request-Id": {"a\x00b\x01c\x1fd\te\nf\rg\bh\fi\x7f"}},
			`{"X-Request-Id":["a\u0000b\u0001c\u001fd\te\nf\rg\bh\fi` + "\x7f" + `"]}`},
		{"quotes, backslashes and HTML", http.Header{"User-Agent": {`"x" \ <script>&amp;</script>`}},
			`{"User-Agent":["\"x\" \\ \u003cscript\u003e\u0026amp;\u003c/script\u003e"]}`},
		{"line and paragraph separators", http.Header{"User-Agent": {"a\u2028b\u2029c"}}, `{"User-Agent":["a\u2028b\u2029c"]}`},
		{"invalid UTF-8", http.Header{"User-Agent": {"a\xffb\xc3(c\xed\xa0\x80"}},
			`{"User-Agent":["a\ufffdb\ufffd(c\ufffd\ufffd\ufffd"]}`},
		// Header.Values looks keys up canonicalised: a key set directly in
		// another case is not found, by either encoding.
		{"key not canonical", http.Header{"x-real-ip": {"203.0.113.7"}, "Content-Type": {"text/plain"}},
			`{"Content-Type":["text/plain"]}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, want := store.SelectHeaders(tt.h), referenceSelectHeaders(tt.h)
			if string(got) != string(want) {
				t.Fatalf("SelectHeaders = %s\njson.Marshal gives %s", got, want)
			}
			if string(got) != tt.want {
				t.Errorf("SelectHeaders = %s, want %s", got, tt.want)
			}
			if (got == nil) != (tt.want == "") {
				t.Errorf("SelectHeaders = %#v: nil must mean nothing kept", got)
			}
		})
	}
}

// FuzzSelectHeaders holds selectHeaders to json.Marshal for any header
// values; explore with `go test -run '^$' -fuzz FuzzSelectHeaders ./store/`.
func FuzzSelectHeaders(f *testing.F) {
	f.Add("c2ln", "application/json", "ua/1", "", "a\x00\xff<\u2028")
	f.Add("", "", "", "x", "")
	f.Fuzz(func(t *testing.T, sig, ctype, ua, xff, other string) {
		h := http.Header{}
		for k, v := range map[string]string{"Signature": sig, "Content-Type": ctype, "User-Agent": ua, "X-Forwarded-For": xff, "Cookie": other} {
			if v != "" {
				h[k] = []string{v}
			}
		}
		if other != "" {
			h["X-Request-Id"] = []string{other, sig}
		}
		if got, want := store.SelectHeaders(h), referenceSelectHeaders(h); string(got) != string(want) || (got == nil) != (want == nil) {
			t.Fatalf("SelectHeaders(%q) = %q, json.Marshal gives %q", h, got, want)
		}
	})
}

// BenchmarkSelectHeaders measures the kept headers' encoding beside the
// json.Marshal of a map it replaced, on a webhook's headers behind a proxy.
func BenchmarkSelectHeaders(b *testing.B) {
	h := deliveryHeaders()
	b.Run("hand-written", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = store.SelectHeaders(h)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = referenceSelectHeaders(h)
		}
	})
}
