-- 0016: the first digest a report gave for a period that had ended.
--
-- A digest finance signed must come out the same whenever the period's
-- report is made again, unless data inside the period changed; then the
-- report names the lines that changed since. The first report of an ended
-- period (from, to) records here its digest, when it was made and a
-- fingerprint of its order lines (buckets: for each of 4096 groups of
-- orders by id, the sum of their lines' hashes), under the version of
-- what a digest covers: a later report of the same period compares its
-- own lines with them. Rows are never replaced: the first issue stays the
-- first.
--
-- The table is local, like log_identity and log_entries: a report is made
-- by one instance, so no digest of the replicated state covers it (an
-- instance that never made the report has no row), and a snapshot carries
-- it.
CREATE TABLE issued_digests (
    period_from INTEGER NOT NULL,
    period_to   INTEGER NOT NULL,
    version     TEXT    NOT NULL,
    digest      TEXT    NOT NULL,
    issued_at   INTEGER NOT NULL,
    lines       INTEGER NOT NULL,
    buckets     BLOB    NOT NULL,
    PRIMARY KEY (period_from, period_to, version)
);
