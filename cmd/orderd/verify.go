package main

import (
	"context"
	"crypto"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"orderd/provider"
)

// maxVerifyBody bounds what verify reads, far above any webhook body.
const maxVerifyBody = 64 << 20

// stringList is a flag that may be given several times.
type stringList []string

func (s *stringList) String() string { return strings.Join(*s, ",") }

func (s *stringList) Set(v string) error {
	*s = append(*s, v)
	return nil
}

func verifyCommand() command {
	return command{
		Name:    "verify",
		Summary: "check a webhook signature offline",
		Args:    "[FILE|-]",
		Help: `Reads the webhook body from FILE, or from standard input when FILE is "-" or
absent, and checks SIGNATURE (the base64 the provider sends, as
"openssl dgst -sha512 -sign KEY body | base64" prints it) against the
public key(s). Prints "signature OK" and exits 0 when it verifies; prints
"signature INVALID: <reason>" and exits 1 when it does not; exits 2 when
a flag is missing or a file cannot be read. Each key file must be a
regular file of at most 64 KiB.`,
		Setup: func(fs *flag.FlagSet) func(context.Context, *env) error {
			var pubkeys stringList
			fs.Var(&pubkeys, "pubkey", "PEM `FILE` with the provider's public key; repeat for several keys (required)")
			sig := fs.String("signature", "", "`B64` signature to check, as the provider sent it (required)")
			return func(ctx context.Context, e *env) error {
				return verify(e, pubkeys, *sig)
			}
		},
	}
}

func verify(e *env, pubkeys []string, sig string) error {
	if len(pubkeys) == 0 {
		return e.usagef("-pubkey is required")
	}
	if sig == "" {
		return e.usagef("-signature is required")
	}
	if len(e.Args) > 1 {
		return e.usagef("want at most one body file, got %d arguments", len(e.Args))
	}
	keys, err := loadPublicKeys(pubkeys)
	if err != nil {
		return e.usagef("-pubkey: %v", err)
	}
	v, err := provider.NewVerifier(keys...)
	if err != nil {
		return e.usagef("-pubkey: %v", err)
	}

	body, err := readBody(e)
	if err != nil {
		return e.usagef("%v", err)
	}
	if err := v.Verify(body, sig); err != nil {
		fmt.Fprintf(e.Stdout, "signature INVALID: %v\n", err)
		return &exitError{code: 1}
	}
	fmt.Fprintln(e.Stdout, "signature OK")
	return nil
}

// loadPublicKeys reads and parses the -pubkey files as the configuration's
// provider.public_keys are read: only regular files of at most
// maxSecretFileBytes, so "-pubkey /dev/zero" is refused at once instead of
// being read until memory runs out, and a FIFO does not hold the command.
func loadPublicKeys(files []string) ([]crypto.PublicKey, error) {
	var keys []crypto.PublicKey
	for _, f := range files {
		b, _, err := readSecretFile(f)
		if err != nil {
			return nil, fmt.Errorf("public key file: %w", err)
		}
		ks, err := provider.ParsePublicKeys(b)
		if err != nil {
			return nil, fmt.Errorf("public key file %s: %w", f, err)
		}
		keys = append(keys, ks...)
	}
	return keys, nil
}

// readBody reads the body argument: a file, or standard input for "-" or
// no argument. The bytes are checked exactly as read; nothing is trimmed.
func readBody(e *env) ([]byte, error) {
	var r io.Reader = e.Stdin
	name := "standard input"
	if len(e.Args) == 1 && e.Args[0] != "-" {
		f, err := os.Open(e.Args[0])
		if err != nil {
			return nil, fmt.Errorf("body: %w", err)
		}
		defer f.Close()
		r, name = f, e.Args[0]
	}
	if r == nil {
		return nil, fmt.Errorf("body: no standard input")
	}
	body, err := io.ReadAll(io.LimitReader(r, maxVerifyBody+1))
	if err != nil {
		return nil, fmt.Errorf("read body from %s: %w", name, err)
	}
	if len(body) > maxVerifyBody {
		return nil, fmt.Errorf("body from %s is larger than %d bytes", name, maxVerifyBody)
	}
	return body, nil
}
