package reconcile

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestReport_lines_readerPanic: a panic while the orders are read (here a
// report without its read transaction) fails that report with an error
// and a logged stack, instead of ending the process.
func TestReport_lines_readerPanic(t *testing.T) {
	var logs bytes.Buffer
	rp := &report{
		r: &Reporter{log: slog.New(slog.NewTextHandler(&logs, nil))},
		p: Period{From: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)},
	}
	called := 0
	err := rp.lines(t.Context(), func(*Line) error { called++; return nil })
	if err == nil || !strings.Contains(err.Error(), "panic") {
		t.Fatalf("lines = %v, want an error saying the reading panicked", err)
	}
	if called != 0 {
		t.Errorf("%d lines written from a reading that panicked", called)
	}
	if !strings.Contains(logs.String(), "reading the orders panicked") || !strings.Contains(logs.String(), "goroutine") {
		t.Errorf("no error line with the stack:\n%s", logs.String())
	}
}
