package provider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// objectKeys describes the keys of one kind of JSON object orderd reads:
// the exact spelling of each, and which values are objects (or arrays of
// objects) whose keys are checked too.
type objectKeys struct {
	keys []string // at most 64
	// objects maps a key to the keys of the object it holds; arrays maps a
	// key to the keys of each object in the array it holds.
	objects map[string]*objectKeys
	arrays  map[string]*objectKeys
	// money marks a Money object, whose values are checked too (see
	// checkMoneyValue), and whose currency is required.
	money bool
}

var (
	moneyKeys = &objectKeys{keys: []string{"amount", "currency"}, money: true}
	authKeys  = &objectKeys{keys: []string{"type", "redirectUrl", "code", "expiresAt"}}
	refundKey = &objectKeys{
		keys:    []string{"id", "status", "type", "amount", "createdAt"},
		objects: map[string]*objectKeys{"amount": moneyKeys},
	}
	transactionKeys = &objectKeys{
		keys:    transactionKnown,
		objects: map[string]*objectKeys{"authorized": moneyKeys, "merchantWallet": moneyKeys, "amount": moneyKeys},
	}
	orderKeys = &objectKeys{
		keys: orderKnown,
		objects: map[string]*objectKeys{
			"merchantSourceWallet": moneyKeys, "merchantTargetWallet": moneyKeys,
			"auth": authKeys, "refundTransaction": refundKey,
		},
		arrays: map[string]*objectKeys{"transactions": transactionKeys},
	}
)

// checkOrderKeys refuses an order in which a field orderd reads is named
// twice, or in another case, or whose money is not in the spec's form (see
// checkMoneyValue). encoding/json matches keys case-insensitively
// (by Unicode folding, so "ſtatus" is "status") and keeps the last of two,
// while the raw body — what events carry and what a case-sensitive consumer
// reads — may say the other value: {"status":"rejected","Status":"completed"}
// would be stored as completed and read elsewhere as rejected. With this
// check passed, every field orderd decodes was read by its exact key, once.
// data must be well-formed JSON (it has just been decoded).
func checkOrderKeys(data []byte) error {
	i := skipJSONSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil // not an object: nothing is read by key
	}
	if _, err := checkObjectKeys(data, i, orderKeys, false); err != nil {
		return err
	}
	return nil
}

// KeySchema describes the keys of a JSON request body for CheckKeys: the
// exact spelling of each key the caller reads, and for a key holding an
// object (or an array of objects) the keys of that object.
type KeySchema struct {
	Keys    []string
	Objects map[string]*KeySchema
}

// objectKeys is s as the key check takes it.
func (s *KeySchema) objectKeys() *objectKeys {
	if s == nil {
		return noKeys
	}
	k := &objectKeys{keys: s.Keys}
	for name, sub := range s.Objects {
		if k.objects == nil {
			k.objects, k.arrays = map[string]*objectKeys{}, map[string]*objectKeys{}
		}
		sk := sub.objectKeys()
		k.objects[name], k.arrays[name] = sk, sk
	}
	return k
}

// noKeys describes an object none of whose keys is read.
var noKeys = &objectKeys{}

// KeyError is a key CheckKeys refuses.
type KeyError struct {
	// Field is the path of the key as the body spells it: keys joined by
	// dots, array elements as [n] ("invoice.amount", "items[1].A"). For a
	// malformed object it is the path of the object.
	Field string
	msg   string
}

func (e *KeyError) Error() string { return e.msg }

// CheckKeys checks a request body with the check DecodeOrder makes of an
// order, extended to every key: in each object at any depth, no key may
// appear more than once or be another key of the object in another case,
// and a key schema describes must be spelled exactly. encoding/json matches
// keys case-insensitively and keeps the last of two, so without this a
// body decoded as {"amount":"0.40"} could say "amount":"0.01" first, and a
// passed-through body could carry both spellings to the provider. data
// must be well-formed JSON (json.Valid, which also bounds its depth). The
// error is a *KeyError.
func CheckKeys(data []byte, schema *KeySchema) error {
	i := skipJSONSpace(data, 0)
	var err *keyError
	switch {
	case i >= len(data):
		return nil
	case data[i] == '{':
		_, err = checkObjectKeys(data, i, schema.objectKeys(), true)
	case data[i] == '[':
		_, err = checkArrayKeys(data, i, noKeys, true)
	}
	if err == nil {
		return nil
	}
	msg := err.msg
	if len(err.path) > 0 {
		msg = err.where() + ": " + msg
	}
	field := err.where()
	if err.key != "" {
		field = joinPath(field, err.key)
	}
	return &KeyError{Field: field, msg: msg}
}

// checkObjectKeys checks the object starting at data[i] against k and
// returns the index just past it. In strict mode (CheckKeys) every key of
// the object is checked, not only k's: none may appear twice or be another
// in another case; and the objects and arrays under keys k does not
// describe are checked the same way.
func checkObjectKeys(data []byte, i int, k *objectKeys, strict bool) (int, *keyError) {
	var seen uint64
	// folded maps each key's fold class to the key as first written, in
	// strict mode.
	var folded map[string]string
	i++ // '{'
	for {
		i = skipJSONSpace(data, i)
		if i >= len(data) {
			return -1, newKeyError("unexpected end")
		}
		switch data[i] {
		case '}':
			if k.money && seen&(1<<1) == 0 {
				return -1, newKeyError("currency is missing")
			}
			return i + 1, nil
		case ',':
			i++
			continue
		case '"':
		default:
			return -1, newKeyError("malformed object")
		}
		end := skipJSONString(data, i)
		if end < 0 {
			return -1, newKeyError("unexpected end")
		}
		key := data[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			// An escaped key is the key it spells: "\u0073tatus" is status.
			var s string
			if err := json.Unmarshal(data[i:end], &s); err != nil {
				return -1, newKeyError("key %s: %v", data[i:end], err)
			}
			key = []byte(s)
		}
		i = skipJSONSpace(data, end)
		if i >= len(data) || data[i] != ':' {
			return -1, newKeyError("malformed object")
		}
		i = skipJSONSpace(data, i+1)
		exact := -1
		for n, kn := range k.keys {
			if string(key) == kn {
				exact = n
				break
			}
			if foldEqual(key, kn) {
				return -1, newKeyError("key %q is %q in another case; the field is read by its exact key", key, kn).at(key)
			}
		}
		if exact >= 0 {
			if seen&(1<<exact) != 0 {
				return -1, newKeyError("key %q appears more than once", key).at(key)
			}
			seen |= 1 << exact
		}
		if strict {
			if folded == nil {
				folded = map[string]string{}
			}
			class := foldClass(key)
			switch prev, ok := folded[class]; {
			case ok && prev == string(key):
				return -1, newKeyError("key %q appears more than once", key).at(key)
			case ok:
				return -1, newKeyError("key %q is %q in another case", key, prev).at(key)
			}
			folded[class] = string(key)
		}
		var err *keyError
		switch {
		case exact >= 0 && k.money:
			i, err = checkMoneyValue(data, i, k.keys[exact])
		case exact >= 0 && i < len(data) && data[i] == '{' && k.objects[k.keys[exact]] != nil:
			i, err = checkObjectKeys(data, i, k.objects[k.keys[exact]], strict)
		case exact >= 0 && i < len(data) && data[i] == '[' && k.arrays[k.keys[exact]] != nil:
			i, err = checkArrayKeys(data, i, k.arrays[k.keys[exact]], strict)
		case strict && i < len(data) && data[i] == '{':
			i, err = checkObjectKeys(data, i, noKeys, strict)
		case strict && i < len(data) && data[i] == '[':
			i, err = checkArrayKeys(data, i, noKeys, strict)
		default:
			i = skipJSONValue(data, i)
		}
		if err != nil {
			return -1, err.in(string(key))
		}
		if i < 0 {
			return -1, newKeyError("unexpected end")
		}
	}
}

// checkMoneyValue checks the value of a Money object's key (amount or
// currency) starting at data[i] and returns the index just past it. The
// spec writes amounts as numeric strings and shows none with a sign: which
// way money moves is told by the field (source or target wallet) and the
// transaction's type, so "-5.00", "+100" and "-0" are refused rather than
// guessed at. A currency is a lowercase three-letter ISO code.
func checkMoneyValue(data []byte, i int, key string) (int, *keyError) {
	if i >= len(data) || data[i] != '"' {
		end := skipJSONValue(data, i)
		if end < 0 {
			return -1, newKeyError("unexpected end")
		}
		if key == "amount" {
			return -1, newKeyError("must be a numeric string, got %s", truncate(data[i:end]))
		}
		return -1, newKeyError("must be a string, got %s", truncate(data[i:end]))
	}
	end := skipJSONString(data, i)
	if end < 0 {
		return -1, newKeyError("unexpected end")
	}
	v := data[i+1 : end-1]
	if bytes.IndexByte(v, '\\') >= 0 {
		var s string
		if err := json.Unmarshal(data[i:end], &s); err != nil {
			return -1, newKeyError("%s: %v", data[i:end], err)
		}
		v = []byte(s)
	}
	switch key {
	case "amount":
		if len(v) > 0 && (v[0] == '-' || v[0] == '+') {
			return -1, newKeyError("%q has a sign; amounts are unsigned numeric strings", v)
		}
	case "currency":
		if len(v) != 3 || !isLowerASCII(v) {
			return -1, newKeyError("%q is not a lowercase three-letter ISO code", v)
		}
	}
	return end, nil
}

func isLowerASCII(b []byte) bool {
	for _, c := range b {
		if c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

// checkArrayKeys checks each object of the array starting at data[i]
// against k and returns the index just past the array. In strict mode the
// objects in nested arrays are checked too.
func checkArrayKeys(data []byte, i int, k *objectKeys, strict bool) (int, *keyError) {
	i++ // '['
	for n := 0; ; {
		i = skipJSONSpace(data, i)
		if i >= len(data) {
			return -1, newKeyError("unexpected end")
		}
		switch data[i] {
		case ']':
			return i + 1, nil
		case ',':
			i++
			n++
			continue
		case '{':
			var err *keyError
			if i, err = checkObjectKeys(data, i, k, strict); err != nil {
				return -1, err.in("[" + strconv.Itoa(n) + "]")
			}
		case '[':
			if !strict {
				i = skipJSONValue(data, i)
				continue
			}
			var err *keyError
			if i, err = checkArrayKeys(data, i, noKeys, strict); err != nil {
				return -1, err.in("[" + strconv.Itoa(n) + "]")
			}
		default:
			if i = skipJSONValue(data, i); i < 0 {
				return -1, newKeyError("unexpected end")
			}
		}
	}
}

// foldEqual is strings.EqualFold(string(key), known) without copying key.
// A key of ASCII letters only folds to a known key of its own length.
func foldEqual(key []byte, known string) bool {
	ascii := true
	for _, c := range key {
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii && len(key) != len(known) {
		return false
	}
	return bytes.EqualFold(key, []byte(known))
}

// foldClass returns one string for all keys equal under Unicode case
// folding (what strings.EqualFold and encoding/json's name matching take
// as equal) and different strings for others: each rune becomes the
// smallest rune it folds to, so "K", "k" and the Kelvin sign are all "K".
func foldClass(key []byte) string {
	b := make([]byte, 0, len(key))
	for i := 0; i < len(key); {
		r, n := utf8.DecodeRune(key[i:])
		i += n
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		b = utf8.AppendRune(b, least)
	}
	return string(b)
}

// keyError is what checkOrderKeys refuses, and where: the keys and array
// indexes leading to the object, innermost first, added as the error
// travels out, and the key refused when there is one.
type keyError struct {
	msg  string
	path []string
	key  string
}

func newKeyError(format string, args ...any) *keyError {
	return &keyError{msg: fmt.Sprintf(format, args...)}
}

// in places the error inside key (or an index "[n]") of the enclosing value.
func (e *keyError) in(key string) *keyError {
	e.path = append(e.path, key)
	return e
}

// at names the key refused.
func (e *keyError) at(key []byte) *keyError {
	e.key = string(key)
	return e
}

func (e *keyError) Error() string {
	if len(e.path) == 0 {
		return "the order: " + e.msg
	}
	return e.where() + ": " + e.msg
}

// where is the path of the object the error is in, outermost first.
func (e *keyError) where() string {
	var p string
	for i := len(e.path) - 1; i >= 0; i-- {
		p = joinPath(p, e.path[i])
	}
	return p
}

// joinPath appends a key, or an array index "[n]", to a path.
func joinPath(path, key string) string {
	if path == "" || strings.HasPrefix(key, "[") {
		return path + key
	}
	return path + "." + key
}

func skipJSONSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// skipJSONValue returns the index just past the well-formed JSON value that
// starts at data[i], or -1 when data ends first.
func skipJSONValue(data []byte, i int) int {
	if i >= len(data) {
		return -1
	}
	switch data[i] {
	case '"':
		return skipJSONString(data, i)
	case '{', '[':
		depth := 0
		for i < len(data) {
			switch data[i] {
			case '"':
				if i = skipJSONString(data, i); i < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	default: // number, true, false, null
		for i < len(data) {
			switch data[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
}

// skipJSONString returns the index just past the string whose opening quote
// is data[i], or -1 when data ends first.
func skipJSONString(data []byte, i int) int {
	for j := i + 1; j < len(data); {
		k := bytes.IndexByte(data[j:], '"')
		if k < 0 {
			return -1
		}
		j += k
		// The quote closes the string unless an odd number of
		// backslashes escapes it.
		n := 0
		for b := j - 1; b > i && data[b] == '\\'; b-- {
			n++
		}
		if n%2 == 0 {
			return j + 1
		}
		j++
	}
	return -1
}
