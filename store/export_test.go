package store

import (
	"context"
	"fmt"
	"time"
)

// SelectHeaders exposes selectHeaders to the external tests, which hold it
// to the json.Marshal encoding it replaced.
var SelectHeaders = selectHeaders

// PendingFromDB is PendingEvents' read of the database, which the feed's
// answers are held to.
func PendingFromDB(ctx context.Context, s *Store, afterSeq int64, limit int) ([]OutboxEvent, error) {
	return s.pendingFromDB(ctx, afterSeq, limit)
}

// FeedAfter is the feed's answer to PendingEvents(afterSeq, limit), and
// whether it had one.
func FeedAfter(s *Store, afterSeq int64, limit int) ([]OutboxEvent, bool) {
	fed, ok := s.feed.after(afterSeq, limit)
	return outboxEvents(fed), ok
}

// RequestPlans returns SQLite's plan of every query the dashboard and the
// admin reads run, by name, with arguments of the shape they are given.
func RequestPlans(ctx context.Context, s *Store) (map[string][]string, error) {
	type q struct {
		query string
		args  []any
	}
	orders, oargs := ordersPageQuery(OrderQuery{Limit: 51}, -1)
	byStatus, sargs := ordersPageQuery(OrderQuery{Status: "processing", Type: "payin", Limit: 51, AfterID: 7}, 20_007)
	byTime, targs := ordersPageQuery(OrderQuery{From: time.Unix(0, 0), To: time.Unix(60, 0), Limit: 51}, 20_000)
	findings, fargs, err := findingsPageQuery(FindingQuery{State: "open", Limit: 51})
	if err != nil {
		return nil, err
	}
	qs := map[string]q{
		"activity":            {activityQuery, []any{0}},
		"recent orders":       {recentOrdersQuery, []any{20}},
		"order by provider":   {orderByProviderIDQuery, []any{"x"}},
		"orders by prefix":    {ordersByPrefixQuery, []any{"a", "a\xff", 20}},
		"orders page":         {orders, oargs},
		"orders by status":    {byStatus, sargs},
		"orders by time":      {byTime, targs},
		"order scan bound":    {orderScanBoundQuery, []any{7, DefaultOrderScan - 1}},
		"odd status":          {oddStatusQuery, []any{"refunded"}},
		"odd type":            {oddTypeQuery, []any{"transfer"}},
		"findings page":       {findings, fargs},
		"recently resolved":   {recentlyResolvedQuery, []any{10}},
		"open finding counts": {openFindingCountsQuery, nil},
		"reopened finding":    {reopenedFindingQuery, []any{"balance_drift", "brl"}},
		"refunding orders":    {refundingOrdersQuery, []any{0, 1, 1, 64}},
		"outbox stats":        {outboxStatsQuery, nil},
		"order":               {orderByMerchantIDQuery, []any{"x"}},
		"order history":       {orderHistoryQuery, []any{1}},
	}
	out := map[string][]string{}
	for name, q := range qs {
		plan, err := s.queryPlan(ctx, q.query, q.args...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[name] = plan
	}
	return out, nil
}
