package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"orderd/provider/providertest"
	"orderd/store"
)

// linkedConfig writes a copy of the config at cfg into dir whose
// store.path is a symbolic link in dir to the database cfg names
// (filepath.Join(filepath.Dir(cfg), "orderd.db")), with each of replace's
// pairs replaced too, and returns the copy's path and the link's.
func linkedConfig(t *testing.T, cfg, dir string, replace ...string) (string, string) {
	t.Helper()
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(filepath.Dir(cfg), "orderd.db")
	link := filepath.Join(dir, "alias.db")
	if err := os.Symlink(db, link); err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(b), "path: "+db, "path: "+link, 1)
	if s == string(b) {
		t.Fatalf("%s names no store.path %s", cfg, db)
	}
	s = strings.NewReplacer(replace...).Replace(s)
	return writeFile(t, dir, "config.yaml", s), link
}

// refusedWhileHeld runs each command that must have the database to itself
// with the config at cfg, whose store.path leads to a database a running
// orderd holds through another path, and checks each is exit 2 naming
// store.path and leaves the database's orders as they were.
func refusedWhileHeld(t *testing.T, cfg, db string) {
	t.Helper()
	before := orderCount(t, db)
	if before <= 0 {
		t.Fatalf("the running orderd's database holds %d orders; want some", before)
	}
	st, _ := reportStore(t)
	backup := filepath.Join(t.TempDir(), "backup.db")
	if err := st.Backup(t.Context(), backup); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"restore", "-config", cfg, "-i", backup},
		{"migrate", "-config", cfg},
		{"run", "-config", cfg},
	} {
		// Bounded: a run that is wrongly let through would serve until
		// stopped.
		ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
		var stdout, stderr bytes.Buffer
		err := dispatch(ctx, commands(), append([]string{"orderd"}, args...), func(string) string { return "" }, nil, &stdout, &stderr)
		cancel()
		r := result{code: exitCode(err, &stderr), stdout: stdout.String(), stderr: stderr.String()}
		if r.code != 2 || !strings.Contains(r.stderr, "store.path") || !strings.Contains(r.stderr, "in use") {
			t.Errorf("%s beside a running orderd on the same database: exit %d, stdout %q, stderr %q; want exit 2 naming store.path",
				args[0], r.code, r.stdout, r.stderr)
		}
	}
	if after := orderCount(t, db); after != before {
		t.Errorf("the running orderd's database holds %d orders after the refused commands, want %d", after, before)
	}
	if _, err := os.Lstat(db + ".before-restore"); err == nil {
		t.Errorf("a refused restore left %s.before-restore", db)
	}
}

// TestLock_symlinkSingleNode: an orderd runs on a symbolic link to its
// database; restore, migrate and a second run through the database's own
// path are refused and change nothing, and so are they through another
// link to it.
func TestLock_symlinkSingleNode(t *testing.T) {
	de := newDaemonEnv(t, "")
	dir := filepath.Dir(de.cfgPath)
	db := filepath.Join(dir, "orderd.db")
	// The daemon runs on a link; the commands below go through the path
	// of the database itself.
	linkCfg, _ := linkedConfig(t, de.cfgPath, t.TempDir())
	_, done, log := runInProcess(t, linkCfg)
	addrs := waitStarted(t, log, done)
	waitReady(t, addrs.Admin, done)
	if fi, err := os.Lstat(db); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("the database behind the link: %v", err)
	}
	for i, mid := range []string{"lock-1", "lock-2"} {
		if _, err := de.fake.CreateOrder(providertest.NewOrder{MerchantOrderID: mid, Amount: "10.00", Currency: "brl",
			WebhookURL: "http://" + addrs.Webhooks + "/webhooks/orders"}); err != nil {
			t.Fatal(err)
		}
		if err := de.fake.Complete(mid); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); orderCount(t, db) < i+1; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("order %s not stored within 10s", mid)
			}
		}
	}
	t.Run("real path", func(t *testing.T) { refusedWhileHeld(t, de.cfgPath, db) })
	other, _ := linkedConfig(t, de.cfgPath, t.TempDir())
	t.Run("another link", func(t *testing.T) { refusedWhileHeld(t, other, db) })
}

// TestLock_symlinkReplicated: in replicated mode, a second instance whose
// store.path is a link to a running instance's database does not start,
// and restore through the link is refused.
func TestLock_symlinkReplicated(t *testing.T) {
	nc, fake := natsAndFake(t)
	a := startReplica(t, fake, nc.ClientURL(), "a", 2*time.Second)
	db := filepath.Join(a.dir, "orderd.db")
	// stored has the fake complete a new order, whose webhook goes to a,
	// and waits until a's database holds n orders.
	stored := func(mid string, n int, what string) {
		t.Helper()
		if _, err := fake.CreateOrder(providertest.NewOrder{MerchantOrderID: mid, Amount: "10.00", Currency: "brl",
			WebhookURL: "http://" + a.addrs.Webhooks + "/webhooks/orders"}); err != nil {
			t.Fatal(err)
		}
		if err := fake.Complete(mid); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); orderCount(t, db) < n; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal(what + " not stored within 10s")
			}
		}
	}
	stored("lock-r", 1, "order")
	cfg, _ := linkedConfig(t, filepath.Join(a.dir, "config.yaml"), t.TempDir(), "node: a", "node: c")
	refusedWhileHeld(t, cfg, db)
	// The running instance still applies the log: a webhook after the
	// refused start is stored and the instance leads as before.
	stored("lock-r2", 2, "a webhook after the refused start was")
	if st := clusterStatus(t, a.addrs.Admin); !st.Leading || st.Error != "" {
		t.Errorf("the running instance after the refused start: %+v", st)
	}
}

// TestLock_besideCommands: a restore never replaces a database a backup,
// a report or a reconcile has open, and none of them, nor a daemon, opens
// one a restore or a migrate is changing (a daemon neither: it takes the
// lock a restore holds); through a link as through the database's own
// path.
func TestLock_besideCommands(t *testing.T) {
	cfg, live, backup := restoreSetup(t)
	link := filepath.Join(t.TempDir(), "alias.db")
	if err := os.Symlink(live, link); err != nil {
		t.Fatal(err)
	}
	linkCfg := writeFile(t, t.TempDir(), "config.yaml", withLines("store:\n  path: "+link, "log:\n  level: warn"))
	refused := func(what string, r result) {
		t.Helper()
		if r.code != 2 || !strings.Contains(r.stderr, "store.path") || !strings.Contains(r.stderr, "in use") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 naming store.path", what, r.code, r.stdout, r.stderr)
		}
	}

	// As a backup or a report reading it holds it.
	release, err := store.LockUse(link, false)
	if err != nil {
		t.Fatal(err)
	}
	refused("restore beside a reader", runOrderd(t, nil, nil, "restore", "-config", cfg, "-i", backup))
	refused("migrate beside a reader", runOrderd(t, nil, nil, "migrate", "-config", cfg))
	if r := runOrderd(t, nil, nil, "backup", "-config", cfg, "-o", filepath.Join(t.TempDir(), "b.db")); r.code != 0 {
		t.Errorf("backup beside another reader: exit %d, stderr %q", r.code, r.stderr)
	}
	release()

	// As a restore or a migrate changing it holds it.
	owner, err := store.Lock(live)
	if err != nil {
		t.Fatal(err)
	}
	alone, err := store.LockUse(live, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"backup", "-config", linkCfg, "-o", filepath.Join(t.TempDir(), "b.db")},
		{"report", "-config", linkCfg, "-from", "2026-11-01", "-to", "2026-11-02"},
		{"reconcile", "-config", linkCfg, "-job", "stale"},
		{"restore", "-config", linkCfg, "-i", backup},
		{"migrate", "-config", linkCfg},
	} {
		refused(args[0]+" beside a restore", runOrderd(t, nil, nil, args...))
	}
	alone()
	owner()
	if r := runOrderd(t, nil, nil, "restore", "-config", linkCfg, "-i", backup); r.code != 0 {
		t.Errorf("restore once nothing holds the database: exit %d, stderr %q", r.code, r.stderr)
	}
	if n := orderCount(t, live); n != 2 {
		t.Errorf("the database the link leads to holds %d orders after the restore, want the backup's 2", n)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the restore through the link replaced the link: %v", err)
	}
}
