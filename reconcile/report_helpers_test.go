package reconcile_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"orderd/reconcile"
	"orderd/store"
	"orderd/test/support/reportschema"
)

var update = flag.Bool("update", false, "rewrite the report golden files in testdata/")

// rOrder is an order as the provider writes it, for report tests: one own
// transaction, refunds, the wallets a completed order has.
type rOrder struct {
	id, mid, typ, status string
	created              string // createdAt
	amount, net, ccy     string // authorized, merchantWallet, currency
	completed            string // own transaction's completedAt
	reject               string
	refunds              []rRefund
}

type rRefund struct {
	id, status, amount, created, completed string
}

func jsonTimeOrNull(s string) string {
	if s == "" {
		return "null"
	}
	return `"` + s + `"`
}

func jsonStringOrNull(s string) string {
	if s == "" {
		return "null"
	}
	return fmt.Sprintf("%q", s)
}

// json renders o the way the provider does (amounts as strings).
func (o rOrder) json() []byte {
	source, target := "null", "null"
	if o.status == "completed" {
		if o.typ == "payin" {
			target = fmt.Sprintf(`{"amount":%q,"currency":%q}`, o.net, o.ccy)
		} else {
			source = fmt.Sprintf(`{"amount":%q,"currency":%q}`, o.amount, o.ccy)
		}
	}
	txs := []string{fmt.Sprintf(`{"id":"tx-%s","type":%q,"status":%q,"authorized":{"amount":%q,"currency":%q},`+
		`"merchantWallet":{"amount":%q,"currency":%q},"counterpartyInfo":null,"paymentInfo":null,`+
		`"createdAt":%q,"completedAt":%s,"rejectReason":%s}`,
		o.id, o.typ, o.status, o.amount, o.ccy, o.net, o.ccy, o.created, jsonTimeOrNull(o.completed), jsonStringOrNull(o.reject))}
	for _, r := range o.refunds {
		txs = append(txs, fmt.Sprintf(`{"id":%q,"type":"refund","status":%q,"amount":{"amount":%q,"currency":%q},`+
			`"counterpartyInfo":null,"paymentInfo":null,"createdAt":%q,"completedAt":%s,"rejectReason":null}`,
			r.id, r.status, r.amount, o.ccy, r.created, jsonTimeOrNull(r.completed)))
	}
	return fmt.Appendf(nil, `{"id":%q,"merchantOrderId":%q,"type":%q,"createdAt":%q,"status":%q,"rejectReason":%s,`+
		`"merchantSourceWallet":%s,"merchantTargetWallet":%s,"transactions":[%s]}`,
		o.id, o.mid, o.typ, o.created, o.status, jsonStringOrNull(o.reject), source, target, strings.Join(txs, ","))
}

// at sets the shared clock to an RFC 3339 time.
func (e *env) at(s string) {
	e.t.Helper()
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		e.t.Fatal(err)
	}
	e.clock.mu.Lock()
	e.clock.t = t
	e.clock.mu.Unlock()
}

// observe applies o through the store's one write path as source saw it
// now.
func (e *env) observe(o rOrder, source store.Source) {
	e.t.Helper()
	e.apply(o.json(), source)
}

// reportEnv is a store with the fixed data set of the golden files, built
// through the store's real write path and the real balances job against
// the fake provider. The report period is 2026-11-01; the clock ends at
// 2026-11-02T01:00:00Z, when the scheduled report would run.
//
// brl: a payin completed the day before whose 10.00 refund completes in
// the period; a completed payin (fee 3.00); a completed payin with a
// partial refund of 50.00 (webhook says processing, a poll completes it);
// a payin rejected at creation (gateway); a completed payout; a payin
// still processing; a payin created in the period that completes only
// after it. usd: a completed payin learned by a poll. A quarantined
// webhook. Balances: brl moves 5.00 more than the orders explain, a
// balance_drift finding; usd moves exactly as expected.
func reportEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t, envOptions{clock: &clock{t: time.Date(2026, 10, 31, 21, 0, 0, 0, time.UTC)},
		cfg: reconcile.Config{DriftGrace: 1}})

	old := rOrder{id: "0a000000-0000-4000-8000-000000000000", mid: "m-old", typ: "payin", status: "completed",
		created: "2026-10-31T21:30:00Z", amount: "40.00", net: "38.80", ccy: "brl", completed: "2026-10-31T21:59:00Z"}
	e.at("2026-10-31T22:00:00Z")
	e.observe(old, store.SourceWebhook)

	if err := e.fake.AdjustBalance("brl", "1000.00"); err != nil {
		t.Fatal(err)
	}
	if err := e.fake.AdjustBalance("usd", "500.00"); err != nil {
		t.Fatal(err)
	}
	e.at("2026-10-31T23:00:00Z")
	e.run(e.rec.RunBalances)

	// The period: 2026-11-01.
	paid := rOrder{id: "0a000000-0000-4000-8000-000000000001", mid: "m-paid", typ: "payin", status: "processing",
		created: "2026-11-01T07:55:00Z", amount: "100.00", net: "97.00", ccy: "brl"}
	e.at("2026-11-01T07:55:01Z")
	e.observe(paid, store.SourceGateway)
	paid.status, paid.completed = "completed", "2026-11-01T08:00:03Z"
	e.at("2026-11-01T08:00:05Z")
	e.observe(paid, store.SourceWebhook)

	old.refunds = []rRefund{{id: "rf-old", status: "completed", amount: "10.00", created: "2026-11-01T08:30:00Z", completed: "2026-11-01T08:59:00Z"}}
	e.at("2026-11-01T09:00:00Z")
	e.observe(old, store.SourcePoll)

	refunded := rOrder{id: "0a000000-0000-4000-8000-000000000002", mid: "m-refunded", typ: "payin", status: "completed",
		created: "2026-11-01T10:00:00Z", amount: "250.00", net: "242.50", ccy: "brl", completed: "2026-11-01T10:05:00Z"}
	e.at("2026-11-01T10:05:01Z")
	e.observe(refunded, store.SourceWebhook)
	refunded.refunds = []rRefund{{id: "rf-partial", status: "processing", amount: "50.00", created: "2026-11-01T14:00:00Z"}}
	e.at("2026-11-01T14:00:02Z")
	e.observe(refunded, store.SourceWebhook)
	refunded.refunds[0].status, refunded.refunds[0].completed = "completed", "2026-11-01T14:59:30Z"
	e.at("2026-11-01T15:00:00Z")
	e.observe(refunded, store.SourcePoll)

	rejected := rOrder{id: "0a000000-0000-4000-8000-000000000003", mid: "m-rejected", typ: "payin", status: "rejected",
		created: "2026-11-01T12:00:00Z", amount: "80.00", net: "77.60", ccy: "brl", reject: "payer document mismatch"}
	e.at("2026-11-01T12:00:01Z")
	e.observe(rejected, store.SourceGateway)

	usd := rOrder{id: "0a000000-0000-4000-8000-000000000004", mid: "m-usd", typ: "payin", status: "completed",
		created: "2026-11-01T12:30:00Z", amount: "40.00", net: "38.80", ccy: "usd", completed: "2026-11-01T13:00:00Z"}
	e.at("2026-11-01T13:10:00Z")
	e.observe(usd, store.SourcePoll)

	payout := rOrder{id: "0a000000-0000-4000-8000-000000000005", mid: "m-payout", typ: "payout", status: "completed",
		created: "2026-11-01T15:30:00Z", amount: "60.00", net: "60.00", ccy: "brl", completed: "2026-11-01T16:00:00Z"}
	e.at("2026-11-01T16:00:01Z")
	e.observe(payout, store.SourceWebhook)

	e.at("2026-11-01T18:00:00Z")
	if err := e.st.Quarantine(t.Context(), store.QuarantinedWebhook{
		Raw:             []byte(`{"id":"0a000000-0000-4000-8000-00000000000f","merchantOrderId":"m-garbled","status":`),
		Reason:          "unexpected end of JSON input",
		MerchantOrderID: "m-garbled",
	}); err != nil {
		t.Fatal(err)
	}

	open := rOrder{id: "0a000000-0000-4000-8000-000000000006", mid: "m-open", typ: "payin", status: "processing",
		created: "2026-11-01T20:00:00Z", amount: "30.00", net: "29.10", ccy: "brl"}
	e.at("2026-11-01T20:00:01Z")
	e.observe(open, store.SourceWebhook)

	late := rOrder{id: "0a000000-0000-4000-8000-000000000007", mid: "m-late", typ: "payin", status: "processing",
		created: "2026-11-01T21:00:00Z", amount: "20.00", net: "19.40", ccy: "brl"}
	e.at("2026-11-01T21:00:01Z")
	e.observe(late, store.SourceWebhook)

	// The provider's balances at the end of the day: brl moved by the
	// completed orders and refunds (97.00 + 242.50 - 10.00 - 50.00 -
	// 60.00 = 219.50) and 5.00 more that nothing explains; usd by
	// exactly its payin.
	if err := e.fake.AdjustBalance("brl", "224.50"); err != nil {
		t.Fatal(err)
	}
	if err := e.fake.AdjustBalance("usd", "38.80"); err != nil {
		t.Fatal(err)
	}
	e.at("2026-11-01T23:00:00Z")
	e.run(e.rec.RunBalances)

	// After the period: the late order completes.
	late.status, late.completed = "completed", "2026-11-02T00:30:00Z"
	e.at("2026-11-02T00:30:02Z")
	e.observe(late, store.SourceWebhook)

	e.at("2026-11-02T01:00:00Z")
	return e
}

// reportDay is the period of the golden files.
var reportDay = reconcile.Period{
	From: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC),
	To:   time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC),
}

// reporter returns a Reporter over the env's store and clock.
func (e *env) reporter() *reconcile.Reporter {
	return reconcile.NewReporter(e.st, reconcile.ReportConfig{Now: e.clock.Now})
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run go test ./reconcile -run Report -update to create it): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test ./reconcile -run Report -update rewrites it after review)\n--- got\n%s\n--- want\n%s",
			name, got, want)
	}
}

// reportSchema is the published schema of the JSON report, read from the
// repository as api/openapi.json refers to it.
var reportSchema = sync.OnceValues(func() (*reportschema.Validator, error) {
	b, err := os.ReadFile(filepath.Join("..", "api", "report.schema.json"))
	if err != nil {
		return nil, err
	}
	return reportschema.New(b)
})

// checkSchema fails the test when a JSON report does not follow
// api/report.schema.json. Every JSON report these tests make goes through
// it (writeJSON, the golden test), so a field added to the report without
// the schema, or a value of the wrong type, fails here.
func checkSchema(t testing.TB, report []byte) {
	t.Helper()
	v, err := reportSchema()
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Validate(report); err != nil {
		t.Errorf("%v\n%s", err, report)
	}
}

// writeJSON makes the JSON report of p and holds it to the schema.
func writeJSON(t testing.TB, r *reconcile.Reporter, p reconcile.Period) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := r.WriteJSON(t.Context(), &buf, p); err != nil {
		t.Fatal(err)
	}
	checkSchema(t, buf.Bytes())
	return buf.Bytes()
}
