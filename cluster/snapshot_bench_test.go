package cluster_test

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"orderd/cluster"
	"orderd/publish"
	"orderd/store"
)

// snapshotOrders sizes BenchmarkSnapshot's database (make bench-snapshot).
var (
	snapshotOrders = flag.Int("snapshot.orders", 300_000, "orders in BenchmarkSnapshot's database")
	snapshotRate   = flag.Int64("snapshot.rate", cluster.DefaultSnapshotReadRate, "bytes a second a snapshot reads the database at (0: full speed)")
)

// snapshotFigures is what one run of the snapshot scenario measured.
type snapshotFigures struct {
	Orders, Added int
	// DBBytes is the database at the incremental snapshot.
	DBBytes uint64
	// Full* is the whole-file snapshot (VACUUM INTO, one object), as
	// orderd wrote before chunks.
	FullBytes             uint64
	FullTook, FullRestore time.Duration
	FullErr               error
	FirstUploaded         uint64
	FirstTook             time.Duration
	IncUploaded           uint64
	IncTook               time.Duration
	// CopyTook is the page-preserving copy of the last snapshot.
	CopyTook                 time.Duration
	Restore                  time.Duration
	P99Without, P99During    time.Duration
	LoadWithout, LoadDuring  int
	SourceDigest, RestDigest string
}

// loadRate is the webhook rate of the ingest measured beside a snapshot:
// a busy merchant's, well under the store's capacity, so latency shows
// what the snapshot does to it rather than a saturated queue.
const loadRate = 400

// ingest applies new orders' webhooks at loadRate until stop is closed
// (at most max of them) and returns each apply's latency.
func ingest(tb testing.TB, st applier, stop <-chan struct{}, max int) []time.Duration {
	const workers = 8
	var mu sync.Mutex
	var all []time.Duration
	var wg sync.WaitGroup
	every := time.Second * workers / loadRate
	for range workers {
		wg.Go(func() {
			t := time.NewTicker(every)
			defer t.Stop()
			var mine []time.Duration
			defer func() { mu.Lock(); all = append(all, mine...); mu.Unlock() }()
			for range max / workers {
				select {
				case <-stop:
					return
				case <-t.C:
				}
				ob := webhook(tb, randomID(), "m-"+randomID(), randomID(), "completed")
				t0 := time.Now()
				if _, err := st.Apply(context.Background(), ob); err != nil {
					tb.Errorf("apply during the load: %v", err)
					return
				}
				mine = append(mine, time.Since(t0))
			}
		})
	}
	wg.Wait()
	return all
}

func p99(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[len(d)*99/100]
}

// createObjectStore makes an R3 object store, retrying while a cluster
// that has just started has not placed its peers yet ("no suitable peers
// for placement"), as cluster.New does for its own assets.
func createObjectStore(tb testing.TB, js jetstream.JetStream, bucket string) jetstream.ObjectStore {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		obj, err := js.CreateObjectStore(tb.Context(), jetstream.ObjectStoreConfig{Bucket: bucket, Replicas: 3, Storage: jetstream.FileStorage})
		if err == nil {
			return obj
		}
		if time.Now().After(deadline) {
			tb.Fatalf("create object store %s: %v", bucket, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// runSnapshotScenario builds a database of orders through the real write
// path (single-node store, as a database to be seeded), and measures on a
// three-node NATS cluster (R3, fsync always): a whole-file snapshot and its
// restore, the first chunked snapshot, the chunked snapshot after 1 % more
// orders, its restore onto an empty disk, and the webhook latency during a
// snapshot against the same load without one.
// jetStreamOf connects to the cluster nc, closed when the test ends.
func jetStreamOf(tb testing.TB, nc *publish.EmbeddedCluster) (*nats.Conn, jetstream.JetStream) {
	tb.Helper()
	conn, err := nats.Connect(nc.ClientURL())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(conn.Close)
	js, err := jetstream.New(conn)
	if err != nil {
		tb.Fatal(err)
	}
	return conn, js
}

func runSnapshotScenario(tb testing.TB, orders int, quiet time.Duration) snapshotFigures {
	ctx := tb.Context()
	nc := startNATS(tb)
	conn, js := jetStreamOf(tb, nc)
	obj := createObjectStore(tb, js, "ORDERD_SNAPSHOTS")
	whole := createObjectStore(tb, js, "WHOLE_SNAPSHOTS")
	dir := tb.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "orderd.db"), store.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	defer st.Close(context.Background())
	f := snapshotFigures{Orders: orders}
	start := time.Now()
	addOrders(tb, st, orders, 64)
	tb.Logf("built %d orders in %s", orders, time.Since(start).Round(time.Second))

	// The whole-file snapshot, as before. On a large database JetStream
	// may refuse the burst of one object's chunks (429, too many
	// requests): that is a figure too.
	f.FullErr = wholeFileSnapshot(tb, st, whole, filepath.Join(dir, "full.db"), &f)

	snap := func() cluster.SnapshotInfo {
		tmp := filepath.Join(dir, "snapshot-"+randomID())
		defer os.Remove(tmp)
		si, copied, err := cluster.TakeSnapshotOf(ctx, st, obj, tmp, "bench", *snapshotRate, false)
		if err != nil {
			tb.Fatal(err)
		}
		f.CopyTook = copied
		return si
	}
	start = time.Now()
	si := snap()
	f.FirstTook, f.FirstUploaded = time.Since(start), si.UploadedBytes

	// 1 % more orders, then the incremental snapshot.
	f.Added = max(orders/100, 1)
	addOrders(tb, st, f.Added, 64)
	start = time.Now()
	si = snap()
	f.IncTook, f.IncUploaded, f.DBBytes = time.Since(start), si.UploadedBytes, si.Bytes

	// An empty disk restores it.
	restored := filepath.Join(tb.TempDir(), "orderd.db")
	start = time.Now()
	if _, ok, err := cluster.RestoreSnapshot(ctx, conn, cluster.Config{Node: "empty"}, restored); err != nil || !ok {
		tb.Fatalf("restore: ok %v, %v", ok, err)
	}
	f.Restore = time.Since(start)
	f.SourceDigest, _, err = st.Digest(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	rs, err := store.Open(ctx, restored, store.Options{ReadOnly: true})
	if err != nil {
		tb.Fatal(err)
	}
	defer rs.Close(context.Background())
	f.RestDigest, _, err = rs.Digest(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	// Ingest alone, then ingest during a snapshot (its read of the whole
	// database, the hashing, the upload of what changed meanwhile).
	stop := make(chan struct{})
	time.AfterFunc(quiet, func() { close(stop) })
	lat := ingest(tb, st, stop, int(quiet.Seconds()+1)*loadRate)
	f.P99Without, f.LoadWithout = p99(lat), len(lat)
	stop = make(chan struct{})
	var during []time.Duration
	var wg sync.WaitGroup
	wg.Go(func() { during = ingest(tb, st, stop, 3600*loadRate) })
	snap()
	close(stop)
	wg.Wait()
	f.P99During, f.LoadDuring = p99(during), len(during)
	return f
}

// wholeFileSnapshot writes and restores a snapshot the way orderd did
// before chunks: VACUUM INTO, one object.
func wholeFileSnapshot(tb testing.TB, st *store.Store, whole jetstream.ObjectStore, full string, f *snapshotFigures) error {
	ctx := tb.Context()
	defer os.Remove(full)
	start := time.Now()
	if err := st.Backup(ctx, full); err != nil {
		return err
	}
	fh, err := os.Open(full)
	if err != nil {
		return err
	}
	oi, err := whole.Put(ctx, jetstream.ObjectMeta{Name: "orderd.db"}, fh)
	fh.Close()
	if err != nil {
		return err
	}
	f.FullTook, f.FullBytes = time.Since(start), oi.Size
	os.Remove(full)
	start = time.Now()
	// A replica may answer a moment behind the write.
	for try := 0; ; try++ {
		err := whole.GetFile(ctx, "orderd.db", full)
		if err == nil {
			break
		}
		if !errors.Is(err, jetstream.ErrObjectNotFound) || try == 10 {
			return err
		}
		os.Remove(full)
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := store.CheckBackup(ctx, full); err != nil {
		return err
	}
	f.FullRestore = time.Since(start)
	return nil
}

func (f snapshotFigures) log(tb testing.TB) {
	tb.Logf("database %d orders +%d: %d bytes (%.0f bytes/order), chunk %d KiB", f.Orders, f.Added, f.DBBytes,
		float64(f.DBBytes)/float64(f.Orders+f.Added), cluster.ChunkBytes>>10)
	if f.FullErr != nil {
		tb.Logf("whole-file snapshot failed: %v", f.FullErr)
	} else {
		tb.Logf("whole-file snapshot: %d bytes uploaded in %s; its restore %s", f.FullBytes, f.FullTook.Round(time.Millisecond), f.FullRestore.Round(time.Millisecond))
	}
	tb.Logf("first chunked snapshot: %d bytes uploaded in %s", f.FirstUploaded, f.FirstTook.Round(time.Millisecond))
	tb.Logf("after 1%% more orders: %d bytes uploaded (%.2f%% of the database) in %s", f.IncUploaded,
		100*float64(f.IncUploaded)/float64(f.DBBytes), f.IncTook.Round(time.Millisecond))
	tb.Logf("the last snapshot's copy of the database took %s", f.CopyTook.Round(time.Millisecond))
	tb.Logf("restore onto an empty disk: %s", f.Restore.Round(time.Millisecond))
	tb.Logf("webhook apply p99 at %d/s: %s without a snapshot (%d applies), %s during one (%d applies)",
		loadRate, f.P99Without.Round(10*time.Microsecond), f.LoadWithout, f.P99During.Round(10*time.Microsecond), f.LoadDuring)
}

// TestSnapshot_smallScale is BenchmarkSnapshot's scenario at a small size:
// a snapshot after 1 % more orders uploads a small part of the database,
// and an empty disk restores the same database.
func TestSnapshot_smallScale(t *testing.T) {
	f := runSnapshotScenario(t, 2000, time.Second)
	f.log(t)
	if f.RestDigest != f.SourceDigest {
		t.Fatalf("restored digest %s, source %s", f.RestDigest, f.SourceDigest)
	}
	if f.FirstUploaded < f.DBBytes/2 {
		t.Errorf("the first snapshot uploaded %d of %d bytes: it should upload (nearly) all", f.FirstUploaded, f.DBBytes)
	}
	// The acceptance is at most a tenth at 300,000 orders (make
	// bench-snapshot); a small database has fewer pages per change.
	if f.IncUploaded*5 > f.DBBytes {
		t.Errorf("after 1%% more orders a snapshot uploaded %d of %d bytes, want at most a fifth", f.IncUploaded, f.DBBytes)
	}
}

// BenchmarkSnapshot runs the snapshot scenario once on -snapshot.orders
// orders (make bench-snapshot) and reports its figures.
func BenchmarkSnapshot(b *testing.B) {
	for range b.N {
		f := runSnapshotScenario(b, *snapshotOrders, 10*time.Second)
		f.log(b)
		if f.RestDigest != f.SourceDigest {
			b.Fatalf("restored digest %s, source %s", f.RestDigest, f.SourceDigest)
		}
		b.ReportMetric(float64(f.DBBytes), "db-bytes")
		b.ReportMetric(float64(f.FullBytes), "full-uploaded-bytes")
		b.ReportMetric(f.FullTook.Seconds(), "full-s")
		b.ReportMetric(f.FullRestore.Seconds(), "full-restore-s")
		b.ReportMetric(float64(f.FirstUploaded), "first-uploaded-bytes")
		b.ReportMetric(f.FirstTook.Seconds(), "first-s")
		b.ReportMetric(float64(f.IncUploaded), "inc-uploaded-bytes")
		b.ReportMetric(100*float64(f.IncUploaded)/float64(f.DBBytes), "inc-uploaded-%")
		b.ReportMetric(f.IncTook.Seconds(), "inc-s")
		b.ReportMetric(f.Restore.Seconds(), "restore-s")
		b.ReportMetric(float64(f.P99Without.Microseconds())/1000, "p99-ms-without")
		b.ReportMetric(float64(f.P99During.Microseconds())/1000, "p99-ms-during")
	}
}
