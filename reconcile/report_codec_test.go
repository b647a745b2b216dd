package reconcile_test

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"orderd/provider"
	"orderd/reconcile"
)

// TestLineEncoder_matchesEncodingJSON: the JSON report's hand-written line
// encoder writes every line byte for byte as encoding/json writes it,
// whatever the strings hold (escapes, HTML characters, invalid UTF-8,
// U+2028) and whichever amounts are missing.
func TestLineEncoder_matchesEncodingJSON(t *testing.T) {
	money := func(a, c string) *provider.Money {
		return &provider.Money{Amount: decimal.RequireFromString(a), Currency: c}
	}
	at := time.Date(2026, 11, 1, 10, 0, 0, 123e6, time.UTC)
	for _, s := range []string{"", "plain-1", `q"uote`, `back\slash`, "tab\t", "cr\r", "lf\n", "bs\b", "ff\f", "nul\x00",
		"<b>&amp;</b>", "ü-€", "bad\xffutf8", "line\u2028sep", "del\x7f"} {
		for _, l := range []reconcile.Line{
			{OrderID: s, MerchantOrderID: s, Type: s, Status: s, Membership: s, LearnedVia: s, OpenFindings: []string{s, "stuck_order"}},
			{OrderID: "o", MerchantOrderID: "m", Type: "payin", Status: "completed", Membership: "final", CreatedAt: at, CompletedAt: at.Add(time.Hour),
				Authorized: money("10.00", s), Requested: money("1", "brl"), Merchant: money("9.70", "brl"), Fee: money("0.30", "brl"),
				Refunded:   []reconcile.Refunded{{Money: provider.Money{Amount: decimal.RequireFromString("2.50"), Currency: s}, Count: 2}},
				LearnedVia: "webhook"},
		} {
			fast, ref := reconcile.EncodeLine(&l)
			if string(fast) != string(ref) {
				t.Errorf("string %q:\n got %s\nwant %s", s, fast, ref)
			}
		}
	}
}

// TestAmountsDecoder_matchesGeneral: the report's token reader of stored
// states gives what the general decode gives, or leaves the state to it.
func TestAmountsDecoder_matchesGeneral(t *testing.T) {
	for name, raw := range map[string]string{
		"payin with refund": `{"id":"x","merchantOrderId":"m","type":"payin","createdAt":"2026-11-01T10:00:00Z","status":"completed","rejectReason":null,` +
			`"merchantSourceWallet":null,"merchantTargetWallet":{"amount":"9.70","currency":"brl"},"transactions":[{"id":"t","type":"payin","status":"completed",` +
			`"authorized":{"amount":"10.00","currency":"brl"},"merchantWallet":{"amount":"9.70","currency":"brl"},"counterpartyInfo":{"name":"A \"B\"","n":[1,{"x":null}]},` +
			`"paymentInfo":null,"createdAt":"2026-11-01T10:00:00Z","completedAt":"2026-11-01T10:00:05.123456+00:00","rejectReason":null},` +
			`{"id":"r","type":"refund","status":"completed","amount":{"currency":"brl","amount":"2.00"},"completedAt":"2026-11-02T09:00:00Z"}]}`,
		"payout":               `{"type":"payout","merchantSourceWallet":{"amount":"10.30","currency":"usd"},"merchantTargetWallet":null,"transactions":[{"type":"payout","status":"processing","authorized":{"amount":"10","currency":"usd"},"completedAt":null}]}`,
		"no transactions":      `{"id":"x","transactions":null}`,
		"empty transactions":   `{"transactions":[]}`,
		"money with extra key": `{"merchantTargetWallet":{"amount":"1.00","currency":"brl","extra":1},"transactions":[]}`,
		"escaped amount":       `{"merchantTargetWallet":{"amount":"1\u002e00","currency":"brl"},"transactions":[]}`,
		"status null":          `{"transactions":[{"type":null,"status":null,"amount":null}]}`,
		"bad amount":           `{"merchantTargetWallet":{"amount":"x","currency":"brl"}}`,
		"bad time":             `{"transactions":[{"completedAt":"yesterday"}]}`,
		"not an object":        `[1,2]`,
		// Names read twice: encoding/json keeps the last (merging the
		// second transactions into the first), so the reader leaves them.
		"transactions twice":    `{"transactions":[{"type":"payin","authorized":{"amount":"5","currency":"brl"}}],"transactions":[{"type":"refund"}]}`,
		"wallet twice":          `{"merchantTargetWallet":{"amount":"1.00","currency":"brl"},"merchantTargetWallet":null,"transactions":[]}`,
		"completedAt twice":     `{"transactions":[{"type":"refund","completedAt":"2026-11-02T09:00:00Z","completedAt":null}]}`,
		"type twice":            `{"transactions":[{"type":"refund","type":"payin"}]}`,
		"amount twice":          `{"merchantTargetWallet":{"amount":"1.00","amount":"2.00","currency":"brl"}}`,
		"other name twice":      `{"id":"a","id":"b","transactions":[{"id":"t","id":"u","type":"payin"}]}`,
		"whitespace everywhere": "{ \"transactions\" : [ { \"type\" : \"payin\" , \"authorized\" : { \"amount\" : \"5\" , \"currency\" : \"BRL\" } } ] }",
	} {
		t.Run(name, func(t *testing.T) {
			fast, general, fastErr, generalErr := reconcile.DecodeAmounts([]byte(raw))
			if fastErr != nil {
				return // left to the general decode, which decides
			}
			if generalErr != nil {
				t.Fatalf("the token reader took a state the general decode refuses (%v)", generalErr)
			}
			if !reflect.DeepEqual(fast, general) {
				t.Errorf("token reader %+v\ngeneral      %+v", fast, general)
			}
		})
	}
}

// TestAmountsDecoder_mutations: whatever the bytes, a state the token
// reader takes is one the general decode takes too, with the same
// amounts: stored states mutated a byte or a few at a time (the JSON's
// punctuation, escapes, numbers, control and non-UTF-8 bytes) never make
// the two disagree. The states as stored are read by the token reader.
func TestAmountsDecoder_mutations(t *testing.T) {
	seeds := []string{
		`{"id":"x","merchantOrderId":"m","type":"payin","createdAt":"2026-11-01T10:00:00Z","status":"completed","rejectReason":null,` +
			`"merchantSourceWallet":null,"merchantTargetWallet":{"amount":"9.70","currency":"brl"},"transactions":[{"id":"t","type":"payin","status":"completed",` +
			`"authorized":{"amount":"10.00","currency":"brl"},"merchantWallet":{"amount":"9.70","currency":"brl"},"counterpartyInfo":{"name":"A \"B\" \u00e9","n":[1,-2.5e3,{"x":null,"y":true,"z":false}]},` +
			`"paymentInfo":null,"createdAt":"2026-11-01T10:00:00Z","completedAt":"2026-11-01T10:00:05.123456+00:00","rejectReason":null},` +
			`{"id":"r","type":"refund","status":"completed","amount":{"currency":"brl","amount":"2.00"},"completedAt":"2026-11-02T09:00:00Z"}]}`,
		`{"type":"payout","merchantSourceWallet":{"amount":"10.30","currency":"usd"},"merchantTargetWallet":null,"transactions":[{"type":"payout","status":"processing","authorized":{"amount":"10","currency":"usd"},"completedAt":null}]}`,
		"{ \"transactions\" : [ { \"type\" : \"payin\" , \"authorized\" : { \"amount\" : \"5\" , \"currency\" : \"BRL\" } } ] }\n",
	}
	alphabet := []byte("{}[]\",:\\/ \t\r\n0123456789.-+eEutrfnlsab\x00\x1f\x7f\x80\xc3\xa9\xff")
	r := rand.New(rand.NewPCG(5, 6))
	accepted := 0
	for i := range 30000 {
		seed := seeds[i%len(seeds)]
		b := []byte(seed)
		if i >= len(seeds) {
			for range 1 + r.IntN(3) {
				p := r.IntN(len(b) + 1)
				switch r.IntN(4) {
				case 0: // insert
					b = slices.Insert(b, p, alphabet[r.IntN(len(alphabet))])
				case 1: // delete
					if p < len(b) {
						b = slices.Delete(b, p, p+1)
					}
				case 2: // replace
					if p < len(b) {
						b[p] = alphabet[r.IntN(len(alphabet))]
					}
				case 3: // repeat a span, names and all
					q := min(len(b), p+1+r.IntN(40))
					b = slices.Insert(b, q, b[p:q]...)
				}
			}
		}
		fast, general, fastErr, generalErr := reconcile.DecodeAmounts(b)
		if i < len(seeds) && fastErr != nil {
			t.Fatalf("the token reader leaves a stored state (%v): %s", fastErr, b)
		}
		if fastErr != nil {
			continue
		}
		accepted++
		if generalErr != nil {
			t.Fatalf("the token reader took a state the general decode refuses (%v): %q", generalErr, b)
		}
		if !reflect.DeepEqual(fast, general) {
			t.Fatalf("%q:\ntoken reader %+v\ngeneral      %+v", b, fast, general)
		}
	}
	t.Logf("%d of 30000 states taken by the token reader", accepted)
}
