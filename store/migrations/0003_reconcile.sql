-- 0003: the reconciler's tables.
--
-- Times are INTEGER unix milliseconds (UTC) and money is TEXT, like the
-- rest of the schema. Only the indexes a reconcile or report query needs
-- exist.

-- reconcile_runs: one row per run of a reconcile job (scheduled or from
-- the CLI). The row is written when the run starts, so a run in progress
-- (finished_at NULL) is visible; counts is a JSON object of what the run
-- did ({"checked": 12, "changed": 3, ...}); error is empty on success.
CREATE TABLE reconcile_runs (
    id          INTEGER PRIMARY KEY,
    job         TEXT    NOT NULL,
    started_at  INTEGER NOT NULL,
    finished_at INTEGER,
    counts      TEXT    NOT NULL DEFAULT '{}',
    error       TEXT    NOT NULL DEFAULT ''
);
-- The latest runs of one job (health, reports).
CREATE INDEX reconcile_runs_job ON reconcile_runs (job, started_at);

-- balance_snapshots: the provider's available balance per currency, as the
-- balances job read it. amount is the provider's numeric string.
CREATE TABLE balance_snapshots (
    id       INTEGER PRIMARY KEY,
    currency TEXT    NOT NULL,
    amount   TEXT    NOT NULL,
    taken_at INTEGER NOT NULL,
    run_id   INTEGER REFERENCES reconcile_runs (id)
);
-- The previous snapshot of a currency; snapshots of a report period.
CREATE INDEX balance_snapshots_currency ON balance_snapshots (currency, taken_at);

-- balance_drifts: one row per currency per balances run that had a
-- snapshot to compare with. The comparison runs from the "opening"
-- snapshot to the "closing" one. The opening snapshot is the previous one,
-- unless the previous comparison left drift unexplained beyond tolerance:
-- then the opening snapshot stays where the books last balanced, so a
-- movement learned late still explains it and real missing money keeps
-- showing.
--
--   actual      = closing amount - opening amount
--   expected    = sum of ledger_movements placed in (opening, closing]
--   drift       = actual - expected
--   explained   = the part of drift attributed (detail.parts)
--   unexplained = drift - explained
--   within_tolerance = |unexplained| <= tolerance
--
-- detail is the JSON the balance_drift finding carries: both snapshots,
-- the sums, and parts [{kind, amount, orders:[{orderId, merchantOrderId,
-- amount, at}]}] with kind boundary | processing | in_doubt |
-- refund_in_flight.
CREATE TABLE balance_drifts (
    id               INTEGER PRIMARY KEY,
    currency         TEXT    NOT NULL,
    opening_id       INTEGER NOT NULL REFERENCES balance_snapshots (id),
    closing_id       INTEGER NOT NULL REFERENCES balance_snapshots (id),
    opening_at       INTEGER NOT NULL,
    closing_at       INTEGER NOT NULL,
    opening          TEXT    NOT NULL,
    closing          TEXT    NOT NULL,
    actual           TEXT    NOT NULL,
    expected         TEXT    NOT NULL,
    drift            TEXT    NOT NULL,
    explained        TEXT    NOT NULL,
    unexplained      TEXT    NOT NULL,
    tolerance        TEXT    NOT NULL,
    within_tolerance INTEGER NOT NULL,
    detail           TEXT    NOT NULL,
    run_id           INTEGER REFERENCES reconcile_runs (id),
    computed_at      INTEGER NOT NULL
);
-- The latest comparison of a currency; comparisons of a report period.
CREATE INDEX balance_drifts_currency ON balance_drifts (currency, closing_at);

-- ledger_movements: every movement of the merchant's balance that orderd
-- has observed, derived from order states by the balances job: a completed
-- payin credits merchantTargetWallet (positive), a completed payout debits
-- merchantSourceWallet (negative), a completed refund transaction debits
-- its amount (negative). placed_at is the provider's completedAt, or when
-- orderd learned the state (placed_by 'learned') when the provider gave
-- none. entry_key is the order's own transaction (payin/payout) or the
-- refund transaction's id, so a movement is recorded once.
CREATE TABLE ledger_movements (
    id                INTEGER PRIMARY KEY,
    order_id          INTEGER NOT NULL REFERENCES orders (id),
    entry_key         TEXT    NOT NULL,
    kind              TEXT    NOT NULL CHECK (kind IN ('payin', 'payout', 'refund')),
    provider_order_id TEXT    NOT NULL,
    merchant_order_id TEXT    NOT NULL,
    currency          TEXT    NOT NULL,
    amount            TEXT    NOT NULL,
    placed_at         INTEGER NOT NULL,
    placed_by         TEXT    NOT NULL CHECK (placed_by IN ('provider', 'learned')),
    learned_at        INTEGER NOT NULL,
    UNIQUE (order_id, entry_key)
);
-- Sums and boundary lookups between two snapshots.
CREATE INDEX ledger_movements_placed ON ledger_movements (currency, placed_at);

-- ledger_pending: movements that may still happen, as of each order's
-- latest state: a payin or payout not final yet ('processing', the amount
-- it would move) and refund transactions not final yet ('refund_in_flight',
-- negative). The balances job offers them as explanations of drift.
CREATE TABLE ledger_pending (
    order_id          INTEGER NOT NULL REFERENCES orders (id),
    entry_key         TEXT    NOT NULL,
    kind              TEXT    NOT NULL CHECK (kind IN ('processing', 'refund_in_flight')),
    provider_order_id TEXT    NOT NULL,
    merchant_order_id TEXT    NOT NULL,
    currency          TEXT    NOT NULL,
    amount            TEXT    NOT NULL,
    since             INTEGER NOT NULL,
    PRIMARY KEY (order_id, entry_key)
) WITHOUT ROWID;

-- reconcile_state: the reconciler's cursors, e.g. the last order_history
-- row the ledger has read.
CREATE TABLE reconcile_state (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;

-- requisites: deposit requisites the sweep pages through. Registered by
-- the gateway when it creates one (source 'gateway') or through the watch
-- endpoint (source 'watch'). last_swept_at is where the next sweep starts
-- (with a small overlap).
CREATE TABLE requisites (
    id             INTEGER PRIMARY KEY,
    requisite_id   TEXT    NOT NULL UNIQUE,
    currency       TEXT    NOT NULL DEFAULT '',
    source         TEXT    NOT NULL,
    active         INTEGER NOT NULL DEFAULT 1,
    created_at     INTEGER NOT NULL,
    deactivated_at INTEGER,
    last_swept_at  INTEGER,
    recovered      INTEGER NOT NULL DEFAULT 0
);
