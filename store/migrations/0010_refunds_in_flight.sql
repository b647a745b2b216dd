-- 0010: the completed orders with a refund in flight, found without a scan.
--
-- A refund moves from new (or processing) to completed or rejected at the
-- provider on its own, and the provider's API does not say that a refund's
-- end sends a webhook: the stale job polls the orders whose refund has
-- been in flight for a while (store.RefundingOrders). ledger_pending holds
-- every movement still to happen, of every order in flight; this index
-- reaches the refunds among them, by order.
CREATE INDEX ledger_pending_kind ON ledger_pending (kind, order_id);
