package receiver_test

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"orderd/receiver"
)

// BenchmarkHandler_ServeHTTP is one signed webhook through the real
// handler, verifier and decode, with a store that keeps nothing and a
// response writer that is reused: what the handler itself costs per
// webhook, allocations included, without HTTP or SQLite around it.
func BenchmarkHandler_ServeHTTP(b *testing.B) {
	key, _ := testKeys(b)
	h := receiver.New(receiver.Config{}, receiver.Deps{
		Store: discardStore{}, Verifier: newVerifier(b, key), Logger: slog.New(slog.DiscardHandler),
	})
	body := newOrder(1, "completed").JSON()
	sig := sign(b, key, body)
	rd := bytes.NewReader(body)
	req, err := http.NewRequestWithContext(b.Context(), http.MethodPost, receiver.DefaultPath, io.NopCloser(rd))
	if err != nil {
		b.Fatal(err)
	}
	req.RemoteAddr = "203.0.113.7:40312"
	req.ContentLength = int64(len(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Signature", sig)
	w := &discardWriter{header: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(body)
		clear(w.header)
		h.ServeHTTP(w, req)
		if w.code != http.StatusOK {
			b.Fatalf("status %d", w.code)
		}
	}
}

// discardWriter is a ResponseWriter that keeps only the status.
type discardWriter struct {
	header http.Header
	code   int
}

func (w *discardWriter) Header() http.Header         { return w.header }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
