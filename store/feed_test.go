package store_test

import (
	"fmt"
	"reflect"
	"testing"

	"orderd/store"
)

// TestPendingEvents_feedMatchesDatabase drives the store with the
// determinism test's workload (every write kind, failing writes rolled
// back inside their batch, set-asides, re-queues, cursor moves and
// pruning), in phases, and after each phase reads the outbox the way the
// relay does, from where its last read ended. Every answer the in-memory
// feed gives must be exactly the database's, and the feed must answer
// most of those reads.
func TestPendingEvents_feedMatchesDatabase(t *testing.T) {
	for _, replicated := range []bool{false, true} {
		t.Run(fmt.Sprint("replicated=", replicated), func(t *testing.T) {
			ctx := t.Context()
			s, _ := openStore(t, store.Options{})
			if replicated {
				log := newMemLog(s)
				s.Replicate(log)
				defer log.close()
			}
			var after int64
			reads, served := 0, 0
			for phase := range 25 {
				workload(t, s, uint64(100+phase), 40, 2)
				cur, err := s.OutboxCursor(ctx)
				if err != nil {
					t.Fatal(err)
				}
				after = max(after, cur)
				for {
					got, ok := store.FeedAfter(s, after, 7)
					want, err := store.PendingFromDB(ctx, s, after, 7)
					if err != nil {
						t.Fatal(err)
					}
					reads++
					if ok {
						served++
						if !reflect.DeepEqual(got, want) {
							t.Fatalf("phase %d, after seq %d: the feed answered\n%+v\nthe database\n%+v", phase, after, got, want)
						}
					}
					if len(want) == 0 {
						break
					}
					after = want[len(want)-1].Seq
				}
			}
			t.Logf("%d reads, %d answered by the feed", reads, served)
			if served < reads/4 {
				t.Fatalf("the feed answered %d of %d reads", served, reads)
			}
			// PendingEvents itself gives the database's answer.
			for _, from := range []int64{0, after - 3, after} {
				got, err := s.PendingEvents(ctx, from, 10)
				if err != nil {
					t.Fatal(err)
				}
				want, err := store.PendingFromDB(ctx, s, from, 10)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("PendingEvents(%d) = %+v, the database has %+v", from, got, want)
				}
			}
		})
	}
}
