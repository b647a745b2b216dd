package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// ErrLocked is returned by Lock when another process holds the database.
var ErrLocked = errors.New("store: the database is in use by another process")

// maxLinks bounds the symbolic links ResolvePath follows, as the kernel's
// own limit (ELOOP) does.
const maxLinks = 40

// ResolvePath returns the absolute path of the file that path leads to,
// every symbolic link followed, in the directory as well as in the last
// element: the file SQLite opens for path (it follows links itself, and
// keeps the -wal and -shm beside the file they lead to). The file need not
// exist, so a link to a database yet to be created resolves too; its
// directory must.
func ResolvePath(path string) (string, error) {
	p, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	for range maxLinks {
		dir, err := filepath.EvalSymlinks(filepath.Dir(p))
		if err != nil {
			return "", err
		}
		p = filepath.Join(dir, filepath.Base(p))
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return p, nil
		}
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			return p, nil
		}
		target, err := os.Readlink(p)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(dir, target)
		}
		p = target
	}
	return "", fmt.Errorf("%s: too many levels of symbolic links", path)
}

// Lock takes an exclusive advisory lock on the database at path and
// returns its release: the lock of the one process that owns the
// database. The daemon holds it for its life; restore and migrate take it
// too, so each refuses a database another holds. The lock is a file beside
// the database path resolves to (ResolvePath + ".lock"), not beside path
// itself, so every path that leads to one database, through symbolic links
// or not, takes the same lock.
func Lock(path string) (release func() error, err error) {
	return flock(path, ".lock", syscall.LOCK_EX, "")
}

// LockUse takes the lock of a process that has the database open, a file
// beside Lock's (ResolvePath + ".use.lock"): shared for those that may
// work beside each other and beside the daemon (the daemon, backup,
// report, reconcile), exclusive for those that must have the file to
// themselves (restore, migrate). So a restore never replaces a database a
// backup or a report is reading, and none of them opens one a restore is
// replacing. A shared lock whose file cannot be created (a reader without
// write access to the directory) is not taken: reading goes on unlocked
// rather than not at all.
func LockUse(path string, exclusive bool) (release func() error, err error) {
	if exclusive {
		return flock(path, ".use.lock", syscall.LOCK_EX, "another orderd command has it open (backup, report, reconcile, restore or migrate)")
	}
	release, err = flock(path, ".use.lock", syscall.LOCK_SH, "a restore or a migrate is changing it")
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
		return func() error { return nil }, nil
	}
	return release, err
}

// flock takes how (LOCK_EX or LOCK_SH) on the file beside the database
// path resolves to, named with suffix, without waiting; why, when not
// empty, says who holds it when that fails.
func flock(path, suffix string, how int, why string) (release func() error, err error) {
	resolved, err := ResolvePath(path)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	// Readable by all (it is empty): a lock file root created, running a
	// command by hand, still serves the service's own user, since flock
	// needs no write access to the file it locks.
	f, err := os.OpenFile(resolved+suffix, os.O_RDWR|os.O_CREATE, 0o644)
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
		f, err = os.Open(resolved + suffix)
	}
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			name := path
			if resolved != path {
				name = fmt.Sprintf("%s (%s)", path, resolved)
			}
			if why != "" {
				return nil, fmt.Errorf("%w: %s: %s", ErrLocked, name, why)
			}
			return nil, fmt.Errorf("%w: %s", ErrLocked, name)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f.Close, nil
}
