package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"orderd/provider"
)

// The binary form of an observation (observeCmd, the command of every
// webhook), in order:
//
//	source      string
//	observedAt  0, or 1 then Unix seconds (varint) and nanoseconds (uvarint)
//	raw         bytes
//	delivery    0, or 1 then the remote address (string) and, for each of
//	            keptHeaders in order, its number of values (uvarint) and
//	            the values (strings)
//	order       0, or 1 then the order's JSON (bytes)
//
// Strings and bytes are length-prefixed (uvarint). The body goes as it
// came (JSON wrote it in base64), and of the delivery's headers only those
// the store keeps (selectHeaders reads no others). The order stays JSON,
// written by the same provider.Order method as in version 2 entries and
// read by provider.UnmarshalOrder, which gives what json.Unmarshal gives,
// so that it decodes to the same order.

func (c *observeCmd) appendBinary(b []byte) ([]byte, error) {
	b = appendObservation(b, c.Obs)
	if c.Obs.Order == nil {
		return append(b, 0), nil
	}
	order, err := json.Marshal(c.Obs.Order)
	if err != nil {
		return nil, err
	}
	b = append(b, 1)
	return appendField(b, order), nil
}

func (c *observeCmd) decodeBinary(b []byte) error {
	r := fieldReader{b: b}
	obs, err := readObservation(&r)
	if err != nil {
		return err
	}
	if r.flag() {
		order := r.field()
		if r.err == nil {
			if obs.Order, err = provider.UnmarshalOrder(order); err != nil {
				return fmt.Errorf("order: %w", err)
			}
		}
	}
	if err := r.end(); err != nil {
		return err
	}
	c.Obs = obs
	return nil
}

// The binary form of observe.3 (observeBodyCmd) is observeCmd's without
// its last part: source, observedAt, raw and delivery. The order is what
// provider.DecodeOrder reads from raw; a body it refuses is an entry no
// instance applies.

func (c *observeBodyCmd) appendBinary(b []byte) ([]byte, error) {
	return appendObservation(b, c.Obs), nil
}

func (c *observeBodyCmd) decodeBinary(b []byte) error {
	r := fieldReader{b: b}
	obs, err := readObservation(&r)
	if err != nil {
		return err
	}
	if err := r.end(); err != nil {
		return err
	}
	if obs.Order, err = provider.DecodeOrder(obs.Raw); err != nil {
		return fmt.Errorf("order from the body: %w", err)
	}
	c.Obs = obs
	return nil
}

// appendObservation appends obs's source, time, body and delivery.
func appendObservation(b []byte, obs Observation) []byte {
	b = appendField(b, []byte(obs.Source))
	if obs.ObservedAt.IsZero() {
		b = append(b, 0)
	} else {
		b = append(b, 1)
		b = binary.AppendVarint(b, obs.ObservedAt.Unix())
		b = binary.AppendUvarint(b, uint64(obs.ObservedAt.Nanosecond()))
	}
	b = appendField(b, obs.Raw)
	if d := obs.Delivery; d == nil {
		b = append(b, 0)
	} else {
		b = append(b, 1)
		b = appendField(b, []byte(d.RemoteAddr))
		for _, k := range keptHeaders {
			vs := d.Header.Values(k)
			b = binary.AppendUvarint(b, uint64(len(vs)))
			for _, v := range vs {
				b = appendField(b, []byte(v))
			}
		}
	}
	return b
}

// readObservation reads what appendObservation wrote.
func readObservation(r *fieldReader) (Observation, error) {
	obs := Observation{Source: Source(r.field())}
	if r.flag() {
		sec, nsec := r.varint(), r.uvarint()
		if nsec >= uint64(time.Second) {
			return Observation{}, errors.New("observedAt: nanoseconds out of range")
		}
		obs.ObservedAt = time.Unix(sec, int64(nsec)).UTC()
	}
	if raw := r.field(); len(raw) > 0 {
		// A copy: events keep the body, and should not keep the whole
		// entry it came in.
		obs.Raw = bytes.Clone(raw)
	}
	if r.flag() {
		d := &Delivery{RemoteAddr: string(r.field())}
		for _, k := range keptHeaders {
			n := r.uvarint()
			if n > uint64(len(r.b)) {
				return Observation{}, errors.New("truncated")
			}
			for range n {
				if d.Header == nil {
					d.Header = http.Header{}
				}
				d.Header[k] = append(d.Header[k], string(r.field()))
			}
		}
		obs.Delivery = d
	}
	return obs, nil
}

func appendField(b, f []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(f)))
	return append(b, f...)
}

// fieldReader reads what appendField and the varint appenders wrote; the
// first short read sets err, after which every read gives zero values.
type fieldReader struct {
	b   []byte
	err error
}

func (r *fieldReader) fail() {
	if r.err == nil {
		r.err = errors.New("truncated")
	}
	r.b = nil
}

func (r *fieldReader) uvarint() uint64 {
	v, k := binary.Uvarint(r.b)
	if k <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[k:]
	return v
}

func (r *fieldReader) varint() int64 {
	v, k := binary.Varint(r.b)
	if k <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[k:]
	return v
}

func (r *fieldReader) flag() bool {
	if len(r.b) == 0 {
		r.fail()
		return false
	}
	f := r.b[0]
	r.b = r.b[1:]
	if f > 1 {
		r.err = fmt.Errorf("flag %d", f)
		r.b = nil
		return false
	}
	return f == 1
}

// field returns the next length-prefixed field, aliasing r's bytes.
func (r *fieldReader) field() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.fail()
		return nil
	}
	f := r.b[:n:n]
	r.b = r.b[n:]
	return f
}

// end is the error of a read that should have taken all of r's bytes:
// the first short read's, or the bytes left over.
func (r *fieldReader) end() error {
	if r.err != nil {
		return r.err
	}
	if len(r.b) > 0 {
		return fmt.Errorf("%d bytes after the observation", len(r.b))
	}
	return nil
}
