package provider_test

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"orderd/provider"
)

// The seed corpus of each fuzz target runs with every `go test`; explore
// further with e.g. `go test -run '^$' -fuzz FuzzDecodeOrder ./provider/`.

func FuzzDecodeOrder(f *testing.F) {
	for _, s := range []string{
		orderJSON, futureOrder, fpBase, string(webhookBody),
		`{"id":"x","merchantOrderId":"m","type":"payin","status":"new"}`,
		`{"id":"x","merchantOrderId":"m","type":"payin","status":"new","transactions":null,"auth":null}`,
		`{"id":"x","merchantOrderId":"m","type":"payin","status":"new","ID":"y","Status":"completed"}`,
		`{"id":"x","merchantOrderId":"m","type":"payin","status":"new","createdAt":"0001-01-01T00:00:00Z"}`,
		`{"id":"x","merchantOrderId":"m","type":"payin","status":"new","transactions":[{"id":"b"},{"id":"a","completedAt":"2026-01-02T03:04:05.5+01:00"}]}`,
		`{"id":"x","merchantOrderId":"m","type":"payin","status":"new","transactions":[null,{"Id":"a","ID":"b"}]}`,
		`{"id":"x","merchantOrderId":"m","type":"payin","status":"new","merchantTargetWallet":{"amount":"+0.0","currency":"\u00c9UR"}}`,
		`{"id":"x","merchantOrderId":"m","type":"payin","status":"new","refundTransaction":{"id":"r","amount":{"amount":"1","currency":"brl"}}}`,
		`{"id":"x\ud800","merchantOrderId":"m\u0000","type":"payin","status":"new"}`,
		`{}`, `null`, `[]`, `{"id":1}`, `{"id":"x","status":5}`, `{"id":"x","transactions":[{"status":[]}]}`,
		`{"id":"x","merchantTargetWallet":{"amount":98.0,"currency":"brl"}}`, `{"id":"x","createdAt":"yesterday"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := provider.DecodeOrder(data)
		if err != nil {
			if !errors.Is(err, provider.ErrInvalidOrder) {
				t.Fatalf("DecodeOrder error %v does not wrap ErrInvalidOrder", err)
			}
			// The reason is for people who know the JSON, not Go's types.
			if msg := err.Error(); !bytes.Contains(data, []byte("Go ")) && !bytes.Contains(data, []byte("provider.")) &&
				(strings.Contains(msg, "Go ") || strings.Contains(msg, "provider.") || strings.Contains(msg, "money:")) {
				t.Fatalf("DecodeOrder error %q speaks of Go\ninput %q", msg, data)
			}
			return
		}
		fp := o.Fingerprint()
		if ref := referenceFingerprint(o); fp != ref {
			t.Fatalf("Fingerprint %s differs from the encoding/json reference %s\ninput %q", fp, ref, data)
		}
		enc, err := json.Marshal(o)
		if err != nil {
			t.Fatalf("a decoded order does not encode: %v\ninput %q", err, data)
		}
		back, err := provider.DecodeOrder(enc)
		if err != nil {
			t.Fatalf("the encoded order does not decode: %v\ninput %q\nencoded %s", err, data, enc)
		}
		if back.Fingerprint() != fp {
			t.Fatalf("fingerprint changed across a round trip\ninput %q\nencoded %s\n%+v\n%+v", data, enc, o, back)
		}
		enc2, err := json.Marshal(back)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not stable after one round trip:\n%s\n%s (%v)", enc, enc2, err)
		}
	})
}

func FuzzEnvelope(f *testing.F) {
	for _, s := range []string{
		envelope(orderJSON), envelope("null"), envelope("[]"), `{"data":{"a":1}}`,
		`{"data":null,"error":{"code":"VALIDATION","validationErrors":[{"field":"invoice.amount","message":"too small"}]}}`,
		`{"data":null,"error":{"code":"ORDER_NOT_FOUND","validationErrors":null}}`,
		`{"data":null,"error":{"code":"SOMETHING_NEW"}}`,
		`{"data":null,"error":{"code":""}}`, `{"data":null,"error":{}}`, `{"data":null,"error":"x"}`,
		`{"error":null}`, `{}`, `[]`, `null`, ``, `<html>`, `{"data":`, ` {"data":1} `, `{"data":1}garbage`,
		`{"DATA":1,"Error":{"code":"X"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		data, err := provider.DecodeEnvelope(body)
		var perr *provider.Error
		isErr := errors.As(err, &perr)
		inDoubt := errors.Is(err, provider.ErrInDoubt)
		switch {
		case err == nil:
			if !json.Valid(data) {
				t.Fatalf("success with invalid data %q from %q", data, body)
			}
		case isErr && inDoubt:
			t.Fatalf("error %v is both definite and in doubt", err)
		case isErr:
			if perr.Code == "" {
				t.Fatalf("definite error without a code from %q", body)
			}
			// The error survives being written and read again.
			enc, merr := json.Marshal(provider.Envelope{Data: json.RawMessage("null"), Error: perr})
			if merr != nil {
				t.Fatalf("encode %v: %v", perr, merr)
			}
			_, err2 := provider.DecodeEnvelope(enc)
			var perr2 *provider.Error
			if !errors.As(err2, &perr2) || perr2.Code != perr.Code || !reflect.DeepEqual(perr2.ValidationErrors, perr.ValidationErrors) {
				t.Fatalf("error %#v became %#v (%v) after a round trip", perr, perr2, err2)
			}
		case !inDoubt:
			t.Fatalf("error %v is neither definite nor in doubt", err)
		}
	})
}

func FuzzVerify(f *testing.F) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		f.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	v, err := provider.NewVerifier(&rsaKey.PublicKey, &ecKey.PublicKey)
	if err != nil {
		f.Fatal(err)
	}
	rsaSign := func(body []byte) []byte {
		d := sha512.Sum512(body)
		sig, err := rsa.SignPKCS1v15(nil, rsaKey, crypto.SHA512, d[:])
		if err != nil {
			f.Fatal(err)
		}
		return sig
	}
	d := sha512.Sum512(webhookBody)
	ecSig, err := ecdsa.SignASN1(rand.Reader, ecKey, d[:])
	if err != nil {
		f.Fatal(err)
	}
	rsaSig := rsaSign(webhookBody)
	b64 := base64.StdEncoding.EncodeToString
	for _, s := range []struct {
		body []byte
		sig  string
	}{
		{webhookBody, b64(rsaSig)},
		{webhookBody, base64.RawStdEncoding.EncodeToString(rsaSig)},
		{webhookBody, b64(rsaSig)[:100] + "\n" + b64(rsaSig)[100:] + "\n"},
		{webhookBody, b64(rsaSig[:len(rsaSig)-1])},
		{webhookBody, b64(ecSig)},
		{webhookBody, b64(ecSig[:len(ecSig)-2])},
		{append(bytes.Clone(webhookBody), 'x'), b64(rsaSig)},
		{nil, ""},
		{nil, "AAAA"},
		{[]byte("x"), "MAYCAQECAQE="}, // a well-formed but wrong ECDSA signature
		{[]byte("x"), strings.Repeat("/", 344)},
		{[]byte("x"), "====\n"},
	} {
		f.Add(s.body, s.sig)
	}
	f.Fuzz(func(t *testing.T, body []byte, sig string) {
		err := v.Verify(body, sig)
		if err == nil {
			// Only a genuine signature may verify. RSA signatures are
			// deterministic; the one EC signature made here is for webhookBody.
			raw, derr := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(sig), ""))
			if derr != nil {
				raw, derr = base64.RawStdEncoding.DecodeString(strings.Join(strings.Fields(sig), ""))
			}
			switch {
			case derr != nil:
				t.Fatalf("signature %q verified but is not base64: %v", sig, derr)
			case bytes.Equal(raw, rsaSign(body)):
			case bytes.Equal(body, webhookBody) && bytes.Equal(raw, ecSig):
			default:
				t.Fatalf("a signature we did not make verified: body %q sig %q", body, sig)
			}
			return
		}
		n := 0
		for _, e := range []error{provider.ErrNoSignature, provider.ErrMalformedSignature, provider.ErrBadSignature} {
			if errors.Is(err, e) {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("Verify error %v matches %d of the sentinel errors; want exactly 1", err, n)
		}
	})
}
