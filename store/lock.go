package store

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// ErrLocked is returned by Lock when another process holds the database.
var ErrLocked = errors.New("store: the database is in use by another process")

// Lock takes an exclusive advisory lock on the database at path (a file
// beside it, path + ".lock") and returns its release. The daemon holds it
// for its life; restore refuses to replace a database that is locked.
func Lock(path string) (release func() error, err error) {
	f, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", ErrLocked, path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f.Close, nil
}
