package provider

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// explainOrder tells why decodeOrderSlow refused data, naming the field by
// its JSON path ("transactions[0].createdAt") and the problem in the terms
// of JSON. decodeErr, from encoding/json, names Go types instead ("cannot
// unmarshal number into Go struct field plain.status of type
// provider.Status"), and the errors of Money and Time do not say where they
// are. The reason ends up in the quarantine, read by people who know the
// provider's JSON, not orderd's code.
//
// It decodes data again, so it runs only for a body already refused: the
// cost of a good reason falls on bodies that are not orders.
func explainOrder(data []byte, decodeErr error) error {
	if _, ok := errors.AsType[*json.SyntaxError](decodeErr); ok {
		return errors.New("the body is not valid JSON: " + decodeErr.Error())
	}
	if i := skipJSONSpace(data, 0); i >= len(data) || data[i] != '{' {
		return errors.New("the body must be a JSON object")
	}
	// The same decode once more, with the JSON v2 decoder, which reports
	// where a value is wrong, and with Money and Time read by functions
	// that refuse what their UnmarshalJSON refuses, saying why in JSON's
	// terms. Duplicate names and invalid UTF-8 are let through as
	// encoding/json lets them through; checkOrderKeys judges the keys.
	err := jsonv2.Unmarshal(data, new(plainOrder), explainOptions)
	if se, ok := errors.AsType[*jsonv2.SemanticError](err); ok {
		return semanticProblem(data, se)
	}
	// encoding/json matches keys in any case ("Status") where JSON v2 does
	// not; checkOrderKeys names such a key.
	if err := checkOrderKeys(data); err != nil {
		return err
	}
	// Not reached by any body known to be refused; said without Go's words
	// all the same.
	if te, ok := errors.AsType[*json.UnmarshalTypeError](decodeErr); ok && te.Field != "" {
		return newKeyError("cannot be a JSON %s", te.Value).in(te.Field)
	}
	return errors.New("the order cannot be decoded")
}

// explainOptions read an order as encoding/json does, but name where a
// value is wrong: transactions without Transaction.UnmarshalJSON (whose
// encoding/json call would lose the path), Money and Time by explainMoney
// and explainTime.
var explainOptions = jsonv2.JoinOptions(
	jsontext.AllowDuplicateNames(true),
	jsontext.AllowInvalidUTF8(true),
	jsonv2.WithUnmarshalers(jsonv2.JoinUnmarshalers(
		jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, t *Transaction) error {
			return jsonv2.UnmarshalDecode(dec, (*plainTransaction)(t))
		}),
		jsonv2.UnmarshalFunc(explainMoney),
		jsonv2.UnmarshalFunc(explainTime),
	)),
)

// explainMoney refuses what Money.UnmarshalJSON refuses, with a *keyError
// that names the member at fault.
func explainMoney(data []byte, _ *Money) error {
	if string(data) == "null" {
		return nil
	}
	if len(data) == 0 || data[0] != '{' {
		return newKeyError("must be an object, got %s", truncate(data))
	}
	// The object is well formed (encoding/json checked the whole body), so
	// this cannot fail; its keys match in any case, as moneyJSON's do.
	var raw struct {
		Amount   json.RawMessage `json:"amount"`
		Currency json.RawMessage `json:"currency"`
	}
	_ = json.Unmarshal(data, &raw)
	if c := raw.Currency; len(c) > 0 && c[0] != '"' && string(c) != "null" {
		return newKeyError("must be a string, got %s", truncate(c)).in("currency")
	}
	if len(raw.Amount) == 0 {
		return newKeyError("amount is missing")
	}
	var s string
	if raw.Amount[0] != '"' || json.Unmarshal(raw.Amount, &s) != nil {
		return newKeyError("must be a numeric string, got %s", truncate(raw.Amount)).in("amount")
	}
	if _, err := ParseAmount(s); err != nil {
		if ae, ok := errors.AsType[*amountError](err); ok {
			return newKeyError("%s", ae.problem()).in("amount")
		}
		return newKeyError("%s is not a decimal number", quoteShort(s)).in("amount")
	}
	return nil
}

// explainTime refuses what Time.UnmarshalJSON refuses, with a *keyError.
func explainTime(data []byte, _ *Time) error {
	if string(data) == "null" {
		return nil
	}
	var s string
	if len(data) == 0 || data[0] != '"' || json.Unmarshal(data, &s) != nil {
		return newKeyError("must be a string, got %s", truncate(data))
	}
	if s == "" {
		return nil
	}
	if _, err := ParseTime(s); err != nil {
		if te, ok := errors.AsType[*timeError](err); ok {
			return newKeyError("%s", te.problem())
		}
		return newKeyError("%s is not ISO 8601", quoteShort(s))
	}
	return nil
}

// semanticProblem turns the JSON v2 decoder's error into a *keyError with
// the path of the value at fault: the error of explainMoney or explainTime
// as it is, or, for a value of the wrong kind, what kind it must be.
func semanticProblem(data []byte, se *jsonv2.SemanticError) error {
	ke, ok := errors.AsType[*keyError](se.Err)
	if !ok {
		got := []byte(se.JSONValue)
		if len(got) == 0 && se.ByteOffset >= 0 && se.ByteOffset < int64(len(data)) {
			if end := skipJSONValue(data, int(se.ByteOffset)); end > 0 {
				got = data[se.ByteOffset:end]
			}
		}
		ke = newKeyError("must be %s, got %s", jsonKindFor(se.GoType), truncate(got))
	}
	tokens := strings.Split(string(se.JSONPointer), "/")[1:]
	for i := len(tokens) - 1; i >= 0; i-- {
		tok := strings.NewReplacer("~1", "/", "~0", "~").Replace(tokens[i])
		if tok != "" && strings.Trim(tok, "0123456789") == "" {
			// orderd reads no object member named by digits: an index.
			tok = "[" + tok + "]"
		}
		ke.in(tok)
	}
	return ke
}

// jsonKindFor says which JSON value a Go type of the order is read from.
func jsonKindFor(t reflect.Type) string {
	if t == nil {
		return "another kind of value"
	}
	orNull := ""
	if t.Kind() == reflect.Pointer {
		t, orNull = t.Elem(), " or null"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string" + orNull
	case reflect.Slice, reflect.Array:
		return "an array" + orNull
	case reflect.Struct, reflect.Map:
		return "an object" + orNull
	default:
		return "another kind of value"
	}
}

// quoteShort quotes s for an error message, cut after 64 bytes: the reason
// is stored and logged, and the value can be as long as the body.
func quoteShort(s string) string {
	const limit = 64
	if len(s) > limit {
		return strconv.Quote(s[:limit]) + "…"
	}
	return strconv.Quote(s)
}
