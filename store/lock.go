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
// returns its release. The daemon holds it for its life; restore and
// migrate refuse a database that is locked. The lock is a file beside the
// database path resolves to (ResolvePath + ".lock"), not beside path
// itself, so every path that leads to one database, through symbolic links
// or not, takes the same lock.
func Lock(path string) (release func() error, err error) {
	resolved, err := ResolvePath(path)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	f, err := os.OpenFile(resolved+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			if resolved != path {
				return nil, fmt.Errorf("%w: %s (%s)", ErrLocked, path, resolved)
			}
			return nil, fmt.Errorf("%w: %s", ErrLocked, path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f.Close, nil
}
