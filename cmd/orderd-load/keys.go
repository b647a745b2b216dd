package main

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"

	"orderd/provider/providertest"
)

// generateKeyFiles writes a fresh private key of kind to path (0600) and its
// public key to path+".pub" (0644), and returns the public key's path.
func generateKeyFiles(path, kind string) (string, error) {
	if kind != providertest.KeyECDSA && kind != providertest.KeyRSA {
		return "", usagef("-key-type %q is not ecdsa or rsa", kind)
	}
	key, pubPEM, err := providertest.GenerateKey(kind)
	if err != nil {
		return "", err
	}
	privPEM, err := providertest.PrivateKeyPEM(key)
	if err != nil {
		return "", err
	}
	pubPath := path + ".pub"
	// O_EXCL: a key file that exists is somebody's key; never overwrite it.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("write private key: %w", err)
	}
	if _, err := f.Write(privPEM); err != nil {
		f.Close()
		return "", fmt.Errorf("write private key: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("write private key: %w", err)
	}
	if err := os.WriteFile(pubPath, pubPEM, 0o644); err != nil {
		return "", fmt.Errorf("write public key: %w", err)
	}
	return pubPath, nil
}

// loadKey reads a private key from the first PEM block of path: PKCS #8
// ("PRIVATE KEY"), PKCS #1 ("RSA PRIVATE KEY") or SEC 1 ("EC PRIVATE KEY"),
// as openssl writes them.
func loadKey(path string) (crypto.Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, usagef("-key: %v", err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, usagef("-key: %s holds no PEM block", path)
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
		return nil, usagef("-key: %s (%s): %v", path, block.Type, err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, usagef("-key: %s: %T cannot sign", path, k)
	}
	// Sign refuses key types the provider does not use; find out now.
	if _, err := providertest.Sign(signer, []byte("probe")); err != nil {
		return nil, usagef("-key: %s: %v", path, err)
	}
	return signer, nil
}
