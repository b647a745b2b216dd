-- 0004: events the relay sets aside.
--
-- An event that can never be published as it is (larger than the NATS
-- server's or the stream's largest message, or a row that does not encode)
-- is set aside rather than left to hold back the outbox: published_at is
-- set, so it leaves the unpublished index, the backlog and the readiness
-- check, and set_aside says why. Pruning keeps such rows, so the event can
-- be sent again once the limit is raised (clear both columns).
ALTER TABLE outbox ADD COLUMN set_aside TEXT;
