package providertest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
)

// Key kinds accepted by GenerateKey and Options.KeyType.
const (
	KeyRSA   = "rsa"
	KeyECDSA = "ecdsa"
)

// Sign signs body the way the provider signs a webhook and returns the value
// of the Signature header: the base64 of what
// `openssl dgst -sha512 -sign KEY body` writes, that is RSA PKCS #1 v1.5
// over SHA-512 for an RSA key and an ASN.1 DER ECDSA signature over SHA-512
// for an EC key. Other key types are refused.
func Sign(key crypto.Signer, body []byte) (string, error) {
	if key == nil {
		return "", errors.New("sign: no key")
	}
	switch key.Public().(type) {
	case *rsa.PublicKey, *ecdsa.PublicKey:
	default:
		return "", fmt.Errorf("sign: unsupported key type %T", key.Public())
	}
	sum := sha512.Sum512(body)
	// With a plain crypto.Hash as options, *rsa.PrivateKey signs PKCS #1
	// v1.5 and *ecdsa.PrivateKey writes ASN.1 DER: both what openssl does.
	sig, err := key.Sign(rand.Reader, sum[:], crypto.SHA512)
	if err != nil {
		return "", fmt.Errorf("sign: %w", err)
	}
	return base64.StdEncoding.EncodeToString(sig), nil
}

// GenerateKey makes a fresh signing key of the given kind ("rsa", the
// default when kind is empty, is 2048 bits; "ecdsa" is P-256) and returns it
// with its public key as a PEM "PUBLIC KEY" block (PKIX), the form a
// merchant receives.
func GenerateKey(kind string) (crypto.Signer, []byte, error) {
	var key crypto.Signer
	var err error
	switch kind {
	case "", KeyRSA:
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	case KeyECDSA:
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	default:
		return nil, nil, fmt.Errorf("generate key: unknown kind %q (want %q or %q)", kind, KeyRSA, KeyECDSA)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("generate %s key: %w", kind, err)
	}
	pub, err := PublicKeyPEM(key)
	if err != nil {
		return nil, nil, err
	}
	return key, pub, nil
}

// PublicKeyPEM returns the public half of key as a PEM "PUBLIC KEY" block.
func PublicKeyPEM(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return nil, fmt.Errorf("marshal public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// PrivateKeyPEM returns key as a PEM "PRIVATE KEY" block (PKCS #8), which
// `openssl dgst -sign` reads; tests use it to sign with the real openssl.
func PrivateKeyPEM(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// LoadKey reads a signing key from the first PEM block of path: PKCS #8
// ("PRIVATE KEY"), PKCS #1 ("RSA PRIVATE KEY") or SEC 1 ("EC PRIVATE KEY"),
// as openssl writes them. A key Sign cannot use is refused here.
func LoadKey(path string) (crypto.Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, fmt.Errorf("%s holds no PEM block", path)
	}
	var k any
	switch block.Type {
	case "PRIVATE KEY":
		k, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		k, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		err = errors.New("not a private key block")
	}
	if err != nil {
		return nil, fmt.Errorf("%s (%s): %w", path, block.Type, err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%s: %T cannot sign", path, k)
	}
	if _, err := Sign(signer, []byte("probe")); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return signer, nil
}
