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
// reports of a period: the SHA-256 of the report's canonical content, that
// is the JSON report's values without the generation time and the breaks'
// ages (both measured from when the report was generated), taken in an
// order every format can follow in its one pass over the orders: the
// period, each order line, each currency with its verdict, each finding,
// each reconcile run. Every value is its JSON report form on one line
// after a one-letter tag, so no two different reports hash alike by a
// value sliding from one part into the next.
type digester struct {
	h   hash.Hash
	buf bytes.Buffer
	enc *json.Encoder
	err error
	// lb is a line with its tag and newline, reused: one write and no
	// allocation per line.
	lb []byte
}

// newDigester starts the digest of the report of p.
func newDigester(p Period) *digester {
	d := &digester{h: sha256.New()}
	d.enc = json.NewEncoder(&d.buf)
	d.enc.SetEscapeHTML(false)
	d.value('p', jsonPeriod{From: jsonTime(p.From), To: jsonTime(p.To), Timezone: "UTC"})
	return d
}

// line adds an order line, as the JSON report writes it (lineEncoder).
func (d *digester) line(b []byte) {
	d.lb = append(append(append(d.lb[:0], 'l'), b...), '\n')
	d.h.Write(d.lb)
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

// currency adds a currency of the report, its breaks' ages left out.
func (d *digester) currency(jc jsonCurrencyVerdict) { d.value('c', jc.zeroAges()) }

// finding adds a finding of the report.
func (d *digester) finding(f store.Finding) { d.value('f', newJSONFinding(f)) }

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
