package provider

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updatePinned = flag.Bool("update-pinned", false, "rewrite testdata/decode_order_pinned.txt from this DecodeOrder")

// TestDecodeOrder_pinnedForTheLog holds what DecodeOrder reads from each
// body of the differential corpus (the order's JSON, or that it refuses
// the body) to a file. From log version 5 a replicated webhook's entry
// carries its body alone and every instance reads the order from it with
// DecodeOrder, so instances of two releases must read the same order from
// the same body. A change that makes this test fail changes what entries
// of version 5 mean: it needs a new log version (store: its log version
// constants and a new command kind), after which the file is rewritten
// with -update-pinned.
func TestDecodeOrder_pinnedForTheLog(t *testing.T) {
	var got strings.Builder
	accepted := 0
	for _, c := range fastCorpus() {
		got.WriteString(c.name)
		got.WriteString("\t")
		o, err := DecodeOrder([]byte(c.body))
		if err != nil {
			got.WriteString("refused\n")
			continue
		}
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		accepted++
		got.Write(b)
		got.WriteString("\n")
	}
	if accepted < 10 {
		t.Fatalf("DecodeOrder accepted only %d bodies of the corpus", accepted)
	}
	path := filepath.Join("testdata", "decode_order_pinned.txt")
	if *updatePinned {
		if err := os.WriteFile(path, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != string(want) {
		gl, wl := strings.Split(got.String(), "\n"), strings.Split(string(want), "\n")
		for i := range max(len(gl), len(wl)) {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("DecodeOrder reads the corpus differently from what log version 5 entries were written with, first at line %d:\n got: %s\nwant: %s\n"+
					"a replicated webhook's order is read from its body on every instance: a new log version is needed before this change (see the test's comment)", i+1, g, w)
			}
		}
	}
}
