package store

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// The temporary files orderd's operations write beside the database, each
// named after the database's path. Every operation removes its own when it
// ends or fails; RemoveTempFiles removes those of one that was killed.
const (
	// TempSnapshotInfix names a snapshot's copy of the database: the
	// database's path, this, and a unique suffix.
	TempSnapshotInfix = ".snapshot-"
	// TempSeedInfix names a seed's copy of the database and the snapshot
	// it reads back: the database's path, this, and a unique suffix.
	TempSeedInfix = ".seed-"
	// TempRestoreSuffix names the snapshot an instance on an empty disk
	// downloads: the database's path and this.
	TempRestoreSuffix = ".restore"
	// TempRestoringInfix names orderd restore's copy of the backup: a dot,
	// the database's file name, this, and a unique suffix.
	TempRestoringInfix = ".restoring-"
)

// RemoveTempFiles removes the temporary files that operations on the
// database at path left behind when they were killed (see the Temp
// constants), with the -wal and -shm files SQLite kept beside them, and
// returns the names it removed. The caller must hold the database's lock
// (Lock): every operation that writes such files runs under it, so none is
// in use. What the database keeps on purpose (a restore's
// ".before-restore" files) and the database's own files stay.
func RemoveTempFiles(path string) ([]string, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, e := range ents {
		if e.IsDir() || !isTempFile(base, e.Name()) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, e.Name())
	}
	return removed, errors.Join(errs...)
}

// isTempFile reports whether name is one of the temporary files of the
// database named base, or a -wal, -shm or -journal file beside one.
func isTempFile(base, name string) bool {
	if strings.HasPrefix(name, base+TempSnapshotInfix) || strings.HasPrefix(name, base+TempSeedInfix) ||
		strings.HasPrefix(name, "."+base+TempRestoringInfix) {
		return true
	}
	for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
		if name == base+TempRestoreSuffix+suffix {
			return true
		}
	}
	return false
}
