package providertest_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"orderd/provider/providertest"
)

func TestSign(t *testing.T) {
	body := []byte(`{"id":"x","status":"completed","amount":"0.10"}`)
	for _, kind := range []string{providertest.KeyRSA, providertest.KeyECDSA} {
		t.Run(kind, func(t *testing.T) {
			key, pubPEM, err := providertest.GenerateKey(kind)
			if err != nil {
				t.Fatal(err)
			}
			sig, err := providertest.Sign(key, body)
			if err != nil {
				t.Fatal(err)
			}
			pub := parsePublicKey(t, pubPEM)
			if !verify(pub, body, sig) {
				t.Fatal("signature does not verify with the standard library")
			}
			if verify(pub, append(body, ' '), sig) {
				t.Error("signature verifies another body")
			}
			other, _, err := providertest.GenerateKey(kind)
			if err != nil {
				t.Fatal(err)
			}
			if otherSig, _ := providertest.Sign(other, body); verify(pub, body, otherSig) {
				t.Error("a foreign key's signature verifies")
			}
		})
	}
	t.Run("unsupported key", func(t *testing.T) {
		_, k, _ := ed25519.GenerateKey(rand.Reader)
		if _, err := providertest.Sign(k, body); err == nil {
			t.Error("Sign accepted an Ed25519 key")
		}
		if _, _, err := providertest.GenerateKey("dsa"); err == nil {
			t.Error("GenerateKey accepted dsa")
		}
		if _, err := providertest.Start(providertest.Options{Key: k}); err == nil {
			t.Error("Start accepted an Ed25519 key")
		}
	})
}

// TestSign_OpenSSL checks that Sign and `openssl dgst -sha512` agree both
// ways: openssl verifies what Sign makes, and for RSA (deterministic)
// produces the very same signature.
func TestSign_OpenSSL(t *testing.T) {
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("openssl is not installed; .ci/run installs it")
	}
	body := []byte(`{"id":"7f7c3a4e","merchantOrderId":"m-1","status":"completed"}`)
	for _, kind := range []string{providertest.KeyRSA, providertest.KeyECDSA} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			key, pubPEM, err := providertest.GenerateKey(kind)
			if err != nil {
				t.Fatal(err)
			}
			privPEM, err := providertest.PrivateKeyPEM(key)
			if err != nil {
				t.Fatal(err)
			}
			files := map[string][]byte{"key.pem": privPEM, "pub.pem": pubPEM, "body.json": body}
			sig, err := providertest.Sign(key, body)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := base64.StdEncoding.DecodeString(sig)
			files["sig.bin"] = raw
			for name, b := range files {
				if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			p := func(name string) string { return filepath.Join(dir, name) }
			out, err := exec.CommandContext(t.Context(), openssl, "dgst", "-sha512", "-verify", p("pub.pem"),
				"-signature", p("sig.bin"), p("body.json")).CombinedOutput()
			if err != nil || !strings.Contains(string(out), "Verified OK") {
				t.Fatalf("openssl does not verify Sign's signature: %v: %s", err, out)
			}
			theirs, err := exec.CommandContext(t.Context(), openssl, "dgst", "-sha512", "-sign", p("key.pem"), p("body.json")).Output()
			if err != nil {
				t.Fatalf("openssl sign: %v", err)
			}
			if !verify(parsePublicKey(t, pubPEM), body, base64.StdEncoding.EncodeToString(theirs)) {
				t.Error("openssl's signature does not verify the way webhooks are checked")
			}
			if kind == providertest.KeyRSA && !bytes.Equal(theirs, raw) {
				t.Error("RSA signatures of Sign and openssl differ")
			}
		})
	}
}

func TestServer_ZeroOptions(t *testing.T) {
	s := providertest.NewServer(providertest.Options{})
	defer s.Close()
	if s.APIKey() != "test-api-key" || !strings.HasPrefix(s.URL(), "http://127.0.0.1:") {
		t.Errorf("defaults: key %q url %q", s.APIKey(), s.URL())
	}
	pub := parsePublicKey(t, s.PublicKeyPEM())
	sig, err := providertest.Sign(s.Signer(), []byte("x"))
	if err != nil || !verify(pub, []byte("x"), sig) {
		t.Errorf("Signer and PublicKeyPEM do not match: %v", err)
	}
	mustOK(t, s, providertest.PathBalances, `{}`)
}

func TestStart_BadOptions(t *testing.T) {
	for name, o := range map[string]providertest.Options{
		"key type":        {KeyType: "dsa"},
		"min amount":      {Key: sharedKey(), MinAmount: "five"},
		"max amount":      {Key: sharedKey(), MaxAmount: "1e9"},
		"fee":             {Key: sharedKey(), FeePercent: "-1"},
		"initial balance": {Key: sharedKey(), InitialBalances: map[string]string{"brl": "lots"}},
		"listen":          {Key: sharedKey(), Listen: "127.0.0.1:99999"},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := providertest.Start(o)
			if err == nil {
				s.Close()
				t.Fatal("Start accepted bad options")
			}
		})
	}
}

// TestLoadKey reads the key encodings openssl writes, and refuses what
// cannot sign a webhook.
func TestLoadKey(t *testing.T) {
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, _ := x509.MarshalECPrivateKey(ecKey)
	pkcs8, _ := x509.MarshalPKCS8PrivateKey(rsaKey)
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	edDER, _ := x509.MarshalPKCS8PrivateKey(edKey)
	for _, tt := range []struct {
		path string
		ok   bool
	}{
		{write("pkcs1.pem", "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rsaKey)), true},
		{write("pkcs8.pem", "PRIVATE KEY", pkcs8), true},
		{write("sec1.pem", "EC PRIVATE KEY", ecDER), true},
		{write("ed25519.pem", "PRIVATE KEY", edDER), false},
		{write("cert.pem", "CERTIFICATE", []byte{1, 2, 3}), false},
		{filepath.Join(dir, "missing.pem"), false},
	} {
		k, err := providertest.LoadKey(tt.path)
		if (err == nil) != tt.ok {
			t.Errorf("LoadKey(%s) = %v, %v; want ok %v", filepath.Base(tt.path), k, err, tt.ok)
		}
	}
}
