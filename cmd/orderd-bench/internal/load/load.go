// Package load is "orderd-bench load": it sends uniquely signed order webhooks to a webhook
// receiver, at a fixed rate or as fast as it answers, and measures from the
// sender's side how long each acknowledgement takes.
//
// Every distinct webhook is a completed payin with its own order id and
// merchantOrderId, signed like the provider signs (SHA-512, RSA PKCS #1
// v1.5 or ECDSA DER, base64 in the Signature header). All bodies are signed
// before the clock starts, so signing does not compete with the receiver
// for CPU while it is measured. A fraction of the requests (-repeat) resend
// a body that was already acknowledged, as the provider's retries do; the
// receiver should answer those "duplicate".
//
// With -ceiling the same requests also go to a server inside this process
// that only checks the signature with the same key and answers 200: the
// ceiling that HTTP and signature verification set on this machine,
// measured in the same run, so the receiver's rate can be read as a ratio
// of it. The two alternate in -rounds rounds (default 4), each a share of
// -n and -d, so a change in the machine's background load touches both.
//
// Usage:
//
//	orderd-bench load -gen-key-out FILE [-key-type ecdsa|rsa]
//	orderd-bench load [-url URL] [-ceiling] -key FILE (-flat | -rate N) [-c N] [-n N] [-d D] [-repeat F] [-rounds R]
//
// -gen-key-out writes a fresh private key to FILE (mode 0600) and its
// public key to FILE.pub; list FILE.pub under provider.public_keys in the
// receiver's config. Each run prints one summary line per target on
// standard output:
//
//	target=orderd mode=flat c=64 sent=41230 ok=41230 503=0 other=0 err=0 repeats=8210 duplicate=8210 rate=4122.7/s p50=14.2ms p90=21.0ms p99=30.9ms max=88.1ms elapsed=10.001s
//
// where sent = ok + 503 + other + err (err counts transport failures), and,
// with both -url and -ceiling, a last line "ratio=R" (the target's rate over
// the ceiling's). Exit status: 0 after a run (whatever the answers), 1 on a
// runtime failure, 2 on a usage error.
package load

import (
	"context"
	"io"

	"orderd/cmd/orderd-bench/internal/cli"
)

// Run runs "orderd-bench load" with args (those after the subcommand) and
// returns its exit status: 0 after a run, 1 on a runtime failure, 2 on a
// usage error.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return cli.ExitCode(run(ctx, args, stdout, stderr), stderr, "orderd-bench load")
}
