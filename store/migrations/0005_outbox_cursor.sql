-- 0005: the relay follows the outbox with a cursor.
--
-- Every event with a seq at or below outbox_cursor.seq is acknowledged by
-- JetStream (or set aside); the relay moves the cursor once per batch of
-- acknowledgements. Before, it stamped published_at on every event with an
-- UPDATE, and the outbox_unpublished index took an entry per event on
-- insert and lost it again at the stamp: two index writes and a row
-- rewrite per event for what one small row now says. Rows queued from now
-- on keep published_at NULL unless they are set aside, so "unpublished" is
-- seq > outbox_cursor.seq AND published_at IS NULL, read along the primary
-- key from the cursor.
CREATE TABLE outbox_cursor (
    id  INTEGER PRIMARY KEY CHECK (id = 1),
    seq INTEGER NOT NULL
);

-- Start below the first event still unpublished (those after it that were
-- stamped keep their stamp, and the relay skips them), or after the last
-- event when every event is published.
INSERT INTO outbox_cursor (id, seq) VALUES (1, coalesce(
    (SELECT min(seq) - 1 FROM outbox WHERE published_at IS NULL),
    (SELECT max(seq) FROM outbox),
    0));

DROP INDEX outbox_unpublished;
