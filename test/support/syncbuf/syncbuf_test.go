package syncbuf_test

import (
	"strings"
	"sync"
	"testing"

	"orderd/test/support/syncbuf"
)

// TestBuffer_concurrent: writes from several goroutines while another
// reads all arrive whole (run with -race).
func TestBuffer_concurrent(t *testing.T) {
	var b syncbuf.Buffer
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				b.Write([]byte("line\n"))
			}
		})
	}
	wg.Go(func() {
		for range 100 {
			_ = b.String()
		}
	})
	wg.Wait()
	if got := strings.Count(b.String(), "line\n"); got != 400 {
		t.Errorf("%d lines, want 400", got)
	}
}
