-- 0014: migrations that rewrite existing rows run in the background.
--
-- A schema step that must rewrite every row of a large table (filling a
-- new column from each order's state) held the start for as long as it
-- took: 49 s at a million orders for 0011's backfill, with orderd not
-- ready and the provider answered 503 meanwhile. Such a rewrite is now a
-- Go step (store/background.go) that a SQL migration only schedules, by
-- inserting its row here; after start it walks the table by row id, a
-- bounded batch per short transaction through the one writer, so the
-- webhooks' commits go on between its batches.
--
-- One row per background step, kept after it finished:
--   name        the step (store.backgroundSteps knows each by name);
--   cursor      the last row id it has rewritten: a restart resumes after it;
--   end_id      the highest row id when it began; rows written after that
--               come from the current write path and need no rewrite;
--   rows_done   rows walked so far, rows_total rows to walk (NULL until it
--               began), for /readyz, the metrics and `orderd migrate`;
--   scheduled_at, started_at, finished_at: unix milliseconds; finished_at
--               NULL while the step has rows left.
-- The table is local bookkeeping, like store_meta: every instance of
-- replicated mode runs each step on its own database, at its own pace.
CREATE TABLE background_migrations (
    name         TEXT    PRIMARY KEY,
    cursor       INTEGER NOT NULL DEFAULT 0,
    end_id       INTEGER,
    rows_done    INTEGER NOT NULL DEFAULT 0,
    rows_total   INTEGER,
    scheduled_at INTEGER NOT NULL,
    started_at   INTEGER,
    finished_at  INTEGER
) WITHOUT ROWID;
