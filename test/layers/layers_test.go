// Package layers holds the module's import graph to its layers: from cmd
// down to the provider's vocabulary and the ground-floor helpers, every
// import points down, and no product package imports test support.
package layers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"

	"orderd/test/support/testbin"
)

// rank is a package's floor: a package may import only packages on a
// lower floor. The test suites and their support (test/...) sit apart. A
// command's own packages sit just below it: its subcommands above the
// helpers they share.
func rank(pkg string) (float64, bool) {
	switch {
	case pkg == "orderd/cmd/orderd-bench/internal/load", pkg == "orderd/cmd/orderd-bench/internal/scale":
		return 3.8, true
	case strings.HasPrefix(pkg, "orderd/cmd/orderd-bench/internal/"):
		return 3.6, true
	case strings.HasPrefix(pkg, "orderd/internal/"):
		return 0, true
	case pkg == "orderd/provider":
		return 1, true
	case pkg == "orderd/provider/providertest", pkg == "orderd/store":
		return 2, true
	case pkg == "orderd/receiver", pkg == "orderd/publish", pkg == "orderd/reconcile", pkg == "orderd/api", pkg == "orderd/cluster":
		return 3, true
	case strings.HasPrefix(pkg, "orderd/cmd/"):
		return 4, true
	case strings.HasPrefix(pkg, "orderd/examples/"), pkg == "orderd/monitoring":
		return 4, true
	}
	return 0, false
}

func TestLayers_importsPointDown(t *testing.T) {
	root, err := testbin.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	// -pgo=off: with cmd/orderd/default.pgo, go list names the packages
	// orderd is built from a second time, as their PGO variants.
	cmd := exec.Command("go", "list", "-pgo=off", "-json=ImportPath,Imports", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	n := 0
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		n++
		if strings.HasPrefix(p.ImportPath, "orderd/test/") {
			continue
		}
		from, ok := rank(p.ImportPath)
		if !ok {
			t.Errorf("package %s has no floor: give it one in rank", p.ImportPath)
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, "orderd/") {
				continue
			}
			if strings.HasPrefix(imp, "orderd/test/") {
				t.Errorf("product package %s imports test support %s", p.ImportPath, imp)
				continue
			}
			to, ok := rank(imp)
			if !ok {
				t.Errorf("package %s has no floor: give it one in rank", imp)
				continue
			}
			if to >= from {
				t.Errorf("%s (floor %g) imports %s (floor %g): imports point down only", p.ImportPath, from, imp, to)
			}
		}
	}
	if n < 15 {
		t.Fatalf("go list gave %d packages; the module has more", n)
	}
}
