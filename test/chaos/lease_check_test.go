//go:build chaos

package chaos_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"orderd/provider/providertest"
)

// TestCheckLease_Verdicts feeds the lease checker a made-up history and
// calls: it must count a call past 9/10 of lease_ttl after the caller's
// last write, and a call by an instance that never held the lease, as
// unleased; leave a call within the bound alone; call one that a missed
// revision might cover unverifiable; and ignore the gateway's calls, which
// any instance makes.
func TestCheckLease_Verdicts(t *testing.T) {
	l := &lab{hosts: map[string]*host{"a": {name: "a", ip: "10.0.0.21"}, "b": {name: "b", ip: "10.0.0.22"}}}
	w := &world{lab: l, ods: []*instance{{name: "a", h: l.hosts["a"]}, {name: "b", h: l.hosts["b"]}}}
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ll := &leaseLog{since: t0.Add(-time.Second), writes: map[uint64]leaseWrite{}}
	// a holds the lease from 0 and renews at 600 ms; then nothing until
	// b takes it at 4000 ms; revision 5 was not seen by any watcher.
	for _, lw := range []leaseWrite{
		{rev: 1, node: "a", at: at(0)},
		{rev: 2, node: "a", at: at(600)},
		{rev: 3, node: "", at: at(3000)}, // a release
		{rev: 4, node: "b", at: at(4000)},
		{rev: 6, node: "b", at: at(6300)},
	} {
		ll.writes[lw.rev] = lw
	}
	calls := []providerCall{
		{Endpoint: providertest.PathGetStatus, At: at(2000), Remote: "10.0.0.21:4000"},       // 1.4 s after a's renewal: fine
		{Endpoint: providertest.PathBalances, At: at(2500), Remote: "10.0.0.21:4001"},        // 1.9 s: unleased
		{Endpoint: providertest.PathGetStatus, At: at(3500), Remote: "10.0.0.22:4002"},       // b never held it yet: unleased
		{Endpoint: providertest.PathPaymentCreate, At: at(3500), Remote: "10.0.0.21:4003"},   // the gateway: not judged
		{Endpoint: providertest.PathGetStatus, At: at(6000), Remote: "10.0.0.22:4004"},       // 0.7 s after rev 6: fine
		{Endpoint: providertest.PathGetStatus, At: at(5250), Remote: "10.0.0.22:4005"},       // 1.25 s after rev 4, rev 5 unseen: unverifiable
		{Endpoint: providertest.PathGetStatus, At: at(5900), Remote: "192.0.2.9:4006"},       // not an instance
		{Endpoint: providertest.PathRequisiteOrders, At: at(-500), Remote: "10.0.0.21:4007"}, // before watching began
	}
	v := checkLease(w, ll, calls)
	if v.unleased != 2 || v.unverifiable != 1 || v.calls != 5 {
		t.Errorf("unleased %d, unverifiable %d, judged %d; want 2, 1, 5 (%v)", v.unleased, v.unverifiable, v.calls, v.examples)
	}
	if v.moves != 1 {
		t.Errorf("lease moves %d; want 1", v.moves)
	}
}

// TestLeadershipTrail checks what a failed run prints of an instance's
// log: leadership changes, warnings and errors but not a webhook's answer,
// the last n of them, each shortened.
func TestLeadershipTrail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.log")
	lines := []string{
		`{"level":"info","msg":"became leader","term":1}`,
		`{"level":"info","msg":"webhook","status":200}`,
		`{"level":"warn","msg":"stepped down as leader","reason":"lease taken by another instance"}`,
		`{"level":"info","msg":"reconcile run finished"}`,
		`{"level":"warn","msg":"webhook","status":503,"outcome":"overloaded"}`,
		`{"level":"error","msg":"relay stopped","err":"` + strings.Repeat("x", 300) + `"}`,
		`{"level":"info","msg":"became leader","term":2}`,
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := leadershipTrail(path, 3)
	if len(got) != 3 {
		t.Fatalf("trail = %q, want the last 3 of 4 matching lines", got)
	}
	if !strings.Contains(got[0], "stepped down") || !strings.Contains(got[1], "relay stopped") || !strings.Contains(got[2], `"term":2`) {
		t.Errorf("trail = %q", got)
	}
	if n := len([]rune(got[1])); n != 241 || !strings.HasSuffix(got[1], "…") {
		t.Errorf("long line kept as %d runes: %q", n, got[1])
	}
	if got := leadershipTrail(filepath.Join(t.TempDir(), "none.log"), 3); len(got) != 0 {
		t.Errorf("missing log: trail = %q", got)
	}
}
