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
	"errors"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"orderd/provider"
)

// webhookBody is a realistic webhook: the get-status data of a completed payin.
var webhookBody = []byte(`{"id":"7f7c3a4e-0000-4000-8000-000000000001","merchantOrderId":"m-1","type":"payin",` +
	`"createdAt":"2026-01-02T03:04:05+00:00","status":"completed","rejectReason":null,"merchantSourceWallet":null,` +
	`"merchantTargetWallet":{"amount":"98.00","currency":"brl"},"transactions":[{"id":"t-1","type":"payin",` +
	`"status":"completed","authorized":{"amount":"100.00","currency":"brl"},"merchantWallet":{"amount":"98.00",` +
	`"currency":"brl"},"counterpartyInfo":null,"paymentInfo":null,"createdAt":"2026-01-02T03:04:05Z",` +
	`"completedAt":"2026-01-02T03:06:00Z","rejectReason":null}]}`)

// openssl runs the openssl command line in dir, feeding stdin, and returns
// its standard output. The test is skipped when openssl is not installed.
func openssl(t testing.TB, dir string, stdin []byte, args ...string) []byte {
	t.Helper()
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl is not on PATH; install it to run the signature interop tests (CI does)")
	}
	cmd := exec.Command("openssl", args...)
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("openssl %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// opensslKey is a key pair made by openssl, as files in a temporary directory.
type opensslKey struct {
	dir  string
	priv string // private key PEM path
	pub  string // PKIX public key PEM path
}

func newOpensslKey(t testing.TB, kind string) opensslKey {
	t.Helper()
	dir := t.TempDir()
	args := map[string][]string{
		"rsa2048": {"-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"},
		"p256":    {"-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"},
		"p384":    {"-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384"},
		"ed25519": {"-algorithm", "ED25519"},
	}[kind]
	k := opensslKey{dir: dir, priv: filepath.Join(dir, "key.pem"), pub: filepath.Join(dir, "pub.pem")}
	openssl(t, dir, nil, append([]string{"genpkey", "-out", k.priv}, args...)...)
	openssl(t, dir, nil, "pkey", "-in", k.priv, "-pubout", "-out", k.pub)
	return k
}

// sign signs body exactly as the provider documents: openssl dgst -sha512
// -sign, then openssl base64 (wrapped at 64 columns) or base64 -A (one line).
func (k opensslKey) sign(t testing.TB, body []byte, oneLine bool) string {
	t.Helper()
	sig := openssl(t, k.dir, body, "dgst", "-sha512", "-sign", k.priv)
	args := []string{"base64"}
	if oneLine {
		args = append(args, "-A")
	}
	return string(openssl(t, k.dir, sig, args...))
}

func verifierFromFiles(t testing.TB, files ...string) *provider.Verifier {
	t.Helper()
	keys, err := provider.LoadPublicKeys(files...)
	if err != nil {
		t.Fatalf("LoadPublicKeys: %v", err)
	}
	v, err := provider.NewVerifier(keys...)
	if err != nil {
		t.Fatalf("NewVerifier: %v", err)
	}
	return v
}

func TestVerifier_Verify_OpenSSL(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"rsa2048", "p256", "p384"} {
		t.Run(kind, func(t *testing.T) {
			key := newOpensslKey(t, kind)
			foreign := newOpensslKey(t, kind)
			v := verifierFromFiles(t, key.pub)

			wrapped := key.sign(t, webhookBody, false)
			oneLine := key.sign(t, webhookBody, true)
			if kind == "rsa2048" && !strings.Contains(strings.TrimSpace(wrapped), "\n") {
				t.Fatalf("openssl base64 did not wrap the signature: %q", wrapped)
			}
			unpadded := strings.TrimRight(strings.TrimSpace(oneLine), "=")
			tampered := bytes.Replace(webhookBody, []byte(`"98.00"`), []byte(`"99.00"`), 1)
			empty := key.sign(t, nil, true)

			tests := []struct {
				name string
				body []byte
				sig  string
				want error // nil: verifies
			}{
				{"wrapped base64", webhookBody, wrapped, nil},
				{"one-line base64", webhookBody, oneLine, nil},
				{"without padding", webhookBody, unpadded, nil},
				{"surrounding whitespace and CRLF", webhookBody, " \t" + strings.ReplaceAll(wrapped, "\n", "\r\n") + " ", nil},
				{"empty body", nil, empty, nil},
				{"tampered body", tampered, oneLine, provider.ErrBadSignature},
				{"one byte more in the body", append(bytes.Clone(webhookBody), ' '), oneLine, provider.ErrBadSignature},
				{"foreign key", webhookBody, foreign.sign(t, webhookBody, true), provider.ErrBadSignature},
				{"signature of another body", webhookBody, empty, provider.ErrBadSignature},
				{"truncated signature", webhookBody, oneLine[:len(strings.TrimSpace(oneLine))-8], provider.ErrMalformedSignature},
				{"signature missing its first bytes", webhookBody, strings.TrimSpace(oneLine)[4:], provider.ErrMalformedSignature},
				{"not base64", webhookBody, "this is not base64!", provider.ErrMalformedSignature},
				{"url-safe alphabet", webhookBody, strings.NewReplacer("+", "-", "/", "_").Replace(oneLine) + "-_", provider.ErrMalformedSignature},
				{"hex instead of base64", webhookBody, strings.Repeat("0f", 40), provider.ErrMalformedSignature},
				{"empty signature", webhookBody, "", provider.ErrNoSignature},
				{"blank signature", webhookBody, " \r\n ", provider.ErrNoSignature},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					err := v.Verify(tt.body, tt.sig)
					if tt.want == nil {
						if err != nil {
							t.Fatalf("Verify: %v", err)
						}
						return
					}
					if !errors.Is(err, tt.want) {
						t.Fatalf("Verify = %v, want %v", err, tt.want)
					}
					for _, other := range []error{provider.ErrNoSignature, provider.ErrMalformedSignature, provider.ErrBadSignature} {
						if other != tt.want && errors.Is(err, other) {
							t.Errorf("Verify = %v also matches %v", err, other)
						}
					}
				})
			}
		})
	}
}

// TestLoadPublicKeys_Formats loads each PEM form the provider may hand out and
// checks the key verifies an openssl signature.
func TestLoadPublicKeys_Formats(t *testing.T) {
	t.Parallel()
	rsaKey := newOpensslKey(t, "rsa2048")
	ecKey := newOpensslKey(t, "p256")
	rsaSig := rsaKey.sign(t, webhookBody, false)
	ecSig := ecKey.sign(t, webhookBody, false)

	pkcs1 := filepath.Join(rsaKey.dir, "pkcs1.pem")
	openssl(t, rsaKey.dir, nil, "rsa", "-in", rsaKey.priv, "-RSAPublicKey_out", "-out", pkcs1)
	rsaCert := filepath.Join(rsaKey.dir, "cert.pem")
	openssl(t, rsaKey.dir, nil, "req", "-new", "-x509", "-key", rsaKey.priv, "-subj", "/CN=provider webhooks", "-days", "2", "-out", rsaCert)
	ecCert := filepath.Join(ecKey.dir, "cert.pem")
	openssl(t, ecKey.dir, nil, "req", "-new", "-x509", "-key", ecKey.priv, "-subj", "/CN=provider webhooks", "-days", "2", "-out", ecCert)
	// A certificate as "openssl x509 -text" prints it: a text dump, then the PEM.
	textCert := filepath.Join(rsaKey.dir, "cert-text.pem")
	if err := os.WriteFile(textCert, openssl(t, rsaKey.dir, nil, "x509", "-in", rsaCert, "-text"), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, path := range []string{pkcs1, rsaCert, textCert} {
		if b, _ := os.ReadFile(path); path == pkcs1 && !bytes.Contains(b, []byte("BEGIN RSA PUBLIC KEY")) {
			t.Fatalf("openssl did not write PKCS#1: %s", b)
		}
	}

	tests := []struct {
		name string
		file string
		sig  string
	}{
		{"PKIX RSA", rsaKey.pub, rsaSig},
		{"PKCS#1 RSA", pkcs1, rsaSig},
		{"RSA certificate", rsaCert, rsaSig},
		{"certificate with text dump", textCert, rsaSig},
		{"PKIX EC", ecKey.pub, ecSig},
		{"EC certificate", ecCert, ecSig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := verifierFromFiles(t, tt.file)
			if err := v.Verify(webhookBody, tt.sig); err != nil {
				t.Fatalf("Verify: %v", err)
			}
			other := rsaSig
			if tt.sig == rsaSig {
				other = ecSig
			}
			if err := v.Verify(webhookBody, other); err == nil {
				t.Fatal("a signature by the other key verified")
			}
		})
	}
}

// TestVerifier_Rotation: with the old and the new key loaded (in one file or
// two), signatures by either verify, in any order, and a third key does not.
func TestVerifier_Rotation(t *testing.T) {
	t.Parallel()
	oldKey := newOpensslKey(t, "rsa2048")
	newKey := newOpensslKey(t, "p256")
	third := newOpensslKey(t, "rsa2048")
	oldPEM, _ := os.ReadFile(oldKey.pub)
	newPEM, _ := os.ReadFile(newKey.pub)
	bundle := filepath.Join(t.TempDir(), "bundle.pem")
	if err := os.WriteFile(bundle, append(append(oldPEM, "\n# next key\n"...), newPEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	oldSig := oldKey.sign(t, webhookBody, true)
	newSig := newKey.sign(t, webhookBody, true)
	thirdSig := third.sign(t, webhookBody, true)

	for name, files := range map[string][]string{"one bundle file": {bundle}, "two files": {oldKey.pub, newKey.pub}} {
		t.Run(name, func(t *testing.T) {
			v := verifierFromFiles(t, files...)
			for i, sig := range []string{oldSig, newSig, newSig, oldSig, newSig, oldSig, oldSig} {
				if err := v.Verify(webhookBody, sig); err != nil {
					t.Fatalf("signature %d: %v", i, err)
				}
			}
			if err := v.Verify(webhookBody, thirdSig); !errors.Is(err, provider.ErrBadSignature) {
				t.Fatalf("a third key's signature: %v, want ErrBadSignature", err)
			}
		})
	}
}

func TestVerifier_VerifyConcurrent(t *testing.T) {
	t.Parallel()
	a := newOpensslKey(t, "p256")
	b := newOpensslKey(t, "p256")
	v := verifierFromFiles(t, a.pub, b.pub)
	sigs := []string{a.sign(t, webhookBody, true), b.sign(t, webhookBody, true)}
	var wg sync.WaitGroup
	errs := make(chan error, 8*20)
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				if err := v.Verify(webhookBody, sigs[(g+i)%2]); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent Verify: %v", err)
	}
}

func TestParsePublicKeys_Errors(t *testing.T) {
	t.Parallel()
	rsaKey := newOpensslKey(t, "rsa2048")
	edKey := newOpensslKey(t, "ed25519")
	privPEM, _ := os.ReadFile(rsaKey.priv)
	pubPEM, _ := os.ReadFile(rsaKey.pub)
	corrupt := bytes.Replace(pubPEM, []byte("MII"), []byte("M!I"), 1)

	tests := []struct {
		name string
		pem  []byte
		want string
	}{
		{"empty", nil, "no PEM public key"},
		{"plain text", []byte("the provider's key is attached"), "no PEM public key"},
		{"private key", privPEM, "private key"},
		{"public then private", append(bytes.Clone(pubPEM), privPEM...), "PEM block 2 (PRIVATE KEY)"},
		{"corrupt base64 in the block", corrupt, "PEM block 1 is malformed"},
		{"EC parameters", []byte("-----BEGIN EC PARAMETERS-----\nBggqhkjOPQMBBw==\n-----END EC PARAMETERS-----\n"), "unsupported block type"},
		{"garbage DER", []byte("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"), "PEM block 1 (PUBLIC KEY)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys, err := provider.ParsePublicKeys(tt.pem)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ParsePublicKeys = %d keys, %v; want an error mentioning %q", len(keys), err, tt.want)
			}
		})
	}

	t.Run("missing file", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "nope.pem")
		_, err := provider.LoadPublicKeys(rsaKey.pub, missing)
		if err == nil || !strings.Contains(err.Error(), "nope.pem") {
			t.Fatalf("LoadPublicKeys = %v; want an error naming the file", err)
		}
	})
	t.Run("no files", func(t *testing.T) {
		if _, err := provider.LoadPublicKeys(); err == nil {
			t.Fatal("LoadPublicKeys() succeeded")
		}
	})
	t.Run("ed25519 key", func(t *testing.T) {
		keys, err := provider.LoadPublicKeys(edKey.pub)
		if err != nil {
			t.Fatalf("LoadPublicKeys: %v", err)
		}
		if _, err := provider.NewVerifier(keys...); err == nil || !strings.Contains(err.Error(), "ed25519") {
			t.Fatalf("NewVerifier(ed25519) = %v; want an error naming ed25519", err)
		}
	})
}

func TestNewVerifier_Refuses(t *testing.T) {
	small := &rsa.PublicKey{N: new(big.Int).Add(new(big.Int).Lsh(big.NewInt(1), 511), big.NewInt(1)), E: 65537}
	tests := []struct {
		name string
		keys []crypto.PublicKey
		want string
	}{
		{"no keys", nil, "no public keys"},
		{"512-bit RSA", []crypto.PublicKey{small}, "512 bits"},
		{"nil RSA", []crypto.PublicKey{(*rsa.PublicKey)(nil)}, "empty RSA key"},
		{"a private key", []crypto.PublicKey{&rsa.PrivateKey{}}, "unsupported key type"},
		{"a string", []crypto.PublicKey{"key"}, "unsupported key type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := provider.NewVerifier(tt.keys...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewVerifier = %v, %v; want an error mentioning %q", v, err, tt.want)
			}
		})
	}
	t.Run("nil verifier fails closed", func(t *testing.T) {
		var v *provider.Verifier
		if err := v.Verify(webhookBody, "AAAA"); !errors.Is(err, provider.ErrBadSignature) {
			t.Fatalf("nil Verifier.Verify = %v; want ErrBadSignature", err)
		}
	})
}

// BenchmarkVerifier_Verify measures one webhook verification (base64 decode,
// SHA-512 of a typical body, one public-key operation) beside its ceiling:
// the bare crypto/rsa or crypto/ecdsa verification of a precomputed digest,
// timed in the same iterations. ns/op counts both; read verify-ns/op and
// ceiling-ns/op.
func BenchmarkVerifier_Verify(b *testing.B) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		b.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	digest := sha512.Sum512(webhookBody)
	for _, bc := range []struct {
		name string
		key  crypto.Signer
		raw  func(sig []byte) bool
	}{
		{"rsa2048", rsaKey, func(sig []byte) bool {
			return rsa.VerifyPKCS1v15(&rsaKey.PublicKey, crypto.SHA512, digest[:], sig) == nil
		}},
		{"ecdsa-p256", ecKey, func(sig []byte) bool { return ecdsa.VerifyASN1(&ecKey.PublicKey, digest[:], sig) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			sigBytes, err := bc.key.Sign(rand.Reader, digest[:], crypto.SHA512)
			if err != nil {
				b.Fatal(err)
			}
			sig := base64.StdEncoding.EncodeToString(sigBytes)
			v, err := provider.NewVerifier(bc.key.Public())
			if err != nil {
				b.Fatal(err)
			}
			// Each iteration times the verifier and the bare verification back
			// to back, so both see the same machine load.
			var verifyNs, ceilingNs time.Duration
			n := 0
			for b.Loop() {
				t0 := time.Now()
				if err := v.Verify(webhookBody, sig); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if !bc.raw(sigBytes) {
					b.Fatal("raw verification failed")
				}
				verifyNs += t1.Sub(t0)
				ceilingNs += time.Since(t1)
				n++
			}
			b.ReportMetric(float64(verifyNs.Nanoseconds())/float64(n), "verify-ns/op")
			b.ReportMetric(float64(ceilingNs.Nanoseconds())/float64(n), "ceiling-ns/op")
			b.ReportMetric(float64(time.Second)/(float64(verifyNs.Nanoseconds())/float64(n)), "verifies/s")
		})
	}
}
