package reconcile_test

import (
	"bytes"
	"testing"

	"orderd/reconcile"
)

func TestReporter_Write_golden(t *testing.T) {
	e := reportEnv(t)
	r := e.reporter()
	for _, tc := range []struct{ name, format string }{
		{"csv", reconcile.FormatCSV},
		{"json", reconcile.FormatJSON},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := r.Write(t.Context(), &buf, reportDay, tc.format, reconcile.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			golden(t, "report-2026-11-01."+tc.format, buf.Bytes())
		})
	}
}
