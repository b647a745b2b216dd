-- 0013: the findings people resolved lately, for the dashboard.
--
-- The dashboard lists the most recently resolved findings with their
-- trail, so that a finding a person has just resolved stays in sight with
-- who resolved it and why. Without an index that listing would read every
-- finding ever resolved; this partial index holds only the resolved ones,
-- in the order they were resolved, so the listing walks it from its end
-- and stops at its limit.
CREATE INDEX findings_resolved ON findings (resolved_at, id) WHERE resolved_at IS NOT NULL;
