package docs_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// root is the repository's root, from this package's directory.
const root = "../.."

func read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// goFiles parses every Go file of the repository (tests too, whatever
// their build tags) and calls fn with its directory relative to the root.
func goFiles(t *testing.T, fn func(dir string, name string, f *ast.File)) {
	t.Helper()
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		fn(filepath.ToSlash(rel), filepath.Base(path), f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// testRef is `package:TestName` in ARCHITECTURE.md.
var testRef = regexp.MustCompile("`([a-z0-9_./-]+):((?:Test|Fuzz|Benchmark)[A-Za-z0-9_]*)`")

// TestArchitecture_NamedTestsExist: every test ARCHITECTURE.md names as
// proof of an invariant is a test function in the package it says, so a
// renamed or deleted test cannot leave an invariant proved on paper only.
func TestArchitecture_NamedTestsExist(t *testing.T) {
	arch := read(t, "ARCHITECTURE.md")
	funcs := map[string]bool{} // "dir:Name" of every test function
	goFiles(t, func(dir, name string, f *ast.File) {
		if !strings.HasSuffix(name, "_test.go") {
			return
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil {
				funcs[dir+":"+fd.Name.Name] = true
			}
		}
	})
	refs := testRef.FindAllStringSubmatch(arch, -1)
	if len(refs) < 30 {
		t.Fatalf("ARCHITECTURE.md names %d tests as `package:TestName`; the invariants need their proofs", len(refs))
	}
	for _, r := range refs {
		if !funcs[r[1]+":"+r[2]] {
			t.Errorf("ARCHITECTURE.md names %s, but package %s has no test function %s", r[0], r[1], r[2])
		}
	}
	// Every numbered invariant names at least one test.
	sec := section(t, arch, "## Invariants and the tests that prove them")
	items := regexp.MustCompile(`(?m)^\d+\. `).Split(sec, -1)[1:]
	if len(items) < 9 {
		t.Fatalf("ARCHITECTURE.md lists %d invariants, want at least the design's nine", len(items))
	}
	for i, it := range items {
		if !testRef.MatchString(it) {
			t.Errorf("ARCHITECTURE.md: invariant %d names no test: %.60q", i+1, strings.TrimSpace(it))
		}
	}
}

// TestArchitecture_PackagesListed: the package table names every package
// of the module, and only those.
func TestArchitecture_PackagesListed(t *testing.T) {
	out, err := exec.Command("go", "list", "-tags", "e2e,consumers,chaos", "-f", "{{.Dir}}", "orderd/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	var pkgs []string
	for _, dir := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(abs, dir)
		if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, filepath.ToSlash(rel))
	}
	table := section(t, read(t, "ARCHITECTURE.md"), "## Packages")
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)` \\|").FindAllStringSubmatch(table, -1) {
		listed[m[1]] = true
	}
	for _, p := range pkgs {
		if !listed[p] {
			t.Errorf("ARCHITECTURE.md's package table does not list %s", p)
		}
		delete(listed, p)
	}
	for p := range listed {
		t.Errorf("ARCHITECTURE.md's package table lists %s, which is not a package", p)
	}
}

// TestDocs_FindingKinds: every finding kind the code can open — each
// Finding… string constant — is in docs/events.md's table of finding kinds
// and in RUNBOOK.md, and the table lists no other.
func TestDocs_FindingKinds(t *testing.T) {
	kinds := map[string]string{} // kind → where it is declared
	goFiles(t, func(dir, name string, f *ast.File) {
		if strings.HasSuffix(name, "_test.go") {
			return
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, "Finding") || i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						v, err := strconv.Unquote(lit.Value)
						if err != nil {
							t.Fatal(err)
						}
						kinds[v] = dir + "." + n.Name
					}
				}
			}
		}
	})
	if len(kinds) < 6 {
		t.Fatalf("found %d finding kinds in the code (%v); are they still Finding… string constants?", len(kinds), kinds)
	}
	table := section(t, read(t, "docs/events.md"), "## Finding kinds")
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|").FindAllStringSubmatch(table, -1) {
		listed[m[1]] = true
	}
	runbook := read(t, "RUNBOOK.md")
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		if !listed[k] {
			t.Errorf("docs/events.md's finding kinds table lacks %s (%s)", k, kinds[k])
		}
		if !strings.Contains(runbook, "`"+k+"`") {
			t.Errorf("RUNBOOK.md does not say what to do about %s findings", k)
		}
		delete(listed, k)
	}
	for k := range listed {
		t.Errorf("docs/events.md lists finding kind %s, which the code does not declare", k)
	}
}

// documents lists the Markdown documents: those at the root and the pages
// under docs/, as paths relative to the root.
func documents(t *testing.T) []string {
	t.Helper()
	var docs []string
	for _, pattern := range []string{"*.md", "docs/*.md"} {
		m, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m {
			rel, err := filepath.Rel(root, f)
			if err != nil {
				t.Fatal(err)
			}
			docs = append(docs, filepath.ToSlash(rel))
		}
	}
	for _, want := range []string{"README.md", "ARCHITECTURE.md", "RUNBOOK.md", "SECURITY.md", "BENCHMARKS.md", "docs/events.md"} {
		if !slices.Contains(docs, want) {
			t.Fatalf("no %s among the documents %v", want, docs)
		}
	}
	return docs
}

// mdLink is a relative Markdown link target: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)#\s]+)(#[^)\s]*)?\)`)

// TestDocs_LinksResolve: every relative link in the documents (the root's
// and docs/'s) leads to a file of the repository, resolved from the
// document's own directory as a reader's viewer resolves it, and every
// #anchor to a heading of its document — the documents point at nothing
// outside the repository.
func TestDocs_LinksResolve(t *testing.T) {
	for _, doc := range documents(t) {
		text := read(t, doc)
		for _, m := range regexp.MustCompile(`\]\((#[^)\s]+)\)`).FindAllStringSubmatch(text, -1) {
			if !hasAnchor(text, m[1][1:]) {
				t.Errorf("%s links %s, which is no heading of it", doc, m[1])
			}
		}
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				t.Errorf("%s links %s outside the repository", doc, target)
				continue
			}
			rel := path.Join(path.Dir(doc), target)
			if rel == ".." || strings.HasPrefix(rel, "../") {
				t.Errorf("%s links %s, outside the repository", doc, target)
				continue
			}
			if _, err := os.Stat(filepath.Join(root, rel)); err != nil {
				t.Errorf("%s links %s: %v", doc, target, err)
				continue
			}
			if m[2] != "" && strings.HasSuffix(rel, ".md") && !hasAnchor(read(t, rel), m[2][1:]) {
				t.Errorf("%s links %s%s, which is no heading of %s", doc, target, m[2], rel)
			}
		}
	}
}

// TestDocs_PagesLinked: the README links every page under docs/, so that
// no page can only be found by listing the directory.
func TestDocs_PagesLinked(t *testing.T) {
	readme := read(t, "README.md")
	linked := map[string]bool{}
	for _, m := range mdLink.FindAllStringSubmatch(readme, -1) {
		linked[path.Clean(m[1])] = true
	}
	pages := 0
	for _, doc := range documents(t) {
		if !strings.HasPrefix(doc, "docs/") {
			continue
		}
		pages++
		if !linked[doc] {
			t.Errorf("README.md does not link %s", doc)
		}
	}
	if pages < 7 {
		t.Fatalf("docs/ holds %d pages; want the user guide's seven at least", pages)
	}
}

// testName is a Go test, benchmark or fuzz function's name as a document
// writes it in a command or in prose.
var testName = regexp.MustCompile(`\b(?:Test|Benchmark|Fuzz)[A-Z][A-Za-z0-9_]*`)

// TestDocs_NamedTestsExist: every test, benchmark or fuzz function a
// document names (`go test -run TestX`, `-bench BenchmarkY`, a proof cited
// in prose) is a function of a _test.go file of the repository, so a
// renamed test cannot leave a document's command matching nothing.
func TestDocs_NamedTestsExist(t *testing.T) {
	funcs := map[string]bool{}
	goFiles(t, func(dir, name string, f *ast.File) {
		if !strings.HasSuffix(name, "_test.go") {
			return
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil {
				funcs[fd.Name.Name] = true
			}
		}
	})
	names := slices.Collect(maps.Keys(funcs))
	named := 0
	for _, doc := range documents(t) {
		for _, n := range testName.FindAllString(read(t, doc), -1) {
			named++
			// A -run or -bench pattern may name the prefix of several
			// functions (BenchmarkReporter_ matches them all).
			if funcs[n] || slices.ContainsFunc(names, func(f string) bool { return strings.HasPrefix(f, n) }) {
				continue
			}
			t.Errorf("%s names %s, which is no test, benchmark or fuzz function of the repository", doc, n)
		}
	}
	if named < 30 {
		t.Fatalf("the documents name %d tests; is the pattern still right?", named)
	}
}

// section returns the text of a document from the heading to the next
// heading of the same or a higher level.
func section(t *testing.T, doc, heading string) string {
	t.Helper()
	i := strings.Index(doc, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("no heading %q", heading)
	}
	rest := doc[i+1+len(heading):]
	level := strings.Count(strings.Fields(heading)[0], "#")
	for _, l := range regexp.MustCompile(`(?m)^#{1,6} `).FindAllStringIndex(rest, -1) {
		if strings.Count(strings.Fields(rest[l[0]:])[0], "#") <= level {
			return rest[:l[0]]
		}
	}
	return rest
}

// hasAnchor reports whether a heading of doc has the GitHub anchor a
// (lowercased, spaces to dashes, other punctuation dropped).
func hasAnchor(doc, a string) bool {
	for _, m := range regexp.MustCompile(`(?m)^#{1,6} +(.+?) *$`).FindAllStringSubmatch(doc, -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
				b.WriteRune(r)
			}
		}
		if b.String() == a {
			return true
		}
	}
	return false
}
