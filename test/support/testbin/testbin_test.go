package testbin

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// sources lists what a build may read, the module's sources and embedded
// files, and leaves out version control, build output and the sandbox's
// state, which change without changing orderd.
func TestSources(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{"go.mod", "a.go", "store/migrations/0001.sql", "api/page.tmpl",
		".git/HEAD", "bin/orderd", "orderd-sandbox/orderd.db", "sub/.cache/x"} {
		path := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files, err := sources(root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range files {
		rel, err := filepath.Rel(root, f)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, filepath.ToSlash(rel))
	}
	slices.Sort(got)
	want := []string{"a.go", "api/page.tmpl", "go.mod", "store/migrations/0001.sql"}
	if !slices.Equal(got, want) {
		t.Errorf("sources %q, want %q", got, want)
	}
}

// The module's own root is found from a package directory, and the list
// holds this file and the command's sources.
func TestModuleRoot(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := sources(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"go.mod", "cmd/orderd/main.go", "test/support/testbin/testbin.go"} {
		if !slices.Contains(files, filepath.Join(root, filepath.FromSlash(want))) {
			t.Errorf("the module's sources lack %s", want)
		}
	}
}
