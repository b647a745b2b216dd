package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// referenceKeys is checkOrderKeys written plainly with encoding/json's
// tokenizer: whether data (well-formed JSON) names a field orderd reads
// twice or in another case, or has money not in the spec's form.
func referenceKeys(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // numbers are skipped, not converted: 1e700 is fine
	tok, err := dec.Token()
	if err != nil {
		return true
	}
	return referenceValue(dec, tok, orderKeys) == nil
}

var errReferenceKeys = errors.New("bad key")

func referenceValue(dec *json.Decoder, tok json.Token, k *objectKeys) (err error) {
	ok := true
	defer func() {
		if err == nil && !ok {
			err = errReferenceKeys
		}
	}()
	d, isDelim := tok.(json.Delim)
	if !isDelim {
		return nil
	}
	switch d {
	case '{':
		seen := map[string]bool{}
		defer func() {
			if k.money && !seen["currency"] {
				ok = false
			}
		}()
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			key := kt.(string)
			exact := false
			for _, kn := range k.keys {
				if key == kn {
					exact = true
				} else if strings.EqualFold(key, kn) {
					return errReferenceKeys
				}
			}
			if exact && seen[key] {
				return errReferenceKeys
			}
			seen[key] = true
			vt, err := dec.Token()
			if err != nil {
				return err
			}
			if exact && k.money {
				v, isString := vt.(string)
				switch {
				case !isString:
					return errReferenceKeys
				case key == "amount" && (strings.HasPrefix(v, "-") || strings.HasPrefix(v, "+")):
					return errReferenceKeys
				case key == "currency" && !regexp.MustCompile(`^[a-z]{3}$`).MatchString(v):
					return errReferenceKeys
				}
			}
			var sub *objectKeys
			switch {
			case !exact:
			case vt == json.Delim('{'):
				sub = k.objects[key]
			case vt == json.Delim('['):
				if elems := k.arrays[key]; elems != nil {
					for dec.More() {
						et, err := dec.Token()
						if err != nil {
							return err
						}
						if err := referenceValue(dec, et, elems); err != nil {
							return err
						}
					}
					_, err := dec.Token() // ']'
					if err != nil {
						return err
					}
					continue
				}
			}
			if err := referenceValue(dec, vt, orNone(sub)); err != nil {
				return err
			}
		}
	case '[':
		for dec.More() {
			et, err := dec.Token()
			if err != nil {
				return err
			}
			if err := referenceValue(dec, et, &objectKeys{}); err != nil {
				return err
			}
		}
	default:
		return nil
	}
	_, err = dec.Token() // the closing delimiter
	return err
}

// orNone is k, or an object whose keys are all unknown (opaque values).
func orNone(k *objectKeys) *objectKeys {
	if k == nil {
		return &objectKeys{}
	}
	return k
}

func compareKeys(t *testing.T, data []byte) {
	t.Helper()
	if !json.Valid(data) {
		return
	}
	got := checkOrderKeys(data)
	if want := referenceKeys(data); (got == nil) != want {
		t.Fatalf("checkOrderKeys(%q) = %v; the tokenizer's reading says ok=%v", data, got, want)
	}
}

func TestCheckOrderKeys_MatchesReference(t *testing.T) {
	for _, c := range fastCorpus() {
		compareKeys(t, []byte(c.body))
	}
}

// FuzzCheckOrderKeys compares the key check with its plain version; explore
// with `go test -run '^$' -fuzz FuzzCheckOrderKeys ./provider/`.
func FuzzCheckOrderKeys(f *testing.F) {
	for _, c := range fastCorpus() {
		f.Add([]byte(c.body))
	}
	f.Add([]byte(`{"transactions":[{"authorized":{"amount":"1","amount":"2"}},null,[{"id":1,"id":2}]],"auth":{"Code":1}}`))
	f.Add([]byte(`{"x":{"status":1,"status":2},"refundTransaction":{"amount":{"currency":"a","CURRENCY":"b"}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		compareKeys(t, data)
	})
}

// requestSchema is a request body's keys as a caller of CheckKeys gives
// them.
var requestSchema = &KeySchema{
	Keys: []string{"merchantOrderId", "invoice", "items"},
	Objects: map[string]*KeySchema{
		"invoice": {Keys: []string{"amount", "currency"}},
		"items":   {Keys: []string{"sku"}},
	},
}

func TestCheckKeys(t *testing.T) {
	tests := []struct {
		name, body string
		refused    bool
		// field is the key refused.
		field string
	}{
		{"plain", `{"merchantOrderId":"m","invoice":{"amount":"1","currency":"brl"},"other":{"a":[1,{"b":2}]}}`, false, ""},
		{"same key in different objects", `{"merchantOrderId":"m","x":{"merchantOrderId":"n"},"y":[{"a":1},{"a":2}]}`, false, ""},
		{"not an object", `[1,2]`, false, ""},
		{"twice", `{"merchantOrderId":"a","merchantOrderId":"b"}`, true, "merchantOrderId"},
		{"twice, once escaped", `{"merchantOrderId":"a","\u006derchantOrderId":"b"}`, true, "merchantOrderId"},
		{"in another case", `{"merchantOrderId":"a","MerchantOrderID":"b"}`, true, "MerchantOrderID"},
		{"only in another case", `{"MERCHANTORDERID":"a"}`, true, "MERCHANTORDERID"},
		{"long s", `{"invoice":{"amount":"1","currency":"brl"},"\u017Fku":1,"sku":2}`, true, "sku"},
		{"Kelvin sign", `{"\u212Aey":1,"key":2}`, true, "key"},
		{"nested twice", `{"invoice":{"amount":"1","currency":"brl","amount":"9"}}`, true, "invoice.amount"},
		{"nested in another case", `{"invoice":{"Amount":"1","currency":"brl"}}`, true, "invoice.Amount"},
		{"unknown key twice", `{"merchantOrderId":"m","destination":{"pix":"a","pix":"b"}}`, true, "destination.pix"},
		{"unknown keys in another case", `{"note":1,"NOTE":2}`, true, "NOTE"},
		{"array of objects", `{"items":[{"sku":"a"},{"sku":"a","SKU":"b"}]}`, true, "items[1].SKU"},
		{"array in an array", `{"x":[[{"a":1}],[{"a":1,"a":2}]]}`, true, "x[1][0].a"},
		{"top-level array", `[{"a":1},{"a":1,"a":2}]`, true, "[1].a"},
		{"empty key twice", `{"":1,"":2}`, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckKeys([]byte(tt.body), requestSchema)
			var ke *KeyError
			switch {
			case !tt.refused && err != nil:
				t.Fatalf("CheckKeys(%s) = %v, want nil", tt.body, err)
			case !tt.refused:
			case !errors.As(err, &ke):
				t.Fatalf("CheckKeys(%s) = %v, want a *KeyError", tt.body, err)
			case ke.Field != tt.field:
				t.Errorf("CheckKeys(%s) refuses %q (%v), want %q", tt.body, ke.Field, err, tt.field)
			}
			compareRequestKeys(t, []byte(tt.body))
		})
	}
}

// referenceRequestKeys is CheckKeys written plainly with encoding/json's
// tokenizer: whether data (well-formed JSON) passes.
func referenceRequestKeys(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return false
	}
	return referenceRequestValue(dec, tok, requestSchema) == nil
}

func referenceRequestValue(dec *json.Decoder, tok json.Token, s *KeySchema) error {
	d, isDelim := tok.(json.Delim)
	if !isDelim {
		return nil
	}
	if s == nil {
		s = &KeySchema{}
	}
	var keys []string
	for dec.More() {
		var sub *KeySchema
		if d == '{' {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			key := kt.(string)
			for _, k := range slices.Concat(keys, s.Keys) {
				if strings.EqualFold(key, k) && (key != k || slices.Contains(keys, key)) {
					return errReferenceKeys
				}
			}
			keys = append(keys, key)
			if slices.Contains(s.Keys, key) {
				sub = s.Objects[key]
			}
		} else {
			sub = s // the elements of an array have the array's schema
		}
		vt, err := dec.Token()
		if err != nil {
			return err
		}
		if err := referenceRequestValue(dec, vt, sub); err != nil {
			return err
		}
	}
	_, err := dec.Token() // the closing delimiter
	return err
}

// compareRequestKeys fails t when CheckKeys and its plain version disagree
// on data.
func compareRequestKeys(t *testing.T, data []byte) {
	t.Helper()
	if !json.Valid(data) {
		return
	}
	got := CheckKeys(data, requestSchema)
	if want := referenceRequestKeys(data); (got == nil) != want {
		t.Fatalf("CheckKeys(%q) = %v; the tokenizer's reading says ok=%v", data, got, want)
	}
}

// FuzzCheckKeys compares the request key check with its plain version;
// explore with `go test -run '^$' -fuzz FuzzCheckKeys ./provider/`.
func FuzzCheckKeys(f *testing.F) {
	f.Add([]byte(`{"merchantOrderId":"m","invoice":{"amount":"1","currency":"brl"},"items":[{"sku":"a"}]}`))
	f.Add([]byte(`{"invoice":{"amount":"1","AMOUNT":"2"},"x":[[{"a":1,"a":2}]],"\u212Aey":1,"key":2}`))
	f.Add([]byte(`[{"":1},{"\u017F":1,"S":2}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		compareRequestKeys(t, data)
	})
}
