package provider_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"orderd/provider"
)

// futureOrder has fields and values the spec does not list; they must survive.
const futureOrder = `{"id":"7f7c3a4e-0000-4000-8000-000000000001","merchantOrderId":"m-1","type":"payout_v2",` +
	`"createdAt":"2026-01-02T03:04:05+00:00","status":"on_hold","rejectReason":null,` +
	`"merchantSourceWallet":{"amount":"0.10","currency":"brl"},"merchantTargetWallet":null,` +
	`"fee":{"amount":"0.01","currency":"brl"},"tags":["a",1,null],"riskScore":0.25,` +
	`"transactions":[{"id":"t-1","type":"payout","status":"awaiting_bank","authorized":{"amount":"1000000000000.01","currency":"brl"},` +
	`"merchantWallet":{"amount":"5","currency":"brl"},"counterpartyInfo":{"bank":"x","nested":{"deep":true}},"paymentInfo":null,` +
	`"createdAt":"2026-01-02T03:04:05Z","completedAt":null,"rejectReason":null,"network":"spei"}],` +
	`"auth":{"type":"pixDynamicQrCode","code":"000201","expiresAt":"2026-01-02T04:04:05Z"}}`

func TestOrder_RoundTripKeepsUnknown(t *testing.T) {
	o, err := provider.DecodeOrder([]byte(futureOrder))
	if err != nil {
		t.Fatal(err)
	}
	if o.Status != "on_hold" || o.Type != "payout_v2" || o.Status.IsFinal() {
		t.Errorf("status %q type %q", o.Status, o.Type)
	}
	if o.Transactions[0].Status != "awaiting_bank" || string(o.Transactions[0].Extra["network"]) != `"spei"` {
		t.Errorf("transaction %+v", o.Transactions[0])
	}
	out, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	var got, want map[string]any
	json.Unmarshal(out, &got)
	json.Unmarshal([]byte(futureOrder), &want)
	// Timestamps are written in one form; everything else must be identical.
	want["createdAt"] = "2026-01-02T03:04:05Z"
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip changed the order\n got %s\nwant %s", out, futureOrder)
	}
	back, err := provider.DecodeOrder(out)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, o) {
		t.Errorf("decode(encode(o)) differs:\n got %+v\nwant %+v", back, o)
	}
}

// TestDecodeOrder_ExactKeys: a field orderd reads must be named exactly and
// once, at every level it reads; encoding/json alone would match "Status"
// to status and keep the last of two keys, so orderd would store one value
// while the raw body (the event's data) says another.
func TestDecodeOrder_ExactKeys(t *testing.T) {
	const head = `{"id":"x","merchantOrderId":"m","type":"payin",`
	tx := func(s string) string {
		return head + `"status":"completed","transactions":[{"id":"t","type":"payin"},` + s + `]}`
	}
	tests := map[string]struct{ in, want string }{
		"status twice":              {head + `"status":"rejected","status":"completed"}`, `the order: key "status" appears more than once`},
		"id twice":                  {`{"id":"x","id":"y","merchantOrderId":"m","type":"payin","status":"new"}`, `key "id" appears more than once`},
		"Status beside status":      {head + `"status":"rejected","Status":"completed"}`, `key "Status" is "status" in another case`},
		"Status alone":              {head + `"Status":"completed"}`, `key "Status" is "status" in another case`},
		"merchantorderid":           {`{"id":"x","merchantorderid":"m2","merchantOrderId":"m","type":"payin","status":"new"}`, `key "merchantorderid"`},
		"Unicode folding":           {head + `"ſtatus":"completed","status":"new"}`, `key "ſtatus" is "status" in another case`},
		"escaped duplicate":         {head + `"status":"new","\u0073tatus":"completed"}`, `key "status" appears more than once`},
		"escaped Unicode folding":   {head + `"\u017ftatus":"completed","status":"new"}`, `key "ſtatus" is "status" in another case`},
		"transaction id twice":      {tx(`{"id":"a","id":"b"}`), `transactions[1]: key "id" appears more than once`},
		"transaction Status":        {tx(`{"id":"a","status":"rejected","STATUS":"completed"}`), `transactions[1]: key "STATUS"`},
		"wallet amount twice":       {head + `"status":"new","merchantTargetWallet":{"amount":"1","amount":"1000","currency":"brl"}}`, `merchantTargetWallet: key "amount" appears more than once`},
		"wallet Currency":           {head + `"status":"new","merchantTargetWallet":{"amount":"1","Currency":"usd","currency":"brl"}}`, `merchantTargetWallet: key "Currency"`},
		"transaction money":         {tx(`{"id":"a","authorized":{"amount":"1","AMOUNT":"2","currency":"brl"}}`), `transactions[1].authorized: key "AMOUNT"`},
		"refund transaction amount": {head + `"status":"completed","refundTransaction":{"id":"r","amount":{"amount":"1","currency":"brl","currency":"usd"}}}`, `refundTransaction.amount: key "currency" appears more than once`},
		"transactions twice":        {head + `"status":"new","transactions":[],"transactions":[]}`, `key "transactions" appears more than once`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			o, err := provider.DecodeOrder([]byte(tt.in))
			if err == nil {
				t.Fatalf("DecodeOrder accepted %s as %+v", tt.in, o)
			}
			if !errors.Is(err, provider.ErrInvalidOrder) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("DecodeOrder = %v; want ErrInvalidOrder mentioning %q", err, tt.want)
			}
		})
	}
	// Keys orderd does not read are kept as they are, in any case, and
	// opaque objects are not looked into.
	ok := head + `"status":"new","Fee":{"amount":"1","amount":"2"},"fee":1,"transactions":[{"id":"t","paymentInfo":{"id":1,"ID":2,"id":3}}]}`
	if _, err := provider.DecodeOrder([]byte(ok)); err != nil {
		t.Errorf("DecodeOrder refused keys it does not read: %v", err)
	}
}

func TestDecodeOrder_Invalid(t *testing.T) {
	tests := map[string]struct{ in, want string }{
		"not JSON":        {`{"id":`, "invalid order"},
		"array":           {`[]`, "invalid order"},
		"null":            {`null`, "id is missing"},
		"no id":           {`{"merchantOrderId":"m","type":"payin","status":"new"}`, "id is missing"},
		"no merchant id":  {`{"id":"x","type":"payin","status":"new"}`, "merchantOrderId is missing"},
		"no type":         {`{"id":"x","merchantOrderId":"m","status":"new"}`, "type is missing"},
		"no status":       {`{"id":"x","merchantOrderId":"m","type":"payin"}`, "status is missing"},
		"float amount":    {`{"id":"x","merchantOrderId":"m","type":"payin","status":"new","merchantTargetWallet":{"amount":1.5,"currency":"brl"}}`, "numeric string"},
		"bad timestamp":   {`{"id":"x","merchantOrderId":"m","type":"payin","status":"new","createdAt":"now"}`, "ISO 8601"},
		"id is a number":  {`{"id":5,"merchantOrderId":"m","type":"payin","status":"new"}`, "invalid order"},
		"bad transaction": {`{"id":"x","merchantOrderId":"m","type":"payin","status":"new","transactions":[{"authorized":{"amount":"x"}}]}`, "not a decimal"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			o, err := provider.DecodeOrder([]byte(tt.in))
			if err == nil {
				t.Fatalf("DecodeOrder accepted %+v", o)
			}
			if !errors.Is(err, provider.ErrInvalidOrder) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("DecodeOrder = %v; want ErrInvalidOrder mentioning %q", err, tt.want)
			}
		})
	}
}

// TestDecodeOrder_Reasons: the reason a signed body is quarantined is read
// by people who know the provider's JSON, not orderd's code: it names the
// field by its JSON path and says what is wrong in JSON's terms, never in
// Go's ("cannot unmarshal number into Go struct field plain.status of type
// provider.Status").
func TestDecodeOrder_Reasons(t *testing.T) {
	const head = `{"id":"x","merchantOrderId":"m","type":"payin","status":"new",`
	tests := map[string]struct{ in, want string }{
		"amount as a number":        {head + `"merchantTargetWallet":{"amount":98.0,"currency":"brl"}}`, `merchantTargetWallet.amount: must be a numeric string, got 98.0`},
		"amount in exponent form":   {head + `"merchantTargetWallet":{"amount":"1e400","currency":"brl"}}`, `merchantTargetWallet.amount: "1e400" is not a decimal number`},
		"amount too long":           {head + `"merchantTargetWallet":{"amount":"` + strings.Repeat("9", 62) + `.00","currency":"brl"}}`, `merchantTargetWallet.amount: too long (65 characters; at most 64)`},
		"amount in another case":    {head + `"merchantTargetWallet":{"Amount":"x","currency":"brl"}}`, `merchantTargetWallet.amount: "x" is not a decimal number`},
		"amount missing":            {head + `"merchantTargetWallet":{"currency":"brl"}}`, `merchantTargetWallet: amount is missing`},
		"currency as a number":      {head + `"merchantTargetWallet":{"amount":"5","currency":5}}`, `merchantTargetWallet.currency: must be a string, got 5`},
		"wallet as a string":        {head + `"merchantTargetWallet":"5"}`, `merchantTargetWallet: must be an object, got "5"`},
		"timestamp in words":        {head + `"createdAt":"yesterday"}`, `createdAt: "yesterday" is not ISO 8601`},
		"timestamp as a number":     {head + `"createdAt":5}`, `createdAt: must be a string, got 5`},
		"timestamp out of range":    {head + `"createdAt":"0000-01-01T00:00:00+01:00"}`, `createdAt: "0000-01-01T00:00:00+01:00" is out of range`},
		"long timestamp":            {head + `"createdAt":"` + strings.Repeat("y", 100) + `"}`, `createdAt: "` + strings.Repeat("y", 64) + `"… is not ISO 8601`},
		"status as a number":        {`{"id":"x","merchantOrderId":"m","type":"payin","status":5}`, `status: must be a string, got 5`},
		"id as an object":           {`{"id":{"a":[1,2]},"merchantOrderId":"m","type":"payin","status":"new"}`, `id: must be a string, got {"a":[1,2]}`},
		"rejectReason as a number":  {head + `"rejectReason":5}`, `rejectReason: must be a string, got 5`},
		"array":                     {`[1,2]`, `the body must be a JSON object`},
		"string":                    {` "x" `, `the body must be a JSON object`},
		"not JSON":                  {`{"id":`, `the body is not valid JSON: unexpected end of JSON input`},
		"transactions as a string":  {head + `"transactions":"none"}`, `transactions: must be an array, got "none"`},
		"transaction as a number":   {head + `"transactions":[5]}`, `transactions[0]: must be an object, got 5`},
		"transaction timestamp":     {head + `"transactions":[{"id":"a"},{"id":"b","createdAt":"now"}]}`, `transactions[1].createdAt: "now" is not ISO 8601`},
		"transaction status":        {head + `"transactions":[{"id":"a"},{"id":"b","status":true}]}`, `transactions[1].status: must be a string, got true`},
		"transaction amount":        {head + `"transactions":[{"id":"a"},{"id":"b","authorized":{"amount":"x","currency":"brl"}}]}`, `transactions[1].authorized.amount: "x" is not a decimal number`},
		"auth as a string":          {head + `"auth":"x"}`, `auth: must be an object, got "x"`},
		"auth expiry":               {head + `"auth":{"type":"redirect","expiresAt":"soon"}}`, `auth.expiresAt: "soon" is not ISO 8601`},
		"refund amount as a number": {head + `"refundTransaction":{"id":"r","amount":{"amount":1,"currency":"brl"}}}`, `refundTransaction.amount.amount: must be a numeric string, got 1`},
		"refund as an array":        {head + `"refundTransaction":[]}`, `refundTransaction: must be an object, got []`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			o, err := provider.DecodeOrder([]byte(tt.in))
			if err == nil {
				t.Fatalf("DecodeOrder accepted %s as %+v", tt.in, o)
			}
			if want := "invalid order: " + tt.want; err.Error() != want || !errors.Is(err, provider.ErrInvalidOrder) {
				t.Errorf("DecodeOrder = %v\nwant ErrInvalidOrder saying %s", err, want)
			}
		})
	}
}

// TestDecodeOrder_Money: the spec writes amounts as numeric strings and
// currencies as lowercase three-letter ISO codes; what it does not allow is
// refused, naming the field, rather than trusted. It shows no signed
// amount: which way money moves is told by the field and the transaction
// type, so a sign of either kind (even on zero) is refused.
func TestDecodeOrder_Money(t *testing.T) {
	wallet := func(m string) string {
		return `{"id":"x","merchantOrderId":"m","type":"payin","status":"completed","merchantTargetWallet":` + m + `}`
	}
	refused := map[string]struct{ in, want string }{
		"negative":             {wallet(`{"amount":"-5.00","currency":"brl"}`), `merchantTargetWallet.amount: "-5.00" has a sign`},
		"plus":                 {wallet(`{"amount":"+100","currency":"brl"}`), `merchantTargetWallet.amount: "+100" has a sign`},
		"minus zero":           {wallet(`{"amount":"-0","currency":"brl"}`), `"-0" has a sign`},
		"escaped minus":        {wallet(`{"amount":"\u002d5","currency":"brl"}`), `"-5" has a sign`},
		"uppercase currency":   {wallet(`{"amount":"5","currency":"BRL"}`), `merchantTargetWallet.currency: "BRL" is not a lowercase three-letter ISO code`},
		"empty currency":       {wallet(`{"amount":"5","currency":""}`), `merchantTargetWallet.currency: "" is not`},
		"null currency":        {wallet(`{"amount":"5","currency":null}`), `merchantTargetWallet.currency: must be a string, got null`},
		"no currency":          {wallet(`{"amount":"5"}`), `merchantTargetWallet: currency is missing`},
		"four letters":         {wallet(`{"amount":"5","currency":"brla"}`), `"brla" is not`},
		"digits":               {wallet(`{"amount":"5","currency":"978"}`), `"978" is not`},
		"non-ASCII":            {wallet(`{"amount":"5","currency":"ée"}`), `is not a lowercase`},
		"transaction negative": {`{"id":"x","merchantOrderId":"m","type":"payin","status":"completed","transactions":[{"id":"t","type":"payin","authorized":{"amount":"10","currency":"brl"},"merchantWallet":{"amount":"-10","currency":"brl"}}]}`, `transactions[0].merchantWallet.amount: "-10" has a sign`},
		"refund currency":      {`{"id":"x","merchantOrderId":"m","type":"payin","status":"completed","refundTransaction":{"id":"r","amount":{"amount":"1","currency":"Brl"}}}`, `refundTransaction.amount.currency: "Brl" is not`},
	}
	for name, tt := range refused {
		t.Run(name, func(t *testing.T) {
			o, err := provider.DecodeOrder([]byte(tt.in))
			if err == nil {
				t.Fatalf("DecodeOrder accepted %s as %+v", tt.in, o)
			}
			if !errors.Is(err, provider.ErrInvalidOrder) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("DecodeOrder = %v; want ErrInvalidOrder mentioning %q", err, tt.want)
			}
		})
	}
	for _, m := range []string{`{"amount":"0","currency":"brl"}`, `{"amount":"0.00","currency":"usd"}`,
		`{"amount":"123456789012345678901234567890.000000000000000000000000000001","currency":"mxn"}`, `null`} {
		if _, err := provider.DecodeOrder([]byte(wallet(m))); err != nil {
			t.Errorf("DecodeOrder refused %s: %v", m, err)
		}
	}
}

// fpBase is a completed payin with two transactions.
const fpBase = `{"id":"o-1","merchantOrderId":"m-1","type":"payin","createdAt":"2026-01-02T03:04:05Z",
"status":"completed","rejectReason":null,"merchantSourceWallet":null,
"merchantTargetWallet":{"amount":"98.00","currency":"brl"},"transactions":[
{"id":"t-1","type":"payin","status":"completed","authorized":{"amount":"100.00","currency":"brl"},
 "merchantWallet":{"amount":"98.00","currency":"brl"},"createdAt":"2026-01-02T03:04:05Z","completedAt":"2026-01-02T03:06:00Z","rejectReason":null},
{"id":"t-2","type":"refund","status":"processing","amount":{"amount":"5","currency":"brl"},"createdAt":"2026-01-02T03:07:00Z","completedAt":null,"rejectReason":null}]}`

func fingerprint(t *testing.T, in string) string {
	t.Helper()
	o, err := provider.DecodeOrder([]byte(in))
	if err != nil {
		t.Fatalf("DecodeOrder(%s): %v", in, err)
	}
	return o.Fingerprint()
}

func TestOrder_Fingerprint(t *testing.T) {
	base := fingerprint(t, fpBase)
	if len(base) != 64 {
		t.Fatalf("fingerprint %q is not hex SHA-256", base)
	}
	same := map[string]string{
		"5 vs 5.00":   strings.Replace(fpBase, `"amount":"5"`, `"amount":"5.00"`, 1),
		"98.00 vs 98": strings.NewReplacer(`"98.00"`, `"98"`).Replace(fpBase),
		"reordered keys": `{"status":"completed","transactions":[
{"rejectReason":null,"completedAt":"2026-01-02T03:06:00Z","merchantWallet":{"currency":"brl","amount":"98.00"},"authorized":{"currency":"brl","amount":"100.00"},"status":"completed","type":"payin","id":"t-1","createdAt":"2026-01-02T03:04:05Z"},
{"amount":{"currency":"brl","amount":"5"},"status":"processing","type":"refund","id":"t-2","completedAt":null,"rejectReason":null,"createdAt":"2026-01-02T03:07:00Z"}],
"merchantTargetWallet":{"currency":"brl","amount":"98.00"},"merchantSourceWallet":null,"rejectReason":null,"createdAt":"2026-01-02T03:04:05Z","type":"payin","merchantOrderId":"m-1","id":"o-1"}`,
		"reordered transactions": reorderTransactions(t, fpBase),
		"+00:00 timestamps":      strings.ReplaceAll(fpBase, `Z"`, `+00:00"`),
		"other offset, same instant": strings.Replace(fpBase, `"completedAt":"2026-01-02T03:06:00Z"`,
			`"completedAt":"2026-01-02T06:06:00+03:00"`, 1),
		"auth and unknown fields": strings.Replace(fpBase, `"status":"completed",`,
			`"status":"completed","auth":{"type":"redirect","redirectUrl":"https://x"},"shiny":{"new":1},`, 1),
		"compact whitespace": strings.ReplaceAll(fpBase, "\n", ""),
	}
	for name, in := range same {
		t.Run("same/"+name, func(t *testing.T) {
			if fp := fingerprint(t, in); fp != base {
				t.Errorf("fingerprint changed: %s vs %s", fp, base)
			}
		})
	}
	different := map[string]string{
		"order status":       strings.Replace(fpBase, `"status":"completed","rejectReason"`, `"status":"rejected","rejectReason"`, 1),
		"target amount":      strings.Replace(fpBase, `"merchantTargetWallet":{"amount":"98.00"`, `"merchantTargetWallet":{"amount":"98.01"`, 1),
		"refund amount":      strings.Replace(fpBase, `"amount":"5"`, `"amount":"4.99"`, 1),
		"currency":           strings.Replace(fpBase, `"amount":"5","currency":"brl"`, `"amount":"5","currency":"mxn"`, 1),
		"transaction status": strings.Replace(fpBase, `"status":"processing"`, `"status":"completed"`, 1),
		"completedAt":        strings.Replace(fpBase, `"completedAt":null`, `"completedAt":"2026-01-02T03:08:00Z"`, 1),
		"rejectReason":       strings.Replace(fpBase, `"rejectReason":null,"merchantSourceWallet"`, `"rejectReason":"fraud","merchantSourceWallet"`, 1),
		"source wallet":      strings.Replace(fpBase, `"merchantSourceWallet":null`, `"merchantSourceWallet":{"amount":"0","currency":"brl"}`, 1),
		"new transaction": strings.Replace(fpBase, `"completedAt":null,"rejectReason":null}]`,
			`"completedAt":null,"rejectReason":null},{"id":"t-3","type":"refund","status":"new","amount":{"amount":"1","currency":"brl"}}]`, 1),
		"merchant order id": strings.Replace(fpBase, `"m-1"`, `"m-2"`, 1),
	}
	for name, in := range different {
		t.Run("different/"+name, func(t *testing.T) {
			if in == fpBase {
				t.Fatal("the replacement did not apply")
			}
			if fp := fingerprint(t, in); fp == base {
				t.Errorf("fingerprint did not change")
			}
		})
	}
}

func reorderTransactions(t *testing.T, in string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(in), &m); err != nil {
		t.Fatal(err)
	}
	var txs []json.RawMessage
	json.Unmarshal(m["transactions"], &txs)
	txs[0], txs[1] = txs[1], txs[0]
	m["transactions"], _ = json.Marshal(txs)
	out, _ := json.Marshal(m)
	if string(out) == in {
		t.Fatal("reordering changed nothing")
	}
	return string(out)
}

func TestOrder_FingerprintDuplicateTransactionIDs(t *testing.T) {
	// Two transactions that share an id (a provider quirk) must not make the
	// fingerprint depend on their order.
	a := `{"id":"o","merchantOrderId":"m","type":"payin","status":"completed","transactions":[` +
		`{"id":"t","type":"payin","status":"completed"},{"id":"t","type":"refund","status":"new"}]}`
	b := `{"id":"o","merchantOrderId":"m","type":"payin","status":"completed","transactions":[` +
		`{"id":"t","type":"refund","status":"new"},{"id":"t","type":"payin","status":"completed"}]}`
	if fingerprint(t, a) != fingerprint(t, b) {
		t.Error("fingerprint depends on the order of transactions with the same id")
	}
}

func TestStatus_IsFinal(t *testing.T) {
	for s, want := range map[provider.Status]bool{
		provider.StatusNew: false, provider.StatusProcessing: false,
		provider.StatusCompleted: true, provider.StatusRejected: true, "on_hold": false, "": false,
	} {
		if got := s.IsFinal(); got != want {
			t.Errorf("%q.IsFinal() = %v, want %v", s, got, want)
		}
	}
}

func TestCode_Known(t *testing.T) {
	if len(provider.Codes) != 21 {
		t.Errorf("%d codes, the spec lists 21", len(provider.Codes))
	}
	for _, c := range provider.Codes {
		if !c.Known() {
			t.Errorf("%s not known", c)
		}
	}
	if provider.Code("BRAND_NEW").Known() {
		t.Error("an unlisted code is known")
	}
}

func TestError_Is(t *testing.T) {
	err := error(&provider.Error{Code: provider.CodeOrderNotFound})
	if !errors.Is(err, &provider.Error{Code: provider.CodeOrderNotFound}) {
		t.Error("errors.Is does not match the same code")
	}
	if errors.Is(err, &provider.Error{Code: provider.CodeValidation}) {
		t.Error("errors.Is matches another code")
	}
	if provider.ErrorCode(errors.New("x")) != "" || provider.ErrorCode(err) != provider.CodeOrderNotFound {
		t.Error("ErrorCode")
	}
}

func TestDecodeEnvelope(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		wantData string
		wantCode provider.Code
	}{
		{name: "success", in: `{"data":[1],"error":null}`, wantData: `[1]`},
		{name: "success without error key", in: `{"data":{"a":"b"}}`, wantData: `{"a":"b"}`},
		{name: "success with null data", in: `{"data":null,"error":null}`, wantData: `null`},
		{name: "error without data key", in: `{"error":{"code":"AUTHENTICATION_FAILED"}}`, wantCode: provider.CodeAuthenticationFailed},
		{name: "not an object", in: `[{"data":1}]`},
		{name: "validation errors of the wrong shape", in: `{"data":null,"error":{"code":"VALIDATION","validationErrors":"bad"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := provider.DecodeEnvelope([]byte(tt.in))
			switch {
			case tt.wantData != "":
				if err != nil || string(data) != tt.wantData {
					t.Errorf("DecodeEnvelope = %s, %v; want %s", data, err, tt.wantData)
				}
			case tt.wantCode != "":
				if provider.ErrorCode(err) != tt.wantCode {
					t.Errorf("DecodeEnvelope = %s, %v; want code %s", data, err, tt.wantCode)
				}
			default:
				if !errors.Is(err, provider.ErrInDoubt) {
					t.Errorf("DecodeEnvelope = %s, %v; want ErrInDoubt", data, err)
				}
			}
		})
	}
}

// referenceFingerprint is Fingerprint as it was first written, with
// encoding/json over canonical structs: the hand-written encoder must give
// the same fingerprints, since they are part of stored event ids.
func referenceFingerprint(o *provider.Order) string {
	type canonicalTx struct {
		ID             string     `json:"id"`
		Type           string     `json:"type"`
		Status         string     `json:"status"`
		Authorized     *[2]string `json:"authorized"`
		MerchantWallet *[2]string `json:"merchantWallet"`
		Amount         *[2]string `json:"amount"`
		CompletedAt    string     `json:"completedAt"`
		RejectReason   *string    `json:"rejectReason"`
	}
	money := func(m *provider.Money) *[2]string {
		if m == nil {
			return nil
		}
		return &[2]string{provider.NormalizeAmount(m.Amount), m.Currency}
	}
	c := struct {
		ID              string        `json:"id"`
		MerchantOrderID string        `json:"merchantOrderId"`
		Type            string        `json:"type"`
		Status          string        `json:"status"`
		RejectReason    *string       `json:"rejectReason"`
		Source          *[2]string    `json:"merchantSourceWallet"`
		Target          *[2]string    `json:"merchantTargetWallet"`
		Transactions    []canonicalTx `json:"transactions"`
	}{o.ID, o.MerchantOrderID, string(o.Type), string(o.Status), o.RejectReason,
		money(o.MerchantSourceWallet), money(o.MerchantTargetWallet), make([]canonicalTx, 0, len(o.Transactions))}
	for _, t := range o.Transactions {
		ct := canonicalTx{ID: t.ID, Type: t.Type, Status: string(t.Status), Authorized: money(t.Authorized),
			MerchantWallet: money(t.MerchantWallet), Amount: money(t.Amount), RejectReason: t.RejectReason}
		if !t.CompletedAt.IsZero() {
			ct.CompletedAt = t.CompletedAt.UTC().Format(time.RFC3339Nano)
		}
		c.Transactions = append(c.Transactions, ct)
	}
	slices.SortFunc(c.Transactions, func(a, b canonicalTx) int {
		if c := strings.Compare(a.ID, b.ID); c != 0 {
			return c
		}
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		return bytes.Compare(ja, jb)
	})
	b, _ := json.Marshal(c)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func TestOrder_FingerprintMatchesReference(t *testing.T) {
	for _, in := range []string{
		fpBase, futureOrder,
		`{"id":"o<&>","merchantOrderId":"m\u2028\"","type":"payin","status":"completed","rejectReason":"a\tb","transactions":[` +
			`{"id":"=","type":"payin","status":"completed","completedAt":"2026-01-02T03:04:05.123456789+05:30"},` +
			`{"id":"<","type":"refund","status":"new","rejectReason":"x"},{"id":"<","type":"refund","status":"new"}]}`,
		`{"id":"x","merchantOrderId":"m","type":"payin","status":"new","transactions":[]}`,
		manyTransactions(40),
	} {
		o, err := provider.DecodeOrder([]byte(in))
		if err != nil {
			t.Fatalf("DecodeOrder(%s): %v", in, err)
		}
		if got, want := o.Fingerprint(), referenceFingerprint(o); got != want {
			t.Errorf("Fingerprint = %s, reference %s, for %s", got, want, in)
		}
	}
}

// manyTransactions is an order with n transactions, each with long ids and
// every amount set, in reverse id order: more than Fingerprint's buffers
// hold before they grow.
func manyTransactions(n int) string {
	var b strings.Builder
	b.WriteString(`{"id":"o-many","merchantOrderId":"m-many","type":"payin","status":"completed",` +
		`"merchantTargetWallet":{"amount":"1000.10","currency":"brl"},"transactions":[`)
	for i := n; i > 0; i-- {
		if i < n {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"%s-%04d","type":"refund","status":"completed","authorized":{"amount":"%d.50","currency":"brl"},`+
			`"merchantWallet":{"amount":"%d.00","currency":"brl"},"amount":{"amount":"%d","currency":"brl"},`+
			`"completedAt":"2026-01-02T03:04:05.%06dZ","rejectReason":"reason %d with some length to it"}`,
			strings.Repeat("f", 60), i, i, i, i, i, i)
	}
	b.WriteString(`]}`)
	return b.String()
}
