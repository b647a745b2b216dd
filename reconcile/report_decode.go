package reconcile

import (
	"encoding/binary"
	"errors"
	"unicode/utf8"

	"orderd/provider"
)

// amountsDecoder reads the part of a stored order state that a report
// needs (see orderAmounts) in one pass over its bytes: no reflection, no
// token objects, nothing kept of the fields it skips (counterparty and
// payment details). Over a month of orders this is most of what a report
// costs beyond reading the rows. It checks the JSON's syntax as
// encoding/json does, and whatever it does not read in the provider's
// usual shape (a string with escapes or other than UTF-8 where an amount,
// a currency, a type, a status or a time is; a money object with other
// members; a name it reads given twice; nesting deeper than maxDepth) it
// leaves to the general decode, which decides: TestAmountsDecoder_* hold
// the two to each other.
type amountsDecoder struct {
	b []byte
	i int
	// words holds the types, statuses and currencies read so far, so
	// that each is one string however many orders state it.
	words map[string]string
}

// maxWords bounds words: a provider states a handful of each.
const maxWords = 256

// errShape: the state is in a shape this reader leaves to the general
// decode (including any it cannot read as JSON).
var errShape = errors.New("not in the usual shape")

// maxDepth bounds the nesting the reader follows; a deeper state is left
// to the general decode.
const maxDepth = 1000

// decode fills a from raw, which the caller has zeroed.
func (d *amountsDecoder) decode(raw []byte, a *orderAmounts) error {
	d.b, d.i = raw, 0
	err := d.object(func(name []byte, seen seen) (seen, error) {
		switch string(name) {
		case "merchantSourceWallet":
			return d.moneyOnce(seen, 0, &a.MerchantSourceWallet)
		case "merchantTargetWallet":
			return d.moneyOnce(seen, 1, &a.MerchantTargetWallet)
		case "transactions":
			seen, err := seen.once(2)
			if err != nil {
				return seen, err
			}
			return seen, d.transactions(a)
		}
		return seen, d.skip(1)
	})
	if err != nil {
		return err
	}
	d.ws()
	if d.i != len(d.b) {
		return errShape
	}
	return nil
}

// seen marks the names of one object that the reader has read, by bit.
type seen uint8

// once marks bit i, or refuses a name read twice: encoding/json keeps the
// last (and merges objects), the general decode decides. (A value, not a
// pointer: it stays on the stack through the member callbacks.)
func (s seen) once(i uint) (seen, error) {
	if s&(1<<i) != 0 {
		return s, errShape
	}
	return s | 1<<i, nil
}

// object reads an object, calling member for each name with the reader
// at the member's value, which member reads, and the names read so far.
func (d *amountsDecoder) object(member func(name []byte, seen seen) (seen, error)) error {
	d.ws()
	if !d.eat('{') {
		return errShape
	}
	var s seen
	d.ws()
	if d.eat('}') {
		return nil
	}
	for {
		d.ws()
		name, plain, err := d.str()
		if err != nil {
			return err
		}
		if !plain {
			// An escaped name may spell one that is read.
			return errShape
		}
		d.ws()
		if !d.eat(':') {
			return errShape
		}
		d.ws()
		if s, err = member(name, s); err != nil {
			return err
		}
		d.ws()
		if d.eat('}') {
			return nil
		}
		if !d.eat(',') {
			return errShape
		}
	}
}

func (d *amountsDecoder) transactions(a *orderAmounts) error {
	if d.null() {
		return nil
	}
	if !d.eat('[') {
		return errShape
	}
	d.ws()
	if d.eat(']') {
		return nil
	}
	for {
		d.ws()
		a.Transactions = append(a.Transactions, txAmounts{})
		if err := d.transaction(&a.Transactions[len(a.Transactions)-1]); err != nil {
			return err
		}
		d.ws()
		if d.eat(']') {
			return nil
		}
		if !d.eat(',') {
			return errShape
		}
	}
}

func (d *amountsDecoder) transaction(t *txAmounts) error {
	return d.object(func(name []byte, seen seen) (seen, error) {
		var err error
		switch string(name) {
		case "type":
			if seen, err = seen.once(0); err == nil {
				t.Type, err = d.word()
			}
			return seen, err
		case "status":
			var s string
			if seen, err = seen.once(1); err == nil {
				s, err = d.word()
				t.Status = provider.Status(s)
			}
			return seen, err
		case "authorized":
			return d.moneyOnce(seen, 2, &t.Authorized)
		case "merchantWallet":
			return d.moneyOnce(seen, 3, &t.MerchantWallet)
		case "amount":
			return d.moneyOnce(seen, 4, &t.Amount)
		case "completedAt":
			var s string
			if seen, err = seen.once(5); err != nil {
				return seen, err
			}
			if s, err = d.text(); err != nil || s == "" {
				return seen, err
			}
			pt, err := provider.ParseTime(s)
			t.CompletedAt = pt.Time
			return seen, err
		}
		return seen, d.skip(2)
	})
}

// text reads a string without escapes in valid UTF-8 (or null, as ""), as
// the provider writes types, statuses, amounts, currencies and times.
func (d *amountsDecoder) text() (string, error) {
	v, err := d.textBytes()
	return string(v), err
}

// word is text for a type, a status or a currency: one of few values.
func (d *amountsDecoder) word() (string, error) {
	v, err := d.textBytes()
	if err != nil || len(v) == 0 {
		return "", err
	}
	if w, ok := d.words[string(v)]; ok {
		return w, nil
	}
	w := string(v)
	if d.words == nil {
		d.words = map[string]string{}
	}
	if len(d.words) < maxWords {
		d.words[w] = w
	}
	return w, nil
}

func (d *amountsDecoder) textBytes() ([]byte, error) {
	if d.null() {
		return nil, nil
	}
	v, plain, err := d.str()
	if err != nil {
		return nil, err
	}
	if !plain || !utf8.Valid(v) {
		return nil, errShape
	}
	return v, nil
}

// moneyOnce reads the money of name bit i of an object into m.
func (d *amountsDecoder) moneyOnce(seen seen, i uint, m **provider.Money) (seen, error) {
	seen, err := seen.once(i)
	if err != nil {
		return seen, err
	}
	*m, err = d.money()
	return seen, err
}

// money reads {"amount":"…","currency":"…"} in either order, or null.
func (d *amountsDecoder) money() (*provider.Money, error) {
	if d.null() {
		return nil, nil
	}
	var amount, currency string
	err := d.object(func(name []byte, seen seen) (seen, error) {
		var err error
		switch string(name) {
		case "amount":
			if seen, err = seen.once(0); err == nil {
				amount, err = d.text()
			}
		case "currency":
			if seen, err = seen.once(1); err == nil {
				currency, err = d.word()
			}
		default:
			err = errShape
		}
		return seen, err
	})
	if err != nil {
		return nil, err
	}
	m, err := provider.NewMoney(amount, currency)
	if err != nil {
		return nil, err
	}
	return &m, nil
}

// ws skips whitespace as JSON defines it.
func (d *amountsDecoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// eat consumes c if it is next.
func (d *amountsDecoder) eat(c byte) bool {
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// null consumes a null if it is next.
func (d *amountsDecoder) null() bool {
	if len(d.b)-d.i >= 4 && string(d.b[d.i:d.i+4]) == "null" {
		d.i += 4
		return true
	}
	return false
}

// str reads a string and returns what is between its quotes; plain says
// it has no escapes. Escapes and control characters are checked as JSON
// defines them; the bytes are not checked for UTF-8 (encoding/json
// accepts any, and text checks what it reads).
func (d *amountsDecoder) str() (v []byte, plain bool, err error) {
	if !d.eat('"') {
		return nil, false, errShape
	}
	start := d.i
	plain = true
	for d.i < len(d.b) {
		// Most of a string's bytes stand for themselves: eight at a time
		// while none of them is special, then one at a time by table.
		for d.i+8 <= len(d.b) && !strSpecial8(binary.LittleEndian.Uint64(d.b[d.i:])) {
			d.i += 8
		}
		for d.i < len(d.b) && strPlain[d.b[d.i]] {
			d.i++
		}
		if d.i == len(d.b) {
			break
		}
		c := d.b[d.i]
		switch {
		case c == '"':
			v = d.b[start:d.i]
			d.i++
			return v, plain, nil
		case c < 0x20:
			return nil, false, errShape
		case c == '\\':
			plain = false
			if d.i+1 >= len(d.b) {
				return nil, false, errShape
			}
			switch d.b[d.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				d.i += 2
			case 'u':
				if d.i+6 > len(d.b) {
					return nil, false, errShape
				}
				for _, h := range d.b[d.i+2 : d.i+6] {
					if !isHex(h) {
						return nil, false, errShape
					}
				}
				d.i += 6
			default:
				return nil, false, errShape
			}
		default:
			d.i++
		}
	}
	return nil, false, errShape
}

// strPlain marks the bytes that stand for themselves inside a string:
// not a quote, a backslash or a control character.
var strPlain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// strSpecial8 says whether any of the eight bytes in x is a quote, a
// backslash or a control character (below 0x20): the exact tests for "a
// byte equal to zero" and "a byte less than n" on a word at once, applied
// to x^'"', x^'\\' and x.
func strSpecial8(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q, b := x^(ones*'"'), x^(ones*'\\')
	return ((x-ones*0x20)&^x|(q-ones)&^q|(b-ones)&^b)&highs != 0
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

// skip reads any value at nesting depth and discards it.
func (d *amountsDecoder) skip(depth int) error {
	if depth > maxDepth || d.i >= len(d.b) {
		return errShape
	}
	switch c := d.b[d.i]; {
	case c == '"':
		_, _, err := d.str()
		return err
	case c == '{':
		return d.object(func(_ []byte, s seen) (seen, error) { return s, d.skip(depth + 1) })
	case c == '[':
		d.i++
		d.ws()
		if d.eat(']') {
			return nil
		}
		for {
			d.ws()
			if err := d.skip(depth + 1); err != nil {
				return err
			}
			d.ws()
			if d.eat(']') {
				return nil
			}
			if !d.eat(',') {
				return errShape
			}
		}
	case c == 't':
		return d.literal("true")
	case c == 'f':
		return d.literal("false")
	case c == 'n':
		return d.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		return d.number()
	}
	return errShape
}

func (d *amountsDecoder) literal(s string) error {
	if len(d.b)-d.i >= len(s) && string(d.b[d.i:d.i+len(s)]) == s {
		d.i += len(s)
		return nil
	}
	return errShape
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *amountsDecoder) number() error {
	d.eat('-')
	switch {
	case d.eat('0'):
	case d.i < len(d.b) && '1' <= d.b[d.i] && d.b[d.i] <= '9':
		d.digits()
	default:
		return errShape
	}
	if d.eat('.') && !d.digits() {
		return errShape
	}
	if d.eat('e') || d.eat('E') {
		if !d.eat('+') {
			d.eat('-')
		}
		if !d.digits() {
			return errShape
		}
	}
	return nil
}

// digits reads one or more digits; false if there was none.
func (d *amountsDecoder) digits() bool {
	start := d.i
	for d.i < len(d.b) && '0' <= d.b[d.i] && d.b[d.i] <= '9' {
		d.i++
	}
	return d.i > start
}
