package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"testing"
	"time"
)

// spin burns CPU in a function whose name the test looks for.
//
//go:noinline
func spin(until time.Time) int {
	n := 0
	for time.Now().Before(until) {
		for i := range 10000 {
			n += i * i
		}
	}
	return n
}

// TestReadProfile reads a real CPU and allocation profile of this test
// process, as the daemon's /debug/pprof/ writes them.
func TestReadProfile(t *testing.T) {
	dir := t.TempDir()
	var cpu bytes.Buffer
	if err := pprof.StartCPUProfile(&cpu); err != nil {
		t.Skipf("a CPU profile is running already: %v", err)
	}
	spin(time.Now().Add(300 * time.Millisecond))
	pprof.StopCPUProfile()
	if err := os.WriteFile(filepath.Join(dir, "cpu.pprof"), cpu.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := readProfile(filepath.Join(dir, "cpu.pprof"))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.types) != 2 || p.types[1] != "cpu" {
		t.Fatalf("sample types %q, want [samples cpu]", p.types)
	}
	var inSpin, total int64
	for _, s := range p.samples {
		total += s.values[1]
		for _, f := range s.stack {
			if strings.HasSuffix(f, ".spin") {
				inSpin += s.values[1]
				break
			}
		}
	}
	if total == 0 || inSpin*2 < total {
		t.Errorf("%d of %d ns of CPU in spin, want most: the stacks are not read right", inSpin, total)
	}

	var allocs bytes.Buffer
	if err := pprof.Lookup("allocs").WriteTo(&allocs, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "allocs.pprof"), allocs.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := readProfile(filepath.Join(dir, "allocs.pprof"))
	if err != nil {
		t.Fatal(err)
	}
	if _, total, err := breakdown(a, "alloc_space"); err != nil || total <= 0 {
		t.Errorf("alloc_space: total %d, %v", total, err)
	}
	if _, _, err := breakdown(a, "cpu"); err == nil {
		t.Error("an allocation profile has no cpu values, and breakdown did not say so")
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		stack []string
		want  string
	}{
		{[]string{"crypto/internal/fips140/bigmod.addMulVVW2048", "crypto/internal/fips140/rsa.VerifyPKCS1v15", "orderd/provider.(*Verifier).Verify", "orderd/receiver.(*Handler).handle", "net/http.(*conn).serve"},
			"signature check (base64, SHA-512, RSA-2048 verify)"},
		{[]string{"internal/runtime/syscall/linux.Syscall6", "modernc.org/sqlite/lib._vdbeCommit", "orderd/store.(*Store).runOnce", "orderd/store.(*Store).run"},
			"store writer: commit (WAL write, fsync, page cache)"},
		// The relay's marks run in the writer's transaction: they are the
		// relay's.
		{[]string{"modernc.org/sqlite/lib._sqlite3VdbeExec", "orderd/store.(*advanceOutboxCmd).Apply", "orderd/store.callFn", "orderd/store.(*Store).runOnce"},
			"relay: moving the outbox cursor (writer's SQLite)"},
		{[]string{"modernc.org/sqlite/lib._sqlite3VdbeExec", "orderd/store.(*Store).PendingEvents", "orderd/publish.(*pass).run.func1"},
			"relay: reading the outbox (SQLite)"},
		{[]string{"runtime.mallocgc", "runtime.gcAssistAlloc", "orderd/provider.DecodeOrder"}, "GC: assists during allocations"},
		{[]string{"runtime.memmove", "orderd/provider.DecodeOrder", "orderd/receiver.(*Handler).handle"}, "decode (provider.DecodeOrder)"},
		{[]string{"github.com/nats-io/nats-server/v2/server.newBatchStore"}, "embedded NATS server (JetStream store, fsync)"},
		{[]string{"main.main"}, otherCategory},
	}
	for _, tt := range tests {
		if got := classify(tt.stack); got != tt.want {
			t.Errorf("classify(%q) = %q, want %q", tt.stack, got, tt.want)
		}
	}
	p := &profile{types: []string{"samples", "cpu"}, samples: []sample{
		{values: []int64{1, 10}, stack: []string{"main.main"}},
		{values: []int64{1, 30}, stack: []string{"orderd/provider.DecodeOrder"}},
		{values: []int64{1, 60}, stack: []string{"crypto/rsa.VerifyPKCS1v15"}},
	}}
	shares, total, err := breakdown(p, "cpu")
	if err != nil || total != 100 || len(shares) != 3 {
		t.Fatalf("breakdown = %v, %d, %v", shares, total, err)
	}
	if shares[0].value != 60 || shares[1].value != 30 || shares[2].name != otherCategory || shares[2].fraction != 0.1 {
		t.Errorf("breakdown = %+v, want largest first and other last", shares)
	}
}
