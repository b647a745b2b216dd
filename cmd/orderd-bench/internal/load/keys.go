package load

import (
	"crypto"
	"fmt"
	"os"

	"orderd/cmd/orderd-bench/internal/cli"
	"orderd/provider/providertest"
)

// generateKeyFiles writes a fresh private key of kind to path (0600) and its
// public key to path+".pub" (0644), and returns the public key's path.
func generateKeyFiles(path, kind string) (string, error) {
	if kind != providertest.KeyECDSA && kind != providertest.KeyRSA {
		return "", cli.Usagef("-key-type %q is not ecdsa or rsa", kind)
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

// loadKey reads the -key file (see providertest.LoadKey).
func loadKey(path string) (crypto.Signer, error) {
	k, err := providertest.LoadKey(path)
	if err != nil {
		return nil, cli.Usagef("-key: %v", err)
	}
	return k, nil
}
