-- 0001: the core schema of orderd's store.
--
-- Conventions: every *_at column is INTEGER unix milliseconds (UTC); money
-- amounts are TEXT exactly as the provider writes them (never REAL); raw
-- bodies are BLOBs holding the bytes as received. Every table has an
-- integer primary key, and only the indexes an invariant or a query needs
-- exist, because each random-key index costs a page write per insert on the
-- hot path.

-- orders: the current state of every order orderd knows, one row per
-- provider order id. state_id points at the order_history row of the
-- current state, whose raw JSON lives either in that row (polls, gateway
-- answers) or in the delivery it points at (webhooks), so a body is stored
-- once (the orders_current view joins it). The pointer is not declared as a
-- foreign key because the two rows reference each other and are written in
-- the same transaction.
CREATE TABLE orders (
    id                INTEGER PRIMARY KEY,
    provider_id       TEXT    NOT NULL UNIQUE,
    merchant_order_id TEXT    NOT NULL UNIQUE,
    type              TEXT    NOT NULL,
    status            TEXT    NOT NULL,
    fingerprint       TEXT    NOT NULL,
    source_amount     TEXT,
    source_currency   TEXT,
    target_amount     TEXT,
    target_currency   TEXT,
    state_id          INTEGER,
    learned_via       TEXT    NOT NULL,
    created_at        INTEGER,          -- the provider's createdAt
    first_seen_at     INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL, -- last change of state as orderd saw it
    completed_at      INTEGER,          -- the provider's completedAt, else when orderd learned the final status
    next_check_at     INTEGER,          -- when the reconciler should poll a non-final order
    check_attempts    INTEGER NOT NULL DEFAULT 0
);

-- The reconciler's due-orders query: non-final orders by next check.
CREATE INDEX orders_due ON orders (next_check_at) WHERE status IN ('new', 'processing');

-- deliveries: every distinct authenticated webhook body, once. The key is
-- (order, SHA-256 of the exact bytes): a byte-identical repeat bumps
-- times_seen and last_received_at instead of adding a row, while a repeat in
-- another formatting is kept as its own evidence (it is still a duplicate of
-- the order's state, decided by fingerprint). Leading with the integer
-- order id keeps the index append-mostly for new orders.
CREATE TABLE deliveries (
    id                INTEGER PRIMARY KEY,
    order_id          INTEGER NOT NULL REFERENCES orders (id),
    body_sha256       BLOB    NOT NULL,
    fingerprint       TEXT    NOT NULL,
    raw               BLOB    NOT NULL,
    headers           TEXT,
    remote_addr       TEXT,
    first_received_at INTEGER NOT NULL,
    last_received_at  INTEGER NOT NULL,
    times_seen        INTEGER NOT NULL DEFAULT 1,
    UNIQUE (order_id, body_sha256)
);

-- order_history: every state observed for an order, with the outcome Apply
-- decided. Webhook states point at their delivery; other sources keep their
-- raw JSON here. The (order_id, fingerprint) index answers both "was this
-- state seen before" and the per-order history listing.
CREATE TABLE order_history (
    id          INTEGER PRIMARY KEY,
    order_id    INTEGER NOT NULL REFERENCES orders (id),
    fingerprint TEXT    NOT NULL,
    status      TEXT    NOT NULL,
    source      TEXT    NOT NULL,
    outcome     TEXT    NOT NULL,
    observed_at INTEGER NOT NULL,
    delivery_id INTEGER REFERENCES deliveries (id),
    raw         BLOB,
    CHECK ((delivery_id IS NULL) <> (raw IS NULL))
);
CREATE INDEX order_history_order ON order_history (order_id, fingerprint);

-- orders_current: each order with the raw JSON of its current state, for
-- readers (API, reports) that want the provider's own shape.
CREATE VIEW orders_current AS
SELECT o.*, coalesce(h.raw, d.raw) AS raw
  FROM orders o
  LEFT JOIN order_history h ON h.id = o.state_id
  LEFT JOIN deliveries d ON d.id = h.delivery_id;

-- outbox: events waiting to be published, in seq order. AUTOINCREMENT keeps
-- seq from ever being reused after pruning, so a relay's cursor stays valid.
-- Order events reference their history row (state_id) for data; other
-- events (findings, creation outcomes) carry data inline.
--
-- Event ids are unique. For order events that holds by construction: the id
-- hashes (order id, fingerprint, type) and the write path queues at most
-- one event per (order, fingerprint), since a fingerprint already in the
-- order's history is never new again. The unique index therefore covers
-- only the other events, whose writers rely on INSERT ... ON CONFLICT to
-- drop repeats; this saves a random-key index write per order event.
CREATE TABLE outbox (
    seq               INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id          TEXT    NOT NULL,
    type              TEXT    NOT NULL,
    subject           TEXT    NOT NULL,
    event_subject     TEXT    NOT NULL,
    time              INTEGER NOT NULL,
    merchant_order_id TEXT,
    learned_via       TEXT,
    state_id          INTEGER REFERENCES order_history (id),
    data              BLOB,
    created_at        INTEGER NOT NULL,
    published_at      INTEGER,
    CHECK ((state_id IS NULL) <> (data IS NULL))
);
CREATE UNIQUE INDEX outbox_event_id ON outbox (event_id) WHERE state_id IS NULL;
CREATE INDEX outbox_unpublished ON outbox (seq) WHERE published_at IS NULL;

-- quarantine: signed webhook bodies that did not parse as an order. Kept
-- once per exact body; a repeat bumps times_seen.
CREATE TABLE quarantine (
    id                INTEGER PRIMARY KEY,
    body_sha256       BLOB    NOT NULL UNIQUE,
    raw               BLOB    NOT NULL,
    headers           TEXT,
    remote_addr       TEXT,
    reason            TEXT    NOT NULL,
    order_id          TEXT,
    merchant_order_id TEXT,
    received_at       INTEGER NOT NULL,
    last_received_at  INTEGER NOT NULL,
    times_seen        INTEGER NOT NULL DEFAULT 1
);

-- findings: what the reconciler and the write path could not settle alone.
-- At most one open finding per (kind, subject key).
CREATE TABLE findings (
    id          INTEGER PRIMARY KEY,
    kind        TEXT    NOT NULL,
    subject_key TEXT    NOT NULL,
    detail      TEXT    NOT NULL,
    found_at    INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    resolved_at INTEGER
);
CREATE UNIQUE INDEX findings_open ON findings (kind, subject_key) WHERE resolved_at IS NULL;

-- watches: orders to poll that orderd may not know yet (a quarantined body's
-- order, a webhook that failed its signature check, an order a platform
-- created itself). The reconciler resolves a watch once it has polled it.
CREATE TABLE watches (
    id                INTEGER PRIMARY KEY,
    merchant_order_id TEXT    NOT NULL UNIQUE,
    provider_order_id TEXT,
    type              TEXT,
    reason            TEXT    NOT NULL,
    created_at        INTEGER NOT NULL,
    next_check_at     INTEGER NOT NULL,
    attempts          INTEGER NOT NULL DEFAULT 0,
    resolved_at       INTEGER
);
CREATE INDEX watches_due ON watches (next_check_at) WHERE resolved_at IS NULL;

-- store_meta: small key/value facts about the store itself; the readiness
-- probe writes its heartbeat here.
CREATE TABLE store_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
