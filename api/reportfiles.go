package api

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"time"
)

// ReportFilesPath is where the scheduled report files are listed; each
// file is served under it by name.
const ReportFilesPath = "/v1/reports/files"

// reportFileName is the name the scheduled report job gives its files:
// orderd-reconciliation-<from>-<to>.<csv|json|html>, and the CSV summary
// and findings as <...>-summary.csv and <...>-findings.csv, each bound a UTC date or 20261101T103000Z (with
// milliseconds when it has them). Nothing else in the directory is listed
// or served: not the job's temporary files (.<name>.<n>.tmp), nor
// anything an operator put beside them.
var reportFileName = regexp.MustCompile(`^orderd-reconciliation-` +
	`(\d{4}-\d{2}-\d{2}|\d{8}T\d{6}(?:\.\d{3})?Z)-(\d{4}-\d{2}-\d{2}|\d{8}T\d{6}(?:\.\d{3})?Z)` +
	`(?:(-summary|-findings)\.csv|\.(csv|json|html))$`)

// reportFileTypes are the Content-Types of the report files by format,
// as GET /v1/reports/reconciliation answers them.
var reportFileTypes = map[string]string{
	"csv":  "text/csv; charset=utf-8",
	"json": "application/json",
	"html": "text/html; charset=utf-8",
}

// ReportFile is one scheduled report file in the reports directory.
type ReportFile struct {
	Name string `json:"name"`
	// Format is csv, json or html.
	Format string `json:"format"`
	// Summary marks the CSV per-currency summary beside a CSV report.
	Summary bool `json:"summary"`
	// Findings marks the CSV of the findings and their trails beside a
	// CSV report.
	Findings bool `json:"findings,omitempty"`
	// From and To are the report's period, from inclusive, to exclusive.
	From       time.Time `json:"from"`
	To         time.Time `json:"to"`
	Size       int64     `json:"size"`
	ModifiedAt time.Time `json:"modifiedAt"`
	// Href is the file's path on the admin listener.
	Href string `json:"href"`
}

// ReportFilesConfig configures the scheduled report files' handler.
type ReportFilesConfig struct {
	// Dir is the directory the scheduled report job writes to
	// (reports.dir). It need not exist yet: until the first report is
	// written the list is empty.
	Dir string
	// Logger receives the handler's log lines; nil discards them.
	Logger *slog.Logger
}

// ReportFiles lists and serves the scheduled report files, so finance can
// fetch them over the admin API from a daemon whose state directory no
// other user can read (systemd's DynamicUser keeps it private to the
// service). It is the handler of GET /v1/reports/files and GET
// /v1/reports/files/{name}.
type ReportFiles struct {
	dir string
	log *slog.Logger
}

// NewReportFiles returns the scheduled report files' handler.
func NewReportFiles(cfg ReportFilesConfig) *ReportFiles {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &ReportFiles{dir: cfg.Dir, log: cfg.Logger}
}

// parseReportFileName reads a report file's name; ok is false for any
// name the scheduled job does not write.
func parseReportFileName(name string) (f ReportFile, ok bool) {
	m := reportFileName.FindStringSubmatch(name)
	if m == nil {
		return ReportFile{}, false
	}
	from, err1 := parseFileBound(m[1])
	to, err2 := parseFileBound(m[2])
	if err1 != nil || err2 != nil || !from.Before(to) {
		return ReportFile{}, false
	}
	f = ReportFile{Name: name, Format: m[4], Summary: m[3] == "-summary", Findings: m[3] == "-findings",
		From: from, To: to, Href: ReportFilesPath + "/" + url.PathEscape(name)}
	if m[3] != "" {
		f.Format = "csv"
	}
	return f, true
}

// parseFileBound reads a period bound as file names write it.
func parseFileBound(s string) (time.Time, error) {
	for _, layout := range []string{time.DateOnly, "20060102T150405Z", "20060102T150405.000Z"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("bound %q", s)
}

// List returns the report files in the directory, the latest period
// first, and within a period the HTML, CSV, CSV summary and JSON files in
// that order. A directory that does not exist yet holds none.
func (rf *ReportFiles) List() ([]ReportFile, error) {
	root, err := os.OpenRoot(rf.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return []ReportFile{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reports directory: %w", err)
	}
	defer root.Close()
	d, err := root.Open(".")
	if err != nil {
		return nil, fmt.Errorf("reports directory: %w", err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("reports directory: %w", err)
	}
	out := []ReportFile{}
	for _, name := range names {
		f, ok := parseReportFileName(name)
		if !ok {
			continue
		}
		// Stat through the root: a link that leads out of the directory
		// fails here and is not listed, as it would not be served.
		fi, err := root.Stat(name)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		f.Size, f.ModifiedAt = fi.Size(), fi.ModTime().UTC()
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b ReportFile) int {
		if c := b.To.Compare(a.To); c != 0 {
			return c
		}
		if c := b.From.Compare(a.From); c != 0 {
			return c
		}
		return fileRank(a) - fileRank(b)
	})
	return out, nil
}

// fileRank orders the files of one period: what a person opens first.
func fileRank(f ReportFile) int {
	switch {
	case f.Format == "html":
		return 0
	case f.Format == "csv" && !f.Summary && !f.Findings:
		return 1
	case f.Summary:
		return 2
	case f.Findings:
		return 3
	}
	return 4
}

// ServeHTTP answers GET (and HEAD) /v1/reports/files with the list as
// {"files": [...]} and /v1/reports/files/{name} with the file: its
// format's Content-Type, Content-Disposition (inline for HTML, attachment
// otherwise), Last-Modified and an ETag, so conditional and range
// requests work (http.ServeContent). A name the scheduled job does not
// write is 400 naming the parameter; a file that is not there is 404.
// Files are opened through an os.Root on the directory, so no name and no
// symbolic link reaches outside it.
func (rf *ReportFiles) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if name == "" {
		rf.serveList(w, r)
		return
	}
	rf.serveFile(w, r, name)
}

func (rf *ReportFiles) serveList(w http.ResponseWriter, r *http.Request) {
	if len(r.URL.Query()) > 0 {
		k := sortedParams(r.URL.Query())[0]
		writeJSON(w, http.StatusBadRequest, errorBody{Error: fmt.Sprintf("unknown parameter %q; this route takes none", k), Field: k})
		return
	}
	files, err := rf.List()
	if err != nil {
		rf.log.Error("list report files", "dir", rf.dir, "err", err)
		writeJSON(w, http.StatusInternalServerError, errorBody{Error: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Files []ReportFile `json:"files"`
	}{files})
}

func (rf *ReportFiles) serveFile(w http.ResponseWriter, r *http.Request, name string) {
	meta, ok := parseReportFileName(name)
	if !ok {
		writeJSON(w, http.StatusBadRequest, errorBody{Field: "name", Error: fmt.Sprintf(
			"%q is not the name of a scheduled report file (orderd-reconciliation-<from>-<to>.<csv|json|html>)", name)})
		return
	}
	if len(r.URL.Query()) > 0 {
		k := sortedParams(r.URL.Query())[0]
		writeJSON(w, http.StatusBadRequest, errorBody{Error: fmt.Sprintf("unknown parameter %q; this route takes none", k), Field: k})
		return
	}
	notFound := func() {
		writeJSON(w, http.StatusNotFound, errorBody{Error: fmt.Sprintf("no report file %q", name)})
	}
	root, err := os.OpenRoot(rf.dir)
	if errors.Is(err, fs.ErrNotExist) {
		notFound()
		return
	}
	if err != nil {
		rf.log.Error("open reports directory", "dir", rf.dir, "err", err)
		writeJSON(w, http.StatusInternalServerError, errorBody{Error: "reports directory: " + err.Error()})
		return
	}
	defer root.Close()
	f, err := root.Open(name)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			// A link out of the directory, or a file orderd cannot read.
			rf.log.Warn("open report file", "name", name, "err", err)
		}
		notFound()
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		notFound()
		return
	}
	disposition := "attachment"
	if meta.Format == "html" {
		disposition = "inline"
	}
	h := w.Header()
	h.Set("Content-Type", reportFileTypes[meta.Format])
	h.Set("Content-Disposition", disposition+`; filename="`+name+`"`)
	// Files are replaced whole (renamed into place), never changed in
	// place, so size and modification time identify a version.
	h.Set("ETag", `"`+strconv.FormatInt(fi.Size(), 36)+"-"+strconv.FormatInt(fi.ModTime().UnixNano(), 36)+`"`)
	// A browser may keep a copy but must ask whether it is still current;
	// shared caches must not keep finance data at all.
	h.Set("Cache-Control", "private, no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	if meta.Format == "html" {
		// The same policy the report states in its own meta tag, in case
		// anything else ever lands in the directory under such a name.
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'")
	}
	http.ServeContent(w, r, name, fi.ModTime(), f)
}
