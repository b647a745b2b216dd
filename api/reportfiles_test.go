package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"orderd/api"
)

// reportFileList is GET /v1/reports/files as a client reads it.
type reportFileList struct {
	Files []struct {
		Name, Format string
		Summary      bool
		Findings     bool
		From, To     time.Time
		Size         int64
		ModifiedAt   time.Time
		Href         string
	}
}

// TestReportFiles_list: the list holds the files the scheduled job wrote,
// the latest period first, HTML, CSV, CSV summary, CSV findings and JSON within a
// period, with sizes and times from the files themselves; anything else
// in the directory is left out.
func TestReportFiles_list(t *testing.T) {
	s := newReportServer(t, testToken)
	// Beside the job's files: a note, a temporary file of a job that died,
	// a link that leads out of the directory under a report's name, and a
	// directory under one.
	secret := filepath.Join(t.TempDir(), "secret.csv")
	for path, body := range map[string]string{
		"notes.txt": "x",
		".orderd-reconciliation-2026-11-02-2026-11-03.csv.123.tmp": "partial",
		secret: "not a report",
	} {
		if !filepath.IsAbs(path) {
			path = filepath.Join(s.reportsDir, path)
		}
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(secret, filepath.Join(s.reportsDir, "orderd-reconciliation-2026-10-01-2026-10-02.csv")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(s.reportsDir, "orderd-reconciliation-2026-09-01-2026-09-02.json"), 0o700); err != nil {
		t.Fatal(err)
	}

	r := s.get(t, "GET", api.ReportFilesPath)
	wantStatus(t, r, http.StatusOK)
	var list reportFileList
	if err := json.Unmarshal(r.body, &list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range list.Files {
		names = append(names, f.Name)
		fi, err := os.Stat(filepath.Join(s.reportsDir, f.Name))
		if err != nil {
			t.Fatal(err)
		}
		if f.Size != fi.Size() || !f.ModifiedAt.Equal(fi.ModTime()) || f.Href != api.ReportFilesPath+"/"+f.Name {
			t.Errorf("%s: size %d, modified %s, href %s; the file has %d bytes, modified %s", f.Name, f.Size, f.ModifiedAt,
				f.Href, fi.Size(), fi.ModTime())
		}
	}
	want := []string{
		"orderd-reconciliation-2026-11-01-2026-11-02.html",
		"orderd-reconciliation-2026-11-01-2026-11-02.csv",
		"orderd-reconciliation-2026-11-01-2026-11-02-summary.csv",
		"orderd-reconciliation-2026-11-01-2026-11-02-findings.csv",
		"orderd-reconciliation-2026-11-01-2026-11-02.json",
		"orderd-reconciliation-2026-10-31-2026-11-01.html",
		"orderd-reconciliation-2026-10-31-2026-11-01.csv",
		"orderd-reconciliation-2026-10-31-2026-11-01-summary.csv",
		"orderd-reconciliation-2026-10-31-2026-11-01-findings.csv",
		"orderd-reconciliation-2026-10-31-2026-11-01.json",
	}
	if strings.Join(names, "\n") != strings.Join(want, "\n") {
		t.Errorf("files\n%s\nwant\n%s", strings.Join(names, "\n"), strings.Join(want, "\n"))
	}
	if f := list.Files[2]; f.Format != "csv" || !f.Summary || !f.From.Equal(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)) ||
		!f.To.Equal(time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("summary file described as %+v", f)
	}
	if f := list.Files[3]; f.Format != "csv" || f.Summary || !f.Findings {
		t.Errorf("findings file described as %+v", f)
	}

	t.Run("a directory not written yet lists nothing", func(t *testing.T) {
		h := api.NewReportFiles(api.ReportFilesConfig{Dir: filepath.Join(t.TempDir(), "not-yet")})
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", api.ReportFilesPath, nil))
		if rec.Code != http.StatusOK || strings.TrimSpace(rec.Body.String()) != `{"files":[]}` {
			t.Errorf("answer %d %s", rec.Code, rec.Body)
		}
	})
	t.Run("a parameter", func(t *testing.T) {
		r := s.get(t, "GET", api.ReportFilesPath+"?from=2026-11-01")
		wantStatus(t, r, http.StatusBadRequest)
		if r.json(t)["field"] != "from" {
			t.Errorf("answer %s", r.body)
		}
	})
	t.Run("without the token", func(t *testing.T) {
		anon := *s
		anon.token = ""
		wantStatus(t, anon.get(t, "GET", api.ReportFilesPath), http.StatusUnauthorized)
		wantStatus(t, anon.get(t, "GET", api.ReportFilesPath+"/"+want[0]), http.StatusUnauthorized)
	})
}

// TestReportFiles_serve: each file comes back byte for byte with its
// format's Content-Type and disposition, a validator that conditional
// requests use, ranges and HEAD; names the job does not write, and links
// out of the directory, are refused.
func TestReportFiles_serve(t *testing.T) {
	s := newReportServer(t, testToken)
	for _, tc := range []struct {
		name, contentType, disposition string
	}{
		{"orderd-reconciliation-2026-11-01-2026-11-02.html", "text/html; charset=utf-8", "inline"},
		{"orderd-reconciliation-2026-11-01-2026-11-02.csv", "text/csv; charset=utf-8", "attachment"},
		{"orderd-reconciliation-2026-11-01-2026-11-02-summary.csv", "text/csv; charset=utf-8", "attachment"},
		{"orderd-reconciliation-2026-10-31-2026-11-01.json", "application/json", "attachment"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join(s.reportsDir, tc.name))
			if err != nil {
				t.Fatal(err)
			}
			r := s.get(t, "GET", api.ReportFilesPath+"/"+tc.name)
			wantStatus(t, r, http.StatusOK)
			if string(r.body) != string(want) {
				t.Errorf("body differs from the file (%d bytes, want %d)", len(r.body), len(want))
			}
			h := r.header
			if h.Get("Content-Type") != tc.contentType || h.Get("Content-Disposition") != tc.disposition+`; filename="`+tc.name+`"` ||
				h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Last-Modified") == "" || h.Get("ETag") == "" {
				t.Errorf("headers %v", h)
			}
			if tc.disposition == "inline" && !strings.Contains(h.Get("Content-Security-Policy"), "default-src 'none'") {
				t.Errorf("HTML served without a Content-Security-Policy: %v", h)
			}
			etag, modified := h.Get("ETag"), h.Get("Last-Modified")

			for _, cond := range [][2]string{{"If-None-Match", etag}, {"If-Modified-Since", modified}} {
				r := s.getWith(t, "GET", api.ReportFilesPath+"/"+tc.name, cond[0], cond[1])
				if r.status != http.StatusNotModified || len(r.body) != 0 {
					t.Errorf("%s: %s: status %d with %d bytes, want 304 and none", cond[0], cond[1], r.status, len(r.body))
				}
			}
			r = s.getWith(t, "GET", api.ReportFilesPath+"/"+tc.name, "Range", "bytes=0-9")
			if r.status != http.StatusPartialContent || string(r.body) != string(want[:10]) {
				t.Errorf("range: status %d, body %q", r.status, r.body)
			}
			r = s.get(t, "HEAD", api.ReportFilesPath+"/"+tc.name)
			if r.status != http.StatusOK || len(r.body) != 0 || r.header.Get("Content-Type") != tc.contentType {
				t.Errorf("HEAD: %d %v %q", r.status, r.header, r.body)
			}
		})
	}

	t.Run("a rewritten file has a new validator", func(t *testing.T) {
		name := "orderd-reconciliation-2026-11-01-2026-11-02.json"
		etag := s.get(t, "GET", api.ReportFilesPath+"/"+name).header.Get("ETag")
		path := filepath.Join(s.reportsDir, name)
		later := time.Now().Add(time.Minute)
		if err := os.Chtimes(path, later, later); err != nil {
			t.Fatal(err)
		}
		r := s.getWith(t, "GET", api.ReportFilesPath+"/"+name, "If-None-Match", etag)
		if r.status != http.StatusOK || r.header.Get("ETag") == etag {
			t.Errorf("after a rewrite: status %d, ETag %s (was %s)", r.status, r.header.Get("ETag"), etag)
		}
	})

	secret := filepath.Join(t.TempDir(), "secret.csv")
	if err := os.WriteFile(secret, []byte("salaries"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(s.reportsDir, "orderd-reconciliation-2026-10-01-2026-10-02.csv")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.reportsDir, "notes.txt"), []byte("private"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		status     int
	}{
		{"not a report's name", "notes.txt", http.StatusBadRequest},
		{"a report's name with another extension", "orderd-reconciliation-2026-11-01-2026-11-02.txt", http.StatusBadRequest},
		{"a temporary file", ".orderd-reconciliation-2026-11-01-2026-11-02.csv.1.tmp", http.StatusBadRequest},
		{"an encoded path out of the directory", "..%2F..%2F..%2Fetc%2Fpasswd", http.StatusBadRequest},
		{"an encoded path into a report's name", "..%2Freports%2Forderd-reconciliation-2026-11-01-2026-11-02.csv", http.StatusBadRequest},
		{"a period not written", "orderd-reconciliation-2026-12-01-2026-12-02.csv", http.StatusNotFound},
		{"a link out of the directory", "orderd-reconciliation-2026-10-01-2026-10-02.csv", http.StatusNotFound},
		{"a parameter", "orderd-reconciliation-2026-11-01-2026-11-02.csv?download=1", http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.get(t, "GET", api.ReportFilesPath+"/"+tc.path)
			wantStatus(t, r, tc.status)
			body := string(r.body)
			if strings.Contains(body, "salaries") || strings.Contains(body, "private") || strings.Contains(body, "root:") {
				t.Errorf("served what is not a report: %s", body)
			}
			if e := r.json(t); e["error"] == "" || (tc.status == http.StatusBadRequest && !strings.Contains(tc.path, "?") && e["field"] != "name") {
				t.Errorf("answer %s", body)
			}
		})
	}
}

// getWith is get with one request header.
func (s *reportServer) getWith(t testing.TB, method, path, key, value string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, s.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set(key, value)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}
