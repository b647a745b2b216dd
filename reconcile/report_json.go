package reconcile

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/shopspring/decimal"

	"orderd/provider"
	"orderd/store"
)

// WriteJSON writes the report of p as one JSON object, element by element
// as it is read, so a period of any size streams:
//
//	{"period":{…},"currencies":[…],"orders":[…],"findings":[…],"runs":[…],"digest":"…"}
//
// Each currency has its verdict, bridge and breaks (verdict.go). digest
// is the hex SHA-256 of the report's content but for the digest itself,
// period.generatedAt and the breaks' ageSeconds (both measured from the
// generation time), the same in the CSV and HTML reports (digester): the
// same period over the same data gives the same digest.
//
// The totals come first: the lines of the one pass over the orders wait
// in an unlinked temporary file until the totals are written.
// docs/finance.md documents every field.
func (r *Reporter) WriteJSON(ctx context.Context, w io.Writer, p Period) error {
	rp, err := r.open(ctx, p)
	if err != nil {
		return err
	}
	defer rp.close()
	// The totals come before the lines in the document, and both come
	// from the one pass over the orders: the lines are written to a
	// temporary file as they are read (memory stays flat) and copied
	// after the totals. The file is unlinked at once, so nothing is left
	// behind whatever happens.
	spool, err := os.CreateTemp("", "orderd-report-*.json")
	if err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	os.Remove(spool.Name())
	defer spool.Close()
	sw := bufio.NewWriterSize(spool, 1<<20) // a month's lines are hundreds of MiB
	le := newLineEncoder()
	t := newTotals()
	fl := flagged{}
	dg := rp.newDigester()
	n := 0
	var werr error
	err = rp.lines(ctx, func(l *Line) error {
		t.add(l)
		fl.add(l)
		if n > 0 {
			sw.WriteByte(',')
		}
		sw.WriteByte('\n')
		b := le.line(l)
		dg.line(l, b)
		_, werr = sw.Write(b)
		n++
		return werr
	})
	if err == nil {
		err = sw.Flush()
	}
	if err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	cur, err := rp.finish(ctx, t)
	if err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	vs, err := rp.verdicts(ctx, cur, fl)
	if err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	jw := newJSONWriter(w)
	jw.raw(`{"period":`)
	jw.value(jsonPeriod{From: jsonTime(rp.p.From), To: jsonTime(rp.p.To), GeneratedAt: jsonTime(rp.gen), Timezone: "UTC"})
	jw.raw(",\n\"currencies\":[")
	for i, c := range cur {
		jc := jsonCurrencyVerdict{newJSONCurrency(c), newJSONVerdict(c, vs[c.Currency])}
		jw.elem(i, jc)
		dg.currency(jc)
	}
	jw.raw("],\n\"orders\":[")
	if jw.err == nil {
		if _, err := spool.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("write json: %w", err)
		}
		if _, err := io.CopyBuffer(jw.w, spool, make([]byte, 1<<20)); err != nil {
			return fmt.Errorf("write json: %w", err)
		}
	}
	jw.raw("],\n\"findings\":[")
	n = 0
	err = rp.tx.Findings(ctx, rp.p.From, rp.p.To, func(f store.Finding) error {
		jw.elem(n, newJSONFinding(f))
		dg.finding(f)
		n++
		return jw.err
	})
	if err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	jw.raw("],\n\"runs\":[")
	n = 0
	err = rp.tx.Runs(ctx, rp.p.From, rp.p.To, func(run store.ReconcileRun) error {
		jw.elem(n, newJSONRun(run))
		dg.run(run)
		n++
		return jw.err
	})
	if err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	digest, err := dg.sum()
	if err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	fi, err := rp.firstIssue(ctx, &dg.fp, digest)
	if err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	jw.raw("],\n\"digest\":\"" + digest + "\",\n\"digestCovers\":")
	jw.value(DigestCovers)
	if fi != nil {
		jw.raw(",\n\"firstIssue\":")
		jw.value(jsonFirstIssue{Digest: fi.Digest, IssuedAt: jsonTime(fi.IssuedAt), Same: fi.Digest == digest,
			ChangedOrders: fi.Changed, UnnamedChanges: fi.Unnamed})
	}
	jw.raw("}\n")
	if err := jw.flush(); err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	return nil
}

// jsonWriter writes JSON values through a buffer, remembering the first
// error so the callers check once.
type jsonWriter struct {
	w   *bufio.Writer
	buf bytes.Buffer
	enc *json.Encoder
	err error
}

func newJSONWriter(w io.Writer) *jsonWriter {
	jw := &jsonWriter{w: bufio.NewWriterSize(w, 64<<10)}
	jw.enc = json.NewEncoder(&jw.buf)
	jw.enc.SetEscapeHTML(false)
	return jw
}

func (jw *jsonWriter) raw(s string) {
	if jw.err == nil {
		_, jw.err = jw.w.WriteString(s)
	}
}

// value writes v compactly, without the encoder's newline.
func (jw *jsonWriter) value(v any) {
	if jw.err != nil {
		return
	}
	jw.buf.Reset()
	if jw.err = jw.enc.Encode(v); jw.err != nil {
		return
	}
	_, jw.err = jw.w.Write(bytes.TrimSuffix(jw.buf.Bytes(), []byte("\n")))
}

// elem writes the i-th element of an array, one per line.
func (jw *jsonWriter) elem(i int, v any) {
	if i > 0 {
		jw.raw(",")
	}
	jw.raw("\n")
	jw.value(v)
}

func (jw *jsonWriter) flush() error {
	if jw.err != nil {
		return jw.err
	}
	return jw.w.Flush()
}

// jsonFirstIssue is the report's firstIssue: the first digest issued for
// a period that has ended, and what changed since (report_issued.go).
type jsonFirstIssue struct {
	Digest         string        `json:"digest"`
	IssuedAt       jsonTime      `json:"issuedAt"`
	Same           bool          `json:"sameDigest"`
	ChangedOrders  []changedLine `json:"changedOrders"`
	UnnamedChanges int           `json:"unnamedChanges"`
}

// jsonTime writes a time as TimeLayout in UTC, or null when zero.
type jsonTime time.Time

// MarshalJSON implements json.Marshaler.
func (t jsonTime) MarshalJSON() ([]byte, error) {
	tt := time.Time(t)
	if tt.IsZero() {
		return []byte("null"), nil
	}
	return []byte(`"` + tt.UTC().Format(TimeLayout) + `"`), nil
}

type jsonPeriod struct {
	From        jsonTime `json:"from"`
	To          jsonTime `json:"to"`
	GeneratedAt jsonTime `json:"generatedAt"`
	Timezone    string   `json:"timezone"`
}

type jsonCurrency struct {
	Currency string          `json:"currency"`
	Orders   jsonOrderCounts `json:"orders"`
	Payins   jsonPayins      `json:"payins"`
	Payouts  jsonPayouts     `json:"payouts"`
	Refunds  jsonRefunds     `json:"refunds"`
	Fees     string          `json:"fees"`
	Balance  *jsonBalance    `json:"balance"`
}

type jsonOrderCounts struct {
	Total     int            `json:"total"`
	Completed int            `json:"completed"`
	Rejected  int            `json:"rejected"`
	Open      int            `json:"open"`
	ByStatus  map[string]int `json:"byStatus"`
}

type jsonPayins struct {
	Count           int    `json:"count"`
	GrossAuthorized string `json:"grossAuthorized"`
	MerchantNet     string `json:"merchantNet"`
	Fees            string `json:"fees"`
}

type jsonPayouts struct {
	Count  int    `json:"count"`
	Amount string `json:"amount"`
	Fees   string `json:"fees"`
}

type jsonRefunds struct {
	Count  int    `json:"count"`
	Amount string `json:"amount"`
}

type jsonBalance struct {
	Start                     jsonSnapshot     `json:"start"`
	End                       jsonSnapshot     `json:"end"`
	ActualMovement            string           `json:"actualMovement"`
	ExpectedMovement          *string          `json:"expectedMovement"`
	Drift                     *string          `json:"drift"`
	DriftExplained            *string          `json:"driftExplained"`
	DriftUnexplained          *string          `json:"driftUnexplained"`
	Comparisons               int              `json:"comparisons"`
	ComparisonsOutOfTolerance int              `json:"comparisonsOutOfTolerance"`
	Snapshots                 []jsonSnapshot   `json:"snapshots"`
	Drifts                    []jsonDriftPoint `json:"drifts"`
}

type jsonSnapshot struct {
	Amount string   `json:"amount"`
	At     jsonTime `json:"at"`
}

type jsonDriftPoint struct {
	At              jsonTime `json:"at"`
	Drift           string   `json:"drift"`
	Explained       string   `json:"explained"`
	Unexplained     string   `json:"unexplained"`
	WithinTolerance bool     `json:"withinTolerance"`
}

func newJSONCurrency(c *CurrencyTotals) jsonCurrency {
	j := jsonCurrency{
		Currency: c.Currency,
		Orders: jsonOrderCounts{Total: c.Orders, Completed: c.ByStatus[string(provider.StatusCompleted)],
			Rejected: c.ByStatus[string(provider.StatusRejected)], Open: c.Open, ByStatus: c.ByStatus},
		Payins: jsonPayins{Count: c.Payins, GrossAuthorized: c.Format(c.GrossAuthorized),
			MerchantNet: c.Format(c.MerchantNet), Fees: c.Format(c.PayinFees)},
		Payouts: jsonPayouts{Count: c.Payouts, Amount: c.Format(c.PayoutAmount), Fees: c.Format(c.PayoutFees)},
		Refunds: jsonRefunds{Count: c.Refunds, Amount: c.Format(c.RefundAmount)},
		Fees:    c.Format(c.Fees()),
	}
	b := c.Balance
	if b == nil {
		return j
	}
	opt := func(d *decimal.Decimal) *string {
		if d == nil {
			return nil
		}
		s := c.Format(*d)
		return &s
	}
	jb := &jsonBalance{
		Start:            jsonSnapshot{Amount: c.Format(b.Start.Amount), At: jsonTime(b.Start.TakenAt)},
		End:              jsonSnapshot{Amount: c.Format(b.End.Amount), At: jsonTime(b.End.TakenAt)},
		ActualMovement:   c.Format(b.Actual),
		ExpectedMovement: opt(b.Expected), Drift: opt(b.Drift),
		DriftExplained: opt(b.Explained), DriftUnexplained: opt(b.Unexplained),
		Comparisons: b.Comparisons, ComparisonsOutOfTolerance: b.OutOfTolerance,
		Snapshots: make([]jsonSnapshot, 0, len(b.Series)),
		Drifts:    make([]jsonDriftPoint, 0, len(b.Drifts)),
	}
	for _, s := range b.Series {
		jb.Snapshots = append(jb.Snapshots, jsonSnapshot{Amount: c.Format(s.Amount), At: jsonTime(s.At)})
	}
	for _, d := range b.Drifts {
		jb.Drifts = append(jb.Drifts, jsonDriftPoint{At: jsonTime(d.At), Drift: c.Format(d.Drift),
			Explained: c.Format(d.Explained), Unexplained: c.Format(d.Unexplained), WithinTolerance: d.WithinTolerance})
	}
	j.Balance = jb
	return j
}

type jsonLine struct {
	ID              string          `json:"id"`
	MerchantOrderID string          `json:"merchantOrderId"`
	Type            string          `json:"type"`
	Status          string          `json:"status"`
	Membership      string          `json:"membership"`
	CreatedAt       jsonTime        `json:"createdAt"`
	CompletedAt     jsonTime        `json:"completedAt"`
	Authorized      *provider.Money `json:"authorized"`
	Requested       *provider.Money `json:"requested"`
	Merchant        *provider.Money `json:"merchant"`
	Fee             *provider.Money `json:"fee"`
	Refunded        []jsonRefunded  `json:"refunded"`
	LearnedVia      string          `json:"learnedVia"`
	OpenFindings    []string        `json:"openFindings"`
}

type jsonRefunded struct {
	Amount   string `json:"amount"`
	Currency string `json:"currency"`
	Count    int    `json:"count"`
}

func newJSONLine(l *Line) jsonLine {
	j := jsonLine{
		ID: l.OrderID, MerchantOrderID: l.MerchantOrderID, Type: l.Type, Status: l.Status,
		Membership: l.Membership, CreatedAt: jsonTime(l.CreatedAt), CompletedAt: jsonTime(l.CompletedAt),
		Authorized: l.Authorized, Requested: l.Requested, Merchant: l.Merchant, Fee: l.Fee,
		Refunded:   make([]jsonRefunded, 0, len(l.Refunded)),
		LearnedVia: l.LearnedVia, OpenFindings: l.OpenFindings,
	}
	for _, r := range l.Refunded {
		j.Refunded = append(j.Refunded, jsonRefunded{Amount: provider.FormatAmount(r.Money.Amount),
			Currency: r.Money.Currency, Count: r.Count})
	}
	if j.OpenFindings == nil {
		j.OpenFindings = []string{}
	}
	return j
}

type jsonFinding struct {
	ID         int64                 `json:"id"`
	Kind       string                `json:"kind"`
	Key        string                `json:"key"`
	State      string                `json:"state"`
	Status     string                `json:"status"`
	FoundAt    jsonTime              `json:"foundAt"`
	ResolvedAt jsonTime              `json:"resolvedAt"`
	Resolution string                `json:"resolution,omitempty"`
	ResolvedBy string                `json:"resolvedBy,omitempty"`
	Summary    string                `json:"summary"`
	Detail     json.RawMessage       `json:"detail"`
	Trail      []store.FindingAction `json:"trail"`
}

func newJSONFinding(f store.Finding) jsonFinding {
	j := jsonFinding{ID: f.ID, Kind: f.Kind, Key: f.Key, State: f.State, Status: f.Status, FoundAt: jsonTime(f.FoundAt),
		Resolution: f.Resolution, ResolvedBy: f.ResolvedBy, Summary: FindingSummary(f), Detail: f.Detail, Trail: f.Trail}
	if j.Trail == nil {
		j.Trail = []store.FindingAction{}
	}
	if f.ResolvedAt != nil {
		j.ResolvedAt = jsonTime(*f.ResolvedAt)
	}
	return j
}

type jsonRun struct {
	ID         int64          `json:"id"`
	Job        string         `json:"job"`
	StartedAt  jsonTime       `json:"startedAt"`
	FinishedAt jsonTime       `json:"finishedAt"`
	Counts     map[string]int `json:"counts"`
	Error      string         `json:"error"`
}

func newJSONRun(r store.ReconcileRun) jsonRun {
	j := jsonRun{ID: r.ID, Job: r.Job, StartedAt: jsonTime(r.StartedAt), FinishedAt: jsonTime(r.FinishedAt),
		Counts: r.Counts, Error: r.Error}
	if j.Counts == nil {
		j.Counts = map[string]int{}
	}
	return j
}
