package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"orderd/store"
)

// blockWriter parks the writer inside a write until release is called, so
// a test can fill the queue deterministically.
func blockWriter(t *testing.T, s *store.Store) (release func()) {
	t.Helper()
	entered, unblock := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.Write(context.Background(), func(*store.Tx) error {
			close(entered)
			<-unblock
			return nil
		})
	}()
	<-entered
	var once sync.Once
	release = func() {
		once.Do(func() {
			close(unblock)
			if err := <-done; err != nil {
				t.Errorf("blocking write: %v", err)
			}
		})
	}
	t.Cleanup(release)
	return release
}

// waitQueued waits until n writes are queued.
func waitQueued(t *testing.T, s *store.Store, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.Stats().QueueLen < n {
		if time.Now().After(deadline) {
			t.Fatalf("queue holds %d writes, want %d", s.Stats().QueueLen, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// batchRecorder records the batch size of every commit.
type batchRecorder struct {
	mu      sync.Mutex
	batches []int
}

func (r *batchRecorder) onCommit(n int, _ time.Duration) {
	r.mu.Lock()
	r.batches = append(r.batches, n)
	r.mu.Unlock()
}

func (r *batchRecorder) sizes() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.batches)
}

func TestStore_Apply_concurrent(t *testing.T) {
	var rec batchRecorder
	s, _ := openStore(t, store.Options{OnCommit: rec.onCommit})
	const unique, repeats = 150, 50
	var bodies [][]byte
	for i := range unique {
		o := newOrder(fmt.Sprintf("%d.00", i+1))
		bodies = append(bodies, o.json(false))
		if i < repeats {
			bodies = append(bodies, o.json(i%2 == 0)) // identical or reformatted
		}
	}
	release := blockWriter(t, s)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		outcomes = map[store.Outcome]int{}
		ids      = map[string]bool{}
	)
	for _, b := range bodies {
		ob := obs(t, store.SourceWebhook, b)
		wg.Go(func() {
			res, err := s.Apply(t.Context(), ob)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("apply: %v", err)
				return
			}
			outcomes[res.Outcome]++
			if res.EventID != "" {
				ids[res.EventID] = true
			}
		})
	}
	waitQueued(t, s, len(bodies))
	release()
	wg.Wait()

	if outcomes[store.OutcomeNew] != unique || outcomes[store.OutcomeDuplicate] != repeats || len(ids) != unique {
		t.Errorf("outcomes %v with %d event ids, want %d new, %d duplicate", outcomes, len(ids), unique, repeats)
	}
	if n := count(t, s, `SELECT count(*) FROM outbox`); n != unique {
		t.Errorf("%d outbox rows, want %d", n, unique)
	}
	if n := count(t, s, `SELECT count(DISTINCT event_id) FROM outbox`); n != unique {
		t.Errorf("%d distinct event ids, want %d", n, unique)
	}
	if n := count(t, s, `SELECT count(*) FROM orders`); n != unique {
		t.Errorf("%d orders, want %d", n, unique)
	}
	sizes := rec.sizes()
	if slices.Max(sizes) <= 1 {
		t.Errorf("no commit held more than one write: %v", sizes)
	}
	if st := s.Stats(); st.Writes != uint64(len(bodies))+1 || st.Commits >= st.Writes {
		t.Errorf("stats %+v: want %d writes in fewer commits", st, len(bodies)+1)
	}
}

func TestStore_Write_overloaded(t *testing.T) {
	s, _ := openStore(t, store.Options{QueueSize: 2})
	release := blockWriter(t, s)
	queued := []order{newOrder("1.00"), newOrder("2.00")}
	errs := make(chan error, len(queued))
	for _, o := range queued {
		ob := obs(t, store.SourceWebhook, o.json(false))
		go func() {
			_, err := s.Apply(t.Context(), ob)
			errs <- err
		}()
	}
	waitQueued(t, s, 2)
	refused := newOrder("3.00")
	start := time.Now()
	_, err := s.Apply(t.Context(), obs(t, store.SourceWebhook, refused.json(false)))
	if !errors.Is(err, store.ErrOverloaded) {
		t.Fatalf("apply on a full queue: %v, want ErrOverloaded", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("refusal took %v; it must not wait", d)
	}
	release()
	for range queued {
		if err := <-errs; err != nil {
			t.Errorf("queued apply: %v", err)
		}
	}
	if n := count(t, s, `SELECT count(*) FROM orders WHERE provider_id = ?`, refused.id); n != 0 {
		t.Errorf("refused order was written")
	}
	for table, want := range map[string]int{"orders": 2, "webhook_deliveries": 2, "order_history": 2, "outbox": 2} {
		if n := count(t, s, `SELECT count(*) FROM `+table); n != want {
			t.Errorf("%s has %d rows, want %d", table, n, want)
		}
	}
	if s.Stats().Overloaded != 1 {
		t.Errorf("overloaded count %d, want 1", s.Stats().Overloaded)
	}
}

func TestStore_Write_contextEnds(t *testing.T) {
	t.Run("already ended", func(t *testing.T) {
		s, _ := openStore(t, store.Options{})
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		o := newOrder("1.00")
		if _, err := s.Apply(ctx, obs(t, store.SourceWebhook, o.json(false))); !errors.Is(err, context.Canceled) {
			t.Errorf("error %v, want context.Canceled", err)
		}
		if n := count(t, s, `SELECT count(*) FROM orders`); n != 0 {
			t.Errorf("order written although the caller gave up")
		}
	})
	t.Run("ends while queued", func(t *testing.T) {
		s, _ := openStore(t, store.Options{})
		release := blockWriter(t, s)
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		o := newOrder("1.00")
		_, err := s.Apply(ctx, obs(t, store.SourceWebhook, o.json(false)))
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, store.ErrUnconfirmed) {
			t.Errorf("error %v, want a deadline error that says nothing was written", err)
		}
		release()
		// A later write commits after the writer went past the abandoned one.
		if err := s.Ready(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := count(t, s, `SELECT count(*) FROM orders`); n != 0 {
			t.Errorf("abandoned order was written")
		}
	})
	t.Run("ends during commit", func(t *testing.T) {
		s, _ := openStore(t, store.Options{})
		ctx, cancel := context.WithCancel(t.Context())
		err := s.Write(ctx, func(tx *store.Tx) error {
			if _, err := tx.Exec(`INSERT INTO store_meta (key, value) VALUES ('probe', 'x')`); err != nil {
				return err
			}
			cancel()
			time.Sleep(20 * time.Millisecond) // the caller notices before the commit
			return nil
		})
		if err == nil {
			t.Fatal("write reported success although its caller had gone")
		}
		if !errors.Is(err, store.ErrUnconfirmed) || !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v, want ErrUnconfirmed wrapping context.Canceled", err)
		}
		if err := s.Ready(t.Context()); err != nil {
			t.Fatal(err)
		}
		// Unconfirmed, and in fact committed: a retry would be a duplicate.
		if n := count(t, s, `SELECT count(*) FROM store_meta WHERE key = 'probe'`); n != 1 {
			t.Errorf("unconfirmed write not committed (%d rows)", n)
		}
	})
}

func TestStore_Write_failuresStayAlone(t *testing.T) {
	var rec batchRecorder
	s, _ := openStore(t, store.Options{OnCommit: rec.onCommit})
	release := blockWriter(t, s)
	boom := errors.New("boom")
	o := newOrder("9.00")
	results := make(chan error, 3)
	go func() {
		results <- s.Write(t.Context(), func(tx *store.Tx) error {
			if _, err := tx.Exec(`INSERT INTO store_meta (key, value) VALUES ('failed', 'x')`); err != nil {
				return err
			}
			return boom
		})
	}()
	waitQueued(t, s, 1)
	go func() {
		results <- s.Write(t.Context(), func(tx *store.Tx) error {
			if _, err := tx.Exec(`INSERT INTO store_meta (key, value) VALUES ('panicked', 'x')`); err != nil {
				return err
			}
			panic("bad callback")
		})
	}()
	waitQueued(t, s, 2)
	go func() {
		_, err := s.Apply(t.Context(), obs(t, store.SourceWebhook, o.json(false)))
		results <- err
	}()
	waitQueued(t, s, 3)
	release()
	var got []string
	for range 3 {
		err := <-results
		switch {
		case err == nil:
			got = append(got, "ok")
		case errors.Is(err, boom):
			got = append(got, "boom")
		case strings.Contains(err.Error(), "panicked"):
			got = append(got, "panic")
		default:
			t.Errorf("unexpected error %v", err)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"boom", "ok", "panic"}) {
		t.Errorf("results %v", got)
	}
	if n := count(t, s, `SELECT count(*) FROM store_meta WHERE key IN ('failed', 'panicked')`); n != 0 {
		t.Errorf("failed writes left %d rows", n)
	}
	if n := count(t, s, `SELECT count(*) FROM orders WHERE provider_id = ?`, o.id); n != 1 {
		t.Errorf("the good write of the batch is missing")
	}
	if st := s.Stats(); st.Failed != 2 || st.Refused != 0 {
		t.Errorf("stats %+v: want 2 failed writes, none refused", st)
	}
	if !slices.Contains(rec.sizes(), 3) {
		t.Errorf("the three writes did not share a commit: %v", rec.sizes())
	}
}

func TestStore_Close(t *testing.T) {
	path := t.TempDir() + "/orderd.db"
	s, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	release := blockWriter(t, s)
	var orders []order
	errs := make(chan error, 20)
	for i := range 20 {
		o := newOrder(fmt.Sprintf("%d.00", i+1))
		orders = append(orders, o)
		ob := obs(t, store.SourceWebhook, o.json(false))
		go func() {
			_, err := s.Apply(t.Context(), ob)
			errs <- err
		}()
	}
	waitQueued(t, s, 20)
	closed := make(chan error, 1)
	go func() { closed <- s.Close(context.Background()) }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) before the queued writes were committed", err)
	case <-time.After(50 * time.Millisecond):
	}
	release()
	if err := <-closed; err != nil {
		t.Fatalf("close: %v", err)
	}
	for range 20 {
		if err := <-errs; err != nil {
			t.Errorf("queued apply: %v", err)
		}
	}
	if _, err := s.Apply(t.Context(), obs(t, store.SourceWebhook, newOrder("1.00").json(false))); !errors.Is(err, store.ErrClosed) {
		t.Errorf("apply after close: %v, want ErrClosed", err)
	}

	// Durable: a new process sees every acknowledged write.
	s2, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close(context.Background())
	for _, o := range orders {
		v, err := s2.OrderByMerchantID(t.Context(), o.mid)
		if err != nil || string(v.Order) != string(o.json(false)) {
			t.Errorf("order %s after reopen: %v", o.mid, err)
		}
	}
	if err := s2.IntegrityCheck(t.Context()); err != nil {
		t.Error(err)
	}
}

func TestStore_Notify(t *testing.T) {
	s, _ := openStore(t, store.Options{})
	if err := s.Ready(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Notify():
		t.Fatal("notified after a commit without events")
	default:
	}
	if _, err := s.Apply(t.Context(), obs(t, store.SourceWebhook, newOrder("1.00").json(false))); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Notify():
	default:
		t.Fatal("no notification after a commit that queued an event")
	}
}

// A batch of webhook applies runs without a savepoint per write; when one
// of them fails, the attempt is rolled back and the batch runs again with
// savepoints, so the failing write leaves nothing and the others commit.
func TestStore_Apply_failureInBatchWithoutSavepoints(t *testing.T) {
	var rec batchRecorder
	s, _ := openStore(t, store.Options{OnCommit: rec.onCommit})
	a, b := newOrder("1.00"), newOrder("2.00")
	// c claims a's merchantOrderId under another provider id: it fails
	// after a is inserted earlier in the same transaction.
	c := newOrder("3.00").with(func(o *order) { o.mid = a.mid })
	release := blockWriter(t, s)
	results := make([]chan error, 3)
	for i, o := range []order{a, c, b} {
		results[i] = make(chan error, 1)
		ob := obs(t, store.SourceWebhook, o.json(false))
		go func() {
			_, err := s.Apply(t.Context(), ob)
			results[i] <- err
		}()
		waitQueued(t, s, i+1)
	}
	release()
	if err := <-results[0]; err != nil {
		t.Errorf("apply a: %v", err)
	}
	if err := <-results[1]; !errors.Is(err, store.ErrConflict) {
		t.Errorf("apply c: %v, want ErrConflict", err)
	}
	if err := <-results[2]; err != nil {
		t.Errorf("apply b: %v", err)
	}
	if n := count(t, s, `SELECT count(*) FROM orders`); n != 2 {
		t.Errorf("%d orders, want 2 (a and b)", n)
	}
	if n := count(t, s, `SELECT count(*) FROM orders WHERE provider_id = ?`, c.id); n != 0 {
		t.Errorf("the failed write left its order")
	}
	for _, q := range []string{`SELECT count(*) FROM outbox`, `SELECT count(*) FROM order_history`, `SELECT count(*) FROM webhook_deliveries`} {
		if n := count(t, s, q); n != 2 {
			t.Errorf("%s = %d, want 2", q, n)
		}
	}
	// A conflict is the store's refusal, not a failure of the database:
	// it must not raise the failed writes that page as a broken disk.
	if st := s.Stats(); st.Reruns != 1 || st.Refused != 1 || st.Failed != 0 {
		t.Errorf("stats %+v: want 1 rerun, 1 refused write, none failed", st)
	}
	if !slices.Contains(rec.sizes(), 3) {
		t.Errorf("the three writes did not share a commit: %v", rec.sizes())
	}
}

// Two stores on one file (the daemon and an "orderd reconcile" run beside
// it) both write orders: each transaction draws row ids from what is
// committed when it starts, so neither collides with the other and every
// order points at a history row of its own.
func TestStore_Apply_twoWritersOneFile(t *testing.T) {
	s1, path := openStore(t, store.Options{})
	s2, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s2.Close(ctx); err != nil {
			t.Errorf("close second store: %v", err)
		}
	})
	const perStore = 60
	var wg sync.WaitGroup
	for _, s := range []*store.Store{s1, s2} {
		for i := range perStore {
			o := newOrder(fmt.Sprintf("%d.00", i+1))
			wg.Go(func() {
				if _, err := s.Apply(t.Context(), obs(t, store.SourceWebhook, o.processing().json(false))); err != nil {
					t.Errorf("apply processing: %v", err)
					return
				}
				if _, err := s.Apply(t.Context(), obs(t, store.SourceWebhook, o.json(false))); err != nil {
					t.Errorf("apply completed: %v", err)
				}
			})
		}
	}
	wg.Wait()
	if n := count(t, s1, `SELECT count(*) FROM orders WHERE status = 'completed'`); n != 2*perStore {
		t.Errorf("%d completed orders, want %d", n, 2*perStore)
	}
	if n := count(t, s1, `SELECT count(*) FROM orders o JOIN order_history h ON h.id = o.state_id
		WHERE h.order_id = o.id AND h.fingerprint = o.fingerprint AND h.body_sha256 IS NOT NULL`); n != 2*perStore {
		t.Errorf("%d orders point at their own current state, want %d", n, 2*perStore)
	}
	if n := count(t, s1, `SELECT count(*) FROM order_history`); n != 4*perStore {
		t.Errorf("%d history rows, want %d", n, 4*perStore)
	}
	if n := count(t, s1, `SELECT count(*) FROM webhook_deliveries d JOIN order_history h ON h.id = d.history_id
		WHERE h.order_id = d.order_id`); n != 4*perStore {
		t.Errorf("%d deliveries kept in their own history rows, want %d", n, 4*perStore)
	}
}
