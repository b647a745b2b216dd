package main

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"orderd/internal/filekind"
)

// maxSecretFileBytes bounds a secret or key file: an API key, a token, a
// PEM bundle of public keys, NATS credentials. A real one is a few KiB; a
// file pointing at /dev/zero or a log would otherwise be read until the
// machine runs out of memory.
const maxSecretFileBytes = 64 << 10

// openSecretFile opens a secret or key file for reading and checks what it
// is: a regular file (a FIFO would block start-up until someone writes to
// it, a device can be endless, a directory is a mistake) of at most
// maxSecretFileBytes. It opens without blocking, so a FIFO is refused at
// once instead of waiting for a writer. perm is its permission bits, for
// the caller's checks (othersCanRead, othersCanWrite).
func openSecretFile(path string) (f *os.File, perm fs.FileMode, err error) {
	f, fi, err := openRegularFile(path)
	if err != nil {
		return nil, 0, err
	}
	if fi.Size() > maxSecretFileBytes {
		f.Close()
		return nil, 0, fmt.Errorf("%s is larger than %d bytes", path, maxSecretFileBytes)
	}
	return f, fi.Mode().Perm(), nil
}

// othersCanRead reports whether perm lets every user read the file.
func othersCanRead(perm fs.FileMode) bool { return perm&0o004 != 0 }

// othersCanWrite reports whether perm lets users other than the owner
// (its group or everyone) change the file: whoever can write a key file
// can swap the key orderd trusts.
func othersCanWrite(perm fs.FileMode) bool { return perm&0o022 != 0 }

// openRegularFile opens path for reading and refuses anything but a
// regular file. It opens without blocking, so a FIFO is refused at once
// instead of waiting for a writer; the file it returns is the one checked,
// whatever is renamed onto path afterwards.
func openRegularFile(path string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%s is not a regular file (it is %s)", path, filekind.Of(fi.Mode()))
	}
	return f, fi, nil
}

// readSecretFile reads a secret or key file checked by openSecretFile,
// refusing one that grows past the limit while it is read.
func readSecretFile(path string) (b []byte, perm fs.FileMode, err error) {
	f, perm, err := openSecretFile(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	b, err = io.ReadAll(io.LimitReader(f, maxSecretFileBytes+1))
	if err != nil {
		return nil, 0, err
	}
	if len(b) > maxSecretFileBytes {
		return nil, 0, fmt.Errorf("%s is larger than %d bytes", path, maxSecretFileBytes)
	}
	return b, perm, nil
}

// checkSecretFile checks a file that another library reads (NATS
// credentials, TLS files) the way readSecretFile would, without reading it.
func checkSecretFile(path string) (perm fs.FileMode, err error) {
	f, perm, err := openSecretFile(path)
	if err != nil {
		return 0, err
	}
	return perm, f.Close()
}
