package reconcile

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"

	"orderd/store"
)

// digester computes a report's digest, the same in the JSON, CSV and HTML
// reports of a period: the SHA-256 of the period's books as the report
// gives them, taken in an order every format can follow in its one pass
// over the orders: the period, each order line, each currency's totals,
// balances and bridge movements, each finding found in the period, each
// reconcile run. Every value is its JSON report form on one line after a
// one-letter tag, so no two different reports hash alike by a value
// sliding from one part into the next.
//
// What people and later checks do after the period is left out, so that
// the digest finance signed for a period that has ended comes out the same
// whenever its report is made again, unless the data of the period itself
// changed (a late webhook of an order in it): the open findings on each
// line, how each finding stands now (state, detail, trail), and what
// depends on it — the verdict, the breaks, the bridge's other, expected
// closing and residual, and the summary's resolved and unexplained parts.
// DigestCovers says so in every report.
type digester struct {
	h   hash.Hash
	buf bytes.Buffer
	enc *json.Encoder
	err error
	// lb is a line with its tag and newline, reused: one write and no
	// allocation per line.
	lb []byte
	// fp fingerprints the lines for a comparison with the first issue of
	// the period (report_issued.go).
	fp lineFingerprint
}

// newDigester starts the digest of the report, ready to compare its lines
// with the first issue of its period.
func (rp *report) newDigester() *digester {
	d := newDigester(rp.p)
	if rp.hasIssued {
		d.fp.since = rp.issued.IssuedAt.Add(-issueSkew)
	}
	return d
}

// newDigester starts the digest of the report of p.
func newDigester(p Period) *digester {
	d := &digester{h: sha256.New()}
	d.enc = json.NewEncoder(&d.buf)
	d.enc.SetEscapeHTML(false)
	d.value('p', jsonPeriod{From: jsonTime(p.From), To: jsonTime(p.To), Timezone: "UTC"})
	return d
}

// DigestCovers is what a report's digest covers, as the reports say it.
const DigestCovers = "the period's books: order lines (without the findings open on them now), " +
	"per-currency totals, balances and the bridge's movements, the findings found in the period " +
	"(id, kind, subject, when found) and the reconcile runs; how findings stand now, the verdict, " +
	"the breaks and what people resolved are left out, so a period that has ended keeps its digest " +
	"unless data of the period itself changed"

// openFindingsField starts the last field of a line as lineEncoder writes
// it, which the digest leaves out.
var openFindingsField = []byte(`,"openFindings":[`)

// line adds the order line l, as the JSON report writes it (b, from
// lineEncoder), without its open findings: they are how the line stands
// now.
func (d *digester) line(l *Line, b []byte) {
	if i := bytes.LastIndex(b, openFindingsField); i >= 0 {
		b = b[:i]
	}
	d.lb = append(append(append(append(d.lb[:0], 'l'), b...), '}'), '\n')
	d.h.Write(d.lb)
	d.fp.add(l, d.lb)
}

// value adds v's JSON after tag.
func (d *digester) value(tag byte, v any) {
	if d.err != nil {
		return
	}
	d.buf.Reset()
	d.buf.WriteByte(tag)
	if d.err = d.enc.Encode(v); d.err == nil {
		d.h.Write(d.buf.Bytes())
	}
}

// digestBridge is the part of a bridge the digest covers: the balances
// and the ledger's movements, not what people accepted since.
type digestBridge struct {
	Opening, Closing               *string
	Payins, Payouts, Refunds, Fees *string
}

// digestCurrency is the part of a currency the digest covers.
type digestCurrency struct {
	Currency jsonCurrency
	Bridge   digestBridge
}

// currency adds a currency of the report: its totals and balances
// without the parts people resolved, and its bridge's balances and
// movements.
func (d *digester) currency(jc jsonCurrencyVerdict) {
	c := jc.jsonCurrency
	if c.Balance != nil {
		b := *c.Balance
		b.DriftExplained, b.DriftUnexplained = nil, nil
		c.Balance = &b
	}
	m := jc.Bridge.Movements
	d.value('c', digestCurrency{Currency: c, Bridge: digestBridge{Opening: jc.Bridge.Opening, Closing: jc.Bridge.Closing,
		Payins: m.Payins, Payouts: m.Payouts, Refunds: m.Refunds, Fees: m.Fees}})
}

// digestFinding is the part of a finding the digest covers: that it was
// found in the period, not how it stands now.
type digestFinding struct {
	ID      int64
	Kind    string
	Key     string
	FoundAt jsonTime
}

// finding adds a finding of the report.
func (d *digester) finding(f store.Finding) {
	d.value('f', digestFinding{ID: f.ID, Kind: f.Kind, Key: f.Key, FoundAt: jsonTime(f.FoundAt)})
}

// run adds a reconcile run of the report.
func (d *digester) run(r store.ReconcileRun) { d.value('r', newJSONRun(r)) }

// sum returns the digest in hex.
func (d *digester) sum() (string, error) {
	if d.err != nil {
		return "", fmt.Errorf("digest: %w", d.err)
	}
	return hex.EncodeToString(d.h.Sum(nil)), nil
}

// digest ends d, whose period and lines are in, with the currencies (and
// their verdicts), the findings and the runs of the report, for the
// formats that do not write them as JSON.
func (rp *report) digest(ctx context.Context, d *digester, cur []*CurrencyTotals, vs map[string]*Verdict) (string, error) {
	for _, c := range cur {
		d.currency(jsonCurrencyVerdict{newJSONCurrency(c), newJSONVerdict(c, vs[c.Currency])})
	}
	err := rp.tx.Findings(ctx, rp.p.From, rp.p.To, func(f store.Finding) error {
		d.finding(f)
		return d.err
	})
	if err == nil {
		err = rp.tx.Runs(ctx, rp.p.From, rp.p.To, func(r store.ReconcileRun) error {
			d.run(r)
			return d.err
		})
	}
	if err != nil {
		return "", fmt.Errorf("digest: %w", err)
	}
	return d.sum()
}
