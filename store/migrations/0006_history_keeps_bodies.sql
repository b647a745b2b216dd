-- 0006: a webhook's body lives in the history row of the state it brought.
--
-- Before, every webhook body had a deliveries row, and the history row of
-- the state it brought pointed at it: two rows and two index entries for
-- one state on the hot path. Now a webhook that brings a new or changed
-- state keeps its body and the delivery's facts (SHA-256, kept headers,
-- remote address, last receipt, times seen; first receipt is observed_at)
-- in that history row. deliveries keeps every other body, one that
-- brought no new state: the first webhook of a state learned by poll or
-- from the gateway, a repeat in another formatting, a stale state. A
-- byte-identical repeat still bumps the counter of the one row holding its
-- body, wherever that is (a replayed old state's bytes add no history
-- row). Rows written before stay as they are: readers take
-- coalesce(h.raw, d.raw) as before.
ALTER TABLE order_history ADD COLUMN body_sha256 BLOB;
ALTER TABLE order_history ADD COLUMN headers TEXT;
ALTER TABLE order_history ADD COLUMN remote_addr TEXT;
ALTER TABLE order_history ADD COLUMN last_received_at INTEGER;
ALTER TABLE order_history ADD COLUMN times_seen INTEGER;

-- webhook_deliveries: every authenticated webhook body once, wherever it
-- is kept, with the facts a deliveries row has. Exactly one of
-- delivery_id and history_id is set.
CREATE VIEW webhook_deliveries AS
SELECT id AS delivery_id, NULL AS history_id, order_id, body_sha256, fingerprint, raw, headers, remote_addr,
       first_received_at, last_received_at, times_seen
  FROM deliveries
UNION ALL
SELECT NULL, id, order_id, body_sha256, fingerprint, raw, headers, remote_addr,
       observed_at, last_received_at, times_seen
  FROM order_history
 WHERE body_sha256 IS NOT NULL;
