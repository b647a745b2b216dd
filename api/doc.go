// Package api is orderd's local admin HTTP API, served on the admin
// listener: health and readiness, Prometheus metrics, the stored orders and
// their history, the gateway's attempts, the reconciler's findings, the
// creation gateway, and — through handlers the daemon passes in Deps — the
// reconciliation reports and the dashboard.
//
// New takes every dependency and returns one http.Handler; all routes are
// registered in routes.go, JSON is decoded and encoded in json.go, and
// errors.go is the one place that turns errors and provider codes into
// HTTP statuses. The OpenAPI 3.1 document of every route is openapi.json,
// embedded and served at GET /v1/openapi.json.
//
// # Authentication
//
// When Config.Token is set, every route except /healthz, /readyz and
// /metrics needs "Authorization: Bearer <token>"; a missing or wrong token
// is answered 401 with a JSON body. The comparison is constant-time.
//
// # The creation gateway
//
// POST /v1/payins, /v1/payouts, /v1/refunds, /v1/requisites and
// /v1/requisites/deactivate take the provider's own create bodies (same
// field names). A body is decoded strictly (a body that is not UTF-8, an
// unknown field, a key given twice or in another case at any depth, or
// malformed JSON is 400),
// validated locally (422 listing field and message, like the
// provider's VALIDATION error), and then recorded as an attempt that is
// committed before the provider is called, so no outcome can be lost:
//
//   - created: the provider's order goes through the store's one write path
//     in the same transaction as the attempt's update; 201
//     {"state":"created","order":{…}} with the provider's data as it came,
//     auth included;
//   - rejected: 422 for VALIDATION, INVALID_DATA and amount codes, 409 for
//     ORDER_ALREADY_EXISTS, 403 when the merchant's account cannot do it,
//     503 when the provider cannot; body
//     {"state":"rejected","error":{"code":…,"validationErrors":…}};
//   - in doubt (a 5xx, a timeout, a network fault): 202
//     {"state":"in_doubt","attempt":{…}}. It is never retried blindly; the
//     reconciler settles it with get-status.
//
// Idempotency. Payins and payouts are keyed by merchantOrderId (one key
// space for both). Refunds are keyed by the Idempotency-Key header when it
// is given, else by the order (merchantOrderId, or id) together with the
// request's hash, so that two identical refund requests without the header
// are one refund. Requisite creations are keyed by the Idempotency-Key
// header, else by the request's hash; deactivations by the requisite id.
// The header may be given once: a second Idempotency-Key header is 400.
// For a key that already has an attempt:
//   - an identical request (same canonical JSON) gets the stored outcome
//     with 200: the same body as the first answer, or for an attempt still
//     in doubt its current state;
//   - a different request is 409 while the earlier attempt is pending, in
//     doubt or created;
//   - after a definite rejection or a proven not_created, a corrected
//     request is a new attempt. An identical request after a rejection
//     whose cause lies outside the request (403 and 503 codes: the
//     merchant's account or the provider) is a new attempt too, since it
//     can succeed later; after one caused by the request (422, 409) it gets
//     the stored rejection.
//
// Payout bodies are not shown by the provider's spec, so they are passed
// through to the withdrawal endpoint as JSON objects (canonicalised), with
// only merchantOrderId required and an amount checked when present.
// Refund answers carry only part of the order, so they are not applied as
// the order's state; the refunded order is put on the reconciler's watch
// list instead. When Config.PublicURL is set, creations without webhookUrl
// get it.
//
// POST /v1/watch hands orderd an order a platform created itself: state
// "created" puts it on the reconciler's watch list; "in_doubt" records an
// in-doubt attempt that the reconciler settles like the gateway's own, or
// answers with the live attempt already holding the merchantOrderId — 409
// naming type when that attempt is of the other type. Type
// "requisite" with a requisiteId registers a deposit requisite for the
// reconciler's sweep.
//
// # Queries
//
// GET /v1/orders lists orders keyset-paged on the store's row id behind an
// opaque cursor, so a listing sees every order exactly once even while
// orders arrive; GET /v1/attempts and GET /v1/findings page the same way.
// A parameter a route does not take, or a bad value, is 400 naming it.
package api
