package store_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"orderd/provider"
	"orderd/store"
)

// benchObservations returns n webhook observations: unique completed
// orders, every fifth a byte-identical repeat of the one before it.
func benchObservations(b *testing.B, n int) []store.Observation {
	b.Helper()
	out := make([]store.Observation, 0, n)
	var last store.Observation
	for i := range n {
		if i%5 == 4 {
			out = append(out, last)
			continue
		}
		last = obs(b, store.SourceWebhook, newOrder("125.50").json(false))
		out = append(out, last)
	}
	return out
}

// latencies collects per-operation durations from many goroutines.
type latencies struct {
	mu  sync.Mutex
	all []time.Duration
}

func (l *latencies) add(d []time.Duration) {
	l.mu.Lock()
	l.all = append(l.all, d...)
	l.mu.Unlock()
}

// cpuTime is the process's user+system CPU time so far. Per operation it
// shows the cost of the path even on a machine busy with other work, where
// wall-clock rates are noisy.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (l *latencies) report(b *testing.B, elapsed time.Duration, unit string) {
	slices.Sort(l.all)
	if len(l.all) == 0 {
		return
	}
	pct := func(p float64) float64 {
		return float64(l.all[int(p*float64(len(l.all)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(float64(len(l.all))/elapsed.Seconds(), unit+"/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}

// BenchmarkStore_Apply measures the store path alone (no HTTP, no
// signature): 64 concurrent callers applying unique completed orders with
// 20% repeats, on an on-disk database with synchronous=FULL.
func BenchmarkStore_Apply(b *testing.B) {
	var batches, commits atomic.Int64
	s, _ := openStore(b, store.Options{OnCommit: func(n int, _ time.Duration) {
		batches.Add(int64(n))
		commits.Add(1)
	}})
	all := benchObservations(b, b.N)
	var next atomic.Int64
	var lat latencies
	b.SetParallelism(32) // 64 goroutines on 2 cores
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			ob := all[next.Add(1)-1]
			t0 := time.Now()
			if _, err := s.Apply(context.Background(), ob); err != nil {
				b.Error(err)
				return
			}
			mine = append(mine, time.Since(t0))
		}
		lat.add(mine)
	})
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	b.StopTimer()
	lat.report(b, elapsed, "applies")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/op")
	if c := commits.Load(); c > 0 {
		b.ReportMetric(float64(batches.Load())/float64(c), "writes/commit")
	}
}

// BenchmarkSQLite_RawInsert is the ceiling for BenchmarkStore_Apply: the
// same rows (order, history with the body, outbox; a counter bump for repeats)
// written by one goroutine with plain prepared inserts in transactions of
// 64, same schema and pragmas, no decisions and no queue.
func BenchmarkSQLite_RawInsert(b *testing.B) {
	_, path := openStore(b, store.Options{})
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)"+
		"&_pragma=foreign_keys(1)&_pragma=cache_size(-16384)&_pragma=temp_store(memory)&_txlock=immediate")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	all := benchObservations(b, b.N)
	ctx := context.Background()
	prep := func(q string) *sql.Stmt {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			b.Fatal(err)
		}
		return st
	}
	insOrder := prep(`INSERT INTO orders (provider_id, merchant_order_id, type, status, fingerprint, target_amount,
		target_currency, learned_via, created_at, first_seen_at, updated_at, completed_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?) RETURNING id`)
	bumpBody := prep(`UPDATE order_history SET times_seen = times_seen + 1, last_received_at = max(last_received_at, ?)
		WHERE order_id = ? AND fingerprint = ? AND body_sha256 = ?`)
	insHistory := prep(`INSERT INTO order_history (order_id, fingerprint, status, source, outcome, observed_at,
		raw, body_sha256, headers, remote_addr, last_received_at, times_seen)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,1) RETURNING id`)
	setState := prep(`UPDATE orders SET state_id = ? WHERE id = ?`)
	insOutbox := prep(`INSERT INTO outbox (event_id, type, subject, event_subject, time, merchant_order_id, learned_via,
		state_id, created_at) VALUES (?,?,?,?,?,?,?,?,?)`)
	headers := []byte(`{"Content-Type":["application/json"],"Signature":["c2lnbmF0dXJl"]}`)
	// Row values are computed before the clock starts: the ceiling is
	// SQLite writing the rows, nothing else.
	type rowValues struct {
		fp, eventID string
		sum         [sha256.Size]byte
	}
	vals := make([]rowValues, len(all))
	for i, ob := range all {
		fp := ob.Order.Fingerprint()
		vals[i] = rowValues{fp: fp, eventID: store.EventID(ob.Order.ID, fp, "order."+string(ob.Order.Status)), sum: sha256.Sum256(ob.Raw)}
	}
	var lat latencies
	mine := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	orderIDs := make(map[string]int64)
	for i := 0; i < b.N; {
		t0 := time.Now()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		j := i
		for ; j < b.N && j < i+64; j++ {
			ob, v := all[j], vals[j]
			o, fp := ob.Order, v.fp
			now := time.Now().UnixMilli()
			id, repeat := orderIDs[o.ID]
			if !repeat {
				if err := tx.Stmt(insOrder).QueryRow(o.ID, o.MerchantOrderID, string(o.Type), string(o.Status), fp,
					provider.FormatAmount(o.MerchantTargetWallet.Amount), o.MerchantTargetWallet.Currency, "webhook",
					o.CreatedAt.UnixMilli(), now, now, now).Scan(&id); err != nil {
					b.Fatal(err)
				}
				orderIDs[o.ID] = id
			}
			if repeat {
				if _, err := tx.Stmt(bumpBody).Exec(now, id, fp, v.sum[:]); err != nil {
					b.Fatal(err)
				}
				continue
			}
			var hid int64
			if err := tx.Stmt(insHistory).QueryRow(id, fp, string(o.Status), "webhook", "new", now,
				[]byte(ob.Raw), v.sum[:], headers, "127.0.0.1:5555", now).Scan(&hid); err != nil {
				b.Fatal(err)
			}
			if _, err := tx.Stmt(setState).Exec(hid, id); err != nil {
				b.Fatal(err)
			}
			if _, err := tx.Stmt(insOutbox).Exec(v.eventID, "order."+string(o.Status), "orders.payin.completed", o.ID, now,
				o.MerchantOrderID, "webhook", hid, now); err != nil {
				b.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
		d := time.Since(t0)
		for k := i; k < j; k++ {
			mine = append(mine, d)
		}
		i = j
	}
	elapsed, cpu := time.Since(start), cpuTime()-cpu0
	b.StopTimer()
	lat.add(mine)
	lat.report(b, elapsed, "inserts")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/op")
}

// BenchmarkStore_Digest measures the state digest that replicated
// instances compare at each checkpoint (cluster.digest_every) on a
// database of 50,000 webhook observations, beside its ceiling in the same
// run: reading the same rows without hashing or ordering them.
func BenchmarkStore_Digest(b *testing.B) {
	s, _ := openStore(b, store.Options{})
	const n = 50_000
	all := benchObservations(b, n)
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 32 {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < n; i = next.Add(1) - 1 {
				if _, err := s.Apply(context.Background(), all[i]); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.Run("digest", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := s.Digest(b.Context()); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/n, "us/observation")
	})
	b.Run("scan", func(b *testing.B) {
		for b.Loop() {
			for _, t := range []string{"orders", "deliveries", "order_history", "outbox"} {
				rows, err := s.DB().QueryContext(b.Context(), "SELECT * FROM "+t)
				if err != nil {
					b.Fatal(err)
				}
				cols, _ := rows.Columns()
				vals := make([]any, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				for rows.Next() {
					if err := rows.Scan(ptrs...); err != nil {
						b.Fatal(err)
					}
				}
				rows.Close()
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/n, "us/observation")
	})
}
