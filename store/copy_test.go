package store_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"orderd/store"
)

// pagesChanged counts the 4 KiB pages of b that differ from a's at the
// same offset (pages past a's end count as changed).
func pagesChanged(a, b []byte) (changed, total int) {
	for off := 0; off < len(b); off += 4096 {
		end := min(off+4096, len(b))
		total++
		if end > len(a) || !bytes.Equal(a[off:end], b[off:end]) {
			changed++
		}
	}
	return changed, total
}

// TestStore_Copy: a copy is a checked orderd database with every
// committed order, taken while writes go on; it keeps the pages in place,
// so two copies a few writes apart differ in a few pages only (VACUUM INTO
// would lay them out anew); and an existing file is never overwritten.
func TestStore_Copy(t *testing.T) {
	s, _ := openStore(t, store.Options{})
	for range 2000 {
		if _, err := s.Apply(t.Context(), obs(t, store.SourceWebhook, newOrder("10.00").json(false))); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	first := filepath.Join(dir, "first.db")
	// Writes go on during the copy.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := s.Apply(t.Context(), obs(t, store.SourceWebhook, newOrder("11.00").json(false))); err != nil {
				t.Error(err)
				return
			}
		}
	})
	err := s.Copy(t.Context(), first)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.CheckBackup(t.Context(), first); err != nil {
		t.Fatalf("the copy fails its check: %v", err)
	}
	c, err := store.Open(t.Context(), first, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := count(t, c, `SELECT count(*) FROM orders WHERE merchant_order_id IS NOT NULL`); n < 2000 {
		t.Errorf("the copy holds %d orders, want at least the 2000 committed before it", n)
	}
	c.Close(t.Context())
	if fi, err := os.Stat(first); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the copy's mode: %v %v, want 0600", fi.Mode(), err)
	}

	second := filepath.Join(dir, "second.db")
	if _, err := s.Apply(t.Context(), obs(t, store.SourceWebhook, newOrder("12.00").json(false))); err != nil {
		t.Fatal(err)
	}
	third := filepath.Join(dir, "third.db")
	if err := s.Copy(t.Context(), second); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := s.Apply(t.Context(), obs(t, store.SourceWebhook, newOrder("13.00").json(false))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Copy(t.Context(), third); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(second)
	b, _ := os.ReadFile(third)
	changed, total := pagesChanged(a, b)
	t.Logf("3 more orders changed %d of %d pages", changed, total)
	if changed == 0 || changed*10 > total {
		t.Errorf("3 more orders changed %d of %d pages of the copy, want a few", changed, total)
	}

	if err := s.Copy(t.Context(), third); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("a copy onto an existing file: %v, want it refused", err)
	}
	if got, _ := os.ReadFile(third); !bytes.Equal(got, b) {
		t.Error("a refused copy changed the existing file")
	}
}

// TestStore_CopyPaced: a paced copy reads no faster than its pace, and is
// still of one moment while writes go on: it finishes while they do (a
// commit between two steps does not start it over) and holds the orders
// committed before it, not those after.
func TestStore_CopyPaced(t *testing.T) {
	s, path := openStore(t, store.Options{})
	for range 2000 {
		if _, err := s.Apply(t.Context(), obs(t, store.SourceWebhook, newOrder("10.00").json(false))); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	const perSec, burst = 2 << 20, 256 << 10
	cp := filepath.Join(t.TempDir(), "copy.db")
	var wg sync.WaitGroup
	stop := make(chan struct{})
	// Writes go on until the copy is done, for 30 s at most.
	wg.Go(func() {
		bound := time.After(30 * time.Second)
		for {
			select {
			case <-stop:
				return
			case <-bound:
				return
			default:
			}
			if _, err := s.Apply(t.Context(), obs(t, store.SourceWebhook, newOrder("11.00").json(false))); err != nil {
				t.Error(err)
				return
			}
		}
	})
	start := time.Now()
	err = s.CopyPaced(t.Context(), cp, rate.NewLimiter(perSec, burst))
	took := time.Since(start)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.CheckBackup(t.Context(), cp); err != nil {
		t.Fatalf("the paced copy fails its check: %v", err)
	}
	// The database only grew during the copy; the limiter starts with a
	// burst in hand, and the last step is not waited for.
	least := time.Duration(float64(fi.Size()-2*burst) / perSec * float64(time.Second))
	t.Logf("a paced copy of at least %d bytes at %d B/s took %s", fi.Size(), perSec, took.Round(time.Millisecond))
	if took < least {
		t.Errorf("a copy of %d bytes paced at %d B/s took %s, want at least %s", fi.Size(), perSec, took, least)
	}
	c, err := store.Open(t.Context(), cp, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(t.Context())
	copied := count(t, c, `SELECT count(*) FROM orders`)
	after := count(t, s, `SELECT count(*) FROM orders`)
	if copied < 2000 || copied >= after {
		t.Errorf("the paced copy holds %d orders, want from the 2000 before it to fewer than the %d after it", copied, after)
	}
}
