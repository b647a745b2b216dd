package reconcile_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	stdhtml "html"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"orderd/provider"
	"orderd/reconcile"
	"orderd/store"
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
			if tc.format == reconcile.FormatJSON {
				checkSchema(t, buf.Bytes())
			}
			golden(t, "report-2026-11-01."+tc.format, buf.Bytes())
		})
	}
}

// TestReporter_WriteCSVFiles checks the three-file form: the lines file,
// the summary file and the findings file hold exactly the three sections
// of the one-stream form.
func TestReporter_WriteCSVFiles(t *testing.T) {
	e := reportEnv(t)
	r := e.reporter()
	var one bytes.Buffer
	if err := r.WriteCSV(t.Context(), &one, nil, reportDay); err != nil {
		t.Fatal(err)
	}
	linesPart, rest, ok := bytes.Cut(one.Bytes(), []byte("\r\n\r\n"))
	summaryPart, findingsPart, ok2 := bytes.Cut(rest, []byte("\r\n\r\n"))
	if !ok || !ok2 {
		t.Fatalf("one-stream CSV has no empty line between its sections:\n%s", one.Bytes())
	}
	summaryPart = append(summaryPart, "\r\n"...)
	path := filepath.Join(t.TempDir(), "day.csv")
	if err := r.WriteCSVFiles(t.Context(), path, reportDay); err != nil {
		t.Fatal(err)
	}
	lines, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	summary, err := os.ReadFile(filepath.Join(filepath.Dir(path), "day-summary.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if want := append(linesPart, "\r\n"...); !bytes.Equal(lines, want) {
		t.Errorf("lines file:\n%s\nwant:\n%s", lines, want)
	}
	findings, err := os.ReadFile(filepath.Join(filepath.Dir(path), "day-findings.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(findings, findingsPart) || !bytes.HasPrefix(findings, []byte("finding_id,kind,")) {
		t.Errorf("findings file:\n%s\nwant:\n%s", findings, findingsPart)
	}
	if !bytes.Equal(summary, summaryPart) {
		t.Errorf("summary file:\n%s\nwant:\n%s", summary, summaryPart)
	}
	// Each file is plain RFC 4180 that a strict reader takes whole.
	for name, b := range map[string][]byte{"lines": lines, "summary": summary, "findings": findings} {
		recs, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
		if err != nil {
			t.Errorf("%s file does not parse as CSV: %v", name, err)
		}
		if len(recs) < 2 {
			t.Errorf("%s file has %d records, want a header and rows", name, len(recs))
		}
	}
}

// reportJSON is the JSON report as a consumer reads it.
type reportJSON struct {
	Period struct {
		From, To, GeneratedAt, Timezone string
	}
	Currencies []struct {
		Currency string
		Orders   struct {
			Total, Completed, Rejected, Open int
			ByStatus                         map[string]int
		}
		Payins struct {
			Count                              int
			GrossAuthorized, MerchantNet, Fees string
		}
		Payouts struct {
			Count        int
			Amount, Fees string
		}
		Refunds struct {
			Count  int
			Amount string
		}
		Fees    string
		Balance *struct {
			Start, End                                                struct{ Amount, At string }
			ActualMovement                                            string
			ExpectedMovement, Drift, DriftExplained, DriftUnexplained *string
			Comparisons, ComparisonsOutOfTolerance                    int
		}
		Verdict string
		Bridge  struct {
			Opening                            *string
			Movements                          struct{ Payins, Payouts, Refunds, Fees, Other string }
			ExpectedClosing, Closing, Residual *string
		}
		Breaks []struct {
			FindingID  int64
			Kind, Key  string
			Amount     *string
			AgeSeconds int64
			Priority   string
		}
	}
	Orders []struct {
		ID, MerchantOrderID, Type, Status, Membership string
		CreatedAt, CompletedAt                        *string
		Authorized, Requested, Merchant, Fee          *struct{ Amount, Currency string }
		Refunded                                      []struct {
			Amount, Currency string
			Count            int
		}
		LearnedVia   string
		OpenFindings []string
	}
	Findings []struct {
		ID                  int64
		Kind, Key, State    string
		Status              string
		FoundAt, ResolvedAt *string
		Resolution          string
		ResolvedBy          string
		Summary             string
		Detail              json.RawMessage
		Trail               []store.FindingAction
	}
	Runs []struct {
		ID         int64
		Job, Error string
	}
	Digest       string
	DigestCovers string
	FirstIssue   *struct {
		Digest, IssuedAt string
		SameDigest       bool
		ChangedOrders    []struct{ OrderID, MerchantOrderID string }
		UnnamedChanges   int
	}
}

func readReport(t *testing.T, r *reconcile.Reporter, p reconcile.Period) reportJSON {
	t.Helper()
	var rep reportJSON
	dec := json.NewDecoder(bytes.NewReader(writeJSON(t, r, p)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("report is not the documented JSON shape: %v", err)
	}
	return rep
}

// TestReporter_periodMembership checks which period each order is a line
// of: the one where it reached its final status; the one where it was
// created while it is not final by that period's end; and the one where a
// refund of it completed.
func TestReporter_periodMembership(t *testing.T) {
	e := newEnv(t, envOptions{clock: &clock{t: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}})
	day := func(d int) reconcile.Period {
		return reconcile.Day(time.Date(2026, 11, d, 12, 0, 0, 0, time.UTC))
	}
	mk := func(id, mid, created string) rOrder {
		return rOrder{id: id, mid: mid, typ: "payin", status: "processing", created: created, amount: "10.00", net: "9.70", ccy: "brl"}
	}
	// Created on day 1, completed at exactly midnight, the first instant
	// of day 2: open on day 1, final on day 2.
	edge := mk("o-edge", "m-edge", "2026-11-01T23:59:00Z")
	e.at("2026-11-01T23:59:01Z")
	e.observe(edge, store.SourceWebhook)
	edge.status, edge.completed = "completed", "2026-11-02T00:00:00Z"
	e.at("2026-11-02T00:00:02Z")
	e.observe(edge, store.SourceWebhook)

	// Created day 1, completed day 3: open on day 1, absent on day 2,
	// final on day 3.
	slow := mk("o-slow", "m-slow", "2026-11-01T10:00:00Z")
	e.at("2026-11-01T10:00:01Z")
	e.observe(slow, store.SourceGateway)
	slow.status, slow.completed = "completed", "2026-11-03T09:00:00Z"
	e.at("2026-11-03T09:00:01Z")
	e.observe(slow, store.SourcePoll)

	// Created day 2 and never final: open on day 2 only.
	hang := mk("o-hang", "m-hang", "2026-11-02T05:00:00Z")
	e.at("2026-11-02T05:00:01Z")
	e.observe(hang, store.SourceWebhook)

	// Learned late: completed on day 1 by the provider's clock, but
	// orderd first heard of it on day 3. It is a line of day 1.
	late := mk("o-late", "m-late", "2026-11-01T08:00:00Z")
	late.status, late.completed = "completed", "2026-11-01T08:05:00Z"
	e.at("2026-11-03T11:00:00Z")
	e.observe(late, store.SourcePoll)

	// Final on day 1, refunded on day 3 (a refund line there), and a
	// refund rejected on day 3 too: no line for that one.
	ref := mk("o-ref", "m-ref", "2026-11-01T07:00:00Z")
	ref.status, ref.completed = "completed", "2026-11-01T07:10:00Z"
	e.at("2026-11-01T07:10:01Z")
	e.observe(ref, store.SourceWebhook)
	ref.refunds = []rRefund{
		{id: "rf-1", status: "completed", amount: "4.00", created: "2026-11-03T06:00:00Z", completed: "2026-11-03T06:30:00Z"},
		{id: "rf-2", status: "rejected", amount: "6.00", created: "2026-11-03T06:00:00Z"},
	}
	e.at("2026-11-03T06:30:05Z")
	e.observe(ref, store.SourcePoll)

	r := e.reporter()
	type want struct{ membership, status, learnedVia string }
	for _, tc := range []struct {
		name   string
		period reconcile.Period
		want   map[string]want
	}{
		{"day 1", day(1), map[string]want{
			"m-edge": {"open", "processing", "webhook"},
			"m-slow": {"open", "processing", "gateway"},
			"m-late": {"final", "completed", "poll"},
			"m-ref":  {"final", "completed", "webhook"},
		}},
		{"day 2", day(2), map[string]want{
			"m-edge": {"final", "completed", "webhook"},
			"m-hang": {"open", "processing", "webhook"},
		}},
		{"day 3", day(3), map[string]want{
			"m-slow": {"final", "completed", "poll"},
			"m-ref":  {"refund", "completed", "poll"},
		}},
		{"days 1 to 3", reconcile.Period{From: day(1).From, To: day(3).To}, map[string]want{
			"m-edge": {"final", "completed", "webhook"},
			"m-slow": {"final", "completed", "poll"},
			"m-hang": {"open", "processing", "webhook"},
			"m-late": {"final", "completed", "poll"},
			"m-ref":  {"final", "completed", "webhook"},
		}},
		{"an RFC 3339 window ending at the edge", reconcile.Period{From: day(1).From.Add(23 * time.Hour), To: day(2).From}, map[string]want{
			"m-edge": {"open", "processing", "webhook"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := readReport(t, r, tc.period)
			got := map[string]want{}
			for _, o := range rep.Orders {
				if _, dup := got[o.MerchantOrderID]; dup {
					t.Errorf("%s is listed twice", o.MerchantOrderID)
				}
				got[o.MerchantOrderID] = want{o.Membership, o.Status, o.LearnedVia}
				if o.Membership == "open" && (o.CompletedAt != nil || o.Merchant != nil || o.Fee != nil) {
					t.Errorf("open line %s shows completion figures: %+v", o.MerchantOrderID, o)
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("lines %v, want %v", got, tc.want)
			}
			for mid, w := range tc.want {
				if got[mid] != w {
					t.Errorf("%s: got %+v, want %+v", mid, got[mid], w)
				}
			}
		})
	}

	t.Run("a refund counts in the period it completed", func(t *testing.T) {
		for _, tc := range []struct {
			period      reconcile.Period
			count       int
			amount      string
			lineRefunds string
		}{
			{day(1), 0, "0.00", ""},
			{day(3), 1, "4.00", "4.00"},
			{reconcile.Period{From: day(1).From, To: day(3).To}, 1, "4.00", "4.00"},
		} {
			rep := readReport(t, r, tc.period)
			if len(rep.Currencies) != 1 || rep.Currencies[0].Refunds.Count != tc.count || rep.Currencies[0].Refunds.Amount != tc.amount {
				t.Errorf("%v: refunds %+v, want %d of %s", tc.period, rep.Currencies, tc.count, tc.amount)
			}
			for _, o := range rep.Orders {
				if o.MerchantOrderID != "m-ref" {
					continue
				}
				got := ""
				if len(o.Refunded) > 0 {
					got = o.Refunded[0].Amount
				}
				if got != tc.lineRefunds {
					t.Errorf("%v: m-ref refunded %q, want %q", tc.period, got, tc.lineRefunds)
				}
			}
		}
	})
}

// TestReporter_decimalExactness sums amounts that float64 cannot hold
// exactly and checks every total to the last digit, in the provider's
// scale.
func TestReporter_decimalExactness(t *testing.T) {
	e := newEnv(t, envOptions{clock: &clock{t: time.Date(2026, 11, 1, 1, 0, 0, 0, time.UTC)}})
	for i, a := range []struct{ amount, net string }{
		{"12345678901234567.89", "12345678901234567.79"},
		{"0.10", "0.07"},
		{"0.20", "0.13"},
		{"1.005", "1.000"},
	} {
		o := rOrder{id: "o-" + a.amount, mid: "m-" + a.amount, typ: "payin", status: "completed", created: "2026-11-01T01:00:00Z",
			amount: a.amount, net: a.net, ccy: "brl", completed: "2026-11-01T02:00:00Z"}
		e.at("2026-11-01T02:00:0" + string(rune('1'+i)) + "Z")
		e.observe(o, store.SourceWebhook)
	}
	rep := readReport(t, e.reporter(), reconcile.Day(e.clock.Now()))
	if len(rep.Currencies) != 1 {
		t.Fatalf("currencies: %+v", rep.Currencies)
	}
	p := rep.Currencies[0].Payins
	// As float64, 12345678901234567.89 + 0.10 + 0.20 + 1.005 is
	// 12345678901234570 (and 0.10 + 0.20 is 0.30000000000000004).
	if p.GrossAuthorized != "12345678901234569.195" || p.MerchantNet != "12345678901234568.990" || p.Fees != "0.205" {
		t.Errorf("payins %+v, want gross 12345678901234569.195, net 12345678901234568.990, fees 0.205", p)
	}
	fees := map[string]string{}
	for _, o := range rep.Orders {
		fees[o.Authorized.Amount] = o.Fee.Amount
		if o.Merchant == nil {
			t.Fatalf("%s has no merchant amount", o.MerchantOrderID)
		}
	}
	for amount, want := range map[string]string{"12345678901234567.89": "0.10", "0.10": "0.03", "0.20": "0.07", "1.005": "0.005"} {
		if fees[amount] != want {
			t.Errorf("fee of %s: %q, want %q (amounts as written: %v)", amount, fees[amount], want, fees)
		}
	}
}

func TestParsePeriod(t *testing.T) {
	utc := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v.UTC()
	}
	for _, tc := range []struct {
		name, from, to string
		want           reconcile.Period
		param          string
		fileName       string
	}{
		{name: "dates", from: "2026-11-01", to: "2026-11-02",
			want:     reconcile.Period{From: utc("2026-11-01T00:00:00Z"), To: utc("2026-11-02T00:00:00Z")},
			fileName: "orderd-reconciliation-2026-11-01-2026-11-02.csv"},
		{name: "RFC 3339 times in another zone", from: "2026-11-01T10:00:00+02:00", to: "2026-11-01T12:30:00Z",
			want:     reconcile.Period{From: utc("2026-11-01T08:00:00Z"), To: utc("2026-11-01T12:30:00Z")},
			fileName: "orderd-reconciliation-20261101T080000Z-20261101T123000Z.csv"},
		{name: "a date and a time", from: "2026-11-01", to: "2026-11-01T06:00:00Z",
			want:     reconcile.Period{From: utc("2026-11-01T00:00:00Z"), To: utc("2026-11-01T06:00:00Z")},
			fileName: "orderd-reconciliation-2026-11-01-20261101T060000Z.csv"},
		{name: "from missing", from: "", to: "2026-11-02", param: "from"},
		{name: "to missing", from: "2026-11-01", to: "", param: "to"},
		{name: "from not a date", from: "2026-13-01", to: "2026-11-02", param: "from"},
		{name: "to not a time", from: "2026-11-01", to: "tomorrow", param: "to"},
		{name: "empty period", from: "2026-11-01", to: "2026-11-01", param: "to"},
		{name: "reversed period", from: "2026-11-02", to: "2026-11-01", param: "to"},
		{name: "a date before 1970", from: "0000-01-01", to: "2026-11-01", param: "from"},
		{name: "a time before 1970", from: "1969-12-31T23:00:00Z", to: "2026-11-01", param: "from"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := reconcile.ParsePeriod(tc.from, tc.to)
			if tc.param != "" {
				var pe *reconcile.PeriodError
				if !errors.As(err, &pe) || pe.Param != tc.param || !strings.HasPrefix(err.Error(), tc.param+" ") {
					t.Fatalf("error %v (%T), want a PeriodError naming %q", err, err, tc.param)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !p.From.Equal(tc.want.From) || !p.To.Equal(tc.want.To) || p.From.Location() != time.UTC {
				t.Errorf("period %v, want %v", p, tc.want)
			}
			if got := p.FileName("csv"); got != tc.fileName {
				t.Errorf("file name %q, want %q", got, tc.fileName)
			}
		})
	}
}

func TestWriteFileAtomic(t *testing.T) {
	errBroken := errors.New("disk on fire")
	for _, tc := range []struct {
		name     string
		existing string
		write    func(w io.Writer) error
		want     string
		wantErr  error
	}{
		{name: "a finished write replaces the file", existing: "old report\n",
			write: func(w io.Writer) error { _, err := io.WriteString(w, "new report\n"); return err },
			want:  "new report\n"},
		{name: "a failing writer leaves no file", existing: "",
			write: func(w io.Writer) error {
				_, _ = io.WriteString(w, strings.Repeat("partial line\n", 50000))
				return errBroken
			},
			wantErr: errBroken},
		{name: "a failing writer leaves the finished file as it was", existing: "finished report\n",
			write: func(w io.Writer) error {
				_, _ = io.WriteString(w, strings.Repeat("partial line\n", 50000))
				return errBroken
			},
			want: "finished report\n", wantErr: errBroken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "report.csv")
			if tc.existing != "" {
				if err := os.WriteFile(path, []byte(tc.existing), 0o640); err != nil {
					t.Fatal(err)
				}
			}
			err := reconcile.WriteFileAtomic(path, tc.write)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			got, rerr := os.ReadFile(path)
			switch {
			case tc.want == "" && !errors.Is(rerr, os.ErrNotExist):
				t.Errorf("file exists after a failed write: %q (%v)", got, rerr)
			case tc.want != "" && string(got) != tc.want:
				t.Errorf("file holds %q, want %q", got, tc.want)
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, en := range entries {
				if en.Name() != "report.csv" {
					t.Errorf("left behind %s", en.Name())
				}
			}
		})
	}

	t.Run("a report cut short by its context leaves no files", func(t *testing.T) {
		e := reportEnv(t)
		dir := t.TempDir()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		err := e.reporter().WriteCSVFiles(ctx, filepath.Join(dir, "r.csv"), reportDay)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v, want context.Canceled", err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("files left: %v", entries)
		}
	})
}

func TestReporter_DailyJob(t *testing.T) {
	e := reportEnv(t) // its clock is 2026-11-02T01:00, when the job runs
	r := e.reporter()
	dir := filepath.Join(t.TempDir(), "reports")
	job := r.DailyJob(dir)
	for run := range 2 {
		if err := job(t.Context()); err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, en := range entries {
			names = append(names, en.Name())
		}
		want := []string{
			"orderd-reconciliation-2026-11-01-2026-11-02-findings.csv",
			"orderd-reconciliation-2026-11-01-2026-11-02-summary.csv",
			"orderd-reconciliation-2026-11-01-2026-11-02.csv",
			"orderd-reconciliation-2026-11-01-2026-11-02.html",
			"orderd-reconciliation-2026-11-01-2026-11-02.json",
		}
		if strings.Join(names, " ") != strings.Join(want, " ") {
			t.Fatalf("run %d wrote %v, want %v", run, names, want)
		}
	}
	for _, f := range []string{"csv", "json"} {
		var buf bytes.Buffer
		if err := r.Write(t.Context(), &buf, reportDay, f, reconcile.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, "orderd-reconciliation-2026-11-01-2026-11-02."+f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "csv" {
			want, _, _ := bytes.Cut(buf.Bytes(), []byte("\r\n\r\n"))
			buf.Reset()
			buf.Write(want)
			buf.WriteString("\r\n")
		}
		if !bytes.Equal(got, buf.Bytes()) {
			t.Errorf("%s file differs from the report of 2026-11-01:\n%s", f, got)
		}
	}
	html, err := os.ReadFile(filepath.Join(dir, "orderd-reconciliation-2026-11-01-2026-11-02.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(html, []byte(`href="orderd-reconciliation-2026-11-01-2026-11-02.csv"`)) {
		t.Errorf("the HTML file does not link its sibling CSV file")
	}
}

func TestReporter_WriteHTML(t *testing.T) {
	e := reportEnv(t)
	var buf bytes.Buffer
	r := reconcile.NewReporter(e.st, reconcile.ReportConfig{Now: e.clock.Now, HTMLMaxLines: 3})
	if err := r.WriteHTML(t.Context(), &buf, reportDay, reconcile.WriteOptions{CSVHref: "?from=2026-11-01&to=2026-11-02&format=csv"}); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	for _, want := range []string{
		`<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="chart-brl"`,
		`<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="chart-usd"`,
		// The opening snapshot, taken the evening before, stands at the
		// period's start, joined by a dashed line: nothing is known of
		// the balance between the two snapshots.
		`<polyline class="opening" points="90.0,165.0 712.9,40.0"/>`,
		`<polyline class="balance" points="712.9,40.0"/>`,
		`<circle class="balance-dot before" cx="90.0" cy="165.0" r="3"><title>1000.00 brl at 2026-10-31 23:00:00 UTC, before the period</title></circle>`,
		`brl: provider balance<tspan class="note"> · opening snapshot from 2026-10-31 23:00 (dashed)</tspan>`,
		`<table id="findings">`,
		`<td>balance_drift<span class="note">brl</span></td>`,
		`5.00 brl unexplained of a drift of 5.00 (tolerance 0.00)`,
		`<td>quarantined_webhook<span class="note">m-garbled</span></td>`,
		`<table id="orders" class="lines">`,
		`Showing 3 of 8 order lines: those with an open finding first, then those still open at the end of the period, then the first of the others, in the order above.`,
		`the <a href="?from=2026-11-01&amp;to=2026-11-02&amp;format=csv">CSV report</a> and the <a href="?from=2026-11-01&amp;to=2026-11-02&amp;format=json">JSON report</a> have every line.`,
		`<table id="breakdown">`,
		`8 order lines · 2 findings`,
		`<table id="runs">`,
		`Content-Security-Policy`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML report lacks %q", want)
		}
	}
	if n := strings.Count(html[strings.Index(html, `<table id="orders"`):strings.Index(html, `id="orders-note"`)], `<tr class="line">`); n != 3 {
		t.Errorf("orders table has %d rows, want the cap of 3", n)
	}
	// Self-contained: nothing to fetch, nothing to run.
	if m := regexp.MustCompile(`(?i)<script|<link|<img|<iframe|\bsrc=|url\(|@import|href="(https?:)?//`).FindString(html); m != "" {
		t.Errorf("HTML report refers outside itself: %q", m)
	}
}

// TestReporter_requestedAmount: an order created through the gateway and
// known only from the provider's creation answer (no transactions, so no
// amount) is shown with the amount its creation asked for and counted
// under that currency, not under "no amount yet"; once the provider
// states the amount, the line shows that instead.
func TestReporter_requestedAmount(t *testing.T) {
	e := newEnv(t, envOptions{clock: &clock{t: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)}})
	create := func(kind store.AttemptKind, id, mid, request string) {
		t.Helper()
		a, _, err := e.st.BeginAttempt(t.Context(), store.NewAttempt{Kind: kind, Origin: store.OriginGateway,
			MerchantOrderID: mid, IdempotencyKey: "order:" + mid, Request: json.RawMessage(request),
			RequestHash: "hash-" + mid, State: store.AttemptPending})
		if err != nil {
			t.Fatal(err)
		}
		answer := []byte(`{"id":"` + id + `","merchantOrderId":"` + mid + `","type":"` + string(kind) +
			`","createdAt":"2026-11-01T09:00:00Z","auth":{"url":"https://pay.example/x"},"status":"processing","rejectReason":null}`)
		o, err := provider.DecodeOrder(answer)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.st.FinishAttempt(t.Context(), a.ID, store.AttemptOutcome{State: store.AttemptCreated, Response: answer,
			Observation: &store.Observation{Source: store.SourceGateway, Order: o, Raw: answer, ObservedAt: e.clock.Now()}}); err != nil {
			t.Fatal(err)
		}
	}
	create(store.AttemptPayin, "0d000000-0000-4000-8000-000000000001", "m-invoice",
		`{"merchantOrderId":"m-invoice","invoice":{"amount":"45.50","currency":"brl"},"client":{"name":"Ana"}}`)
	create(store.AttemptPayout, "0d000000-0000-4000-8000-000000000002", "m-payout",
		`{"merchantOrderId":"m-payout","amount":"12.00","currency":"usd"}`)
	create(store.AttemptPayout, "0d000000-0000-4000-8000-000000000003", "m-opaque",
		`{"merchantOrderId":"m-opaque","destination":"x"}`)
	e.at("2026-11-01T10:00:00Z")
	// A payin learned from a webhook: its own amounts, no request.
	e.observe(rOrder{id: "0d000000-0000-4000-8000-000000000004", mid: "m-hook", typ: "payin", status: "processing",
		created: "2026-11-01T09:30:00Z", amount: "8.00", net: "7.76", ccy: "brl"}, store.SourceWebhook)

	r := e.reporter()
	type money = struct{ Amount, Currency string }
	lines := func(wantCurrencies string) map[string][2]*money {
		t.Helper()
		rep := readReport(t, r, reportDay)
		out := map[string][2]*money{}
		for _, o := range rep.Orders {
			out[o.MerchantOrderID] = [2]*money{(*money)(o.Authorized), (*money)(o.Requested)}
		}
		var ccys []string
		for _, c := range rep.Currencies {
			ccys = append(ccys, fmt.Sprintf("%s:%d", c.Currency, c.Orders.Total))
		}
		if got := strings.Join(ccys, " "); got != wantCurrencies {
			t.Errorf("currencies %s, want %s", got, wantCurrencies)
		}
		return out
	}
	show := func(m *money) string {
		if m == nil {
			return "-"
		}
		return m.Amount + " " + m.Currency
	}
	// m-opaque's request states no amount the report can read: it alone
	// stays under the empty currency.
	got := lines(":1 brl:2 usd:1")
	for mid, want := range map[string][2]string{
		"m-invoice": {"-", "45.50 brl"},
		"m-payout":  {"-", "12.00 usd"},
		"m-opaque":  {"-", "-"},
		"m-hook":    {"8.00 brl", "-"},
	} {
		if g := [2]string{show(got[mid][0]), show(got[mid][1])}; g != want {
			t.Errorf("%s: authorized, requested = %v, want %v", mid, g, want)
		}
	}

	// The webhook brings the provider's amounts: they replace the request.
	e.at("2026-11-01T11:00:00Z")
	e.observe(rOrder{id: "0d000000-0000-4000-8000-000000000001", mid: "m-invoice", typ: "payin", status: "processing",
		created: "2026-11-01T09:00:00Z", amount: "45.50", net: "44.14", ccy: "brl"}, store.SourceWebhook)
	if g := lines(":1 brl:2 usd:1")["m-invoice"]; show(g[0]) != "45.50 brl" || g[1] != nil {
		t.Errorf("after the webhook: authorized %s, requested %s; want 45.50 brl and none", show(g[0]), show(g[1]))
	}

	var csvOut bytes.Buffer
	if err := r.WriteCSV(t.Context(), &csvOut, io.Discard, reportDay); err != nil {
		t.Fatal(err)
	}
	rd := csv.NewReader(&csvOut)
	recs, err := rd.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	header := strings.Join(recs[0], ",")
	if !strings.HasSuffix(header, ",requested_amount,requested_currency") {
		t.Errorf("CSV header %s lacks the requested columns at its end", header)
	}
	for _, rec := range recs[1:] {
		if rec[1] == "m-payout" && (rec[17] != "12.00" || rec[18] != "usd" || rec[7] != "") {
			t.Errorf("CSV line of m-payout %q: want requested 12.00 usd and no authorized amount", rec)
		}
	}
}

// htmlLineOrder returns the merchantOrderIds of an HTML report's order
// lines, top to bottom, and the headings of their groups.
func htmlLineOrder(html string) (mids, groups []string) {
	for _, m := range regexp.MustCompile(`<tr class="line"><td class="order"><span class="mid">([^<]*)</span>|<tr class="group"><th colspan="11">([^<]*)</th>`).FindAllStringSubmatch(html, -1) {
		if m[1] != "" {
			mids = append(mids, m[1])
		} else {
			groups = append(groups, stdhtml.UnescapeString(m[2]))
		}
	}
	return mids, groups
}

// TestReporter_WriteHTML_lineOrder: the HTML report lists final lines by
// completion time, then refund lines, then open lines by creation time,
// ties by merchantOrderId — not in the order orderd happened to learn of
// the orders — and a capped table keeps the first lines of that order.
func TestReporter_WriteHTML_lineOrder(t *testing.T) {
	e := newEnv(t, envOptions{clock: &clock{t: time.Date(2026, 10, 31, 19, 0, 0, 0, time.UTC)}})
	final := func(mid, created, completed string) rOrder {
		return rOrder{id: "0e000000-0000-4000-8000-0000000000" + mid[2:], mid: mid, typ: "payin", status: "completed",
			created: created, amount: "10.00", net: "9.70", ccy: "brl", completed: completed}
	}
	open := func(mid, created string) rOrder {
		return rOrder{id: "0e000000-0000-4000-8000-0000000000" + mid[2:], mid: mid, typ: "payin", status: "processing",
			created: created, amount: "10.00", net: "9.70", ccy: "brl"}
	}
	ref := final("m-50", "2026-10-31T19:50:00Z", "2026-10-31T20:00:00Z")
	e.at("2026-10-31T20:00:01Z")
	e.observe(ref, store.SourceWebhook)
	// In the order orderd learns of them, which is not the order to show.
	for _, step := range []struct {
		at  string
		o   rOrder
		src store.Source
	}{
		{"2026-11-01T10:00:01Z", final("m-30", "2026-11-01T09:00:00Z", "2026-11-01T10:00:00Z"), store.SourceWebhook},
		{"2026-11-01T10:00:02Z", open("m-61", "2026-11-01T09:00:00Z"), store.SourceWebhook},
		{"2026-11-01T12:00:00Z", final("m-10", "2026-11-01T07:00:00Z", "2026-11-01T08:00:00Z"), store.SourcePoll},
		{"2026-11-01T13:00:00Z", final("m-20", "2026-11-01T09:30:00Z", "2026-11-01T10:00:00Z"), store.SourceWebhook},
		{"2026-11-01T14:00:00Z", open("m-60", "2026-11-01T07:00:00Z"), store.SourcePoll},
	} {
		e.at(step.at)
		e.observe(step.o, step.src)
	}
	ref.refunds = []rRefund{{id: "rf-50", status: "completed", amount: "2.00", created: "2026-11-01T15:00:00Z", completed: "2026-11-01T15:00:30Z"}}
	e.at("2026-11-01T15:01:00Z")
	e.observe(ref, store.SourcePoll)
	e.at("2026-11-02T01:00:00Z")

	for _, tc := range []struct {
		name   string
		max    int
		mids   string
		groups []string
	}{
		{"every line", 0, "m-10 m-20 m-30 m-50 m-60 m-61", []string{
			"Final in the period, by completion time · 3 lines",
			"Final earlier, with a refund completed in the period, by the order's completion time · 1 line",
			"Open at the end of the period, by creation time · 2 lines",
		}},
		// Past the cap, the exceptions (here the open orders) are kept
		// first, then the first of the others; the table keeps its order.
		{"capped at 4", 4, "m-10 m-20 m-60 m-61", []string{
			"Final in the period, by completion time · 3 lines, 2 shown",
			"Open at the end of the period, by creation time · 2 lines",
		}},
		{"capped at 2", 2, "m-60 m-61", []string{
			"Open at the end of the period, by creation time · 2 lines",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := reconcile.NewReporter(e.st, reconcile.ReportConfig{Now: e.clock.Now, HTMLMaxLines: tc.max})
			var buf bytes.Buffer
			if err := r.WriteHTML(t.Context(), &buf, reportDay, reconcile.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			mids, groups := htmlLineOrder(buf.String())
			if strings.Join(mids, " ") != tc.mids {
				t.Errorf("lines %v, want %s", mids, tc.mids)
			}
			if strings.Join(groups, "\n") != strings.Join(tc.groups, "\n") {
				t.Errorf("groups\n%s\nwant\n%s", strings.Join(groups, "\n"), strings.Join(tc.groups, "\n"))
			}
			if tc.max != 0 && !strings.Contains(buf.String(), fmt.Sprintf("Showing %d of 6 order lines", tc.max)) {
				t.Errorf("no note about the cap")
			}
			// Every line counts in the breakdown, listed or not.
			for _, row := range []string{
				`<tr><td>2026-10-31</td><td>brl</td><td>refund</td><td>completed</td><td class="num">1</td><td class="num">10.00</td></tr>`,
				`<tr><td>2026-11-01</td><td>brl</td><td>final</td><td>completed</td><td class="num">3</td><td class="num">30.00</td></tr>`,
				`<tr><td>2026-11-01</td><td>brl</td><td>open</td><td>processing</td><td class="num">2</td><td class="num">20.00</td></tr>`,
			} {
				if !strings.Contains(buf.String(), row) {
					t.Errorf("breakdown lacks %s", row)
				}
			}
		})
	}
}

// minutesEnv is a day on which everything happens within six minutes:
// balance snapshots at 10:00, 10:03 and 10:06, a payin the provider
// credits at 10:01 that orderd learns of only at 10:04. The 10:03 check
// finds 97.00 of drift it cannot explain; the 10:06 check, still from
// the 10:00 snapshot, explains all of it.
func minutesEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t, envOptions{clock: &clock{t: time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)},
		cfg: reconcile.Config{DriftGrace: 1}})
	if err := e.fake.AdjustBalance("brl", "1000.00"); err != nil {
		t.Fatal(err)
	}
	e.run(e.rec.RunBalances)
	if err := e.fake.AdjustBalance("brl", "97.00"); err != nil {
		t.Fatal(err)
	}
	e.at("2026-11-01T10:03:00Z")
	e.run(e.rec.RunBalances)
	e.at("2026-11-01T10:04:00Z")
	e.observe(rOrder{id: "0f000000-0000-4000-8000-000000000001", mid: "m-late-hook", typ: "payin", status: "completed",
		created: "2026-11-01T09:59:00Z", amount: "100.00", net: "97.00", ccy: "brl", completed: "2026-11-01T10:01:00Z"}, store.SourceWebhook)
	e.at("2026-11-01T10:06:00Z")
	e.run(e.rec.RunBalances)
	e.at("2026-11-02T01:00:00Z")
	return e
}

// TestReporter_WriteHTML_chart: a chart's time axis follows its points,
// not the period: six minutes of data fill the plot (between x 90 and
// 740) instead of standing as one vertical line in a day-wide axis, under
// round ticks two minutes apart with the date beneath the first.
func TestReporter_WriteHTML_chart(t *testing.T) {
	e := minutesEnv(t)
	var buf bytes.Buffer
	if err := e.reporter().WriteHTML(t.Context(), &buf, reportDay, reconcile.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	m := regexp.MustCompile(`<polyline class="balance" points="([^"]*)"/>`).FindStringSubmatch(html)
	if m == nil {
		t.Fatalf("no balance line in\n%s", html)
	}
	var xs []float64
	for _, pt := range strings.Fields(m[1]) {
		x, _, _ := strings.Cut(pt, ",")
		v, err := strconv.ParseFloat(x, 64)
		if err != nil {
			t.Fatal(err)
		}
		xs = append(xs, v)
	}
	if len(xs) != 3 || xs[0] < 90 || xs[0] > 130 || xs[2] < 700 || xs[2] > 740 || xs[1] < 380 || xs[1] > 450 {
		t.Errorf("balance points at x %v: want 3 spread over the plot (90 to 740), the middle one near its centre", xs)
	}
	var ticks []string
	for _, tm := range regexp.MustCompile(`<text class="tick" [^>]*>([^<]*)</text>(?:<text class="tick-date" [^>]*>([^<]*)</text>)?`).FindAllStringSubmatch(html, -1) {
		ticks = append(ticks, strings.TrimSpace(tm[1]+" "+tm[2]))
	}
	if got := strings.Join(ticks, ", "); got != "10:00 2026-11-01, 10:02, 10:04, 10:06" {
		t.Errorf("time axis ticks %q", got)
	}
	if !strings.Contains(html, `data-from="2026-11-01 09:59:42" data-to="2026-11-01 10:06:18"`) {
		t.Errorf("the axis is not the points' span padded by a twentieth: %s", regexp.MustCompile(`data-from="[^"]*" data-to="[^"]*"`).FindString(html))
	}
}

// TestReporter_WriteHTML_unexplainedZero: drift that a check found
// beyond tolerance and a later check explained leaves 0.00 unexplained,
// which is not shown as an alarm; the count of checks beyond tolerance
// still is.
func TestReporter_WriteHTML_unexplainedZero(t *testing.T) {
	e := minutesEnv(t)
	var buf bytes.Buffer
	if err := e.reporter().WriteHTML(t.Context(), &buf, reportDay, reconcile.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	for _, want := range []string{
		`<tr><th>· unexplained</th><td class="num">0.00</td></tr>`,
		`<tr><th>Balance checks (beyond tolerance)</th><td class="num bad">2 (1)</td></tr>`,
		`1 order line · 1 finding`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML report lacks %q", want)
		}
	}
}

// TestTimeAxis: the charts' time axis spans the points, padded by a
// twentieth of their span on each side (at least two minutes in all),
// kept inside the period, with two to seven round ticks.
func TestTimeAxis(t *testing.T) {
	ts := func(ss ...string) []time.Time {
		var out []time.Time
		for _, s := range ss {
			v, err := time.Parse(time.RFC3339, s)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, v)
		}
		return out
	}
	month := reconcile.Period{From: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	for _, tc := range []struct {
		name     string
		p        reconcile.Period
		times    []time.Time
		from, to string
		ticks    string
	}{
		{"one point gets two minutes around it", reportDay, ts("2026-11-01T10:00:00Z"),
			"09:59:00", "10:01:00", "09:59:00 2026-11-01, 09:59:30, 10:00:00, 10:00:30, 10:01:00 @end"},
		{"minutes", reportDay, ts("2026-11-01T10:00:00Z", "2026-11-01T10:20:00Z"),
			"09:59:00", "10:21:00", "10:00 2026-11-01, 10:05, 10:10, 10:15, 10:20 @end"},
		{"an opening snapshot before the period sits at its start", reportDay, ts("2026-10-31T23:00:00Z", "2026-11-01T05:00:00Z"),
			"00:00:00", "05:30:00", "00:00 2026-11-01, 01:00, 02:00, 03:00, 04:00, 05:00"},
		{"padding that would leave the period shifts inside it", reportDay, ts("2026-11-01T20:00:00Z", "2026-11-01T23:59:00Z"),
			"19:37:06", "00:00:00", "20:00 2026-11-01, 21:00, 22:00, 23:00, 00:00 2026-11-02 @end"},
		{"across midnight the new date shows", reconcile.Period{From: reportDay.From, To: reportDay.To.Add(24 * time.Hour)},
			ts("2026-11-01T22:00:00Z", "2026-11-02T02:00:00Z"),
			"21:48:00", "02:12:00", "22:00 2026-11-01, 23:00, 00:00 2026-11-02, 01:00, 02:00 @end"},
		{"a month, by weeks", month, ts("2026-11-01T00:00:00Z", "2026-11-30T12:00:00Z"),
			"00:00:00", "00:00:00", "2026-11-02, 2026-11-09, 2026-11-16, 2026-11-23, 2026-11-30 @end"},
		{"no points: the period", reportDay, nil, "00:00:00", "00:00:00", "00:00 2026-11-01, 06:00, 12:00, 18:00, 00:00 2026-11-02 @end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			from, to, ticks := reconcile.TimeAxis(tc.p, tc.times)
			if from.Format(time.TimeOnly) != tc.from || to.Format(time.TimeOnly) != tc.to {
				t.Errorf("axis %s to %s, want %s to %s", from.Format(time.DateTime), to.Format(time.DateTime), tc.from, tc.to)
			}
			if from.Before(tc.p.From) || to.After(tc.p.To) {
				t.Errorf("axis %s to %s leaves the period %s", from, to, tc.p)
			}
			if got := strings.Join(ticks, ", "); got != tc.ticks {
				t.Errorf("ticks %q\n want %q", got, tc.ticks)
			}
		})
	}
}

// TestReporter_DailyJob_permissions: under the systemd unit's UMask=0077
// the scheduled files would be readable by orderd alone; the job makes
// them 0640 and a directory it creates 0750. Placed in a setgid directory
// of the readers' group (docs/finance.md's recipe for finance), the files and
// a directory the job creates there carry that group.
func TestReporter_DailyJob_permissions(t *testing.T) {
	old := syscall.Umask(0o077)
	t.Cleanup(func() { syscall.Umask(old) })
	readers := os.Getegid()
	if os.Geteuid() == 0 {
		readers = 4242 // root may give a directory any group; a plain user its own
	}
	e := reportEnv(t)
	for _, tc := range []struct {
		name    string
		setgid  bool
		wantGID int
		dirMode os.FileMode
	}{
		{"a plain parent", false, os.Getegid(), 0o750},
		{"a setgid parent of the readers' group", true, readers, 0o750 | os.ModeSetgid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := filepath.Join(t.TempDir(), "srv")
			if err := os.Mkdir(parent, 0o770); err != nil {
				t.Fatal(err)
			}
			if tc.setgid {
				if err := os.Chown(parent, -1, readers); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(parent, 0o770|os.ModeSetgid); err != nil {
					t.Fatal(err)
				}
			}
			dir := filepath.Join(parent, "reports")
			if err := e.reporter().DailyJob(dir)(t.Context()); err != nil {
				t.Fatal(err)
			}
			check := func(path string, mode os.FileMode) {
				t.Helper()
				fi, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				st := fi.Sys().(*syscall.Stat_t)
				if fi.Mode()&(os.ModePerm|os.ModeSetgid) != mode || int(st.Gid) != tc.wantGID {
					t.Errorf("%s: mode %v, group %d; want %v, group %d", filepath.Base(path), fi.Mode(), st.Gid, mode, tc.wantGID)
				}
			}
			check(dir, tc.dirMode)
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 5 {
				t.Errorf("%d files written, want 5", len(entries))
			}
			for _, en := range entries {
				check(filepath.Join(dir, en.Name()), 0o640)
			}
		})
	}
}
