package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// appliedSeqKey is the store_meta row holding the last log sequence this
// database has applied, written in the same transaction as its effects.
const appliedSeqKey = "log_applied_seq"

var (
	// ErrLogGap is returned by ApplyLog for an entry that does not follow
	// the last applied one: entries are missing (the log was trimmed past
	// this database, say), and the database must be restored from a
	// snapshot before it can follow the log.
	ErrLogGap = errors.New("store: log entry does not follow the last applied one")
	// ErrApplied is returned by ApplyLog for an entry this database has
	// applied already; nothing changed.
	ErrApplied = errors.New("store: log entry already applied")
)

// LogEntry is one entry of the replicated log: its sequence and its ops.
type LogEntry struct {
	Seq uint64
	Ops []Op
	// Hash is the entry's hash as the log's follower computed it (nil
	// records none): kept with the applied sequence, so that the entry
	// can be compared with the log later (EntryHash).
	Hash []byte
}

// keptEntryHashes is how many of the most recent entries' hashes a
// database keeps: enough to check an entry's link to any entry a lagging
// appender can name, and a few kilobytes of pages.
const keptEntryHashes = 1 << 16

// ApplyLog applies one entry of the replicated log, with log sequence
// seq: ApplyLogEntries with one entry.
func (s *Store) ApplyLog(ctx context.Context, seq uint64, ops []Op) ([]OpResult, error) {
	res, err := s.ApplyLogEntries(ctx, []LogEntry{{Seq: seq, Ops: ops}})
	if err != nil {
		return nil, err
	}
	return res[0], nil
}

// ApplyLogEntries applies consecutive entries of the replicated log in one
// transaction: each op in a savepoint of its own (an op that fails leaves
// no trace, the others stay), then the last entry's sequence as the
// applied one. It returns each entry's op results. Only what the ops carry
// is used (their time, their fields) and row ids are drawn afresh for each
// op, so every database that applies the same entries from the same start
// ends the same, however the entries are grouped into transactions. The
// first entry's sequence must be AppliedSeq()+1 (ErrApplied when it is at
// or below, ErrLogGap when above), and the others must follow it.
func (s *Store) ApplyLogEntries(ctx context.Context, entries []LogEntry) ([][]OpResult, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	for i := 1; i < len(entries); i++ {
		if entries[i].Seq != entries[i-1].Seq+1 {
			return nil, fmt.Errorf("%w: entry %d after %d", ErrLogGap, entries[i].Seq, entries[i-1].Seq)
		}
	}
	var results [][]OpResult
	err := s.write(ctx, func(tx *Tx) error {
		results = nil
		applied, err := txAppliedSeq(tx)
		first := entries[0].Seq
		switch {
		case err != nil:
			return err
		case first <= applied:
			return fmt.Errorf("%w: %d (applied %d)", ErrApplied, first, applied)
		case first != applied+1:
			return fmt.Errorf("%w: entry %d after %d", ErrLogGap, first, applied)
		}
		results = make([][]OpResult, len(entries))
		for i, e := range entries {
			results[i] = make([]OpResult, len(e.Ops))
			for j, op := range e.Ops {
				results[i][j] = tx.applyOp(op)
				if errors.Is(results[i][j].Err, errSavepoint) {
					return results[i][j].Err
				}
			}
		}
		tx.now, tx.ids, tx.trace = time.Time{}, rowIDs{}, ""
		last := entries[len(entries)-1].Seq
		hashed := false
		for _, e := range entries {
			if e.Hash == nil {
				continue
			}
			hashed = true
			if _, err := tx.Exec(`INSERT OR REPLACE INTO log_entries (seq, hash) VALUES (?, ?)`, int64(e.Seq), e.Hash); err != nil {
				return fmt.Errorf("record the hash of log entry %d: %w", e.Seq, err)
			}
		}
		if hashed && last > keptEntryHashes {
			if _, err := tx.Exec(`DELETE FROM log_entries WHERE seq <= ?`, int64(last-keptEntryHashes)); err != nil {
				return err
			}
		}
		_, err = tx.Exec(`INSERT INTO store_meta (key, value) VALUES (?, ?)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`, appliedSeqKey,
			strconv.FormatUint(last, 10))
		return err
	}, false)
	if err != nil {
		return nil, err
	}
	return results, nil
}

// errSavepoint marks a failure of the savepoint machinery itself, which
// sinks the whole entry (the transaction may be gone).
var errSavepoint = errors.New("store: savepoint failed")

// applyOp runs one op of a log entry in a savepoint, with the op's time
// and fresh row-id counters.
func (tx *Tx) applyOp(op Op) (res OpResult) {
	tx.now, tx.ids, tx.trace = op.At, rowIDs{}, op.Trace
	st := tx.s.st
	fed, act := len(tx.fed), len(tx.activity)
	if _, err := st.opSavepoint.Exec(); err != nil {
		return OpResult{Err: fmt.Errorf("%w: %w", errSavepoint, err)}
	}
	func() {
		defer func() {
			if p := recover(); p != nil {
				res = OpResult{Err: fmt.Errorf("%s panicked: %v", op.Cmd.Kind(), p)}
			}
		}()
		res.Value, res.Err = op.Cmd.Apply(tx)
	}()
	if res.Err != nil {
		if _, err := st.opRollbackTo.Exec(); err != nil {
			return OpResult{Err: fmt.Errorf("%w: roll back %s (%v): %w", errSavepoint, op.Cmd.Kind(), res.Err, err)}
		}
		tx.fed, tx.activity = tx.fed[:fed], tx.activity[:act]
	}
	if _, err := st.opRelease.Exec(); err != nil {
		return OpResult{Err: fmt.Errorf("%w: %w", errSavepoint, err)}
	}
	return res
}

func txAppliedSeq(tx *Tx) (uint64, error) {
	var v string
	err := tx.QueryRow(`SELECT value FROM store_meta WHERE key = ?`, appliedSeqKey).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("applied log sequence: %w", err)
	}
	return strconv.ParseUint(v, 10, 64)
}

// AppliedSeq returns the last log sequence this database applied (0 for
// none).
func (s *Store) AppliedSeq(ctx context.Context) (uint64, error) {
	return appliedSeq(ctx, s.rdb)
}

func appliedSeq(ctx context.Context, db *sql.DB) (uint64, error) {
	var v string
	err := db.QueryRowContext(ctx, `SELECT value FROM store_meta WHERE key = ?`, appliedSeqKey).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("applied log sequence: %w", err)
	}
	return strconv.ParseUint(v, 10, 64)
}

// replicatedTables are the tables every instance derives from the log, in
// digest order. store_meta is local (readiness heartbeat, applied
// sequence).
var replicatedTables = []string{
	"orders", "deliveries", "order_history", "outbox", "outbox_cursor", "quarantine", "findings", "watches",
	"attempts", "reconcile_runs", "balance_snapshots", "balance_drifts", "ledger_movements",
	"ledger_pending", "reconcile_state", "requisites", "activity_minutes", "finding_actions",
}

// recordTables hold what orderd learned and did; a freshly migrated
// database has no row in any of them (unlike outbox_cursor, which holds
// its one row from the start).
var recordTables = []string{
	"orders", "deliveries", "order_history", "outbox", "quarantine", "findings", "watches",
	"attempts", "reconcile_runs", "balance_snapshots", "requisites",
}

// HasRecords reports whether the database holds any record: an order, a
// delivery, an event, an attempt, a finding, a reconcile run. With
// AppliedSeq 0 that makes it a single-node database, which replicated mode
// must not start on: the other instances would never have its records.
func (s *Store) HasRecords(ctx context.Context) (bool, error) {
	for _, t := range recordTables {
		var found bool
		if err := s.rdb.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM "+t+")").Scan(&found); err != nil {
			return false, fmt.Errorf("records in %s: %w", t, err)
		}
		if found {
			return true, nil
		}
	}
	return false, nil
}

// Digest returns a SHA-256 over every row of the replicated tables, read
// in one consistent snapshot, with the applied log sequence it belongs to.
// Two databases that applied the same log have equal digests.
func (s *Store) Digest(ctx context.Context) (digest string, seq uint64, err error) {
	snap, err := s.ReadSnapshot(ctx)
	if err != nil {
		return "", 0, err
	}
	defer snap.Close()
	digest, err = snap.Digest(ctx)
	return digest, snap.Seq, err
}

// ReadSnapshot is a read transaction over the database as it stands now:
// what it reads stays as of this moment, whatever is written meanwhile.
// The log's applier opens one right after it applied the entry at a
// checkpoint, and digests the replicated state at that very sequence in
// the background while it applies what follows.
type ReadSnapshot struct {
	conn *sql.Conn
	// Seq is the applied log sequence the snapshot holds.
	Seq uint64
}

// ReadSnapshot opens a ReadSnapshot; Close ends it.
func (s *Store) ReadSnapshot(ctx context.Context) (*ReadSnapshot, error) {
	conn, err := s.rdb.Conn(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
		conn.Close()
		return nil, err
	}
	// SQLite takes the snapshot at the transaction's first read.
	var v sql.NullString
	err = conn.QueryRowContext(ctx, `SELECT value FROM store_meta WHERE key = ?`, appliedSeqKey).Scan(&v)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		conn.Close()
		return nil, fmt.Errorf("applied log sequence: %w", err)
	}
	rs := &ReadSnapshot{conn: conn}
	if v.Valid {
		rs.Seq, _ = strconv.ParseUint(v.String, 10, 64)
	}
	return rs, nil
}

// Close ends the snapshot's transaction.
func (r *ReadSnapshot) Close() {
	r.conn.ExecContext(context.Background(), "ROLLBACK")
	r.conn.Close()
}

// Digest is the SHA-256 over every row of the replicated tables as the
// snapshot holds them, less the columns a background migration derives
// (backgroundStep.derived): those are a function of the row's other
// columns and the rows they point at, which the digest covers, and an
// instance fills them at its own pace after an upgrade, so two instances
// that applied the same log but whose background steps stand at
// different rows still have equal digests.
func (r *ReadSnapshot) Digest(ctx context.Context) (string, error) {
	conn := r.conn
	h := sha256.New()
	excluded := digestExcluded()
	for _, t := range replicatedTables {
		fmt.Fprintf(h, "table %s\n", t)
		query, err := digestQuery(ctx, conn, t, excluded[t])
		if err != nil {
			return "", fmt.Errorf("digest %s: %w", t, err)
		}
		rows, err := conn.QueryContext(ctx, query)
		if err != nil {
			return "", fmt.Errorf("digest %s: %w", t, err)
		}
		if err := hashRows(h, rows); err != nil {
			return "", fmt.Errorf("digest %s: %w", t, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// EntryHash returns the hash recorded for the applied log entry seq; ok is
// false when none is (an entry applied before hashes were recorded, or
// one older than the hashes a database keeps).
func (s *Store) EntryHash(ctx context.Context, seq uint64) (hash []byte, ok bool, err error) {
	err = s.rdb.QueryRowContext(ctx, `SELECT hash FROM log_entries WHERE seq = ?`, int64(seq)).Scan(&hash)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("hash of log entry %d: %w", seq, err)
	}
	return hash, true, nil
}

// EntryHashes returns the recorded hashes of the applied entries from
// seq on, by sequence.
func (s *Store) EntryHashes(ctx context.Context, from uint64) (map[uint64][]byte, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT seq, hash FROM log_entries WHERE seq >= ? ORDER BY seq`, int64(from))
	if err != nil {
		return nil, fmt.Errorf("hashes of log entries: %w", err)
	}
	defer rows.Close()
	m := map[uint64][]byte{}
	for rows.Next() {
		var seq int64
		var h []byte
		if err := rows.Scan(&seq, &h); err != nil {
			return nil, err
		}
		m[uint64(seq)] = h
	}
	return m, rows.Err()
}

// digestQuery selects table t's rows for the digest: every column but
// the excluded ones, in the same order in every database holding the same
// rows: by its primary key, which is unique and read in index order
// without a sort, or by every column for a table without one.
func digestQuery(ctx context.Context, conn *sql.Conn, t string, excluded map[string]bool) (string, error) {
	rows, err := conn.QueryContext(ctx, "SELECT name, pk FROM pragma_table_info(?) ORDER BY cid", t)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var cols, all []string
	pk := map[int]string{}
	for rows.Next() {
		var (
			name string
			p    int
		)
		if err := rows.Scan(&name, &p); err != nil {
			return "", err
		}
		q := `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
		all = append(all, q)
		if p > 0 {
			pk[p] = q
		}
		if !excluded[name] {
			cols = append(cols, q)
		}
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	order := all
	if len(pk) > 0 {
		order = make([]string, 0, len(pk))
		for i := 1; i <= len(pk); i++ {
			order = append(order, pk[i])
		}
	}
	return "SELECT " + strings.Join(cols, ", ") + " FROM " + t + " ORDER BY " + strings.Join(order, ", "), nil
}

func hashRows(h io.Writer, rows *sql.Rows) error {
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var buf []byte
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		buf = buf[:0]
		for _, v := range vals {
			// Type and value, length-prefixed: no two rows hash alike.
			switch v := v.(type) {
			case nil:
				buf = append(buf, 'n')
			case int64:
				buf = append(buf, 'i')
				buf = strconv.AppendInt(buf, v, 10)
			case float64:
				buf = append(buf, 'f')
				buf = strconv.AppendFloat(buf, v, 'g', -1, 64)
			case string:
				buf = append(buf, 's')
				buf = strconv.AppendInt(buf, int64(len(v)), 10)
				buf = append(buf, ':')
				buf = append(buf, v...)
			case []byte:
				buf = append(buf, 'b')
				buf = strconv.AppendInt(buf, int64(len(v)), 10)
				buf = append(buf, ':')
				buf = append(buf, v...)
			default:
				s := fmt.Sprintf("%T:%v", v, v)
				buf = append(buf, 'o')
				buf = strconv.AppendInt(buf, int64(len(s)), 10)
				buf = append(buf, ':')
				buf = append(buf, s...)
			}
			buf = append(buf, ';')
		}
		buf = append(buf, '\n')
		if _, err := h.Write(buf); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Backup writes a consistent copy of the database to path (VACUUM INTO),
// which must not exist. It reads a snapshot, so writes go on meanwhile;
// the copy holds the applied log sequence of that snapshot.
func (s *Store) Backup(ctx context.Context, path string) error {
	// Created empty first, which VACUUM INTO accepts.
	if err := createNewPrivate(path); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	// The read pool is query_only, which VACUUM INTO counts as a write;
	// a read-only connection of its own reads the same snapshot rules.
	db, err := sql.Open("sqlite", pathDSN(s.path, fmt.Sprintf("mode=ro&_pragma=busy_timeout(%d)", busyTimeoutMillis)))
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "VACUUM INTO ?", path); err != nil {
		os.Remove(path)
		return fmt.Errorf("backup to %s: %w", path, err)
	}
	return nil
}

// CheckBackup opens the database file at path read-only, checks its
// integrity and returns the log sequence it has applied (0 for a
// single-node database).
func CheckBackup(ctx context.Context, path string) (uint64, error) {
	db, closeFile, err := openFile(path)
	if err != nil {
		return 0, err
	}
	defer closeFile()
	rows, err := db.QueryContext(ctx, "PRAGMA integrity_check")
	if err != nil {
		return 0, fmt.Errorf("%s is not an orderd database: %w", path, err)
	}
	msgs, err := scanStrings(rows)
	if err != nil {
		return 0, fmt.Errorf("%s: integrity check: %w", path, err)
	}
	if len(msgs) != 1 || msgs[0] != "ok" {
		return 0, fmt.Errorf("%s: integrity check: %v", path, msgs)
	}
	if err := checkOrderdTables(ctx, db); err != nil {
		return 0, fmt.Errorf("%s is not an orderd database: %w", path, err)
	}
	return appliedSeq(ctx, db)
}

// CheckRestorable is CheckBackup for a file about to replace the database:
// one a newer orderd migrated (ErrSchemaNewer) is refused too, since this
// orderd would refuse to start on it. A backup of such a database is still
// a good backup, for the newer orderd.
func CheckRestorable(ctx context.Context, path string) (uint64, error) {
	seq, err := CheckBackup(ctx, path)
	if err != nil {
		return 0, err
	}
	if err := checkSchema(ctx, path); err != nil {
		return 0, err
	}
	return seq, nil
}

// coreTables are tables the first migration creates that every part of
// orderd reads or writes.
var coreTables = []string{"orders", "order_history", "deliveries", "outbox", "store_meta"}

// checkOrderdTables checks that db is an orderd database, one a later
// Migrate can go on from: it records its applied migrations in
// schema_migrations, the first among them, and has the core tables. Any
// SQLite file with an orders table is not enough.
func checkOrderdTables(ctx context.Context, db *sql.DB) error {
	hasTable := func(name string) (bool, error) {
		var n int
		err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`, name).Scan(&n)
		return n > 0, err
	}
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	ok, err := hasTable("schema_migrations")
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("it has no schema_migrations table, where orderd records the migrations it applied")
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations WHERE version = ?`, ms[0].version).Scan(&n); err != nil {
		return fmt.Errorf("read schema_migrations: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("its schema_migrations does not record the first migration (%s)", ms[0].name)
	}
	var missing []string
	for _, t := range coreTables {
		ok, err := hasTable(t)
		if err != nil {
			return err
		}
		if !ok {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("it lacks the tables %s", strings.Join(missing, ", "))
	}
	return nil
}
