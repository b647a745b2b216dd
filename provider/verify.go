package provider

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
)

// Errors returned by Verifier.Verify. Each failure wraps exactly one of them.
var (
	// ErrNoSignature: the signature is empty (the header is missing).
	ErrNoSignature = errors.New("provider: no signature")
	// ErrMalformedSignature: the signature is not base64, or its length fits
	// none of the keys.
	ErrMalformedSignature = errors.New("provider: malformed signature")
	// ErrBadSignature: the signature is well formed but no key verifies it.
	ErrBadSignature = errors.New("provider: signature does not verify")
)

// maxSignatureChars bounds the encoded signature; an RSA-16384 signature in
// base64 with line breaks is well below it.
const maxSignatureChars = 8192

// minRSABits is the smallest RSA modulus accepted; crypto/rsa refuses to
// verify with smaller keys anyway, so they are refused when loaded.
const minRSABits = 1024

// ParsePublicKeys reads every PEM block in pemBytes: "PUBLIC KEY" (PKIX),
// "RSA PUBLIC KEY" (PKCS#1) or "CERTIFICATE" (its subject key; validity and
// issuer are not checked, the certificate only carries the key). Text around
// the blocks is ignored; any other block type, or a block that does not
// parse, is an error naming the block.
func ParsePublicKeys(pemBytes []byte) ([]crypto.PublicKey, error) {
	var keys []crypto.PublicKey
	rest := pemBytes
	for n := 1; ; n++ {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		k, err := parsePEMBlock(block)
		if err != nil {
			return nil, fmt.Errorf("PEM block %d (%s): %w", n, block.Type, err)
		}
		keys = append(keys, k)
	}
	if bytes.Contains(rest, []byte("-----BEGIN")) {
		return nil, fmt.Errorf("PEM block %d is malformed", len(keys)+1)
	}
	if len(keys) == 0 {
		return nil, errors.New("no PEM public key found")
	}
	return keys, nil
}

func parsePEMBlock(b *pem.Block) (crypto.PublicKey, error) {
	switch b.Type {
	case "PUBLIC KEY":
		return x509.ParsePKIXPublicKey(b.Bytes)
	case "RSA PUBLIC KEY":
		return x509.ParsePKCS1PublicKey(b.Bytes)
	case "CERTIFICATE":
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, err
		}
		return c.PublicKey, nil
	}
	if strings.Contains(b.Type, "PRIVATE KEY") {
		return nil, errors.New("is a private key; give the public key (openssl pkey -pubout)")
	}
	return nil, errors.New(`unsupported block type; want "PUBLIC KEY", "RSA PUBLIC KEY" or "CERTIFICATE"`)
}

// LoadPublicKeys reads and parses PEM files (see ParsePublicKeys); several
// files, or several blocks in one file, give several keys for rotation.
func LoadPublicKeys(files ...string) ([]crypto.PublicKey, error) {
	if len(files) == 0 {
		return nil, errors.New("no public key files given")
	}
	var keys []crypto.PublicKey
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("public key file: %w", err)
		}
		ks, err := ParsePublicKeys(b)
		if err != nil {
			return nil, fmt.Errorf("public key file %s: %w", f, err)
		}
		keys = append(keys, ks...)
	}
	return keys, nil
}

// Verifier checks webhook signatures against a set of public keys, any of
// which may match (so a key can be rotated by listing old and new). It is
// safe for concurrent use.
type Verifier struct {
	keys []verifyKey
	std  *base64.Encoding
	raw  *base64.Encoding
	// last is the index of the key that verified most recently; it is tried
	// first, so with several keys loaded the current one usually costs a
	// single verification.
	last atomic.Uint32
}

type verifyKey struct {
	rsa *rsa.PublicKey
	ec  *ecdsa.PublicKey
	// Accepted signature lengths: exactly the modulus size for RSA, the
	// range of an ASN.1 DER (r, s) pair for ECDSA.
	minLen, maxLen int
}

// NewVerifier returns a Verifier for keys, which must be *rsa.PublicKey (at
// least 1024 bits) or *ecdsa.PublicKey on P-224, P-256, P-384 or P-521.
func NewVerifier(keys ...crypto.PublicKey) (*Verifier, error) {
	if len(keys) == 0 {
		return nil, errors.New("verifier: no public keys")
	}
	v := &Verifier{std: base64.StdEncoding.Strict(), raw: base64.RawStdEncoding.Strict()}
	for i, k := range keys {
		vk, err := newVerifyKey(k)
		if err != nil {
			return nil, fmt.Errorf("verifier: key %d: %w", i+1, err)
		}
		v.keys = append(v.keys, vk)
	}
	return v, nil
}

func newVerifyKey(k crypto.PublicKey) (verifyKey, error) {
	switch k := k.(type) {
	case *rsa.PublicKey:
		if k == nil || k.N == nil {
			return verifyKey{}, errors.New("empty RSA key")
		}
		if bits := k.N.BitLen(); bits < minRSABits {
			return verifyKey{}, fmt.Errorf("RSA key has %d bits, fewer than %d", bits, minRSABits)
		}
		n := k.Size()
		return verifyKey{rsa: k, minLen: n, maxLen: n}, nil
	case *ecdsa.PublicKey:
		if k == nil || k.Curve == nil {
			return verifyKey{}, errors.New("empty ECDSA key")
		}
		switch k.Curve {
		case elliptic.P224(), elliptic.P256(), elliptic.P384(), elliptic.P521():
		default:
			return verifyKey{}, fmt.Errorf("unsupported curve %s", k.Curve.Params().Name)
		}
		// SEQUENCE { INTEGER r, INTEGER s }: each integer is at most the
		// curve's byte size plus a leading zero, with a 2-byte header; the
		// sequence header is at most 3 bytes. The smallest pair is 8 bytes.
		n := (k.Curve.Params().BitSize + 7) / 8
		return verifyKey{ec: k, minLen: 8, maxLen: 3 + 2*(2+n+1)}, nil
	case ed25519.PublicKey:
		return verifyKey{}, errors.New("ed25519 keys are not supported: signatures are RSA or ECDSA with SHA-512")
	default:
		return verifyKey{}, fmt.Errorf("unsupported key type %T: want RSA or ECDSA", k)
	}
}

// Verify checks that signature is a signature of body by one of the keys:
// RSA PKCS#1 v1.5 or ASN.1 DER ECDSA, over SHA-512 of body, in base64 with or
// without padding; whitespace anywhere (openssl wraps lines at 64 columns)
// is ignored. It is exactly what `openssl dgst -sha512 -sign KEY body |
// openssl base64` prints. Any failure wraps ErrNoSignature,
// ErrMalformedSignature or ErrBadSignature; nothing verifies by default.
func (v *Verifier) Verify(body []byte, signature string) error {
	if v == nil || len(v.keys) == 0 {
		return fmt.Errorf("%w: no public keys loaded", ErrBadSignature)
	}
	sig, err := v.decode(signature)
	if err != nil {
		return err
	}
	if !v.wellFormed(sig) {
		return fmt.Errorf("%w: %d bytes is neither an RSA signature of a loaded key's size nor an ASN.1 ECDSA signature for a loaded curve",
			ErrMalformedSignature, len(sig))
	}
	digest := sha512.Sum512(body)
	n := uint32(len(v.keys))
	start := v.last.Load() % n
	for i := range n {
		idx := (start + i) % n
		if v.keys[idx].verify(digest[:], sig) {
			if idx != start {
				v.last.Store(idx)
			}
			return nil
		}
	}
	return ErrBadSignature
}

// wellFormed reports whether sig could be a signature by one of the keys: the
// exact size of an RSA key, or an ASN.1 DER (r, s) pair of a size an EC key
// allows. It tells a mangled signature from a wrong one.
func (v *Verifier) wellFormed(sig []byte) bool {
	der := -1 // not yet checked
	for i := range v.keys {
		k := &v.keys[i]
		if len(sig) < k.minLen || len(sig) > k.maxLen {
			continue
		}
		if k.rsa != nil {
			return true
		}
		if der < 0 {
			der = 0
			if isECDSADER(sig) {
				der = 1
			}
		}
		if der == 1 {
			return true
		}
	}
	return false
}

// isECDSADER reports whether sig is exactly SEQUENCE { INTEGER, INTEGER } in
// DER with short integer lengths, which every supported curve uses.
func isECDSADER(sig []byte) bool {
	if len(sig) < 8 || sig[0] != 0x30 {
		return false
	}
	body := sig[2:]
	switch l := int(sig[1]); {
	case l < 0x80:
		if l != len(body) {
			return false
		}
	case l == 0x81 && len(sig) > 3 && sig[2] >= 0x80:
		body = sig[3:]
		if int(sig[2]) != len(body) {
			return false
		}
	default:
		return false
	}
	for range 2 {
		if len(body) < 3 || body[0] != 0x02 {
			return false
		}
		n := int(body[1])
		if n == 0 || n >= 0x80 || n > len(body)-2 {
			return false
		}
		body = body[2+n:]
	}
	return len(body) == 0
}

func (k *verifyKey) verify(digest, sig []byte) bool {
	if len(sig) < k.minLen || len(sig) > k.maxLen {
		return false
	}
	if k.rsa != nil {
		return rsa.VerifyPKCS1v15(k.rsa, crypto.SHA512, digest, sig) == nil
	}
	return ecdsa.VerifyASN1(k.ec, digest, sig)
}

// decode strips whitespace and decodes standard base64, padded or not.
func (v *Verifier) decode(signature string) ([]byte, error) {
	if len(signature) > maxSignatureChars {
		return nil, fmt.Errorf("%w: %d characters is too long", ErrMalformedSignature, len(signature))
	}
	s := stripSpace(signature)
	if s == "" {
		return nil, ErrNoSignature
	}
	enc := v.std
	if len(s)%4 != 0 {
		enc = v.raw
	}
	sig := make([]byte, enc.DecodedLen(len(s)))
	n, err := enc.Decode(sig, []byte(s))
	if err != nil {
		return nil, fmt.Errorf("%w: not base64 (%v)", ErrMalformedSignature, err)
	}
	return sig[:n], nil
}

// stripSpace removes ASCII whitespace anywhere in s, allocating only when
// there is some.
func stripSpace(s string) string {
	if !strings.ContainsAny(s, " \t\r\n\v\f") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ' ', '\t', '\r', '\n', '\v', '\f':
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
