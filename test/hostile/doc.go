// Package hostile holds tests that attack a running orderd: the real
// binary, built once per run, started as a process against a real SQLite
// file, embedded NATS and the fake provider of provider/providertest.
//
// Each case sends something a careless or malicious client might send —
// slow or idle connections, oversized bodies and headers, forged, malformed
// or replayed webhooks, unauthenticated admin requests from another
// address — and asserts what a user would see: a clear status, no order
// data stored from unauthenticated input, nothing lost that was
// acknowledged, and a daemon that keeps serving everyone else.
//
// The package has only tests; it is a plain "go test" package (no build
// tag), so it runs in CI with everything else.
package hostile
