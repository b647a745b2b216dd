package reconcile

import (
	"bytes"
	"errors"

	"github.com/go-json-experiment/json/jsontext"

	"orderd/provider"
)

// amountsDecoder reads the part of a stored order state that a report
// needs (see orderAmounts) by walking the JSON's tokens: no reflection,
// nothing kept of the fields it skips (counterparty and payment details),
// one decoder reused for every order. Over a month of orders this is most
// of what a report costs beyond reading the rows. Whatever it does not
// read in the provider's usual shape it leaves to the general decode.
type amountsDecoder struct {
	r   bytes.Reader
	dec *jsontext.Decoder
	buf []byte
}

// errShape: the state is valid JSON in a shape this reader leaves to the
// general decode (a money object with other members, a string with
// escapes where an amount or time is).
var errShape = errors.New("not in the usual shape")

// decode fills a from raw, which the caller has zeroed.
func (d *amountsDecoder) decode(raw []byte, a *orderAmounts) error {
	d.r.Reset(raw)
	// The decoder does not track every name for repeats (a fifth of this
	// reader's time): the write path refused any state with a name twice,
	// and the names this reader reads it checks itself (seen), leaving a
	// state with one of them twice to the general decode.
	if d.dec == nil {
		d.dec = jsontext.NewDecoder(&d.r, jsontext.AllowDuplicateNames(true))
	} else {
		d.dec.Reset(&d.r, jsontext.AllowDuplicateNames(true))
	}
	dec := d.dec
	if err := d.open('{'); err != nil {
		return err
	}
	var seen seen
	for dec.PeekKind() != '}' {
		name, err := dec.ReadValue()
		if err != nil {
			return err
		}
		switch string(name) {
		case `"merchantSourceWallet"`:
			if err = seen.once(0); err == nil {
				a.MerchantSourceWallet, err = d.money()
			}
		case `"merchantTargetWallet"`:
			if err = seen.once(1); err == nil {
				a.MerchantTargetWallet, err = d.money()
			}
		case `"transactions"`:
			if err = seen.once(2); err == nil {
				err = d.transactions(a)
			}
		default:
			err = dec.SkipValue()
		}
		if err != nil {
			return err
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	return nil
}

// seen marks the names of one object that a reader has read, by bit.
type seen uint8

// once marks bit i, or refuses a name read twice: the general decode
// decides what a repeated name means.
func (s *seen) once(i uint) error {
	if *s&(1<<i) != 0 {
		return errShape
	}
	*s |= 1 << i
	return nil
}

// open reads the start of an object or an array.
func (d *amountsDecoder) open(kind jsontext.Kind) error {
	if d.dec.PeekKind() != kind {
		return errShape
	}
	_, err := d.dec.ReadToken()
	return err
}

func (d *amountsDecoder) transactions(a *orderAmounts) error {
	if d.dec.PeekKind() == 'n' {
		return d.dec.SkipValue()
	}
	if err := d.open('['); err != nil {
		return err
	}
	for d.dec.PeekKind() != ']' {
		a.Transactions = append(a.Transactions, txAmounts{})
		if err := d.transaction(&a.Transactions[len(a.Transactions)-1]); err != nil {
			return err
		}
	}
	_, err := d.dec.ReadToken()
	return err
}

func (d *amountsDecoder) transaction(t *txAmounts) error {
	dec := d.dec
	if err := d.open('{'); err != nil {
		return err
	}
	var seen seen
	for dec.PeekKind() != '}' {
		name, err := dec.ReadValue()
		if err != nil {
			return err
		}
		switch string(name) {
		case `"type"`:
			var s string
			if err = seen.once(0); err == nil {
				s, err = d.text()
				t.Type = s
			}
		case `"status"`:
			var s string
			if err = seen.once(1); err == nil {
				s, err = d.text()
				t.Status = provider.Status(s)
			}
		case `"authorized"`:
			if err = seen.once(2); err == nil {
				t.Authorized, err = d.money()
			}
		case `"merchantWallet"`:
			if err = seen.once(3); err == nil {
				t.MerchantWallet, err = d.money()
			}
		case `"amount"`:
			if err = seen.once(4); err == nil {
				t.Amount, err = d.money()
			}
		case `"completedAt"`:
			if err = seen.once(5); err != nil {
				break
			}
			if dec.PeekKind() == 'n' {
				err = dec.SkipValue()
				break
			}
			var s string
			if s, err = d.text(); err == nil && s != "" {
				var pt provider.Time
				pt, err = provider.ParseTime(s)
				t.CompletedAt = pt.Time
			}
		default:
			err = dec.SkipValue()
		}
		if err != nil {
			return err
		}
	}
	_, err := dec.ReadToken()
	return err
}

// text reads a string without escapes (or null, as ""), as the provider
// writes types, statuses, amounts, currencies and times.
func (d *amountsDecoder) text() (string, error) {
	if d.dec.PeekKind() == 'n' {
		return "", d.dec.SkipValue()
	}
	if d.dec.PeekKind() != '"' {
		return "", errShape
	}
	v, err := d.dec.ReadValue()
	if err != nil {
		return "", err
	}
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') >= 0 {
		return "", errShape
	}
	return string(inner), nil
}

// money reads {"amount":"…","currency":"…"} in either order, or null.
func (d *amountsDecoder) money() (*provider.Money, error) {
	dec := d.dec
	if dec.PeekKind() == 'n' {
		return nil, dec.SkipValue()
	}
	if err := d.open('{'); err != nil {
		return nil, err
	}
	var (
		amount, currency string
		seen             seen
	)
	for dec.PeekKind() != '}' {
		name, err := dec.ReadValue()
		if err != nil {
			return nil, err
		}
		switch string(name) {
		case `"amount"`:
			if err = seen.once(0); err == nil {
				amount, err = d.text()
			}
		case `"currency"`:
			if err = seen.once(1); err == nil {
				currency, err = d.text()
			}
		default:
			return nil, errShape
		}
		if err != nil {
			return nil, err
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	m, err := provider.NewMoney(amount, currency)
	if err != nil {
		return nil, err
	}
	return &m, nil
}
