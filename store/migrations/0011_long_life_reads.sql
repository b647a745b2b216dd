-- 0011: reads that stay cheap as the orders grow: the amounts a report
-- reads, kept on the order, and the order listing's check of a status or
-- type the provider does not document.
--
-- A report line needs, of an order's current state, only its merchant
-- wallets (source_amount … target_currency, kept since 0001), what its
-- own transaction authorized and what that transaction's merchant wallet
-- says, and its completed refunds. Reading them out of each order's stored
-- JSON made a month's report cost twice a scan of its orders: the history
-- row that holds the JSON carries the webhook's body, and the JSON had to
-- be read through. The write path now keeps them as columns with the state
-- (store.Tx.apply, from the observation's decoded order, so every instance
-- of replicated mode, which applies the same log through the same code,
-- writes the same values), and a report reads the order's row alone.
--
-- The order's own transaction is the first of its transactions whose type
-- is the order's, else the first that is not a refund (as the ledger reads
-- it). authorized_* is that transaction's authorized amount, own_wallet_*
-- its merchantWallet; the amounts are the provider's decimal text, NULL
-- when the state states none. refunds lists the completed refund
-- transactions with an amount, in the state's order, as a JSON array of
-- [amount, currency, completedAt] ("" when the provider gave no
-- completedAt); '' when there are none. refunds NULL means the columns were
-- never filled (an order the background step below has not reached yet, or
-- a state that does not decode): a report then reads the state's JSON, as
-- before.
ALTER TABLE orders ADD COLUMN authorized_amount TEXT;
ALTER TABLE orders ADD COLUMN authorized_currency TEXT;
ALTER TABLE orders ADD COLUMN own_wallet_amount TEXT;
ALTER TABLE orders ADD COLUMN own_wallet_currency TEXT;
ALTER TABLE orders ADD COLUMN refunds TEXT;

-- The orders written before are filled in the background after start, a
-- few hundred rows per transaction, by the write path's own code
-- (store.reportColumnsOf), so the text is the write path's: migration 0015
-- schedules that step (store/background.go). Releases before 0015 filled
-- them here, in one UPDATE that held the start for about 49 s at a
-- million orders and wrote text of its own ('0007.50' where the write path
-- writes '7.50', '' where it writes NULL); 0015 rewrites those too. Until
-- the step has passed an order, its columns are NULL (a report reads its
-- state's JSON) or the older text, which reads as the same decimals.

-- GET /v1/orders answers 400 for a status or type that is neither one the
-- provider documents nor held by a stored order (rather than an empty
-- list). Whether a stored order holds such a word was a walk of every
-- order. These partial indexes hold only the orders with an undocumented
-- status or type, which are none in practice, so they cost the write path
-- nothing and answer the question at once (store.HasOddOrderWord).
CREATE INDEX orders_odd_status ON orders (status, id)
    WHERE status NOT IN ('new', 'processing', 'completed', 'rejected');
CREATE INDEX orders_odd_type ON orders (type, id)
    WHERE type NOT IN ('payin', 'payout');
