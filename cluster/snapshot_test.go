package cluster_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"orderd/cluster"
	"orderd/store"
)

// snapshotStore opens the snapshot store the instances use.
func snapshotStore(t *testing.T, in *instance) jetstream.ObjectStore {
	t.Helper()
	js, err := jetstream.New(in.nc)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := js.ObjectStore(t.Context(), "ORDERD_SNAPSHOTS")
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// storedManifest is what the tests read of a manifest.
type storedManifest struct {
	Seq   uint64 `json:"seq"`
	Packs []struct {
		Name string `json:"name"`
	} `json:"packs"`
}

// pointed reads the pointer and the manifests it names: the newest, and
// the previous one if any.
func pointed(t *testing.T, obj jetstream.ObjectStore) (names []string, ms []storedManifest) {
	t.Helper()
	raw, err := getObject(t, obj, "orderd.snapshot")
	if err != nil {
		t.Fatalf("pointer: %v", err)
	}
	var p struct{ Manifest, Previous string }
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{p.Manifest, p.Previous} {
		if name == "" {
			continue
		}
		raw, err := getObject(t, obj, name)
		if err != nil {
			t.Fatalf("manifest %s: %v", name, err)
		}
		var m storedManifest
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		names, ms = append(names, name), append(ms, m)
	}
	return names, ms
}

// getObject reads an object, again for a moment if it is not found: the
// store's objects are read from any replica (direct gets), and one may
// answer a moment behind the write.
func getObject(t *testing.T, obj jetstream.ObjectStore, name string) ([]byte, error) {
	t.Helper()
	for try := 0; ; try++ {
		raw, err := obj.GetBytes(t.Context(), name)
		if !errors.Is(err, jetstream.ErrObjectNotFound) || try == 10 {
			return raw, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// objectNames lists the snapshot store's objects, sorted.
func objectNames(t *testing.T, obj jetstream.ObjectStore) []string {
	t.Helper()
	all, err := obj.List(t.Context())
	if err != nil && !errors.Is(err, jetstream.ErrNoObjectsFound) {
		t.Fatal(err)
	}
	var names []string
	for _, oi := range all {
		names = append(names, oi.Name)
	}
	slices.Sort(names)
	return names
}

// TestNode_TakeSnapshot_incremental: after the first snapshot, one taken
// after a small change uploads a small part of the database; the answer
// and the status carry both sizes; the snapshot store keeps exactly the
// newest two manifests and the packs they use; and an instance on an
// empty disk restored from the last of a chain of incremental snapshots
// converges with the leader on every replicated table.
func TestNode_TakeSnapshot_incremental(t *testing.T) {
	nc := startNATS(t)
	a := startInstance(t, nc, "a", t.TempDir(), 3*time.Second)
	addOrders(t, a.st, 400, 16)
	first, err := a.node.TakeSnapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if first.Bytes == 0 || first.UploadedBytes < first.Bytes/2 {
		t.Fatalf("first snapshot %+v: want (nearly) the whole database uploaded", first)
	}
	obj := snapshotStore(t, a)
	var firstPacks []string
	_, ms := pointed(t, obj)
	for _, p := range ms[0].Packs {
		firstPacks = append(firstPacks, p.Name)
	}
	var last cluster.SnapshotInfo
	for round := range 3 {
		addOrders(t, a.st, 4, 4)
		si, err := a.node.TakeSnapshot(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("snapshot %d after 4 more orders: %d of %d bytes uploaded", round+2, si.UploadedBytes, si.Bytes)
		if si.UploadedBytes == 0 || si.UploadedBytes*5 > si.Bytes {
			t.Fatalf("snapshot after a small change %+v: want more than nothing and at most a fifth uploaded", si)
		}
		if si.Seq != a.node.AppliedSeq() {
			t.Fatalf("snapshot at seq %d, applied %d", si.Seq, a.node.AppliedSeq())
		}
		last = si
	}
	st := a.node.Status(t.Context())
	if st.Snapshot == nil || st.Snapshot.Bytes != last.Bytes || st.Snapshot.UploadedBytes != last.UploadedBytes || st.Snapshot.Seq != last.Seq {
		t.Fatalf("status snapshot %+v, want %+v", st.Snapshot, last)
	}
	js, _ := json.Marshal(st)
	if !bytes.Contains(js, []byte(`"uploadedBytes":`)) || !bytes.Contains(js, []byte(`"bytes":`)) {
		t.Fatalf("status JSON %s lacks bytes or uploadedBytes", js)
	}

	// Kept: the pointer, the two newest manifests, the packs they use;
	// nothing else.
	names, ms := pointed(t, obj)
	if len(ms) != 2 || ms[0].Seq != last.Seq {
		t.Fatalf("pointer names %v (seqs %+v), want the newest (seq %d) and the previous", names, ms, last.Seq)
	}
	want := append([]string{"orderd.snapshot"}, names...)
	for _, m := range ms {
		for _, p := range m.Packs {
			if !slices.Contains(want, p.Name) {
				want = append(want, p.Name)
			}
		}
	}
	slices.Sort(want)
	if got := objectNames(t, obj); !slices.Equal(got, want) {
		t.Fatalf("snapshot store holds %v, want %v", got, want)
	}
	// The first snapshot's big pack is still used (it holds most pages);
	// packs written for the rounds in between and no longer used are gone.
	if !slices.Contains(want, firstPacks[0]) {
		t.Fatalf("the first pack %s, still holding most pages, was removed", firstPacks[0])
	}

	addOrders(t, a.st, 3, 3)
	dir := t.TempDir()
	b := startInstance(t, nc, "b", dir, 3*time.Second)
	waitFor(t, 30*time.Second, "b caught up", func() bool { return b.node.AppliedSeq() == a.node.AppliedSeq() })
	da, _ := digest(t, a)
	db, _ := digest(t, b)
	if da != db {
		t.Fatal("the instance restored from a chain of incremental snapshots differs from the leader")
	}
	// The leader's own schedule may have added a snapshot by now (its
	// first comes 10 s after a start without one): b's status names the
	// newest in the store, which is the last one taken here or later.
	newest, ok, err := a.node.LatestSnapshot(t.Context())
	if err != nil || !ok {
		t.Fatalf("latest snapshot: ok %v, %v", ok, err)
	}
	if st := b.node.Status(t.Context()); st.Snapshot == nil || st.Snapshot.Seq != newest.Seq || st.Snapshot.Seq < last.Seq {
		t.Fatalf("b's status snapshot %+v, want seq %d (the newest; at least %d)", st.Snapshot, newest.Seq, last.Seq)
	}
}

// TestRestoreSnapshot_damaged: a pack of the newest snapshot changed or
// missing makes the restore fail with an error naming it, and leaves no
// database behind; the next snapshot uploads what went missing, and then
// the restore succeeds.
func TestRestoreSnapshot_damaged(t *testing.T) {
	nc := startNATS(t)
	a := startInstance(t, nc, "a", t.TempDir(), 3*time.Second)
	addOrders(t, a.st, 50, 8)
	if _, err := a.node.TakeSnapshot(t.Context()); err != nil {
		t.Fatal(err)
	}
	obj := snapshotStore(t, a)
	_, ms := pointed(t, obj)
	pack := ms[0].Packs[0].Name
	good, err := getObject(t, obj, pack)
	if err != nil {
		t.Fatal(err)
	}
	restore := func() error {
		path := filepath.Join(t.TempDir(), "orderd.db")
		_, ok, err := cluster.RestoreSnapshot(t.Context(), a.nc, cluster.Config{Node: "r"}, path)
		if _, statErr := os.Stat(path); err != nil && !errors.Is(statErr, os.ErrNotExist) {
			t.Fatalf("a failed restore left %s (%v)", path, statErr)
		}
		if err == nil && !ok {
			t.Fatal("no snapshot found")
		}
		return err
	}

	bad := bytes.Clone(good)
	bad[len(bad)/2] ^= 0xff
	if _, err := obj.PutBytes(t.Context(), pack, bad); err != nil {
		t.Fatal(err)
	}
	err = restore()
	t.Logf("corrupted pack: %v", err)
	if err == nil || !strings.Contains(err.Error(), pack) || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("restore with a corrupted pack: %v, want an error naming %s as corrupt", err, pack)
	}

	if err := obj.Delete(t.Context(), pack); err != nil {
		t.Fatal(err)
	}
	err = restore()
	t.Logf("missing pack: %v", err)
	if err == nil || !strings.Contains(err.Error(), pack) || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("restore with a missing pack: %v, want an error naming %s as missing", err, pack)
	}

	// The next snapshot does not count on the missing pack: it uploads
	// its pages anew, and the restore succeeds.
	si, err := a.node.TakeSnapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if si.UploadedBytes < uint64(len(good)) {
		t.Fatalf("the snapshot after a pack went missing uploaded %d bytes, less than the pack's %d", si.UploadedBytes, len(good))
	}
	if err := restore(); err != nil {
		t.Fatalf("restore of the snapshot written since: %v", err)
	}
}

// TestRestoreSnapshot_legacy: a whole-file snapshot an older orderd wrote
// (one object, orderd.db) still restores; the first snapshot written
// since removes it.
func TestRestoreSnapshot_legacy(t *testing.T) {
	nc := startNATS(t)
	a := startInstance(t, nc, "a", t.TempDir(), 3*time.Second)
	addOrders(t, a.st, 20, 4)
	backup := filepath.Join(t.TempDir(), "backup.db")
	if err := a.st.Backup(t.Context(), backup); err != nil {
		t.Fatal(err)
	}
	seq, err := store.CheckBackup(t.Context(), backup)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(backup)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	obj := snapshotStore(t, a)
	if _, err := obj.Put(t.Context(), jetstream.ObjectMeta{Name: "orderd.db", Headers: nats.Header{
		"Orderd-Seq": {strconv.FormatUint(seq, 10)}, "Orderd-Taken-At": {time.Now().UTC().Format(time.RFC3339Nano)}}}, f); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "orderd.db")
	si, ok, err := cluster.RestoreSnapshot(t.Context(), a.nc, cluster.Config{Node: "r"}, path)
	if err != nil || !ok || si.Seq != seq {
		t.Fatalf("restore of a whole-file snapshot: %+v %v %v, want seq %d", si, ok, err, seq)
	}
	if got, err := store.CheckBackup(t.Context(), path); err != nil || got != seq {
		t.Fatalf("restored file: seq %d, %v", got, err)
	}
	if _, err := a.node.TakeSnapshot(t.Context()); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(objectNames(t, obj), "orderd.db") {
		t.Fatal("the whole-file snapshot is still there after a new snapshot")
	}
}

// damageIndexPage damages a leaf page of an index of order_history in the
// database at path (closed): the light check never reads it, the full one
// does.
func damageIndexPage(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	var page, pageSize int64
	err = db.QueryRowContext(t.Context(), `SELECT d.pageno FROM dbstat d JOIN sqlite_master m ON m.name = d.name
		WHERE m.type = 'index' AND m.tbl_name = 'order_history' AND d.pagetype = 'leaf' ORDER BY d.pageno LIMIT 1`).Scan(&page)
	if err == nil {
		err = db.QueryRowContext(t.Context(), `PRAGMA page_size`).Scan(&pageSize)
	}
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The b-tree page's type byte: 0 is no page type at all.
	if _, err := f.WriteAt([]byte{0}, (page-1)*pageSize); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestTakeSnapshot_fullCheck: a snapshot checked in full (the leader's
// first after a start, then once a day) refuses a database with a
// damaged page before anything is uploaded, where the light check of the
// snapshots between would pass it.
func TestTakeSnapshot_fullCheck(t *testing.T) {
	nc := startNATS(t)
	a := startInstance(t, nc, "a", t.TempDir(), 3*time.Second)
	obj := snapshotStore(t, a)
	dir := t.TempDir()
	path := filepath.Join(dir, "orderd.db")
	st, err := store.Open(t.Context(), path, store.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	addOrders(t, st, 300, 8)
	if err := st.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	damageIndexPage(t, path)
	st, err = store.Open(t.Context(), path, store.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close(context.Background())

	_, _, err = cluster.TakeSnapshotOf(t.Context(), st, obj, filepath.Join(dir, "full"), "a", 0, true)
	if err == nil || !strings.Contains(err.Error(), "integrity") {
		t.Fatalf("a fully checked snapshot of a damaged database: %v, want the integrity check's refusal", err)
	}
	if _, ok, err := a.node.LatestSnapshot(t.Context()); err != nil || ok {
		t.Fatalf("after the refusal the store holds a snapshot (ok %v, %v), want none", ok, err)
	}
	if _, _, err := cluster.TakeSnapshotOf(t.Context(), st, obj, filepath.Join(dir, "light"), "a", 0, false); err != nil {
		t.Fatalf("the light check refused the same database (%v): this test no longer tells the two apart", err)
	}
}

// TestRestoreSnapshot_damagedCopy: the leader checks its page-for-page
// copy only lightly before most uploads, so a page damaged on the way to the
// copy is uploaded; the restore's full check still refuses it and leaves
// nothing at the path.
func TestRestoreSnapshot_damagedCopy(t *testing.T) {
	nc := startNATS(t)
	a := startInstance(t, nc, "a", t.TempDir(), 3*time.Second)
	addOrders(t, a.st, 300, 8)
	cp := filepath.Join(t.TempDir(), "copy.db")
	if err := a.st.Copy(t.Context(), cp); err != nil {
		t.Fatal(err)
	}
	damageIndexPage(t, cp)
	if _, err := store.CheckBackup(t.Context(), cp); err == nil {
		t.Fatal("the full check passed a copy with a damaged page")
	}
	if _, err := cluster.UploadCopy(t.Context(), snapshotStore(t, a), cp, "a"); err != nil {
		t.Fatalf("upload of the damaged copy: %v", err)
	}
	path := filepath.Join(t.TempDir(), "orderd.db")
	_, _, err := cluster.RestoreSnapshot(t.Context(), a.nc, cluster.Config{Node: "r"}, path)
	t.Logf("restore of a damaged copy: %v", err)
	if err == nil || !strings.Contains(err.Error(), "integrity") {
		t.Fatalf("restore of a snapshot of a damaged copy: %v, want the integrity check's refusal", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused restore left %s (%v)", path, err)
	}
}

// TestTakeSnapshot_paced: a snapshot reads the database (its copy, then
// its hashing) no faster than its read rate, and the paced snapshot
// restores to the same database.
func TestTakeSnapshot_paced(t *testing.T) {
	nc := startNATS(t)
	conn, js := jetStreamOf(t, nc)
	obj := createObjectStore(t, js, "ORDERD_SNAPSHOTS")
	dir := t.TempDir()
	st, err := store.Open(t.Context(), filepath.Join(dir, "orderd.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close(t.Context())
	addOrders(t, st, 1000, 8)
	const perSec = 1 << 20
	start := time.Now()
	si, _, err := cluster.TakeSnapshotOf(t.Context(), st, obj, filepath.Join(dir, "snapshot"), "a", perSec, false)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	// Copy and hashing read the file once each; each pass's limiter
	// starts with a burst (1 MiB) in hand, and its last step is not
	// waited for.
	least := time.Duration(float64(2*int64(si.Bytes)-4<<20) / perSec * float64(time.Second))
	t.Logf("a snapshot of %d bytes read at %d B/s took %s", si.Bytes, perSec, took.Round(time.Millisecond))
	if took < least {
		t.Errorf("a snapshot of %d bytes read at %d B/s took %s, want at least %s", si.Bytes, perSec, took, least)
	}
	restored := filepath.Join(t.TempDir(), "orderd.db")
	if _, ok, err := cluster.RestoreSnapshot(t.Context(), conn, cluster.Config{Node: "r"}, restored); err != nil || !ok {
		t.Fatalf("restore of the paced snapshot: ok %v, %v", ok, err)
	}
	want, _, err := st.Digest(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	rs, err := store.Open(t.Context(), restored, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close(t.Context())
	if got, _, err := rs.Digest(t.Context()); err != nil || got != want {
		t.Fatalf("restored digest %s (%v), want %s", got, err, want)
	}
}
