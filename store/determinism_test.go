package store_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"orderd/store"
)

// memLog is a replicated log in memory: it group-commits the ops of
// concurrent callers into one entry (as the cluster's appender does),
// keeps the encoded entries and applies each to its store through
// ApplyLog, answering each caller with its ops' results.
type memLog struct {
	s       *store.Store
	calls   chan *memCall
	mu      sync.Mutex
	entries [][]byte
	done    chan struct{}
}

type memCall struct {
	ops []store.Op
	res []store.OpResult
	err error
	ok  chan struct{}
}

func newMemLog(s *store.Store) *memLog {
	l := &memLog{s: s, calls: make(chan *memCall, 64), done: make(chan struct{})}
	go l.run()
	return l
}

func (l *memLog) Execute(ctx context.Context, ops []store.Op) ([]store.OpResult, error) {
	c := &memCall{ops: ops, ok: make(chan struct{})}
	l.calls <- c
	<-c.ok
	return c.res, c.err
}

func (l *memLog) run() {
	defer close(l.done)
	for c := range l.calls {
		group := []*memCall{c}
	gather:
		for len(group) < 8 {
			select {
			case c, ok := <-l.calls:
				if !ok {
					break gather
				}
				group = append(group, c)
			default:
				break gather
			}
		}
		var ops []store.Op
		for _, c := range group {
			ops = append(ops, c.ops...)
		}
		b, err := store.EncodeOps(ops)
		var res []store.OpResult
		if err == nil {
			l.mu.Lock()
			l.entries = append(l.entries, b)
			seq := uint64(len(l.entries))
			l.mu.Unlock()
			var dec []store.Op
			if dec, err = store.DecodeOps(b); err == nil {
				res, err = l.s.ApplyLog(context.Background(), seq, dec)
			}
		}
		for _, c := range group {
			if err != nil {
				c.err = err
			} else {
				c.res, res = res[:len(c.ops)], res[len(c.ops):]
			}
			close(c.ok)
		}
	}
}

func (l *memLog) close() { close(l.calls); <-l.done }

// workload drives s with n random writes of every kind from workers
// goroutines: new, changed, repeated, reformatted, stale and conflicting
// webhooks, quarantined bodies, gateway attempts and their outcomes,
// settlements, watches, findings, reconcile runs, balance snapshots, the
// ledger, relay marks and outbox pruning. Errors the store answers
// (conflicts, refusals) are part of the workload.
func workload(t *testing.T, s *store.Store, seed uint64, n, workers int) {
	t.Helper()
	ctx := t.Context()
	var wg sync.WaitGroup
	var failed sync.Map
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			var orders []order
			var attempts []int64
			for i := range n / workers {
				if err := randomWrite(ctx, s, rng, w, i, &orders, &attempts); err != nil {
					failed.Store(fmt.Sprintf("worker %d step %d", w, i), err)
				}
			}
		})
	}
	wg.Wait()
	failed.Range(func(k, v any) bool {
		t.Errorf("%s: %v", k, v)
		return true
	})
}

// randomWrite makes one random write; it returns only errors that are not part
// of the workload's intent.
func randomWrite(ctx context.Context, s *store.Store, rng *rand.Rand, w, i int, orders *[]order, attempts *[]int64) error {
	pick := func() (order, bool) {
		if len(*orders) == 0 {
			return order{}, false
		}
		return (*orders)[rng.IntN(len(*orders))], true
	}
	apply := func(src store.Source, raw []byte) error {
		o := obsT(raw, src)
		_, err := s.Apply(ctx, o)
		if errors.Is(err, store.ErrConflict) {
			return nil
		}
		return err
	}
	switch k := rng.IntN(20); {
	case k < 4: // a new order, first processing
		o := newOrder(fmt.Sprintf("%d.%02d", 10+rng.IntN(900), rng.IntN(100)))
		*orders = append(*orders, o)
		return apply(store.SourceWebhook, o.processing().json(false))
	case k < 6: // completes (or a repeat of the completion)
		if o, ok := pick(); ok {
			return apply(store.SourceWebhook, o.json(rng.IntN(2) == 0))
		}
	case k < 7: // a stale processing after the completion
		if o, ok := pick(); ok {
			return apply(store.SourcePoll, o.processing().json(false))
		}
	case k < 8: // rejected after completed: a mismatch finding
		if o, ok := pick(); ok {
			return apply(store.SourceWebhook, o.rejected().json(false))
		}
	case k < 9: // a refund
		if o, ok := pick(); ok {
			return apply(store.SourceWebhook, o.refunded("1.00").json(false))
		}
	case k < 10: // conflict: a known provider id under another merchantOrderId
		if o, ok := pick(); ok {
			c := o.with(func(c *order) { c.mid = fmt.Sprintf("m-other-%d-%d", w, i) })
			return apply(store.SourceWebhook, c.json(false))
		}
	case k < 11:
		err := s.Quarantine(ctx, store.QuarantinedWebhook{Raw: fmt.Appendf(nil, "not json %d %d %d", w, i, rng.IntN(3)),
			Reason: "unparseable", MerchantOrderID: fmt.Sprintf("m-q-%d", rng.IntN(5))})
		return err
	case k < 13: // a gateway attempt, new or repeated
		mid := fmt.Sprintf("gw-%d-%d", w, rng.IntN(i+1))
		a, _, err := s.BeginAttempt(ctx, payinAttempt(mid, fmt.Sprint(rng.IntN(2))))
		if errors.Is(err, store.ErrAttemptConflict) {
			return nil
		}
		if err == nil {
			*attempts = append(*attempts, a.ID)
		}
		return err
	case k < 15: // its outcome
		if len(*attempts) == 0 {
			return nil
		}
		id := (*attempts)[rng.IntN(len(*attempts))]
		a, err := s.AttemptByID(ctx, id)
		if err != nil {
			return err
		}
		switch rng.IntN(4) {
		case 0:
			raw, po := createdPayin(a.MerchantOrderID)
			_, err = s.FinishAttempt(ctx, id, store.AttemptOutcome{State: store.AttemptCreated,
				Observation: &store.Observation{Source: store.SourceGateway, Order: po, Raw: raw}})
		case 1:
			_, err = s.FinishAttempt(ctx, id, store.AttemptOutcome{State: store.AttemptInDoubt, Detail: "timeout"})
		case 2:
			err = s.SettleAttemptNotCreated(ctx, id)
		default:
			err = s.PostponeAttempt(ctx, id, time.Now().Add(time.Minute))
		}
		return err
	case k < 16:
		return s.MarkForPoll(ctx, fmt.Sprintf("m-watch-%d", rng.IntN(10)), "test")
	case k < 17:
		_, err := s.Exec(ctx, &store.OpenFindingCmd{FindingKind: "test_kind", Key: fmt.Sprint(rng.IntN(6)),
			Detail: []byte(`{"n":1}`)})
		if err == nil && rng.IntN(2) == 0 {
			_, err = s.Exec(ctx, &store.ResolveFindingsCmd{FindingKind: "test_kind", Keys: []string{fmt.Sprint(rng.IntN(6))}})
		}
		return err
	case k < 18:
		id, err := s.StartReconcileRun(ctx, "stale", time.Now())
		if err == nil {
			err = s.FinishReconcileRun(ctx, id, time.Now(), map[string]int{"checked": i}, "")
		}
		if err == nil {
			_, err = s.InsertBalanceSnapshot(ctx, "brl", decimal.NewFromInt(int64(rng.IntN(1000))), time.Now(), id)
		}
		return err
	case k < 19:
		_, err := s.UpdateLedger(ctx, 7)
		return err
	default: // the relay's marks, set-asides and pruning, and re-queues
		evs, err := s.PendingEvents(ctx, 0, 5)
		if err != nil || len(evs) == 0 {
			return err
		}
		switch rng.IntN(6) {
		case 0:
			ev := evs[0]
			return s.SetAsideEvent(ctx, store.SetAside{Seq: ev.Seq, ID: ev.ID, Type: ev.Type, Subject: ev.Subject,
				EventSubject: ev.EventSubject, Reason: "too large"})
		case 1:
			_, err := s.RequeueSetAside(ctx)
			return err
		}
		if err := s.MarkPublishedThrough(ctx, evs[len(evs)-1].Seq); err != nil {
			return err
		}
		_, err = s.PruneOutbox(ctx, time.Now().Add(-time.Duration(rng.IntN(2))*time.Hour))
		return err
	}
	return nil
}

// obsT is obs without a testing.TB, for workers.
func obsT(raw []byte, src store.Source) store.Observation {
	return obs(panicTB{}, src, raw)
}

type panicTB struct{ testing.TB }

func (panicTB) Helper()                   {}
func (panicTB) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }

// replay applies entries into a fresh database, group entries at a time
// in one transaction (at most), and returns its digest.
func replay(t *testing.T, entries [][]byte, group int) (string, uint64) {
	t.Helper()
	s, _ := openStore(t, store.Options{})
	for i := 0; i < len(entries); {
		var batch []store.LogEntry
		for n := 1 + (i*7)%group; n > 0 && i < len(entries); n-- {
			ops, err := store.DecodeOps(entries[i])
			if err != nil {
				t.Fatalf("decode entry %d: %v", i+1, err)
			}
			batch = append(batch, store.LogEntry{Seq: uint64(i + 1), Ops: ops})
			i++
		}
		if _, err := s.ApplyLogEntries(t.Context(), batch); err != nil {
			t.Fatalf("apply entries %d..%d: %v", batch[0].Seq, batch[len(batch)-1].Seq, err)
		}
	}
	d, seq, err := s.Digest(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return d, seq
}

// TestApplyLog_deterministic is the replicated mode's determinism
// property: a log written by concurrent writers of every kind (so entries
// group several ops, some of which fail), applied to empty databases one
// entry at a time, gives byte-for-byte the same replicated tables as the
// database that wrote it, every time, however the entries are grouped
// into transactions.
func TestApplyLog_deterministic(t *testing.T) {
	for _, seed := range []uint64{1, 2} {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			s, _ := openStore(t, store.Options{})
			log := newMemLog(s)
			s.Replicate(log)
			workload(t, s, seed, 400, 4)
			log.close()
			want, wantSeq, err := s.Digest(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if wantSeq != uint64(len(log.entries)) {
				t.Fatalf("applied seq %d, log has %d entries", wantSeq, len(log.entries))
			}
			if orders := count(t, s, `SELECT count(*) FROM orders`); orders < 50 {
				t.Fatalf("workload stored only %d orders", orders)
			}
			if n := count(t, s, `SELECT count(*) FROM findings WHERE kind = 'event_not_published' AND resolved_at IS NOT NULL`); n == 0 {
				t.Fatal("the workload re-queued no set-aside event")
			}
			grouped := 0
			for _, b := range log.entries {
				ops, _ := store.DecodeOps(b)
				if len(ops) > 1 {
					grouped++
				}
			}
			t.Logf("%d entries, %d with several ops", len(log.entries), grouped)
			// Entry by entry, and several entries to a transaction.
			for _, group := range []int{1, 5} {
				got, seq := replay(t, log.entries, group)
				if got != want || seq != wantSeq {
					t.Fatalf("replay in groups of up to %d: digest %s at seq %d, writer has %s at %d", group, got, seq, want, wantSeq)
				}
			}
		})
	}
}

// TestStore_ApplyLog checks the applied sequence's bookkeeping: an entry
// applies once, a gap is refused, a failing op leaves no trace while the
// entry's other ops stay.
func TestStore_ApplyLog(t *testing.T) {
	s, _ := openStore(t, store.Options{})
	ctx := t.Context()
	open := func(key string) store.Op {
		return store.Op{At: time.Unix(1700000000, 0), Cmd: &store.OpenFindingCmd{FindingKind: "k", Key: key, Detail: []byte(`{}`)}}
	}
	bad := store.Op{At: time.Unix(1700000000, 0), Cmd: &store.OpenFindingCmd{FindingKind: "", Key: "x"}}
	res, err := s.ApplyLog(ctx, 1, []store.Op{open("a"), bad, open("b")})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || res[1].Err == nil || res[2].Err != nil {
		t.Fatalf("results %+v: want the middle op alone to fail", res)
	}
	if n := count(t, s, `SELECT count(*) FROM findings WHERE kind = 'k'`); n != 2 {
		t.Fatalf("%d findings, want 2", n)
	}
	if _, err := s.ApplyLog(ctx, 1, []store.Op{open("c")}); !errors.Is(err, store.ErrApplied) {
		t.Fatalf("entry 1 again: %v, want ErrApplied", err)
	}
	if _, err := s.ApplyLog(ctx, 3, []store.Op{open("c")}); !errors.Is(err, store.ErrLogGap) {
		t.Fatalf("entry 3 after 1: %v, want ErrLogGap", err)
	}
	if n := count(t, s, `SELECT count(*) FROM findings WHERE kind = 'k'`); n != 2 {
		t.Fatalf("%d findings after refused entries, want 2", n)
	}
	if seq, err := s.AppliedSeq(ctx); err != nil || seq != 1 {
		t.Fatalf("applied seq %d, %v; want 1", seq, err)
	}
}

// TestStore_Write_replicated: a plain function cannot be replicated.
func TestStore_Write_replicated(t *testing.T) {
	s, _ := openStore(t, store.Options{})
	log := newMemLog(s)
	defer log.close()
	s.Replicate(log)
	if err := s.Write(t.Context(), func(*store.Tx) error { return nil }); !errors.Is(err, store.ErrNotReplicable) {
		t.Fatalf("Write in replicated mode: %v, want ErrNotReplicable", err)
	}
}

// TestDecodeOps_refusesUnknown: an instance never skips what it cannot
// apply.
func TestDecodeOps_refusesUnknown(t *testing.T) {
	future, err := store.EncodeOps([]store.Op{{At: time.Now(), Cmd: store.NoopCmd{}}})
	if err != nil {
		t.Fatal(err)
	}
	future = []byte(strings.Replace(string(future), "noop", "nope", 1))
	good, _ := store.EncodeOps([]store.Op{{At: time.Now(), Cmd: store.NoopCmd{}}})
	if ops, err := store.DecodeOps(good); err != nil || len(ops) != 1 {
		t.Fatalf("DecodeOps(EncodeOps(noop)) = %v, %v", ops, err)
	}
	for _, b := range [][]byte{
		nil,
		{1},
		{9, 0},
		future,
		good[:len(good)-1],
	} {
		if _, err := store.DecodeOps(b); err == nil {
			t.Errorf("DecodeOps(%q) accepted", b)
		}
	}
	// A version from a newer orderd names itself, so the instance's
	// refusal can say which release it needs.
	var ve *store.LogVersionError
	if _, err := store.DecodeOps([]byte{9, 0}); !errors.As(err, &ve) || ve.Version != 9 {
		t.Errorf("DecodeOps of version 9: %v, want a LogVersionError of version 9", err)
	}
	for _, v := range []int{1, store.NewestLogVersion + 1} {
		if _, err := store.EncodeOpsAt([]store.Op{{At: time.Now(), Cmd: store.NoopCmd{}}}, v); err == nil {
			t.Errorf("EncodeOpsAt version %d accepted", v)
		}
	}
}

// TestBackup_CheckBackup: a backup is a consistent database holding the
// applied sequence.
func TestBackup_CheckBackup(t *testing.T) {
	s, _ := openStore(t, store.Options{})
	log := newMemLog(s)
	s.Replicate(log)
	workload(t, s, 9, 120, 2)
	log.close()
	path := t.TempDir() + "/backup.db"
	if err := s.Backup(t.Context(), path); err != nil {
		t.Fatal(err)
	}
	if err := s.Backup(t.Context(), path); err == nil {
		t.Fatal("backup over an existing file accepted")
	}
	seq, err := store.CheckBackup(t.Context(), path)
	if err != nil || seq != uint64(len(log.entries)) {
		t.Fatalf("CheckBackup: %d, %v; want %d", seq, err, len(log.entries))
	}
	b, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())
	d1, _, _ := s.Digest(t.Context())
	d2, _, _ := b.Digest(t.Context())
	if d1 != d2 {
		t.Fatal("backup's digest differs from the database's")
	}
}

// TestCheckBackup_notOrderd: an intact SQLite file that is not an orderd
// database is refused, with what it lacks in plain words, rather than
// accepted for migrate and reports to fail on later.
func TestCheckBackup_notOrderd(t *testing.T) {
	const core = `CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL);
		CREATE TABLE orders (x); CREATE TABLE order_history (x); CREATE TABLE deliveries (x);
		CREATE TABLE outbox (x); CREATE TABLE store_meta (key TEXT PRIMARY KEY, value TEXT);`
	for _, tc := range []struct{ name, schema, want string }{
		{"orders and store_meta only", `CREATE TABLE orders (x); CREATE TABLE store_meta (key TEXT PRIMARY KEY, value TEXT);`,
			"no schema_migrations table"},
		{"no migration recorded", core, "does not record the first migration (0001_core.sql)"},
		{"core tables missing", `CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL);
			INSERT INTO schema_migrations VALUES (1, '0001_core.sql', 0); CREATE TABLE orders (x); CREATE TABLE store_meta (key, value);`,
			"lacks the tables order_history, deliveries, outbox"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "other.db")
			db, err := sql.Open("sqlite", "file:"+path)
			if err != nil {
				t.Fatal(err)
			}
			_, err = db.ExecContext(t.Context(), tc.schema)
			db.Close()
			if err != nil {
				t.Fatal(err)
			}
			_, err = store.CheckBackup(t.Context(), path)
			if err == nil || !strings.Contains(err.Error(), path+" is not an orderd database") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("CheckBackup: %v; want an error saying %q", err, tc.want)
			}
		})
	}
}

// A backup a newer orderd migrated is a good backup, but is refused
// before it replaces a database: the next start would refuse to write to
// it.
func TestCheckRestorable_newerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "newer.db")
	s, err := store.Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.ExecContext(t.Context(), `INSERT INTO schema_migrations VALUES (999, '0999_future.sql', 0)`)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.CheckBackup(t.Context(), path); err != nil {
		t.Errorf("CheckBackup of a newer schema: %v, want it accepted as a backup", err)
	}
	if _, err := store.CheckRestorable(t.Context(), path); !errors.Is(err, store.ErrSchemaNewer) || !strings.Contains(err.Error(), "0999_future.sql") {
		t.Errorf("CheckRestorable of a newer schema: %v, want ErrSchemaNewer naming the migration", err)
	}
}

// TestDecodeOps_versionTwoEntries: entries written before commands had a
// binary form (version 2, every command as JSON) still decode and apply
// to the same database as today's entries of the same ops.
func TestDecodeOps_versionTwoEntries(t *testing.T) {
	s, _ := openStore(t, store.Options{})
	log := newMemLog(s)
	s.Replicate(log)
	workload(t, s, 3, 300, 4)
	log.close()
	want, wantSeq, err := s.Digest(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	old := make([][]byte, len(log.entries))
	binaryOps := 0
	for i, b := range log.entries {
		if b[0] != store.NewestLogVersion {
			t.Fatalf("entry %d written with version %d, want %d", i+1, b[0], store.NewestLogVersion)
		}
		binaryOps += bytes.Count(b, []byte("observe.2\x01")) + bytes.Count(b, []byte("observe.3\x01"))
		if old[i], err = versionTwo(b); err != nil {
			t.Fatalf("entry %d: %v", i+1, err)
		}
		// What an instance writes while the cluster's log version is
		// 2 is that framing, byte for byte.
		ops, err := store.DecodeOps(b)
		if err != nil {
			t.Fatal(err)
		}
		if at2, err := store.EncodeOpsAt(ops, 2); err != nil || !bytes.Equal(at2, old[i]) {
			t.Fatalf("entry %d: EncodeOpsAt(2) = %.40q, %v; want the version 2 framing %.40q", i+1, at2, err, old[i])
		}
	}
	if binaryOps == 0 {
		t.Fatal("no observation was written in its binary form")
	}
	if got, seq := replay(t, old, 5); got != want || seq != wantSeq {
		t.Fatalf("version 2 entries replay to %s at seq %d, the writer has %s at %d", got, seq, want, wantSeq)
	}
}

// versionTwo rewrites a log entry as the version 2 framing wrote it: a
// version byte 2, then per op its time, its kind and its command's JSON,
// each command as version 2 carries it.
func versionTwo(entry []byte) ([]byte, error) {
	ops, err := store.DecodeOps(entry)
	if err != nil {
		return nil, err
	}
	b := []byte{2}
	for _, op := range ops {
		c := store.AtLogVersion(op.Cmd, 2)
		cmd, err := json.Marshal(c)
		if err != nil {
			return nil, err
		}
		kind := c.Kind()
		b = binary.AppendVarint(b, op.At.UnixNano())
		b = binary.AppendUvarint(b, uint64(len(kind)))
		b = append(b, kind...)
		b = binary.AppendUvarint(b, uint64(len(cmd)))
		b = append(b, cmd...)
	}
	return b, nil
}

// laterCmd is a command whose kind came with log version 4; at earlier
// versions it is written as a finding under the older kind.
type laterCmd struct{ Key string }

func (*laterCmd) Kind() string { return "test.later" }
func (c *laterCmd) Apply(tx *store.Tx) (any, error) {
	return (&store.OpenFindingCmd{FindingKind: "test", Key: c.Key, Detail: []byte(`{"later":true}`)}).Apply(tx)
}
func (*laterCmd) LogVersion() int { return 4 }
func (c *laterCmd) Before() store.Command {
	return &store.OpenFindingCmd{FindingKind: "test", Key: c.Key, Detail: []byte(`{"later":false}`)}
}

func init() { store.RegisterCommand("test.later", func() store.Command { return &laterCmd{} }) }

// TestEncodeOpsAt_olderKinds: a command whose kind a later log version
// brought is written, at an earlier version, as the command it was before
// (an older kind that every release reading that version applies).
func TestEncodeOpsAt_olderKinds(t *testing.T) {
	ops := []store.Op{{At: time.Now(), Cmd: &laterCmd{Key: "k"}}, {At: time.Now(), Cmd: store.NoopCmd{}}}
	for v := store.OldestLogVersion; v <= store.NewestLogVersion; v++ {
		b, err := store.EncodeOpsAt(ops, v)
		if err != nil {
			t.Fatal(err)
		}
		if b[0] != byte(v) {
			t.Fatalf("version %d: entry starts with %d", v, b[0])
		}
		got, err := store.DecodeOps(b)
		if err != nil {
			t.Fatal(err)
		}
		want := "test.later"
		if v < 4 {
			want = "finding.open"
		}
		if got[0].Cmd.Kind() != want || got[1].Cmd.Kind() != "noop" {
			t.Fatalf("version %d carries %s, %s; want %s, noop", v, got[0].Cmd.Kind(), got[1].Cmd.Kind(), want)
		}
	}
	if _, ok := ops[0].Cmd.(*laterCmd); !ok {
		t.Fatal("EncodeOpsAt changed the caller's op")
	}
}

// TestApply_replicatedWebhookCarriesItsBodyOnce: from log version 5 a
// webhook's entry carries its body and not the order's JSON besides
// (observe.3); every instance reads the order from the body. The entry is
// smaller than version 4's of the same observation, both apply to the same
// database, and an observation whose order is not what its body says goes
// with its order as before, so the log never swaps one for the other.
func TestApply_replicatedWebhookCarriesItsBodyOnce(t *testing.T) {
	s, _ := openStore(t, store.Options{})
	log := newMemLog(s)
	s.Replicate(log)
	ctx := t.Context()
	body := []byte(`{"id":"p-1","merchantOrderId":"m-1","type":"payin","createdAt":"2026-03-01T12:00:00+00:00","status":"completed",` +
		`"merchantTargetWallet":{"amount":"465.25","currency":"brl"},"transactions":[{"id":"t-1","type":"payin","status":"completed",` +
		`"authorized":{"amount":"474.75","currency":"brl"},"merchantWallet":{"amount":"465.25","currency":"brl"},` +
		`"createdAt":"2026-03-01T12:00:00Z","completedAt":"2026-03-01T12:00:03Z"}]}`)
	if _, err := s.Apply(ctx, obs(t, store.SourceWebhook, body)); err != nil {
		t.Fatal(err)
	}
	// The same body with an order that says otherwise (not what the
	// receiver would pass, but the store must not take it on trust).
	other := obs(t, store.SourceWebhook, []byte(`{"id":"p-2","merchantOrderId":"m-2","type":"payin","status":"processing"}`))
	other.Order.Status = "new"
	if _, err := s.Apply(ctx, other); err != nil {
		t.Fatal(err)
	}
	log.close()
	if len(log.entries) != 2 {
		t.Fatalf("%d entries, want 2", len(log.entries))
	}
	first, second := log.entries[0], log.entries[1]
	if first[0] != 5 || !bytes.Contains(first, []byte("observe.3\x01")) || bytes.Count(first, []byte(`"merchantOrderId"`)) != 1 {
		t.Fatalf("the webhook's entry is not version 5's observe.3 with the body alone: %q", first)
	}
	if !bytes.Contains(second, []byte("observe.2\x01")) || bytes.Contains(second, []byte("observe.3")) {
		t.Fatalf("an observation whose order differs from its body went as %q; want observe.2 with its order", second)
	}
	var st string
	if err := s.DB().QueryRowContext(ctx, `SELECT status FROM orders WHERE provider_id = 'p-2'`).Scan(&st); err != nil || st != "new" {
		t.Fatalf("order p-2 stored as %q (%v); the log must carry the order it was given (new)", st, err)
	}

	ops, err := store.DecodeOps(first)
	if err != nil {
		t.Fatal(err)
	}
	v4, err := store.EncodeOpsAt(ops, 4)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(v4, []byte("observe.2\x01")) {
		t.Fatalf("at version 4 the observation went as %q; want observe.2", v4)
	}
	t.Logf("entry of one completed payin: %d bytes at version 5, %d at version 4", len(first), len(v4))
	if len(first) > len(v4)*3/4 {
		t.Errorf("version 5's entry is %d bytes against version 4's %d: the order's JSON is still in it", len(first), len(v4))
	}
	want, _, err := s.Digest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := replay(t, [][]byte{v4, second}, 1); got != want {
		t.Fatalf("the version 4 entry applies to digest %s, the version 5 one to %s", got, want)
	}
}

// TestDecodeOps_bodyOnceNeedsAnOrder: an observe.3 entry whose body is not
// an order DecodeOrder reads is refused whole, as any entry an instance
// cannot apply exactly.
func TestDecodeOps_bodyOnceNeedsAnOrder(t *testing.T) {
	s, _ := openStore(t, store.Options{})
	log := newMemLog(s)
	s.Replicate(log)
	if _, err := s.Apply(t.Context(), obs(t, store.SourceWebhook, []byte(`{"id":"p-1","merchantOrderId":"m-1","type":"payin","status":"processing"}`))); err != nil {
		t.Fatal(err)
	}
	log.close()
	good := log.entries[0]
	if _, err := store.DecodeOps(good); err != nil {
		t.Fatal(err)
	}
	// The body without its status: JSON still, the same length, but not
	// an order DecodeOrder takes.
	bad := bytes.Replace(good, []byte(`"status":"processing"`), []byte(`"statuz":"processing"`), 1)
	if bytes.Equal(bad, good) {
		t.Fatal("the body is not in the entry")
	}
	if _, err := store.DecodeOps(bad); err == nil || !strings.Contains(err.Error(), "order from the body") {
		t.Fatalf("an observe.3 entry whose body is no order: %v, want an error naming the order from the body", err)
	}
}
