-- 0002: the creation gateway's attempts.
--
-- An attempt is one creation (or requisite action) orderd was asked to make
-- at the provider, or an in-doubt creation a platform handed over through
-- the watch endpoint. The row is committed before the provider is called,
-- so no outcome can be lost: a daemon that dies mid-call leaves it
-- 'pending', and the next start turns it 'in_doubt' for the reconciler to
-- settle with get-status.
--
-- idempotency_key groups the attempts that must not run twice: payins and
-- payouts share "order:<merchantOrderId>", refunds use the Idempotency-Key
-- header or the order and the request's hash, requisites the header or the
-- request's hash. request_hash is the SHA-256 of the kind and the
-- canonical request, so an identical repeat is recognised whatever its
-- formatting.
--
-- Times are INTEGER unix milliseconds like the rest of the schema.
CREATE TABLE attempts (
    id                INTEGER PRIMARY KEY,
    kind              TEXT    NOT NULL CHECK (kind IN
                          ('payin', 'payout', 'refund', 'requisite', 'requisite_deactivate')),
    origin            TEXT    NOT NULL CHECK (origin IN ('gateway', 'watch')),
    merchant_order_id TEXT    NOT NULL DEFAULT '',
    idempotency_key   TEXT    NOT NULL,
    request           BLOB    NOT NULL,
    request_hash      TEXT    NOT NULL,
    state             TEXT    NOT NULL CHECK (state IN
                          ('pending', 'created', 'rejected', 'in_doubt', 'not_created')),
    error_code        TEXT    NOT NULL DEFAULT '',
    detail            TEXT    NOT NULL DEFAULT '',
    response          BLOB,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    settled_at        INTEGER,
    next_check_at     INTEGER,
    check_attempts    INTEGER NOT NULL DEFAULT 0
);

-- The idempotency lookup: the latest attempt for a key.
CREATE INDEX attempts_key ON attempts (idempotency_key, id);
-- GET /v1/orders/{merchantOrderId} lists an order's attempts.
CREATE INDEX attempts_merchant_order ON attempts (merchant_order_id) WHERE merchant_order_id <> '';
-- The reconciler's due query and the restart recovery touch only
-- unsettled attempts, a small set.
CREATE INDEX attempts_unsettled ON attempts (state, next_check_at) WHERE state IN ('pending', 'in_doubt');
