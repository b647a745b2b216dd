package reconcile

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
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
// is the hex SHA-256 of the report as written but for the digest itself,
// period.generatedAt and the breaks' ageSeconds (both measured from the
// generation time): the same period over the same data gives the same
// digest.
//
// The totals come first, so the store is read twice (totals, then lines)
// inside one consistent read transaction. docs/finance.md documents
// every field.
func (r *Reporter) WriteJSON(ctx context.Context, w io.Writer, p Period) error {
	rp, err := r.open(ctx, p)
	if err != nil {
		return err
	}
	defer rp.close()
	t := newTotals()
	fl := flagged{}
	if err := rp.lines(ctx, func(l *Line) error { t.add(l); fl.add(l); return nil }); err != nil {
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
	// The digest hashes what is written but the generation time and the
	// breaks' ages (measured from it): see jsonWriter.
	jw := newJSONWriter(w)
	jw.raw(`{"period":`)
	period := jsonPeriod{From: jsonTime(rp.p.From), To: jsonTime(rp.p.To), GeneratedAt: jsonTime(rp.gen), Timezone: "UTC"}
	jw.unhashed(func() { jw.value(period) })
	period.GeneratedAt = jsonTime{}
	jw.hashOnly(period)
	jw.raw(",\n\"currencies\":[")
	for i, c := range cur {
		jc := jsonCurrencyVerdict{newJSONCurrency(c), newJSONVerdict(c, vs[c.Currency])}
		jw.unhashed(func() { jw.elem(i, jc) })
		jw.hashOnly(jc.zeroAges())
	}
	jw.raw("],\n\"orders\":[")
	n := 0
	err = rp.lines(ctx, func(l *Line) error {
		jw.elem(n, newJSONLine(l))
		n++
		return jw.err
	})
	if err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	jw.raw("],\n\"findings\":[")
	n = 0
	err = rp.tx.Findings(ctx, rp.p.From, rp.p.To, func(f store.Finding) error {
		jw.elem(n, newJSONFinding(f))
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
		n++
		return jw.err
	})
	if err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	jw.raw("]")
	jw.unhashed(func() { jw.raw(",\n\"digest\":\"" + hex.EncodeToString(jw.h.Sum(nil)) + "\"}\n") })
	if err := jw.flush(); err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	return nil
}

// jsonWriter writes JSON values through a buffer, remembering the first
// error so the callers check once.
//
// Everything written also goes into h, the report's digest, except what
// is written inside unhashed; hashOnly adds a value to the digest alone
// (the canonical form of something written unhashed).
type jsonWriter struct {
	w    *bufio.Writer
	buf  bytes.Buffer
	enc  *json.Encoder
	err  error
	h    hash.Hash
	skip bool
}

func newJSONWriter(w io.Writer) *jsonWriter {
	jw := &jsonWriter{w: bufio.NewWriterSize(w, 64<<10), h: sha256.New()}
	jw.enc = json.NewEncoder(&jw.buf)
	jw.enc.SetEscapeHTML(false)
	return jw
}

func (jw *jsonWriter) raw(s string) {
	if jw.err == nil {
		_, jw.err = jw.w.WriteString(s)
		if !jw.skip {
			jw.h.Write([]byte(s))
		}
	}
}

// value writes v compactly, without the encoder's newline.
func (jw *jsonWriter) value(v any) {
	b := jw.encode(v)
	if jw.err != nil {
		return
	}
	_, jw.err = jw.w.Write(b)
	if !jw.skip {
		jw.h.Write(b)
	}
}

func (jw *jsonWriter) encode(v any) []byte {
	if jw.err != nil {
		return nil
	}
	jw.buf.Reset()
	if jw.err = jw.enc.Encode(v); jw.err != nil {
		return nil
	}
	return bytes.TrimSuffix(jw.buf.Bytes(), []byte("\n"))
}

// unhashed runs fn with the digest not taking what it writes.
func (jw *jsonWriter) unhashed(fn func()) {
	jw.skip = true
	fn()
	jw.skip = false
}

// hashOnly adds v to the digest without writing it.
func (jw *jsonWriter) hashOnly(v any) {
	if b := jw.encode(v); jw.err == nil {
		jw.h.Write(b)
	}
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
