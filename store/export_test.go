package store

import "context"

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
