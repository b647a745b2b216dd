-- 0015: the report columns of 0011, filled by the write path's own code.
--
-- Releases up to 0014 filled 0011's columns (authorized_*, own_wallet_*,
-- refunds) for the orders already stored with one SQL UPDATE whose text
-- the write path never produces: '0007.50' where the write path writes
-- '7.50', '' where it writes NULL for a missing currency, '+00:00' where it
-- writes 'Z', the provider's currency case. No report showed the
-- difference, but two databases of the same history differed byte for
-- byte. From this release 0011 no longer fills them; this step does, for
-- every order stored before it was scheduled, in the background after
-- start (store/background.go, "report_columns"), with store.reportColumnsOf,
-- which the write path uses. A database migrated by the old UPDATE is
-- rewritten to the write path's text; reports keep reading the old text
-- meanwhile (it parses to the same decimals), and a column still NULL is
-- read from the order's state as before.
--
-- A new database (no order yet) has nothing to rewrite.
INSERT INTO background_migrations (name, scheduled_at)
SELECT 'report_columns', CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
WHERE EXISTS (SELECT 1 FROM orders);
