// Package providertest is an in-process fake of the payment provider, in
// the spirit of net/http/httptest: NewServer(Options{}) starts it on a free
// loopback port with an API key and a webhook signing key, and Close stops
// it and every goroutine it started. The zero Options works.
//
// It implements every endpoint of the provider's API with the spec's rules
// and keeps the provider's state in memory: orders and their transactions,
// refunds, balances per currency and client requisites. Tests drive what
// the provider would do on its own through controls: Complete and Reject an
// order, Deposit to a requisite, AdjustBalance with no order behind it,
// advance and finish refunds, and InjectFault on the next calls (a 5xx
// before or after the effect, a slow answer, a reset connection, an error
// code, a third-party rejection at creation). Calls and Webhooks record
// what happened. ControlHandler offers the same controls over HTTP for a
// fake in another process (cmd/providertest).
//
// # The spec's rules
//
// Every call is POST with the API key in Authorization and a JSON body;
// every answer is HTTP 200 with the envelope {"data": …, "error": …}.
// Checks run in this order: method (INVALID_HTTP_METHOD), key
// (AUTHENTICATION_FAILED), source IP and referer when configured, path
// (METHOD_NOT_FOUND), JSON syntax (INVALID_DATA), then field validation
// (VALIDATION, with one validationErrors item per bad field, named by its
// dotted path such as "invoice.amount").
//
// A payin is created in processing with an auth object (pixDynamicQrCode,
// a code, expiresAt, and a redirectUrl to a checkout page on the fake whose
// Pay and Decline buttons complete or reject the order and then send the
// customer to the order's returnUrl) and one payin transaction. Complete moves it to completed: the transaction gets
// completedAt, merchantTargetWallet carries the authorized amount minus the
// fee (Options.FeePercent, rounded to cents) and the balance is credited by
// that amount. A final status sends the webhook.
//
// Refunds follow the spec: only a completed payin can be refunded; the sum
// of refunds not rejected never exceeds the original amount; a refund of
// the whole original amount is "full" (new → completed|rejected), any other
// is "partial" (new → processing → completed|rejected). A refund appears in
// the order's transactions with type "refund" and its amount; a completed
// refund debits the balance.
//
// # Choices where the spec is silent
//
//   - Refund failures: an order that is not a completed payin answers
//     OPERATION_NOT_SUPPORTED; an amount above what is left to refund is
//     VALIDATION on "amount"; either id or merchantOrderId identifies the
//     order (both must then agree).
//   - Money that pending payouts and refunds will take is held: creating
//     one fails with NOT_ENOUGH_BALANCE when the balance minus what is held
//     is short. The balance itself moves only on completion.
//   - Withdrawals (order/withdrawal/create) take {"merchantOrderId",
//     "amount": {"amount", "currency"}} (or "invoice" in place of "amount"),
//     an optional "webhookUrl", and ignore other fields. They create a
//     payout order in processing and answer it in the get-status shape.
//     Completing it debits the balance by the amount, which the order
//     carries in merchantSourceWallet (a positive amount); payouts have no
//     fee.
//   - Requisites: requisite/create returns the active requisite a client
//     already has for the same currency and type instead of a second one.
//     long_term requisites live a year, short_term a day; each completed
//     deposit renews expiresAt. A deposit below minAmount creates an order
//     that is rejected at once. Unknown requisites answer WALLET_NOT_FOUND;
//     deactivate answers the requisite with its expiresAt set to now.
//   - get-orders-list answers data {"orders": [<order as get-status>…],
//     "total": <number of orders in the range>}, ordered by creation.
//     createdAtFrom is inclusive and createdAtTo exclusive; limit defaults
//     to 50 and must be 1…100; offset must not be negative.
//   - Timestamps: order createdAt and auth expiresAt use the "+00:00" form,
//     transaction and requisite times the "Z" form, all with microseconds.
//   - get-status does not repeat the auth object of the create answer.
//   - Refunds send no webhook unless Options.RefundWebhooks is set.
//
// # Webhooks
//
// When an order reaches a final status and has a webhookUrl, the fake
// POSTs exactly the bytes get-status would answer as data, with
// Content-Type application/json and a Signature header made by Sign. Any
// answer but 200, a network fault or a timeout (Options.WebhookTimeout,
// 3 s) is retried after Options.WebhookBaseDelay, each further retry
// waiting double the previous one, at most Options.MaxWebhookRetries (20)
// times. Options.DuplicateWebhooks and Options.OutOfOrder add a second
// delivery of the same body and a late delivery of the older processing
// state. One order's webhooks go out one after another, in the order its
// states happened; different orders' go out in parallel. Every delivery
// runs on a goroutine the Server owns; WaitIdle waits for them and Close
// stops them.
//
// # Restarts
//
// With Options.StateFile the fake keeps its books — orders, requisites,
// balances and held amounts — in a JSON file, written atomically soon after
// every change and at Close, and a fake started on the same file carries
// on from them (Restored reports it), as a real provider does when the
// merchant's side restarts. Deliveries in flight are not kept.
package providertest
