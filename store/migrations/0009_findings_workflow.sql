-- 0009: findings worked by people, and balance gaps they accepted.
--
-- A finding is open, acknowledged (open, and a person has it in hand) or
-- resolved. resolved_at stays what says open or not (findings_open keeps
-- at most one open finding per kind and subject). A person's resolution is
-- one of explained, written_off or fixed, with who resolved it; a finding
-- the reconciler resolved itself has neither.
--
-- state_key names the state of the subject a finding was opened (or last
-- refreshed) for, without what changes at every check (attempt counts,
-- the latest snapshot): a check that finds a person-resolved finding's
-- subject in the same state does not open it again.
ALTER TABLE findings ADD COLUMN acknowledged_at INTEGER;
ALTER TABLE findings ADD COLUMN resolution TEXT;
ALTER TABLE findings ADD COLUMN resolved_by TEXT;
ALTER TABLE findings ADD COLUMN state_key TEXT NOT NULL DEFAULT '';
-- The latest finding of a subject, to compare a new problem with it.
CREATE INDEX findings_subject ON findings (kind, subject_key, id);

-- finding_actions: the trail, every action a person took on a finding, in
-- order. resolution is set only for resolve.
CREATE TABLE finding_actions (
    id         INTEGER PRIMARY KEY,
    finding_id INTEGER NOT NULL REFERENCES findings (id),
    action     TEXT    NOT NULL CHECK (action IN ('acknowledge', 'resolve', 'reopen')),
    actor      TEXT    NOT NULL,
    note       TEXT    NOT NULL DEFAULT '',
    resolution TEXT,
    at         INTEGER NOT NULL
);
CREATE INDEX finding_actions_finding ON finding_actions (finding_id, id);

-- balance_drifts.accepted: a person resolved the balance_drift finding
-- this comparison belonged to as explained or written off, so the books
-- count as agreed at its closing snapshot: the next comparison opens there
-- and a new problem is measured from it.
ALTER TABLE balance_drifts ADD COLUMN accepted INTEGER NOT NULL DEFAULT 0;
