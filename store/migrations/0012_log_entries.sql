-- 0012: the hashes of the log entries a replicated database applied.
--
-- Each row is the SHA-256 an instance computed over a log entry it
-- applied (its sequence, message id, log id, the entry it names as the one
-- before it, and its bytes), written in the same transaction as the
-- entry's effects. An instance checks each new entry's link to an earlier
-- one against these rows, re-reads the entry at its applied sequence from
-- the log to see that the log still holds what it applied, and proves with
-- them that it follows a log whose id was lost. Only the most recent
-- entries are kept. The table is local, like log_identity: no digest of
-- the replicated state covers it, and a snapshot carries it.
CREATE TABLE log_entries (
    seq  INTEGER PRIMARY KEY,
    hash BLOB NOT NULL
);
