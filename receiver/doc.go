// Package receiver owns the webhook endpoint: the HTTP handler that takes the
// provider's signed order webhooks, and the HTTP server it runs on.
//
// A delivery passes the checks in a fixed order, and the first that fails
// decides the answer:
//
//	method is POST                     405 bad_method (with Allow: POST)
//	path is Config.Path                404 not_found
//	source address is allowed          403 forbidden
//	body fits Config.MaxBodyBytes      413 too_large (400 bad_request if unreadable)
//	Signature header verifies          401 bad_signature
//	body is not empty                  400 bad_request
//	body decodes as an order           200 quarantined (kept, not lost)
//	store commits within AckBudget     200 accepted | duplicate | stale
//	                                   503 overloaded | unavailable (Retry-After)
//
// The handler answers 200 only after the store has committed the delivery
// and its effects, so an acknowledged webhook is durable. When the commit
// does not finish within the ack budget (the provider waits at most 3 s) it
// answers 503, and the provider retries later; the retry is recognised as a
// duplicate if the first commit did land after all.
//
// Unauthenticated input changes nothing: a delivery refused before its
// signature verifies is never stored as order data. The one thing read from
// an unverified body is its merchantOrderId, which is handed to the store as
// a hint to poll that order: a bad signature may mean the provider rotated
// its key, and a poll goes to the provider itself, so a forged hint gains an
// attacker nothing. Such hints are rate-limited.
//
// A signed body that does not decode as an order is quarantined with the
// reason and acknowledged: the provider would otherwise retry a body that
// can never succeed, and the quarantine keeps it for people to inspect. So
// is an order the store refuses because it contradicts an identity already
// stored (another provider id under a known merchantOrderId, or a known
// provider id with another merchantOrderId or type).
//
// Every answer is a small JSON object {"status": word} (with "error" naming
// the problem when there is one), every delivery is logged in one line
// (never with its body or signature) and counted in Metrics. The verifier
// and the address lists can be replaced while the handler serves, so keys
// and allow-lists can be reloaded without a restart.
package receiver
