-- 0008: what a long life needs to stay fast: per-minute counters of what
-- arrived (the dashboard's rates) and the source of each order's final state
-- (the reports).
--
-- activity_minutes. The dashboard shows the webhooks and events of the last 5 and 60
-- minutes. Counting them in the tables costs a read of every row in the
-- window (history rows carry their webhook's body), which on a busy
-- database is hundreds of thousands of rows per page view. The write path
-- keeps these counters in the transaction that writes the rows, from the
-- rows' own times (store.Tx.flushActivity: one statement per minute a
-- batch touched, not one per row), so every instance of replicated mode,
-- which applies the same log through the same code, derives the same
-- counters, and a rolled-back write leaves no count behind. A window is
-- then the sum of at most 61 rows, plus an exact count of the rows of its
-- first, partial minute.
--
-- minute is unix milliseconds / 60000. webhooks counts the distinct
-- authenticated webhook bodies first received in the minute (a history row
-- that keeps its body, or a deliveries row; a byte-identical repeat updates
-- its row and is not counted again), as the webhook_deliveries view lists
-- them; events counts the outbox rows queued in the minute. A row is a few
-- bytes per minute of life, however many orders the minute saw.
CREATE TABLE activity_minutes (
    minute   INTEGER PRIMARY KEY,
    webhooks INTEGER NOT NULL DEFAULT 0,
    events   INTEGER NOT NULL DEFAULT 0
);

-- The rows written before: one pass over each table (measured in
-- BENCHMARKS.md, "A long life").
INSERT INTO activity_minutes (minute, webhooks, events)
SELECT minute, sum(w), sum(e) FROM (
    SELECT observed_at / 60000 AS minute, 1 AS w, 0 AS e FROM order_history WHERE body_sha256 IS NOT NULL
    UNION ALL
    SELECT first_received_at / 60000, 1, 0 FROM deliveries
    UNION ALL
    SELECT created_at / 60000, 0, 1 FROM outbox
) GROUP BY minute;

-- final_via: how orderd learned the state that brought an order its final
-- status (webhook, poll or gateway), set by the write path with that
-- state. A report's final lines show it; reading it here spares a report
-- a look into every order's history (random reads of rows that carry
-- webhook bodies, which made a month's report cost several times a scan
-- of its orders). NULL while the order is not final. The orders written
-- before get it from their history, once.
ALTER TABLE orders ADD COLUMN final_via TEXT;

UPDATE orders SET final_via = (
    SELECT h.source FROM order_history h
     WHERE h.order_id = orders.id AND h.status = orders.status AND h.outcome IN ('new', 'changed')
     ORDER BY h.id LIMIT 1)
 WHERE completed_at IS NOT NULL;
