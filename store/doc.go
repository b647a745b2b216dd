// Package store is orderd's SQLite database (modernc.org/sqlite): the
// schema and its embedded migrations, the one write path for order state,
// the transactional outbox, findings, watches and quarantine, and the
// queries other packages read with.
//
// # One write path
//
// Every change of an order's state — a webhook, a poll, a gateway answer —
// goes through Store.Apply (or Tx.ApplyObservation inside a Write). In one
// transaction it records the delivery, compares the observed state's
// fingerprint (provider.Order.Fingerprint) with the stored one and decides:
// new, duplicate, stale or changed. Only new and changed states update the
// order and append one outbox event, whose id is EventID(order id,
// fingerprint, event type), so the same state always yields the same event
// id. A final status never regresses; a conflicting final status is kept in
// history and opens a "mismatch" finding for a human. Money changing inside
// a final order (other than a new refund transaction) is applied with its
// event and opens an "amount_changed" finding. A known provider id never
// changes its merchantOrderId or type, nor a merchantOrderId its provider
// id: such a state is refused with ErrConflict.
//
// # Single writer, group commit
//
// SQLite allows one writer at a time, so the store owns exactly one write
// connection, driven by one goroutine. Callers put a request on a bounded
// queue and wait. The writer takes every request waiting at that moment (up
// to Options.MaxBatch), runs each in its own SAVEPOINT inside one
// transaction (a failing request is rolled back alone), commits once, and
// only then releases every waiter with its result. One fsync thus serves a
// whole group, and throughput grows with load while latency stays about one
// commit. A full queue fails at once with ErrOverloaded; a request whose
// caller gave up before the writer reached it is skipped; a caller whose
// context ends while its request is being committed gets ErrUnconfirmed.
// Reads use a separate pool of query-only connections and never wait for
// the writer (WAL).
//
// # Durability
//
// The database runs in WAL mode with synchronous=FULL: a nil error from
// Apply, Write and the other write methods means the change is committed
// and fsynced, and survives a crash or power loss. An error never hides a
// committed success: it is returned only when nothing was written
// (ErrOverloaded, ErrClosed, a skipped request, a failed transaction) or
// when the outcome is unknown (ErrUnconfirmed), in which case the
// provider's retry is recognised as a duplicate if the first copy did
// commit.
//
// # Schema conventions
//
// Migrations live in migrations/NNNN_name.sql and are applied in order,
// each in its own transaction, recorded in schema_migrations; Open applies
// pending ones and Migrate does so alone. Times are INTEGER unix
// milliseconds (UTC); money amounts are TEXT as the provider writes them;
// raw bodies are BLOBs stored once. A webhook that brings a new or changed
// state keeps its body, with the delivery's facts, in that state's history
// row; any other webhook body (the first webhook of a state learned by
// poll or from the gateway, a repeat in another formatting, a stale state)
// is kept in deliveries, and a stale state's history row points at it. A
// byte-identical repeat is counted on the one row that keeps its body and
// adds no history row. Outbox events point at the history row instead of
// copying the body. The webhook_deliveries view lists every kept body
// once, wherever it is.
package store
