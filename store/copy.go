package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"modernc.org/sqlite"
)

// backuper is what modernc.org/sqlite's driver connection offers for
// SQLite's online backup API.
type backuper interface {
	NewBackup(dstURI string) (*sqlite.Backup, error)
}

// Copy writes a consistent copy of the database to path, which must not
// exist, page for page (SQLite's online backup API). Unlike Backup's
// VACUUM INTO, which lays every page out anew, a page that did not change
// between two copies sits at the same offset with the same bytes in
// both, so a snapshot can upload only the parts that changed. The copy
// reads one snapshot of the database in a single step: writers go on
// meanwhile (WAL), and the copy holds the applied log sequence of that
// snapshot.
func (s *Store) Copy(ctx context.Context, path string) (err error) {
	if err := createNewPrivate(path); err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	defer func() {
		if err != nil {
			os.Remove(path)
		}
	}()
	// A read-only connection of its own: the read pool's connections are
	// shared with requests, and a step of the whole database holds one.
	db, err := sql.Open("sqlite", pathDSN(s.path, fmt.Sprintf("mode=ro&_pragma=busy_timeout(%d)", busyTimeoutMillis)))
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	defer conn.Close()
	err = conn.Raw(func(dc any) error {
		b, ok := dc.(backuper)
		if !ok {
			return fmt.Errorf("the sqlite driver's connection (%T) offers no backup", dc)
		}
		bk, err := b.NewBackup(pathDSN(path, ""))
		if err != nil {
			return err
		}
		// One step of every page: one read transaction, so the copy is
		// of one moment; steps of a few pages would start over whenever
		// the writer commits in between.
		_, stepErr := bk.Step(-1)
		return errors.Join(stepErr, bk.Finish())
	})
	if err != nil {
		return fmt.Errorf("copy to %s: %w", path, err)
	}
	return nil
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
