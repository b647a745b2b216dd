package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"orderd/store"
)

// A snapshot in the snapshot store is a manifest and the chunks it
// lists. The database file is cut into chunks of chunkBytes; each chunk is
// an object named after the SHA-256 of its bytes, so a chunk that did not
// change since the previous snapshot is already there and is not
// uploaded again. The copy a snapshot is cut from is page-preserving
// (store.Copy), so a page that did not change keeps its offset and its
// chunk its name.
const (
	// manifestName is the newest snapshot's manifest.
	manifestName = "orderd.manifest"
	// previousName is the manifest before it: its chunks are kept too,
	// so a restore that began from it finishes while the next snapshot
	// is written.
	previousName = "orderd.manifest.previous"
	// legacyName is the whole-file snapshot older orderd versions wrote.
	// It is restored when no manifest exists, and removed once one does.
	legacyName = "orderd.db"
	// chunkPrefix starts each chunk's object name; the SHA-256 in hex
	// follows.
	chunkPrefix = "chunk/"
	// chunkBytes is the size of a chunk (the last one may be shorter):
	// 16 pages of 4 KiB. Smaller chunks upload less after a change
	// spread over the file (random-key index inserts touch pages all
	// over it), larger ones make fewer objects to write and fetch;
	// BENCHMARKS.md ("Snapshots") has the measurements behind it.
	chunkBytes = 64 << 10
	// manifestFormat is the manifest's version.
	manifestFormat = 1
	// transfers is how many chunks are uploaded or fetched at once.
	transfers = 8
)

// Snapshot object headers (on the manifest; on the legacy object too).
const (
	headerSeq      = "Orderd-Seq"
	headerTakenAt  = "Orderd-Taken-At"
	headerBytes    = "Orderd-Bytes"
	headerUploaded = "Orderd-Uploaded-Bytes"
)

// SnapshotInfo describes a snapshot in the snapshot store.
type SnapshotInfo struct {
	// Seq is the last log sequence the snapshot's database applied.
	Seq     uint64    `json:"seq"`
	TakenAt time.Time `json:"takenAt"`
	Node    string    `json:"node,omitempty"`
	// Bytes is the size of the database the snapshot holds.
	Bytes uint64 `json:"bytes"`
	// UploadedBytes is what writing this snapshot put into the snapshot
	// store: the chunks it did not hold yet and the manifests.
	UploadedBytes uint64 `json:"uploadedBytes"`
}

// manifest lists a snapshot's chunks, in file order.
type manifest struct {
	Format     int       `json:"format"`
	Seq        uint64    `json:"seq"`
	TakenAt    time.Time `json:"takenAt"`
	Node       string    `json:"node"`
	Bytes      uint64    `json:"bytes"`
	ChunkBytes int       `json:"chunkBytes"`
	// SHA256 is the whole database file's hash, checked after assembly.
	SHA256 string   `json:"sha256"`
	Chunks []string `json:"chunks"`
}

// check refuses a manifest that does not describe a whole file.
func (m *manifest) check() error {
	switch {
	case m.Format != manifestFormat:
		return fmt.Errorf("manifest format %d, this orderd reads %d", m.Format, manifestFormat)
	case m.ChunkBytes <= 0:
		return fmt.Errorf("manifest chunk size %d", m.ChunkBytes)
	case uint64(len(m.Chunks)) != (m.Bytes+uint64(m.ChunkBytes)-1)/uint64(m.ChunkBytes):
		return fmt.Errorf("manifest lists %d chunks for %d bytes of %d", len(m.Chunks), m.Bytes, m.ChunkBytes)
	}
	for i, h := range m.Chunks {
		if b, err := hex.DecodeString(h); err != nil || len(b) != sha256.Size {
			return fmt.Errorf("manifest chunk %d: %q is not a SHA-256", i, h)
		}
	}
	return nil
}

// chunkLen is the length of chunk i.
func (m *manifest) chunkLen(i int) int {
	return int(min(uint64(m.ChunkBytes), m.Bytes-uint64(i)*uint64(m.ChunkBytes)))
}

func snapshotInfo(oi *jetstream.ObjectInfo) SnapshotInfo {
	si := SnapshotInfo{Bytes: oi.Size, UploadedBytes: oi.Size, Node: oi.Headers.Get(headerNode)}
	si.Seq, _ = strconv.ParseUint(oi.Headers.Get(headerSeq), 10, 64)
	si.TakenAt, _ = time.Parse(time.RFC3339Nano, oi.Headers.Get(headerTakenAt))
	if v := oi.Headers.Get(headerBytes); v != "" {
		si.Bytes, _ = strconv.ParseUint(v, 10, 64)
		si.UploadedBytes, _ = strconv.ParseUint(oi.Headers.Get(headerUploaded), 10, 64)
	}
	return si
}

// latestInfo is the newest snapshot's object: its manifest, else a
// legacy whole-file snapshot; nil when there is none.
func latestInfo(ctx context.Context, obj jetstream.ObjectStore) (*jetstream.ObjectInfo, error) {
	for _, name := range []string{manifestName, legacyName} {
		oi, err := obj.GetInfo(ctx, name)
		if isNotFound(err) {
			continue
		}
		return oi, err
	}
	return nil, nil
}

// LatestSnapshot returns the newest snapshot's description; ok is false
// when there is none.
func (n *Node) LatestSnapshot(ctx context.Context) (si SnapshotInfo, ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	oi, err := latestInfo(ctx, n.obj)
	if err != nil || oi == nil {
		return SnapshotInfo{}, false, err
	}
	return snapshotInfo(oi), true, nil
}

// TakeSnapshot writes a snapshot of this node's database to the snapshot
// store: a consistent, page-preserving copy (store.Copy), checked, of
// which only the chunks the store does not hold yet are uploaded.
func (n *Node) TakeSnapshot(ctx context.Context) (SnapshotInfo, error) {
	// One at a time: the scheduled one and one asked for over HTTP would
	// each collect the other's chunks as garbage.
	n.snapMu.Lock()
	defer n.snapMu.Unlock()
	tmp := n.store.Path() + ".snapshot-" + nuid.Next()
	defer os.Remove(tmp)
	start := time.Now()
	if err := n.store.Copy(ctx, tmp); err != nil {
		return SnapshotInfo{}, err
	}
	copied := time.Since(start)
	si, gcErr, err := uploadSnapshot(ctx, n.obj, tmp, n.cfg.Node)
	if err != nil {
		return SnapshotInfo{}, err
	}
	if gcErr != nil {
		// The snapshot is written; the next one removes what this one
		// left.
		n.cfg.Logger.Warn("snapshot store clean-up failed", "err", gcErr)
	}
	n.m.snapshotSeq.Set(float64(si.Seq))
	n.m.snapshotUploaded.Add(float64(si.UploadedBytes))
	n.cfg.Logger.Info("snapshot written", "seq", si.Seq, "bytes", si.Bytes, "uploadedBytes", si.UploadedBytes,
		"copy", copied.Round(time.Millisecond), "took", time.Since(start).Round(time.Millisecond))
	return si, nil
}

// putSnapshot uploads the database file at dbPath, a consistent copy that
// nothing writes to, as the newest snapshot: it checks the file
// (store.CheckBackup, which gives the log sequence it applied; 0 for a
// seed), uploads the chunks the snapshot store does not hold, writes the
// manifest (keeping the one before it as the previous), and removes the
// chunks neither lists.
func putSnapshot(ctx context.Context, obj jetstream.ObjectStore, dbPath, node string) (SnapshotInfo, error) {
	si, _, err := uploadSnapshot(ctx, obj, dbPath, node)
	return si, err
}

// uploadSnapshot is putSnapshot; gcErr says why removing what no retained
// manifest lists failed, which does not fail the snapshot.
func uploadSnapshot(ctx context.Context, obj jetstream.ObjectStore, dbPath, node string) (si SnapshotInfo, gcErr, err error) {
	seq, err := store.CheckBackup(ctx, dbPath)
	if err != nil {
		return SnapshotInfo{}, nil, fmt.Errorf("snapshot: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	prevRaw, prev, err := readManifest(pctx, obj, manifestName)
	if err != nil && !isNotFound(err) {
		return SnapshotInfo{}, nil, fmt.Errorf("snapshot: previous manifest: %w", err)
	}
	known := map[string]bool{}
	if prev != nil {
		// The newest manifest's chunks are there: nothing removes a
		// chunk the newest manifest lists.
		for _, h := range prev.Chunks {
			known[h] = true
		}
	}
	f, err := os.Open(dbPath)
	if err != nil {
		return SnapshotInfo{}, nil, fmt.Errorf("snapshot: %w", err)
	}
	defer f.Close()
	m := manifest{Format: manifestFormat, Seq: seq, TakenAt: time.Now().UTC(), Node: node, ChunkBytes: chunkBytes}
	whole := sha256.New()
	up := newUploader(pctx, obj)
	for {
		buf := make([]byte, chunkBytes)
		k, err := io.ReadFull(f, buf)
		if k > 0 {
			buf = buf[:k]
			whole.Write(buf)
			sum := sha256.Sum256(buf)
			h := hex.EncodeToString(sum[:])
			m.Chunks = append(m.Chunks, h)
			m.Bytes += uint64(k)
			if !known[h] {
				known[h] = true
				up.put(h, buf)
			}
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			up.wait()
			return SnapshotInfo{}, nil, fmt.Errorf("snapshot: read %s: %w", dbPath, err)
		}
	}
	uploaded, err := up.wait()
	if err != nil {
		return SnapshotInfo{}, nil, fmt.Errorf("snapshot: %w", err)
	}
	m.SHA256 = hex.EncodeToString(whole.Sum(nil))
	raw, err := json.Marshal(m)
	if err != nil {
		return SnapshotInfo{}, nil, err
	}
	if prev != nil {
		// The newest becomes the previous before it is replaced: a
		// restore that read it keeps its chunks until the next snapshot.
		if _, err := obj.Put(pctx, jetstream.ObjectMeta{Name: previousName, Description: "orderd's previous snapshot manifest"},
			bytes.NewReader(prevRaw)); err != nil {
			return SnapshotInfo{}, nil, fmt.Errorf("snapshot: keep the previous manifest: %w", err)
		}
		uploaded += uint64(len(prevRaw))
	}
	uploaded += uint64(len(raw))
	meta := jetstream.ObjectMeta{Name: manifestName, Description: "orderd's newest snapshot manifest",
		Headers: nats.Header{
			headerSeq:      {strconv.FormatUint(m.Seq, 10)},
			headerTakenAt:  {m.TakenAt.Format(time.RFC3339Nano)},
			headerNode:     {node},
			headerBytes:    {strconv.FormatUint(m.Bytes, 10)},
			headerUploaded: {strconv.FormatUint(uploaded, 10)},
		}}
	if _, err := obj.Put(pctx, meta, bytes.NewReader(raw)); err != nil {
		return SnapshotInfo{}, nil, fmt.Errorf("snapshot: put the manifest: %w", err)
	}
	si = SnapshotInfo{Seq: m.Seq, TakenAt: m.TakenAt, Node: node, Bytes: m.Bytes, UploadedBytes: uploaded}
	keep := map[string]bool{}
	for _, h := range m.Chunks {
		keep[h] = true
	}
	if prev != nil {
		for _, h := range prev.Chunks {
			keep[h] = true
		}
	}
	_, gcErr = collectGarbage(pctx, obj, keep)
	return si, gcErr, nil
}

// readManifest reads and checks the manifest object name.
func readManifest(ctx context.Context, obj jetstream.ObjectStore, name string) ([]byte, *manifest, error) {
	raw, err := obj.GetBytes(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	var m manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, nil, fmt.Errorf("manifest %s: %w", name, err)
	}
	if err := m.check(); err != nil {
		return nil, nil, fmt.Errorf("manifest %s: %w", name, err)
	}
	return raw, &m, nil
}

// collectGarbage removes every chunk not in keep, and the legacy
// whole-file snapshot, and returns how many objects it removed.
func collectGarbage(ctx context.Context, obj jetstream.ObjectStore, keep map[string]bool) (int, error) {
	all, err := obj.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("list the snapshot store: %w", err)
	}
	removed := 0
	var errs []error
	for _, oi := range all {
		h, isChunk := strings.CutPrefix(oi.Name, chunkPrefix)
		if (isChunk && !keep[h]) || oi.Name == legacyName {
			if err := obj.Delete(ctx, oi.Name); err != nil && !isNotFound(err) {
				errs = append(errs, fmt.Errorf("remove %s: %w", oi.Name, err))
				continue
			}
			removed++
		}
	}
	return removed, errors.Join(errs...)
}

// uploader puts chunks into the snapshot store, a few at once, each only
// when the store does not hold it already (a snapshot that failed half-way,
// or one before the previous, may have left it there).
type uploader struct {
	ctx  context.Context
	obj  jetstream.ObjectStore
	jobs chan chunkJob
	wg   sync.WaitGroup

	mu       sync.Mutex
	uploaded uint64
	err      error
}

type chunkJob struct {
	hash string
	data []byte
}

func newUploader(ctx context.Context, obj jetstream.ObjectStore) *uploader {
	u := &uploader{ctx: ctx, obj: obj, jobs: make(chan chunkJob, transfers)}
	for range transfers {
		u.wg.Go(func() {
			for j := range u.jobs {
				n, err := u.putOne(j)
				u.mu.Lock()
				u.uploaded += n
				if err != nil && u.err == nil {
					u.err = err
				}
				u.mu.Unlock()
			}
		})
	}
	return u
}

func (u *uploader) putOne(j chunkJob) (uint64, error) {
	u.mu.Lock()
	failed := u.err != nil
	u.mu.Unlock()
	if failed {
		return 0, nil
	}
	name := chunkPrefix + j.hash
	if _, err := u.obj.GetInfo(u.ctx, name); err == nil {
		return 0, nil
	} else if !isNotFound(err) {
		return 0, fmt.Errorf("chunk %s: %w", j.hash, err)
	}
	if _, err := u.obj.Put(u.ctx, jetstream.ObjectMeta{Name: name}, bytes.NewReader(j.data)); err != nil {
		return 0, fmt.Errorf("put chunk %s: %w", j.hash, err)
	}
	return uint64(len(j.data)), nil
}

func (u *uploader) put(hash string, data []byte) { u.jobs <- chunkJob{hash, data} }

// wait waits for every chunk put so far and returns the bytes uploaded.
func (u *uploader) wait() (uint64, error) {
	close(u.jobs)
	u.wg.Wait()
	return u.uploaded, u.err
}

// snapshotLoop takes a snapshot every SnapshotEvery while this node leads
// (and one soon after it starts leading when the newest is older than
// that).
func (n *Node) snapshotLoop(ctx context.Context) {
	next := n.cfg.SnapshotEvery
	if si, ok, err := n.LatestSnapshot(ctx); err == nil && ok {
		next = max(time.Until(si.TakenAt.Add(n.cfg.SnapshotEvery)), 10*time.Second)
	} else if err == nil {
		next = 10 * time.Second
	}
	t := time.NewTimer(next)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n.Leading() {
			if _, err := n.TakeSnapshot(ctx); err != nil && ctx.Err() == nil {
				n.m.snapshotErrors.Inc()
				n.cfg.Logger.Error("snapshot failed", "err", err)
			}
		}
		t.Reset(n.cfg.SnapshotEvery)
	}
}

// RestoreSnapshot prepares the database file at path for a node that
// starts on an empty disk: when path does not exist and the snapshot store
// holds a snapshot, it fetches the newest snapshot's chunks, checks each
// against its hash, the whole file against the manifest's and the database
// (store.CheckBackup), and only then puts it at path. A chunk missing or
// corrupt is an error naming it; nothing is put at path then. It reports
// what it restored; ok is false when path exists or there is no snapshot
// (the node then applies the log from its start).
func RestoreSnapshot(ctx context.Context, nc *nats.Conn, cfg Config, path string) (si SnapshotInfo, ok bool, err error) {
	if err := cfg.setDefaults(); err != nil {
		return SnapshotInfo{}, false, err
	}
	if _, err := os.Stat(path); err == nil || !errors.Is(err, os.ErrNotExist) {
		return SnapshotInfo{}, false, nil
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return SnapshotInfo{}, false, err
	}
	obj, err := ensure(ctx, func(ctx context.Context) (jetstream.ObjectStore, error) {
		o, err := js.ObjectStore(ctx, cfg.snapshotBucket())
		if isNotFound(err) {
			return nil, nil
		}
		return o, err
	}, func(ctx context.Context) (jetstream.ObjectStore, error) { return nil, nil })
	if err != nil || obj == nil {
		return SnapshotInfo{}, false, err
	}
	tmp := path + ".restore"
	os.Remove(tmp)
	defer os.Remove(tmp)
	// A snapshot written while this one is fetched keeps the chunks of
	// the one before it; only a second one can remove chunks this fetch
	// still needs. It then starts over from the newest.
	for attempt := 0; ; attempt++ {
		oi, err := waitLatest(ctx, obj)
		if err != nil || oi == nil {
			return SnapshotInfo{}, false, err
		}
		si = snapshotInfo(oi)
		if oi.Name == legacyName {
			err = fetchLegacy(ctx, obj, tmp)
		} else {
			err = fetchChunked(ctx, obj, oi, tmp)
		}
		var gone *missingChunkError
		if errors.As(err, &gone) && attempt < 3 {
			if now, lerr := latestInfo(ctx, obj); lerr == nil && now != nil && now.NUID != oi.NUID {
				os.Remove(tmp)
				continue
			}
		}
		if err != nil {
			return SnapshotInfo{}, false, err
		}
		break
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return SnapshotInfo{}, false, err
	}
	seq, err := store.CheckBackup(ctx, tmp)
	if err != nil {
		return SnapshotInfo{}, false, fmt.Errorf("downloaded snapshot: %w", err)
	}
	if seq != si.Seq {
		return SnapshotInfo{}, false, fmt.Errorf("downloaded snapshot holds seq %d, its manifest says %d", seq, si.Seq)
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		os.Remove(path + suffix)
	}
	if err := os.Rename(tmp, path); err != nil {
		return SnapshotInfo{}, false, err
	}
	return si, true, nil
}

// waitLatest is latestInfo, waiting up to a minute for a cluster that just
// started (or has no quorum yet) to answer.
func waitLatest(ctx context.Context, obj jetstream.ObjectStore) (*jetstream.ObjectInfo, error) {
	for deadline := time.Now().Add(time.Minute); ; {
		gctx, cancel := context.WithTimeout(ctx, apiTimeout)
		oi, err := latestInfo(gctx, obj)
		cancel()
		if err == nil {
			return oi, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("snapshot store: %w", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// fetchLegacy downloads a whole-file snapshot an older orderd wrote (the
// object store checks its digest).
func fetchLegacy(ctx context.Context, obj jetstream.ObjectStore, tmp string) error {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if err := obj.GetFile(dctx, legacyName, tmp); err != nil {
		return fmt.Errorf("download snapshot %s: %w", legacyName, err)
	}
	return nil
}

// missingChunkError is a chunk the snapshot store does not hold.
type missingChunkError struct {
	index int
	hash  string
	err   error
}

func (e *missingChunkError) Error() string {
	return fmt.Sprintf("snapshot chunk %d (%s%s) is missing from the snapshot store: %v", e.index, chunkPrefix, e.hash, e.err)
}

func (e *missingChunkError) Unwrap() error { return e.err }

// fetchChunked assembles the snapshot the manifest oi describes at tmp,
// checking every chunk and the whole file against their hashes.
func fetchChunked(ctx context.Context, obj jetstream.ObjectStore, oi *jetstream.ObjectInfo, tmp string) error {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	_, m, err := readManifest(dctx, obj, oi.Name)
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	// A chunk that repeats (free pages, say) is fetched once and written
	// at each of its offsets.
	at := map[string][]int{}
	var order []string
	for i, h := range m.Chunks {
		if at[h] == nil {
			order = append(order, h)
		}
		at[h] = append(at[h], i)
	}
	jobs := make(chan string)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	fctx, stop := context.WithCancel(dctx)
	defer stop()
	for range transfers {
		wg.Go(func() {
			for h := range jobs {
				if err := fetchChunk(fctx, obj, m, f, h, at[h]); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					stop()
				}
			}
		})
	}
send:
	for _, h := range order {
		select {
		case jobs <- h:
		case <-fctx.Done():
			break send
		}
	}
	close(jobs)
	wg.Wait()
	if len(errs) > 0 {
		// The first error names the chunk; the others are mostly the
		// cancellation it caused.
		return errs[0]
	}
	if err := dctx.Err(); err != nil {
		return fmt.Errorf("fetch snapshot: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	whole := sha256.New()
	if n, err := io.Copy(whole, f); err != nil {
		return err
	} else if uint64(n) != m.Bytes {
		return fmt.Errorf("snapshot: assembled %d bytes, the manifest says %d", n, m.Bytes)
	}
	if got := hex.EncodeToString(whole.Sum(nil)); got != m.SHA256 {
		return fmt.Errorf("snapshot: the assembled database hashes to %s, the manifest says %s", got, m.SHA256)
	}
	return f.Sync()
}

// fetchChunk fetches chunk h, checks it and writes it at the offsets of
// chunks idx.
func fetchChunk(ctx context.Context, obj jetstream.ObjectStore, m *manifest, f *os.File, h string, idx []int) error {
	data, err := obj.GetBytes(ctx, chunkPrefix+h)
	if isNotFound(err) {
		return &missingChunkError{index: idx[0], hash: h, err: err}
	}
	if err != nil {
		return fmt.Errorf("snapshot chunk %d (%s%s): %w", idx[0], chunkPrefix, h, err)
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != h {
		return fmt.Errorf("snapshot chunk %d (%s%s) is corrupt: its %d bytes hash to %s", idx[0], chunkPrefix, h, len(data), got)
	}
	for _, i := range idx {
		if len(data) != m.chunkLen(i) {
			return fmt.Errorf("snapshot chunk %d (%s%s) is corrupt: %d bytes, the manifest needs %d there", i, chunkPrefix, h, len(data), m.chunkLen(i))
		}
		if _, err := f.WriteAt(data, int64(i)*int64(m.ChunkBytes)); err != nil {
			return err
		}
	}
	return nil
}
