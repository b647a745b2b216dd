package filekind_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"orderd/internal/filekind"
)

func TestOf(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink("pipe", link); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{fifo: "a named pipe", dir: "a directory", link: "a symbolic link"} {
		fi, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := filekind.Of(fi.Mode()); got != want {
			t.Errorf("Of(%s) = %q, want %q", filepath.Base(path), got, want)
		}
	}
}
