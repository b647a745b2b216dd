package api

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// ReportWriter writes the reconciliation report of [from, to) in format
// ("csv", "json" or "html") to w, as it reads it. An HTML report that
// cuts its table short links csvHref for the full CSV.
// reconcile.Reporter satisfies it.
type ReportWriter interface {
	WriteReport(ctx context.Context, w io.Writer, from, to time.Time, format, csvHref string) error
}

// ReportsConfig configures the reports handler.
type ReportsConfig struct {
	Writer ReportWriter
	// Logger receives the handler's log lines; nil discards them.
	Logger *slog.Logger
}

// reportFormats maps each format to its Content-Type and whether a
// browser should show it (inline) rather than save it (attachment).
var reportFormats = map[string]struct {
	contentType string
	inline      bool
}{
	"csv":  {"text/csv; charset=utf-8", false},
	"json": {"application/json", false},
	"html": {"text/html; charset=utf-8", true},
}

// reportParams are the query parameters GET /v1/reports/reconciliation
// takes.
var reportParams = []string{"from", "to", "format"}

// NewReports returns the handler of GET /v1/reports/reconciliation
// ?from=&to=&format=: from and to are UTC dates (2026-11-01) or RFC 3339
// times, from inclusive and to exclusive; format is csv (the default),
// json or html. A missing or bad parameter, or one the route does not
// take, is 400 naming it. The answer streams with the format's
// Content-Type and a Content-Disposition naming the file
// orderd-reconciliation-<from>-<to>.<ext> (attachment for CSV and JSON,
// inline for HTML, which a browser shows). A failure before the first
// byte is a JSON error; after it the connection is cut, so a client
// never takes a truncated report for a whole one.
func NewReports(cfg ReportsConfig) http.Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &reportsHandler{w: cfg.Writer, log: cfg.Logger}
}

type reportsHandler struct {
	w   ReportWriter
	log *slog.Logger
}

func (h *reportsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for _, k := range sortedParams(q) {
		if !slices.Contains(reportParams, k) {
			writeJSON(w, http.StatusBadRequest, errorBody{Error: fmt.Sprintf("unknown parameter %q (want %s)", k,
				strings.Join(reportParams, ", ")), Field: k})
			return
		}
		if len(q[k]) > 1 {
			writeJSON(w, http.StatusBadRequest, errorBody{Error: k + " is given more than once", Field: k})
			return
		}
	}
	from, err := parseReportBound("from", q.Get("from"))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: err.Error(), Field: "from"})
		return
	}
	to, err := parseReportBound("to", q.Get("to"))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: err.Error(), Field: "to"})
		return
	}
	if !from.Before(to) {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: fmt.Sprintf("to %q is not after from %q", q.Get("to"), q.Get("from")), Field: "to"})
		return
	}
	format := q.Get("format")
	if format == "" {
		format = "csv"
	}
	f, ok := reportFormats[format]
	if !ok {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: fmt.Sprintf("format %q is not one of csv, json, html", format), Field: "format"})
		return
	}
	disposition := "attachment"
	if f.inline {
		disposition = "inline"
	}
	name := "orderd-reconciliation-" + reportBoundName(from) + "-" + reportBoundName(to) + "." + format
	setHeaders := func() {
		hd := w.Header()
		hd.Set("Content-Type", f.contentType)
		hd.Set("Content-Disposition", disposition+`; filename="`+name+`"`)
		hd.Set("Cache-Control", "no-store")
		hd.Set("X-Content-Type-Options", "nosniff")
	}
	if r.Method == http.MethodHead {
		setHeaders()
		w.WriteHeader(http.StatusOK)
		return
	}
	csvHref := "?" + url.Values{"from": {q.Get("from")}, "to": {q.Get("to")}}.Encode() + "&format=csv"
	lw := &lazyWriter{w: w, start: func() { setHeaders(); w.WriteHeader(http.StatusOK) }}
	started := time.Now()
	err = h.w.WriteReport(r.Context(), lw, from, to, format, csvHref)
	switch {
	case err == nil:
		if !lw.started {
			lw.start()
		}
		h.log.Info("report served", "from", from, "to", to, "format", format, "bytes", lw.n, "elapsed", time.Since(started))
	case !lw.started:
		h.log.Error("report failed", "from", from, "to", to, "format", format, "err", err)
		writeJSON(w, http.StatusInternalServerError, errorBody{Error: "report: " + err.Error()})
	default:
		// Part of the body is out; cut the connection so the client sees
		// a broken transfer, not a short file.
		h.log.Error("report failed while streaming; connection cut", "from", from, "to", to, "format", format,
			"bytes", lw.n, "err", err)
		panic(http.ErrAbortHandler)
	}
}

// lazyWriter sends the success headers with the first byte of the body,
// so a report that fails before writing anything can still be answered
// with an error status.
type lazyWriter struct {
	w       http.ResponseWriter
	start   func()
	started bool
	n       int64
}

func (l *lazyWriter) Write(p []byte) (int, error) {
	if !l.started {
		l.started = true
		l.start()
	}
	n, err := l.w.Write(p)
	l.n += int64(n)
	return n, err
}

func sortedParams(q url.Values) []string {
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// parseReportBound reads a period bound as the reports accept it: a UTC
// date or an RFC 3339 time.
func parseReportBound(param, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, fmt.Errorf("%s is required (a date 2006-01-02 or an RFC 3339 time)", param)
	}
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		t, err = time.Parse(time.RFC3339Nano, s)
	}
	// A date before 1970 (0001-01-01 is the zero time, which the report
	// writes as null) is refused like a time before it, as the CLI's
	// reconcile.ParsePeriod refuses both.
	if err != nil || t.UTC().Year() < 1970 || t.UTC().Year() > 9999 {
		return time.Time{}, fmt.Errorf("%s %q is not a date (2006-01-02) or an RFC 3339 time from 1970 on", param, s)
	}
	return t.UTC(), nil
}

// reportBoundName writes a bound for a file name: the date at a UTC
// midnight, else 20261101T103000Z (the scheduled files' names too).
func reportBoundName(t time.Time) string {
	switch {
	case t.Equal(t.Truncate(24 * time.Hour)):
		return t.Format(time.DateOnly)
	case t.Nanosecond() != 0:
		return t.Format("20060102T150405.000Z")
	default:
		return t.Format("20060102T150405Z")
	}
}
