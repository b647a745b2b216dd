// Package provider is orderd's vocabulary for the payment provider: the wire
// types of every resource in the provider's API (orders, transactions,
// money, requisites, balances, the response envelope and its errors), an
// HTTP client with a method per endpoint, and verification of the
// provider's signed webhooks.
//
// Money is exact: amounts are decimal.Decimal parsed from numeric strings and
// written back as strings, never through float64. Unknown fields and enum
// values are kept, because the provider's list of values is only what has
// been seen so far.
//
// Outcomes are classified so callers can branch: a decoded error envelope is
// a definite *Error; anything else that goes wrong (transport fault, timeout,
// non-200 status, undecodable body) wraps ErrInDoubt, which for a create call
// means the order may or may not exist and get-status must settle it. A call
// that never left orderd (the rate limiter's wait or the context ended first)
// wraps ErrNotSent instead: the provider saw nothing.
//
// Webhooks are checked by a Verifier over the provider's public keys (RSA or
// ECDSA, several at once for rotation), accepting exactly what
// `openssl dgst -sha512 -sign KEY body | openssl base64` produces.
package provider
