// Package testbin builds orderd's binary for the tests that run it as a
// process, in a way go test's result cache can see.
//
// go test caches a package's passing result by the test binary and the
// files the test itself opened. A binary built by a "go build" child
// process reads the module's sources where the test cannot see it, so a
// change to orderd would leave such a test's old result in the cache:
// a pass for code that was never tested. Orderd stats every file of the
// module first, which go test records, so any change runs the test again.
package testbin

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Orderd builds orderd/cmd/orderd into dst.
func Orderd(dst string) error { return Build(dst, "orderd/cmd/orderd") }

// Build builds the module's main package pkg (an import path, as
// "orderd/examples/consumers/go") into dst.
func Build(dst, pkg string) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	if err := statSources(root); err != nil {
		return err
	}
	cmd := exec.Command("go", "build", "-o", dst, pkg)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
	}
	return nil
}

// ModuleRoot is the directory of the module's go.mod, found from the
// working directory (a test runs in its package's directory).
func ModuleRoot() (string, error) { return moduleRoot() }

// moduleRoot is the directory of the go.mod above the working directory
// (a test runs in its package's directory).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testbin: no go.mod above the working directory")
		}
		dir = parent
	}
}

// statSources stats every file a build may read (see sources), which is
// what go test records.
func statSources(root string) error {
	files, err := sources(root)
	if err != nil {
		return err
	}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			return err
		}
	}
	return nil
}

// sources lists every file below root but those in hidden directories and
// in the build and sandbox output and npm's node_modules, which no build
// reads.
func sources(root string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "bin" || name == "dist" || name == "orderd-sandbox" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		files = append(files, path)
		return nil
	})
	return files, err
}
