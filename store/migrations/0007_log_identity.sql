-- 0007: the log a replicated database follows.
--
-- Every replicated log has an id (a UUID, kept with the log stream in
-- NATS), and a database in replicated mode records the id of the log whose
-- entries it has applied. An instance compares the two at start and
-- refuses a database of another log: a backup of another deployment, or a
-- database of a log since lost and seeded anew, whose applied sequence
-- means nothing in this log. The row is written only outside the log (on
-- a first start, or by `orderd cluster seed`), so it is no replicated
-- table; a snapshot carries it, so an instance restored from one follows
-- the snapshot's log.
CREATE TABLE log_identity (
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    log_id TEXT NOT NULL
);
