package reconcile_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"orderd/reconcile"
)

// TestReporter_WriteHTML_runsCapped: a day of scheduled jobs is thousands
// of runs; past the cap the HTML report lists only the failed ones and
// counts every run per job.
func TestReporter_WriteHTML_runsCapped(t *testing.T) {
	e := newEnv(t, envOptions{clock: &clock{t: time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)}})
	at := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	for i := range 12 {
		at = at.Add(time.Minute)
		job, runErr := "stale", ""
		if i%3 == 0 {
			job = "doubt"
		}
		if i == 7 {
			runErr = "provider timed out"
		}
		id, err := e.st.StartReconcileRun(t.Context(), job, at)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.st.FinishReconcileRun(t.Context(), id, at.Add(time.Second), map[string]int{"checked": i}, runErr); err != nil {
			t.Fatal(err)
		}
	}
	e.at("2026-11-02T01:00:00Z")
	var buf bytes.Buffer
	r := reconcile.NewReporter(e.st, reconcile.ReportConfig{Now: e.clock.Now, HTMLMaxLines: 5})
	if err := r.WriteHTML(t.Context(), &buf, reportDay, reconcile.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	table := html[strings.Index(html, `<table id="runs">`):]
	if n := strings.Count(table, "<tr"); n != 2 { // the header and the failed run
		t.Errorf("runs table has %d rows, want the header and the one failed run:\n%s", n, table)
	}
	if !strings.Contains(table, "provider timed out") {
		t.Errorf("the failed run is not listed:\n%s", table)
	}
	if want := "12 runs in the period; the failed ones are listed. Per job: doubt 4, stale 8 (1 failed)."; !strings.Contains(html, want) {
		t.Errorf("HTML report lacks %q:\n%s", want, table)
	}
}
