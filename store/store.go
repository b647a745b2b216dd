package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	// The pure-Go SQLite driver registers itself as "sqlite".
	_ "modernc.org/sqlite"
)

// Errors callers must tell apart.
var (
	// ErrOverloaded: the write queue is full; nothing was written. A
	// webhook caller answers 503 so the provider retries.
	ErrOverloaded = errors.New("store overloaded")
	// ErrClosed: the store is closing or closed; nothing was written.
	ErrClosed = errors.New("store closed")
	// ErrUnconfirmed: the caller's context ended while its write was
	// already in the transaction being committed. The write may or may
	// not be durable; it was not reported as a success. A webhook caller
	// answers 503 and the provider's retry is then either a duplicate or
	// the first copy.
	ErrUnconfirmed = errors.New("store write unconfirmed")
	// ErrNotFound: the order (or row) asked for is not stored.
	ErrNotFound = errors.New("not found")
	// ErrReadOnly: the store was opened read-only.
	ErrReadOnly = errors.New("store is read-only")
	// ErrConflict: the observation contradicts a stored identity: a new
	// provider order id with a merchantOrderId that another order already
	// has, or a known provider id with another merchantOrderId or type.
	// Nothing was written; the caller should quarantine the body.
	ErrConflict = errors.New("order identity conflict")
	// ErrSchemaNewer: the database records a migration this orderd does
	// not have (a newer orderd wrote it), or records one of its versions
	// under another name. Open (read-write) and Migrate refuse it, since
	// an older orderd writing to a newer schema can corrupt its records; a
	// read-only Open still reads it.
	ErrSchemaNewer = errors.New("the database's schema is newer than this orderd")
	// ErrNotOrderd: the database has tables but no schema record
	// (schema_migrations), so it belongs to another application. Open and
	// Migrate refuse it rather than add orderd's tables to it.
	ErrNotOrderd = errors.New("not an orderd database (it has tables but no schema record)")
)

// Defaults for Options.
const (
	DefaultQueueSize  = 4096
	DefaultMaxBatch   = 256
	DefaultCheckAfter = time.Minute
	busyTimeoutMillis = 10000
)

// Options configure a Store. The zero value is usable.
type Options struct {
	// Logger receives the store's log lines; nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// QueueSize bounds the writes waiting for the writer; a write that
	// finds the queue full fails with ErrOverloaded at once.
	QueueSize int
	// MaxBatch bounds how many waiting writes share one transaction.
	MaxBatch int
	// CheckAfter is how long after its last change a non-final order is
	// first due for a poll (orders.next_check_at); the reconciler's
	// stale_after.
	CheckAfter time.Duration
	// OnCommit, when set, is called by the writer after every commit with
	// the number of writes in the batch and how long the transaction took
	// (including the fsync). It must be quick; metrics hook in here.
	OnCommit func(batch int, d time.Duration)
	// ReadOnly opens only the read pool, for readers such as reports; the
	// database must exist, no migrations run and every write fails with
	// ErrReadOnly.
	ReadOnly bool
	// ReadConns bounds the read pool; 0 means a small default.
	ReadConns int
	// OrderScan bounds how many orders one page of a filtered order
	// listing walks (see OrdersPage); 0 means DefaultOrderScan.
	OrderScan int
	// RelaxedSync commits without waiting for the disk (SQLite
	// synchronous=NORMAL in WAL mode): a power loss may lose the last
	// commits, never corrupt. For replicated mode only, where the log's
	// quorum holds every write and the applied sequence, committed with
	// the effects, makes a lost tail be applied again.
	RelaxedSync bool
}

// Stats are the writer's counters since Open.
type Stats struct {
	// Commits is the number of committed transactions.
	Commits uint64
	// Writes is the number of writes committed (a batch holds several).
	Writes uint64
	// Failed is the number of writes that returned an error from the
	// writer (their own error or a failed commit), refusals aside.
	Failed uint64
	// Refused is the number of writes the store refused by design, with
	// ErrConflict or ErrAttemptConflict: nothing was written and nothing is
	// wrong with the database.
	Refused uint64
	// Overloaded is the number of writes refused with ErrOverloaded.
	Overloaded uint64
	// Expired is the number of writes whose context ended before the
	// writer reached them; they were skipped, nothing written.
	Expired uint64
	// Reruns is the number of batches run a second time, with a
	// savepoint per write, because a write failed in the first run.
	Reruns uint64
	// QueueLen is the number of writes waiting now.
	QueueLen int
}

// Store is orderd's SQLite database: one writer goroutine that owns the only
// write connection and commits waiting writes in groups, and a pool of
// read-only connections. It is safe for concurrent use.
type Store struct {
	path string
	log  *slog.Logger
	now  func() time.Time
	opts Options

	rdb     *sql.DB
	pending *sql.Stmt // PendingEvents, prepared once on the read pool
	wdb     *sql.DB
	wconn   *sql.Conn
	st      *stmts

	mu     sync.RWMutex // guards closed against sends on queue
	closed bool
	queue  chan *request
	done   chan struct{} // closed when the writer goroutine has exited
	notify chan struct{}
	feed   feed // the latest committed outbox events, for PendingEvents

	commits, writes, failed, refused, overloaded, expired, reruns atomic.Uint64

	// replog, when set, takes every command (replicated mode, see
	// Replicate); the writer then runs only what the log hands back
	// (ApplyLog) and local bookkeeping.
	replog Log
}

// pathDSN turns a file path into the driver's URI form, escaping the
// characters a URI would read as delimiters.
func pathDSN(path, query string) string {
	r := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")
	return "file:" + r.Replace(path) + "?" + query
}

// openFile opens the database file at path (a backup, a copy), read-only
// and query-only; a missing file is an error, never a new empty database.
// closeFile closes it and removes the -wal and -shm files the opening
// created: a read-only connection cannot checkpoint, so SQLite leaves an
// empty -wal and a 32 KiB -shm beside a database in WAL mode when it
// closes, and every snapshot, seed and restore would add a pair.
func openFile(path string) (db *sql.DB, closeFile func() error, err error) {
	if _, err := os.Stat(path); err != nil {
		return nil, nil, err
	}
	_, walErr := os.Lstat(path + "-wal")
	_, shmErr := os.Lstat(path + "-shm")
	db, err = sql.Open("sqlite", pathDSN(path, "mode=ro&_pragma=query_only(1)"))
	if err != nil {
		return nil, nil, err
	}
	return db, func() error {
		err := db.Close()
		removeCreatedSidecars(path, errors.Is(walErr, fs.ErrNotExist), errors.Is(shmErr, fs.ErrNotExist))
		return err
	}, nil
}

// removeCreatedSidecars removes the -wal and -shm files beside the
// database at path that a connection now closed created (newWAL, newSHM:
// they were not there before it opened). A -wal is removed only while it
// is empty, which a read-only connection's always is: it holds no
// transaction. The -shm, an index of the -wal that SQLite rebuilds, goes
// once the -wal has gone.
func removeCreatedSidecars(path string, newWAL, newSHM bool) {
	if newWAL {
		if fi, err := os.Lstat(path + "-wal"); err == nil && fi.Mode().IsRegular() && fi.Size() == 0 {
			os.Remove(path + "-wal")
		}
	}
	if newSHM {
		if _, err := os.Lstat(path + "-wal"); errors.Is(err, fs.ErrNotExist) {
			os.Remove(path + "-shm")
		}
	}
}

// writerDSN configures the write connection: WAL so readers never block the
// writer, synchronous=FULL so a commit survives power loss, immediate
// transactions so a transaction never has to upgrade its lock, foreign keys
// enforced, and a busy timeout for writers in other processes (the
// reconcile CLI). The page cache is 16 MiB: modernc.org's allocator gives
// each 4 KiB page an 8 KiB slot outside Go's heap, so 64 MiB held about
// 130 MiB of RSS for good, with no measurable gain (BENCHMARKS.md,
// "Memory").
func writerDSN(path string, relaxed bool) string {
	sync := "FULL"
	if relaxed {
		sync = "NORMAL"
	}
	return pathDSN(path, fmt.Sprintf("_pragma=busy_timeout(%d)&_pragma=journal_mode(WAL)&_pragma=synchronous(%s)"+
		"&_pragma=foreign_keys(1)&_pragma=cache_size(-16384)&_pragma=temp_store(memory)&_txlock=immediate", busyTimeoutMillis, sync))
}

// readerDSN configures the read pool: query_only makes any write on it an
// error, whatever SQL another package sends.
func readerDSN(path string) string {
	return pathDSN(path, fmt.Sprintf("_pragma=busy_timeout(%d)&_pragma=query_only(1)&_pragma=foreign_keys(1)", busyTimeoutMillis))
}

// Open opens (creating if needed) the database at path, applies pending
// migrations and starts the writer. Close releases it. An empty or missing
// file gets the whole schema; a database with tables but no schema record
// is another application's and is refused (ErrNotOrderd). It refuses a
// database from a newer orderd (ErrSchemaNewer) unless opts.ReadOnly: a
// read-only open cannot change the file, so reports and backups still
// work on it, with a warning, since the newer orderd may keep data this
// one does not know where to find.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = DefaultQueueSize
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = DefaultMaxBatch
	}
	if opts.CheckAfter <= 0 {
		opts.CheckAfter = DefaultCheckAfter
	}
	if opts.ReadConns <= 0 {
		opts.ReadConns = max(4, runtime.GOMAXPROCS(0))
	}
	if opts.OrderScan <= 0 {
		opts.OrderScan = DefaultOrderScan
	}
	s := &Store{
		path:   path,
		log:    opts.Logger,
		now:    opts.Now,
		opts:   opts,
		done:   make(chan struct{}),
		notify: make(chan struct{}, 1),
	}
	if opts.ReadOnly {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("open store: %w", err)
		}
		switch err := checkSchema(ctx, path); {
		case errors.Is(err, ErrSchemaNewer):
			s.log.Warn("reading a database this orderd cannot write to", "err", err)
		case errors.Is(err, ErrNotOrderd):
			return nil, err
		}
		close(s.done)
		s.closed = true
	} else {
		if err := createPrivate(path); err != nil {
			return nil, fmt.Errorf("open store: %w", err)
		}
		if err := s.openWriter(ctx); err != nil {
			return nil, err
		}
	}
	rdb, err := sql.Open("sqlite", readerDSN(path))
	if err != nil {
		s.closeWriter()
		return nil, fmt.Errorf("open read pool: %w", err)
	}
	rdb.SetMaxOpenConns(opts.ReadConns)
	rdb.SetMaxIdleConns(opts.ReadConns)
	if err := rdb.PingContext(ctx); err != nil {
		rdb.Close()
		s.closeWriter()
		return nil, fmt.Errorf("open read pool: %w", err)
	}
	s.rdb = rdb
	if s.pending, err = rdb.PrepareContext(ctx, pendingEventsQuery); err != nil {
		rdb.Close()
		s.closeWriter()
		return nil, fmt.Errorf("open %s: prepare: %w", path, err)
	}
	if !opts.ReadOnly {
		s.queue = make(chan *request, opts.QueueSize)
		go s.run()
	}
	return s, nil
}

// createPrivate creates the database file at path, empty and readable by
// its owner only (0600), unless it exists. The database holds customer
// data; SQLite would create it 0644 less the umask, and it gives the WAL
// and shared-memory files it makes beside a database the database file's
// mode, so those stay private too. An existing file keeps its mode.
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return f.Close()
}

func (s *Store) openWriter(ctx context.Context) error {
	if err := checkSchema(ctx, s.path); err != nil {
		return err
	}
	wdb, err := sql.Open("sqlite", writerDSN(s.path, s.opts.RelaxedSync))
	if err != nil {
		return fmt.Errorf("open writer: %w", err)
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxLifetime(0)
	wdb.SetConnMaxIdleTime(0)
	s.wdb = wdb
	if _, err := migrate(ctx, wdb, s.now, s.log); err != nil {
		s.closeWriter()
		return fmt.Errorf("migrate %s: %w", s.path, err)
	}
	var mode string
	if err := wdb.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || !strings.EqualFold(mode, "wal") {
		s.closeWriter()
		return fmt.Errorf("open writer: journal mode is %q, want wal: %v", mode, err)
	}
	// The writer holds its connection for life: statements are prepared on
	// it once and transactions are driven by hand on it.
	conn, err := wdb.Conn(ctx)
	if err != nil {
		s.closeWriter()
		return fmt.Errorf("open writer: %w", err)
	}
	s.wconn = conn
	st, err := prepare(ctx, conn)
	if err != nil {
		s.closeWriter()
		return fmt.Errorf("prepare statements: %w", err)
	}
	s.st = st
	return nil
}

func (s *Store) closeWriter() error {
	var errs []error
	if s.st != nil {
		errs = append(errs, s.st.close())
		s.st = nil
	}
	if s.wconn != nil {
		errs = append(errs, s.wconn.Close())
		s.wconn = nil
	}
	if s.wdb != nil {
		errs = append(errs, s.wdb.Close())
		s.wdb = nil
	}
	return errors.Join(errs...)
}

// Close stops accepting writes, lets the writer commit everything already
// queued, waits for it, and closes the database connections last. If ctx
// ends first, Close returns its error and leaves the connections open for
// the writer to finish with.
func (s *Store) Close(ctx context.Context) error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.queue)
	}
	s.mu.Unlock()
	select {
	case <-s.done:
	default:
		select {
		case <-s.done:
		case <-ctx.Done():
			return fmt.Errorf("close store: waiting for writer: %w", ctx.Err())
		}
	}
	// The read side stays in place, closed: a reader that comes late (a
	// relay, a request finishing during a shutdown) gets "closed" errors
	// from database/sql instead of a nil statement, and both Closes are
	// idempotent.
	var errs []error
	if s.pending != nil {
		errs = append(errs, s.pending.Close())
	}
	if s.rdb != nil {
		errs = append(errs, s.rdb.Close())
	}
	errs = append(errs, s.closeWriter())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	return nil
}

// DB returns the read-only pool for other packages' queries. Writes on it
// fail: every write goes through the writer (Apply, Write, ...).
func (s *Store) DB() *sql.DB { return s.rdb }

// Path returns the database file's path.
func (s *Store) Path() string { return s.path }

// Notify returns a channel that receives a value after each commit that
// queued outbox events. It is buffered (1) and never blocks the writer, so
// a slow relay sees one wake-up for many commits.
func (s *Store) Notify() <-chan struct{} { return s.notify }

// Stats returns the writer's counters.
func (s *Store) Stats() Stats {
	return Stats{
		Commits:    s.commits.Load(),
		Writes:     s.writes.Load(),
		Failed:     s.failed.Load(),
		Refused:    s.refused.Load(),
		Overloaded: s.overloaded.Load(),
		Expired:    s.expired.Load(),
		Reruns:     s.reruns.Load(),
		QueueLen:   len(s.queue),
	}
}

// Ready reports whether the writer can commit: it makes a small real write
// through the queue, so an overloaded or stuck writer reads as not ready.
// The row it writes is local bookkeeping, never replicated.
func (s *Store) Ready(ctx context.Context) error {
	return s.write(ctx, func(tx *Tx) error {
		_, err := tx.Exec(`INSERT INTO store_meta (key, value) VALUES ('ready_at', ?)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`, tx.Now().UTC().Format(time.RFC3339Nano))
		return err
	}, false)
}

// IntegrityCheck runs PRAGMA integrity_check and returns an error listing
// what it found unless the answer is "ok".
func (s *Store) IntegrityCheck(ctx context.Context) error {
	rows, err := s.rdb.QueryContext(ctx, "PRAGMA integrity_check")
	if err != nil {
		return fmt.Errorf("integrity check: %w", err)
	}
	msgs, err := scanStrings(rows)
	if err != nil {
		return fmt.Errorf("integrity check: %w", err)
	}
	if len(msgs) == 1 && msgs[0] == "ok" {
		return nil
	}
	return fmt.Errorf("integrity check: %s", strings.Join(msgs, "; "))
}
