package store

import (
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
	"time"
)

// An observation goes into the log in its binary form and comes out as
// the same observation: the body byte for byte, the observed instant, the
// order, the remote address and every header the store keeps (and none it
// does not); absent parts stay absent.
func TestObserveCommand_binaryRoundTrip(t *testing.T) {
	full := webhookObs(t, processingBody("o-1", "m-1"))
	full.ObservedAt = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.FixedZone("X", 7200))
	full.Delivery.Header = http.Header{
		"Signature":       {"c2ln"},
		"X-Forwarded-For": {"10.0.0.1", "10.0.0.2"},
		"Cookie":          {"not kept"},
	}
	bare := webhookObs(t, processingBody("o-2", "m-2"))
	bare.Source, bare.Delivery, bare.ObservedAt = SourcePoll, nil, time.Time{}
	noOrder := Observation{Source: SourceGateway, Raw: []byte(`{}`)}
	for name, in := range map[string]Observation{"full": full, "bare": bare, "no order": noOrder} {
		b, err := EncodeOps([]Op{{At: time.Unix(1, 2), Cmd: &observeCmd{Obs: in}}})
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(`"Raw"`)) {
			t.Errorf("%s: the observation was written as JSON", name)
		}
		ops, err := DecodeOps(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := ops[0].Cmd.(*observeCmd).Obs
		switch {
		case !ops[0].At.Equal(time.Unix(1, 2)):
			t.Errorf("%s: op time %v", name, ops[0].At)
		case got.Source != in.Source:
			t.Errorf("%s: source %q, want %q", name, got.Source, in.Source)
		case !bytes.Equal(got.Raw, in.Raw):
			t.Errorf("%s: raw %q, want %q", name, got.Raw, in.Raw)
		case !got.ObservedAt.Equal(in.ObservedAt) || got.ObservedAt.IsZero() != in.ObservedAt.IsZero():
			t.Errorf("%s: observed at %v, want %v", name, got.ObservedAt, in.ObservedAt)
		case (got.Delivery == nil) != (in.Delivery == nil):
			t.Errorf("%s: delivery %+v, want %+v", name, got.Delivery, in.Delivery)
		case in.Delivery != nil && (got.Delivery.RemoteAddr != in.Delivery.RemoteAddr ||
			!bytes.Equal(selectHeaders(got.Delivery.Header), selectHeaders(in.Delivery.Header))):
			t.Errorf("%s: delivery %+v, want %+v", name, got.Delivery, in.Delivery)
		case in.Delivery != nil && got.Delivery.Header.Get("Cookie") != "":
			t.Errorf("%s: a header the store does not keep went into the log", name)
		case !reflect.DeepEqual(jsonOf(t, got.Order), jsonOf(t, in.Order)):
			t.Errorf("%s: order %s, want %s", name, jsonOf(t, got.Order), jsonOf(t, in.Order))
		}
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A binary command the decoder cannot read in full, a codec it does not
// know, or a binary form for a kind that has none, is refused: an
// instance never applies a guess.
func TestDecodeOps_refusesBadBinary(t *testing.T) {
	good, err := EncodeOps([]Op{{At: time.Now(), Cmd: &observeCmd{Obs: webhookObs(t, processingBody("o", "m"))}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeOps(good); err != nil {
		t.Fatal(err)
	}
	// Version, time, kind; then the codec byte.
	codecAt := bytes.Index(good, []byte("observe.2")) + len("observe.2")
	withCodec := func(c byte) []byte {
		b := bytes.Clone(good)
		b[codecAt] = c
		return b
	}
	noop, _ := EncodeOps([]Op{{At: time.Now(), Cmd: NoopCmd{}}})
	noopBinary := bytes.Clone(noop)
	noopBinary[bytes.Index(noop, []byte("noop"))+len("noop")] = codecBinary
	for name, b := range map[string][]byte{
		"truncated":           good[:len(good)-3],
		"unknown codec":       withCodec(7),
		"no binary form":      noopBinary,
		"binary read as JSON": withCodec(codecJSON),
	} {
		if _, err := DecodeOps(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	cmd, err := (&observeCmd{Obs: webhookObs(t, processingBody("o", "m"))}).appendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(cmd) {
		if err := (&observeCmd{}).decodeBinary(cmd[:n]); err == nil {
			t.Errorf("the first %d of %d bytes accepted", n, len(cmd))
		}
	}
	if err := (&observeCmd{}).decodeBinary(append(cmd, 0)); err == nil {
		t.Error("a byte after the observation accepted")
	}
}
