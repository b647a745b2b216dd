package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"regexp"
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
