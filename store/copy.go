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

	"modernc.org/sqlite"
)

// restorer is what modernc.org/sqlite's driver connection offers for
// SQLite's online backup API into it.
type restorer interface {
	NewRestore(srcURI string) (*sqlite.Backup, error)
}

// Copy writes a consistent copy of the database to path, which must not
// exist, page for page (SQLite's online backup API). Unlike Backup's
// VACUUM INTO, which lays every page out anew, a page that did not change
// between two copies sits at the same offset with the same bytes in
// both, so a snapshot can upload only the parts that changed. The copy
// reads one snapshot of the database in a single step: writers go on
// meanwhile (WAL), and the copy holds the applied log sequence of that
// snapshot. The copy is not synced to disk: it is for reading at once
// (a snapshot's upload), not a backup to keep; Backup is.
func (s *Store) Copy(ctx context.Context, path string) (err error) {
	if err := createNewPrivate(path); err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	defer func() {
		if err != nil {
			os.Remove(path)
		}
	}()
	for try := 1; ; try++ {
		err = s.copyTo(ctx, path)
		// The reading connection has no busy timeout (the backup API
		// opens it); a read lock is refused only for a moment, while the
		// writer resets the WAL.
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

// copyTo is one attempt of Copy into the existing file at path.
func (s *Store) copyTo(ctx context.Context, path string) error {
	// The copy is a scratch file, read once and removed: written with no
	// journal and no fsync, so it does not put the whole database through
	// the disk queue the writer's commits wait in.
	db, err := sql.Open("sqlite", pathDSN(path, "_pragma=journal_mode(OFF)&_pragma=synchronous(OFF)"))
	if err != nil {
		return err
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		r, ok := dc.(restorer)
		if !ok {
			return fmt.Errorf("the sqlite driver's connection (%T) offers no backup", dc)
		}
		// The database is read through a read-only connection of its own.
		bk, err := r.NewRestore(pathDSN(s.path, "mode=ro"))
		if err != nil {
			return err
		}
		// One step of every page: one read transaction, so the copy is
		// of one moment; steps of a few pages would start over whenever
		// the writer commits in between.
		_, stepErr := bk.Step(-1)
		return errors.Join(stepErr, bk.Finish())
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
	if _, err := os.Stat(path); err != nil {
		return 0, err
	}
	db, err := sql.Open("sqlite", pathDSN(path, "mode=ro&_pragma=query_only(1)"))
	if err != nil {
		return 0, err
	}
	defer db.Close()
	if err := checkOrderdTables(ctx, db); err != nil {
		return 0, fmt.Errorf("%s is not an orderd database: %w", path, err)
	}
	return appliedSeq(ctx, db)
}
