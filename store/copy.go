package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"golang.org/x/time/rate"
	"modernc.org/sqlite"
)

// backuper is what modernc.org/sqlite's driver connection offers for
// SQLite's online backup API out of it.
type backuper interface {
	NewBackup(dstURI string) (*sqlite.Backup, error)
}

// copyBatchPages is how many pages a paced copy reads between two waits:
// 1 MiB of 4 KiB pages, a few milliseconds of one core.
const copyBatchPages = 256

// Copy writes a consistent copy of the database to path, which must not
// exist, page for page (SQLite's online backup API). Unlike Backup's
// VACUUM INTO, which lays every page out anew, a page that did not change
// between two copies sits at the same offset with the same bytes in
// both, so a snapshot can upload only the parts that changed. The copy
// reads one snapshot of the database: writers go on meanwhile (WAL), and
// the copy holds the applied log sequence of that snapshot. The copy is
// not synced to disk: it is for reading at once (a snapshot's upload),
// not a backup to keep; Backup is.
func (s *Store) Copy(ctx context.Context, path string) error {
	return s.CopyPaced(ctx, path, nil)
}

// CopyPaced is Copy reading at most as fast as pace allows (bytes of
// database pages; nil reads at full speed): a copy that takes longer but
// leaves the writer its share of the CPU and the disk. All the pages come
// from one read transaction, so a paced copy is still of one moment; while
// it lasts, the WAL grows by what is written meanwhile (a checkpoint
// cannot go past a reader), and shrinks back at the next checkpoint after.
func (s *Store) CopyPaced(ctx context.Context, path string, pace *rate.Limiter) (err error) {
	if err := createNewPrivate(path); err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	defer func() {
		if err != nil {
			os.Remove(path)
		}
	}()
	for try := 1; ; try++ {
		err = s.copyTo(ctx, path, pace)
		// The reading connection has no busy timeout; a read lock is
		// refused only for a moment, while the writer resets the WAL.
		if err == nil || !strings.Contains(err.Error(), "SQLITE_BUSY") || try == 5 || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("copy to %s: %w", path, err)
	}
	return nil
}

// copyTo is one attempt of CopyPaced into the existing file at path.
func (s *Store) copyTo(ctx context.Context, path string, pace *rate.Limiter) error {
	// The database is read through a read-only connection of its own.
	db, err := sql.Open("sqlite", pathDSN(s.path, "mode=ro"))
	if err != nil {
		return err
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	// One read transaction around every step: the backup uses it instead
	// of a transaction per step, so each step reads the same snapshot and
	// a commit in between does not start the copy over.
	if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
		return err
	}
	defer conn.ExecContext(context.Background(), "ROLLBACK")
	var pageSize int64
	if err := conn.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(new(int64)); err != nil {
		return err
	}
	if err := conn.QueryRowContext(ctx, "PRAGMA page_size").Scan(&pageSize); err != nil {
		return err
	}
	return conn.Raw(func(dc any) error {
		b, ok := dc.(backuper)
		if !ok {
			return fmt.Errorf("the sqlite driver's connection (%T) offers no backup", dc)
		}
		// The copy is a scratch file, read once and removed: written with
		// no journal and no fsync, so it does not put the whole database
		// through the disk queue the writer's commits wait in.
		bk, err := b.NewBackup(pathDSN(path, "_pragma=journal_mode(OFF)&_pragma=synchronous(OFF)"))
		if err != nil {
			return err
		}
		// Unpaced, one step of every page; paced, steps of at most the
		// pace's burst, each waited for.
		step := int32(-1)
		if pace != nil {
			step = int32(max(1, min(copyBatchPages, int64(pace.Burst())/pageSize)))
		}
		for {
			more, err := bk.Step(step)
			if err != nil || !more {
				return errors.Join(err, bk.Finish())
			}
			if err := pace.WaitN(ctx, int(int64(step)*pageSize)); err != nil {
				return errors.Join(err, bk.Finish())
			}
		}
	})
}

// createNewPrivate creates path empty and private (0600), refusing a
// file that exists: a copy of the database holds the same customer data,
// and never replaces another file.
func createNewPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists", path)
	}
	if err != nil {
		return err
	}
	return f.Close()
}

// CheckCopy is CheckBackup without the integrity check, for a file Copy
// just wrote from this database: it checks that the file is an orderd
// database and returns the log sequence it has applied. A page-for-page
// copy holds the pages this instance's writer wrote; PRAGMA
// integrity_check reads every page and index of it on one core, which
// took as long as the copy itself and competed with ingest for the CPU
// (BENCHMARKS.md, "Snapshots"). Whoever restores the copy checks its
// integrity in full (CheckRestorable), so a damaged copy is refused there,
// never applied.
func CheckCopy(ctx context.Context, path string) (uint64, error) {
	db, closeFile, err := openFile(path)
	if err != nil {
		return 0, err
	}
	defer closeFile()
	if err := checkOrderdTables(ctx, db); err != nil {
		return 0, fmt.Errorf("%s is not an orderd database: %w", path, err)
	}
	return appliedSeq(ctx, db)
}
