-- The UPDATE with which migration 0011 filled the report columns of the
-- orders already stored, in releases before the report_columns background
-- migration (0015). Tests run it on purpose to make a database as those
-- releases left it.
UPDATE orders SET (authorized_amount, authorized_currency, own_wallet_amount, own_wallet_currency, refunds) = (
    SELECT json_extract(s.own, '$.authorized.amount'), coalesce(json_extract(s.own, '$.authorized.currency'), ''),
        json_extract(s.own, '$.merchantWallet.amount'), coalesce(json_extract(s.own, '$.merchantWallet.currency'), ''),
        s.refunds
    FROM (
        SELECT
            (SELECT t.value FROM json_each(st.raw, '$.transactions') t
              WHERE json_extract(t.value, '$.type') IS orders.type OR json_extract(t.value, '$.type') IS NOT 'refund'
              ORDER BY json_extract(t.value, '$.type') IS orders.type DESC, t.key
              LIMIT 1) AS own,
            (SELECT CASE WHEN count(*) = 0 THEN '' ELSE json_group_array(json_array(
                        json_extract(t.value, '$.amount.amount'),
                        coalesce(json_extract(t.value, '$.amount.currency'), ''),
                        coalesce(json_extract(t.value, '$.completedAt'), ''))) END
               FROM json_each(st.raw, '$.transactions') t
              WHERE json_extract(t.value, '$.type') = 'refund' AND json_extract(t.value, '$.status') = 'completed'
                AND json_extract(t.value, '$.amount.amount') IS NOT NULL) AS refunds
        FROM (
            SELECT coalesce(h.raw, d.raw) AS raw
            FROM order_history h
            LEFT JOIN deliveries d ON d.id = h.delivery_id
            WHERE h.id = orders.state_id
        ) st
        WHERE json_valid(st.raw) AND coalesce(json_type(st.raw, '$.transactions'), 'null') IN ('array', 'null')
    ) s
);
