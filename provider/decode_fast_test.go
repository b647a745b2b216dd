package provider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

// These tests hold decodeOrderFast to decodeOrderSlow: whenever the fast
// path takes an input, the slow path must take it too and decode the very
// same Order (Extra maps included) and checkOrderKeys must accept the input
// (DecodeOrder does not run it after the fast path), and DecodeOrder must
// answer exactly as the slow path followed by the key check and the
// required-field checks does.

// fastBase is a webhook body as the provider sends it: a completed payin
// with a partial refund.
const fastBase = `{"id":"3351231c-514a-4336-aadc-8e45ab5bd4f5","merchantOrderId":"demo-7126-0001","type":"payin",` +
	`"createdAt":"2026-11-22T00:25:26.218152+00:00","status":"completed","rejectReason":null,"merchantSourceWallet":null,` +
	`"merchantTargetWallet":{"amount":"465.25","currency":"brl"},"transactions":[{"id":"5494942f-ca69-4b90-ac33-d0baa4665dea",` +
	`"type":"payin","status":"completed","authorized":{"amount":"474.75","currency":"brl"},"merchantWallet":{"amount":"465.25","currency":"brl"},` +
	`"counterpartyInfo":null,"paymentInfo":null,"createdAt":"2026-11-22T00:25:26.218152Z","completedAt":"2026-11-22T00:25:29.233419Z","rejectReason":null},` +
	`{"id":"6494942f-ca69-4b90-ac33-d0baa4665dea","type":"refund","status":"completed","amount":{"amount":"100.00","currency":"brl"},` +
	`"createdAt":"2026-11-22T00:26:26Z","completedAt":"2026-11-22T00:26:29Z","rejectReason":null}]}`

// fastMin is the smallest valid order.
const fastMin = `{"id":"x","merchantOrderId":"m","type":"payin","status":"new"`

// fastCase is one body of the differential corpus. fast says which path
// must decode it: true when the fast path has to take it (so that a fast
// path that refuses everything fails the test), false when it has to leave
// it to the slow path.
type fastCase struct {
	name string
	body string
	fast bool
}

func fastCorpus() []fastCase {
	tx := func(fields string) string { return fastMin + `,"transactions":[` + fields + `]}` }
	rep := func(old, new string) string {
		if !strings.Contains(fastBase, old) {
			panic("corpus: " + old + " is not in fastBase")
		}
		return strings.Replace(fastBase, old, new, 1)
	}
	return []fastCase{
		// Bodies the fast path takes.
		{"webhook", fastBase, true},
		{"minimal", fastMin + `}`, true},
		{"all nulls", `{"id":"x","merchantOrderId":"m","type":"payin","status":"new","createdAt":null,"rejectReason":null,` +
			`"merchantSourceWallet":null,"merchantTargetWallet":null,"transactions":null,"auth":null,"refundTransaction":null}`, true},
		{"null transaction", tx(`null,{"id":"a"},null`), true},
		{"transaction of nulls", tx(`{"id":null,"type":null,"status":null,"authorized":null,"merchantWallet":null,"amount":null,` +
			`"counterpartyInfo":null,"paymentInfo":null,"createdAt":null,"completedAt":null,"rejectReason":null}`), true},
		{"empty transactions", fastMin + `,"transactions":[]}`, true},
		{"empty strings", fastMin + `,"createdAt":"","rejectReason":""}`, true},
		{"escaped timestamp", fastMin + `,"createdAt":"2026\u002d01-02T03:04:05\u005a"}`, true},
		{"timestamps with offsets", fastMin + `,"createdAt":"2026-01-02T06:04:05.5+03:00","transactions":[{"completedAt":"2026-01-02 03:04:05"}]}`, true},
		{"timestamp without zone", fastMin + `,"createdAt":"2026-01-02T03:04:05"}`, true},
		{"nested refund", rep(`"rejectReason":null}]}`, `"rejectReason":null},{"id":"r2","type":"refund","status":"processing",`+
			`"amount":{"amount":"5","currency":"brl"},"counterpartyInfo":{"name":"Jo\u00e3o","list":[1,"]}\"",{"a":[]}]},"paymentInfo":{"x":null}}]}`), true},
		{"auth", rep(`"status":"completed",`, `"status":"completed","auth":{"type":"redirect","redirectUrl":"https://x/?a=1","code":"000201","expiresAt":"2026-01-02T04:04:05Z"},`), true},
		{"refundTransaction with null amount", fastMin + `,"refundTransaction":{"id":"r","amount":null}}`, true},
		{"missing id", `{"merchantOrderId":"m","type":"payin","status":"new"}`, true},
		{"missing merchantOrderId", `{"id":"x","type":"payin","status":"new"}`, true},
		{"missing type", `{"id":"x","merchantOrderId":"m","status":"new"}`, true},
		{"missing status", `{"id":"x","merchantOrderId":"m","type":"payin"}`, true},
		{"empty object", `{}`, true},
		{"null", `null`, true},
		{"value with brackets in a string", fastMin + `,"rejectReason":"}]\"{[\\"}`, true},

		{"escaped strings once", fastMin + `,"rejectReason":"a\"b\\c\/d\u00e9\ud83d\ude00\n","auth":{"type":"t\u0000"}}`, true},
		{"money keys reversed, lowercase", fastMin + `,"merchantTargetWallet":{"currency":"brl","amount":"0.10"}}`, true},
		{"refundTransaction, lowercase", fastMin + `,"refundTransaction":{"id":"r","status":"new","type":"refund","amount":{"amount":"1","currency":"brl"},"createdAt":"2026-01-02T03:04:05Z"}}`, true},
		{"pretty printed, compact money", "\n\t {\n" + strings.NewReplacer(`null,"`, "null ,\r\n\"", `},`, "},\n  ", `":[`, `" : [ `).Replace(fastBase[1:]) + " \r\n", true},
		{"money null in a refund", fastMin + `,"refundTransaction":{"id":"r","amount":null}}`, true},
		{"nesting at the limit", fastMin + `,"transactions":[{"counterpartyInfo":` + strings.Repeat("[", 9997) + strings.Repeat("]", 9997) + `}]}`, true},
		// Bodies the fast path must leave to the slow path.
		// The slow path gives these their answer: the key check refuses
		// most (duplicates, keys in other cases, money not in the spec's
		// form), the rest have money in a form the provider does not write
		// (whitespace, escapes, keys reversed) or strings the v2 decoder
		// refuses and encoding/json replaces (invalid UTF-8 and UTF-16).
		{"pretty printed", "\n\t {\n" + strings.ReplaceAll(fastBase[1:], ",", ",\n  ") + " \r\n", false},
		{"keys in other cases", `{"ID":"x","MerchantOrderID":"m","TYPE":"payin","Status":"new","STATUS":"completed",` +
			`"Transactions":[{"Id":"t","AMOUNT":{"AMOUNT":"1","Currency":"BRL"},"completedat":"2026-01-02T03:04:05Z","RejectReason":"r"}]}`, false},
		{"folded key seen twice", `{"merchantorderId":"b","id":"x","merchantOrderId":"a","type":"payin","status":"new","Status":"completed"}`, false},
		{"duplicate id", fastMin + `,"id":"y","ID":"z"}`, false},
		{"duplicate wallet", fastMin + `,"merchantTargetWallet":{"amount":"1","currency":"brl"},"merchantTargetWallet":{"amount":"2"}}`, false},
		{"duplicate wallet then null", fastMin + `,"merchantTargetWallet":{"amount":"1","currency":"brl"},"merchantTargetWallet":null}`, false},
		{"duplicate key in a transaction", tx(`{"id":"a","type":"payin","Type":"refund","authorized":{"amount":"1"},"authorized":{"amount":"2","currency":"x"}}`), false},
		{"duplicate key in money", fastMin + `,"merchantTargetWallet":{"amount":"1","amount":"2","currency":"a","Currency":"B"}}`, false},
		{"escaped strings", fastMin + `,"rejectReason":"a\"b\\c\/d\u00e9\ud83d\ude00\n","merchantOrderId":"m\u0000"}`, false},
		{"escaped amount and currency", fastMin + `,"merchantTargetWallet":{"amount":"\u0035.10","currency":"\u0042RL"}}`, false},
		{"unicode currency", fastMin + `,"merchantTargetWallet":{"amount":"+0.0","currency":"\u00c9UR"}}`, false},
		{"lone surrogate", `{"id":"x\ud800","merchantOrderId":"m","type":"payin","status":"new"}`, false},
		{"invalid UTF-8 in a value", "{\"id\":\"x\xff\xfe\",\"merchantOrderId\":\"m\xc3\",\"type\":\"payin\",\"status\":\"new\"}", false},
		{"invalid UTF-8 in a currency", fastMin + ",\"merchantTargetWallet\":{\"amount\":\"1\",\"currency\":\"b\xffl\"}}", false},
		{"money keys reversed", fastMin + `,"merchantTargetWallet":{"currency":"BRL","amount":"0.10"}}`, false},
		{"money without currency", fastMin + `,"merchantTargetWallet":{"amount":"7"}}`, false},
		{"money with whitespace", fastMin + `,"merchantTargetWallet":{ "amount" : "7" , "currency" : "brl" }}`, false},
		{"unknown field in money", fastMin + `,"merchantTargetWallet":{"amount":"7","currency":"brl","fee":1}}`, false},
		{"refundTransaction", fastMin + `,"refundTransaction":{"id":"r","status":"new","type":"refund","amount":{"amount":"1","currency":"BRL"},"createdAt":"2026-01-02T03:04:05Z"}}`, false},
		{"refundTransaction key in another case", fastMin + `,"RefundTransaction":{"id":"r"},"Auth":{"type":"t"}}`, false},
		{"nesting past the limit", fastMin + `,"transactions":[{"counterpartyInfo":` + strings.Repeat("[", 9998) + strings.Repeat("]", 9998) + `}]}`, false},
		{"duplicate key in counterpartyInfo", tx(`{"counterpartyInfo":{"a":1,"a":2}}`), false},
		{"money with a sign", fastMin + `,"merchantTargetWallet":{"amount":"-5.00","currency":"brl"}}`, false},
		{"money with a two-letter currency", fastMin + `,"merchantTargetWallet":{"amount":"5","currency":"br"}}`, false},
		{"money key in another case only", fastMin + `,"merchantTargetWallet":{"Amount":"5","currency":"brl"}}`, false},
		{"unknown top-level field", rep(`"status":"completed",`, `"status":"completed","fee":{"amount":"0.01","currency":"brl"},"tags":["a",1,null],`), false},
		{"unknown field in a transaction", rep(`"rejectReason":null}]}`, `"rejectReason":null,"network":"spei"}]}`), false},
		{"unknown field in the first transaction", tx(`{"id":"a","x":1},{"id":"b"}`), false},
		{"unknown field in auth", fastMin + `,"auth":{"type":"t","shiny":true}}`, false},
		{"unknown field in refundTransaction", fastMin + `,"refundTransaction":{"id":"r","completedAt":null}}`, false},
		{"Extra as a key", fastMin + `,"Extra":{"a":1}}`, false},
		{"unknown field that folds with long s", fastMin + `,"ſtatus":"completed"}`, false},
		{"key with escape", fastMin + `,"st\u0061tus":"completed"}`, false},
		{"transactions twice", fastMin + `,"transactions":[{"id":"a","type":"payin","status":"new"},{"id":"b","type":"x"}],"transactions":[{"id":"c"}]}`, false},
		{"transactions twice, shorter then longer", fastMin + `,"transactions":[{"id":"a","type":"t"},{"id":"b","type":"t"},{"id":"c","type":"t"}],` +
			`"transactions":[{"id":"d"}],"transactions":[{"status":"s"},{"status":"s"},{"status":"s"}]}`, false},
		{"transactions in two cases", fastMin + `,"transactions":[{"id":"a","type":"t"}],"Transactions":[{"id":"b"}]}`, false},
		{"transactions with an escaped key", fastMin + `,"transactions":[{"id":"a","type":"t"}],"transaction\u0073":[{"id":"b"}]}`, false},
		{"transactions with a long s", fastMin + `,"transactions":[{"id":"a","type":"t"}],"tranſactions":[{"id":"b"}]}`, false},
		{"transactions then null", fastMin + `,"transactions":[{"id":"a"}],"transactions":null}`, false},
		{"trailing garbage", fastMin + `} x`, false},
		{"trailing object", fastMin + `}{}`, false},
		{"trailing comma", fastMin + `},`, false},
		{"trailing NUL", fastMin + "}\x00", false},
		{"amount as a number", fastMin + `,"merchantTargetWallet":{"amount":1.5,"currency":"brl"}}`, false},
		{"amount as an integer in a transaction", tx(`{"amount":{"amount":5,"currency":"brl"}}`), false},
		{"amount not decimal", tx(`{"authorized":{"amount":"x"}}`), false},
		{"amount with exponent", fastMin + `,"merchantTargetWallet":{"amount":"1e3","currency":"brl"}}`, false},
		{"money is a string", fastMin + `,"merchantTargetWallet":"5 brl"}`, false},
		{"money without amount", fastMin + `,"merchantTargetWallet":{"currency":"brl"}}`, false},
		{"bad timestamp", fastMin + `,"createdAt":"now"}`, false},
		{"timestamp as a number", fastMin + `,"createdAt":1767323045}`, false},
		{"timestamp out of range", fastMin + `,"createdAt":"0000-01-01T00:00:00+01:00"}`, false},
		{"id is a number", `{"id":5,"merchantOrderId":"m","type":"payin","status":"new"}`, false},
		{"transactions is an object", fastMin + `,"transactions":{"id":"a"}}`, false},
		{"transaction is a string", tx(`"a"`), false},
		{"invalid UTF-8 in a key", fastMin + ",\"st\xffatus\":\"x\"}", false},
		{"truncated", fastBase[:len(fastBase)/2], false},
		{"array", `[]`, false},
		{"string", `"x"`, false},
		{"number", `1`, false},
		{"empty", ``, false},
		{"whitespace", " \n", false},
	}
}

// decodeOrderReference is DecodeOrder as it was before the fast path: the
// slow path (its refusals explained by explainOrder), the key check and the
// required-field checks.
func decodeOrderReference(data []byte) (*Order, error) {
	var o Order
	if err := decodeOrderSlow(data, &o); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOrder, explainOrder(data, err))
	}
	if err := checkOrderKeys(data); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOrder, err)
	}
	if err := checkRequired(&o); err != nil {
		return nil, err
	}
	return &o, nil
}

// compareFastSlow fails t when the fast and the slow path disagree on data,
// and reports whether the fast path took it.
func compareFastSlow(t *testing.T, data []byte) bool {
	t.Helper()
	var fast, slow Order
	fastOK := decodeOrderFast(data, &fast)
	slowErr := decodeOrderSlow(data, &slow)
	if !fastOK && !reflect.DeepEqual(fast, Order{}) {
		// DecodeOrder hands the same Order to the slow path.
		t.Fatalf("the fast path refused %q but left %#v behind", data, fast)
	}
	if fastOK {
		if slowErr != nil {
			t.Fatalf("the fast path took %q, the slow path refuses it: %v", data, slowErr)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("the paths disagree on %q\nfast %#v\nslow %#v", data, fast, slow)
		}
		// DecodeOrder skips the key check after the fast path: it must
		// have nothing to refuse.
		if err := checkOrderKeys(data); err != nil {
			t.Fatalf("the fast path took %q, the key check refuses it: %v", data, err)
		}
	}
	got, gotErr := DecodeOrder(data)
	want, wantErr := decodeOrderReference(data)
	if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
		t.Fatalf("DecodeOrder(%q) error %v; the slow path gives %v", data, gotErr, wantErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("DecodeOrder(%q) differs from the slow path\n got %#v\nwant %#v", data, got, want)
	}
	return fastOK
}

func TestDecodeOrderFastMatchesSlow(t *testing.T) {
	for _, c := range fastCorpus() {
		t.Run(c.name, func(t *testing.T) {
			if got := compareFastSlow(t, []byte(c.body)); got != c.fast {
				t.Errorf("fast path took the body: %v, want %v\n%s", got, c.fast, c.body)
			}
		})
	}
}

// TestDecodeOrderFastKeepsExtra checks that the bodies with unknown fields
// really carry them into Extra, so that the corpus exercises what the fast
// path must not drop.
func TestDecodeOrderFastKeepsExtra(t *testing.T) {
	o, err := DecodeOrder([]byte(strings.Replace(fastBase, `"rejectReason":null}]}`, `"rejectReason":null,"network":"spei"}],"fee":1}`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if string(o.Extra["fee"]) != "1" || string(o.Transactions[1].Extra["network"]) != `"spei"` {
		t.Errorf("Extra lost: order %v, transaction %v", o.Extra, o.Transactions[1].Extra)
	}
}

// referenceTimeUnmarshal and referenceMoneyUnmarshal are Time.UnmarshalJSON
// and Money.UnmarshalJSON as they were before their fast paths.
func referenceTimeUnmarshal(t *Time, data []byte) error {
	if bytes.Equal(data, []byte("null")) {
		*t = Time{}
		return nil
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("timestamp must be a string, got %s", truncate(data))
	}
	if s == "" {
		*t = Time{}
		return nil
	}
	p, err := ParseTime(s)
	if err != nil {
		return err
	}
	*t = p
	return nil
}

func referenceMoneyUnmarshal(m *Money, data []byte) error {
	if bytes.Equal(data, []byte("null")) {
		return nil
	}
	var raw moneyJSON
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("money: %w", err)
	}
	var s string
	if a := raw.Amount; len(a) >= 2 && a[0] == '"' && a[len(a)-1] == '"' && bytes.IndexByte(a, '\\') < 0 {
		s = string(a[1 : len(a)-1])
	} else if err := json.Unmarshal(raw.Amount, &s); err != nil {
		return fmt.Errorf("money: amount must be a numeric string, got %s", truncate(raw.Amount))
	}
	d, err := ParseAmount(s)
	if err != nil {
		return fmt.Errorf("money: %w", err)
	}
	m.Amount = d
	m.Currency = strings.ToLower(raw.Currency)
	return nil
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// compareLeaves fails t when Time.UnmarshalJSON or Money.UnmarshalJSON
// answers data otherwise than before, called directly (any bytes) or
// through encoding/json (well-formed JSON only).
func compareLeaves(t *testing.T, data []byte) {
	t.Helper()
	start := Time{time.Date(2001, 2, 3, 4, 5, 6, 7, time.UTC)}
	gotT, wantT := start, start
	gotErr, wantErr := gotT.UnmarshalJSON(data), referenceTimeUnmarshal(&wantT, data)
	if errString(gotErr) != errString(wantErr) || !reflect.DeepEqual(gotT, wantT) {
		t.Fatalf("Time.UnmarshalJSON(%q) = %v, %v; before %v, %v", data, gotT, gotErr, wantT, wantErr)
	}
	startM := Money{Amount: decimal.New(7, -1), Currency: "xyz"}
	gotM, wantM := startM, startM
	gotErr, wantErr = gotM.UnmarshalJSON(data), referenceMoneyUnmarshal(&wantM, data)
	if errString(gotErr) != errString(wantErr) || !reflect.DeepEqual(gotM, wantM) {
		t.Fatalf("Money.UnmarshalJSON(%q) = %v, %v; before %v, %v", data, gotM, gotErr, wantM, wantErr)
	}
}

var leafSeeds = []string{
	`null`, `""`, `"2026-01-02T03:04:05Z"`, `"2026-01-02T03:04:05.123456+00:00"`, `"2026-01-02 03:04:05"`,
	`"2026\u002d01-02T03:04:05Z"`, "\"2026-01-02T03:04:05Z\xff\"", `"now"`, `1767323045`, ` "2026-01-02T03:04:05Z" `,
	`"2026-01-02T03:04:05Z"x"`, `"a"b"`, "\"\x01\"", `"`, ``, `"0000-01-01T00:00:00+01:00"`,
	`{"amount":"5","currency":"BRL"}`, `{"currency":"brl","amount":"0.10"}`, `{"amount":"5"}`, `{"currency":"brl"}`,
	`{"amount":5,"currency":"brl"}`, `{"amount":"5","currency":"brl","x":1}`, `{"amount":"5","amount":"6"}`,
	`{"Amount":"5","CURRENCY":"Brl"}`, `{ "amount":"5"}`, `{"amount":"5",}`, `{"amount":"5",,"currency":"x"}`,
	`{"amount":"\u0035","currency":"\u00c9"}`, "{\"amount\":\"5\",\"currency\":\"\xff\"}", `{"amount":"5","currency":null}`,
	`{"amount":null}`, `{"amount":"1e3"}`, `{"amount":"5"}x`, `{"amount":"5"`, `{}`, `{"amount":"5""currency":"x"}`,
	`{"amount":"5":"x"}`, `"5 brl"`, `[]`,
}

func TestLeafDecodersMatchReference(t *testing.T) {
	for _, s := range leafSeeds {
		compareLeaves(t, []byte(s))
	}
	// Every leaf value of the order corpus, as encoding/json hands it over.
	for _, c := range fastCorpus() {
		var m map[string]any
		if json.Unmarshal([]byte(c.body), &m) != nil {
			continue
		}
		walkJSON(t, []byte(c.body))
	}
}

// walkJSON calls compareLeaves on data and on every value inside it.
func walkJSON(t *testing.T, data []byte) {
	t.Helper()
	compareLeaves(t, data)
	var obj map[string]json.RawMessage
	if json.Unmarshal(data, &obj) == nil {
		for _, v := range obj {
			walkJSON(t, v)
		}
		return
	}
	var arr []json.RawMessage
	if json.Unmarshal(data, &arr) == nil {
		for _, v := range arr {
			walkJSON(t, v)
		}
	}
}

// FuzzDecodeOrderFastSlow compares the fast and the slow path on any input;
// explore with `go test -run '^$' -fuzz FuzzDecodeOrderFastSlow ./provider/`.
func FuzzDecodeOrderFastSlow(f *testing.F) {
	for _, c := range fastCorpus() {
		f.Add([]byte(c.body))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		compareFastSlow(t, data)
	})
}

// FuzzLeafDecoders compares Time's and Money's UnmarshalJSON with what they
// were before their fast paths.
func FuzzLeafDecoders(f *testing.F) {
	for _, s := range leafSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		compareLeaves(t, data)
	})
}

// UnmarshalOrder gives what json.Unmarshal into an Order gives, for every
// body of the corpus and for orders as Order.MarshalJSON writes them.
func TestUnmarshalOrder(t *testing.T) {
	var bodies [][]byte
	for _, c := range fastCorpus() {
		bodies = append(bodies, []byte(c.body))
		var o Order
		if json.Unmarshal([]byte(c.body), &o) == nil {
			b, err := json.Marshal(o)
			if err != nil {
				t.Fatal(err)
			}
			bodies = append(bodies, b)
		}
	}
	for _, b := range bodies {
		var want Order
		wantErr := json.Unmarshal(b, &want)
		got, err := UnmarshalOrder(b)
		switch {
		case (err != nil) != (wantErr != nil):
			t.Errorf("UnmarshalOrder(%s): err %v, json.Unmarshal: %v", b, err, wantErr)
		case err == nil && !reflect.DeepEqual(*got, want):
			t.Errorf("UnmarshalOrder(%s) =\n%#v\njson.Unmarshal gives\n%#v", b, *got, want)
		}
	}
}
