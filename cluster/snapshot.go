package cluster

import (
	"bufio"
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
	"golang.org/x/time/rate"

	"orderd/store"
)

// A snapshot costs what changed since the previous one.
//
// The database copy a snapshot is cut from is page-preserving
// (store.Copy): a page that did not change keeps its offset and its bytes.
// The file is cut into chunks of chunkBytes (one page), and the manifest
// lists every chunk's hash and where its bytes are: at an offset of a
// pack, an object of many chunks named after its own SHA-256. A snapshot
// uploads in new packs only the chunks no pack the previous manifest uses
// holds, and a manifest. Random-key index inserts change pages all over
// the file (BENCHMARKS.md, "Snapshots"), so chunks are small; packing
// them keeps the objects to write and fetch few.
//
// A pack of which less than half is still used is rewritten: its chunks
// that are still used go into the new packs, so the snapshot store holds
// at most about twice the database and a restore fetches about as much.
//
// The pointer object (pointerName) names the newest manifest and the one
// before it; both, and every pack either uses, are kept, so a restore that
// began from the older one finishes while the next snapshot is written.
// Everything else is removed after each snapshot.
const (
	// pointerName is the object naming the newest manifest; its headers
	// describe the newest snapshot (SnapshotInfo).
	pointerName = "orderd.snapshot"
	// legacyName is the whole-file snapshot older orderd versions wrote.
	// It is restored when no pointer exists, and removed once one does.
	legacyName = "orderd.db"
	// manifestPrefix and packPrefix start the names of manifests and of
	// packs (whose SHA-256 in hex follows).
	manifestPrefix = "manifest/"
	packPrefix     = "pack/"
	// chunkBytes is the unit of change: SQLite's default page.
	chunkBytes = 4096
	// hashBytes of each chunk's SHA-256 are in the manifest: enough to
	// tell changed chunks apart (a collision would be caught at restore
	// by the manifest's SHA-256 over the chunks' whole SHA-256s, never
	// restored silently).
	hashBytes = 16
	// packBytes is the size a pack is closed at.
	packBytes = 8 << 20
	// manifestFormat is the manifest's version.
	manifestFormat = 1
	// transfers is how many packs are fetched at once.
	transfers = 4
)

// Snapshot pointer headers (on the legacy object too, less the last two).
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
	// store: the new packs, the manifest and the pointer.
	UploadedBytes uint64 `json:"uploadedBytes"`
}

// pointer is pointerName's content.
type pointer struct {
	Manifest string `json:"manifest"`
	Previous string `json:"previous,omitempty"`
}

// manifest describes one snapshot's database file.
type manifest struct {
	Format     int       `json:"format"`
	Seq        uint64    `json:"seq"`
	TakenAt    time.Time `json:"takenAt"`
	Node       string    `json:"node"`
	Bytes      uint64    `json:"bytes"`
	ChunkBytes int       `json:"chunkBytes"`
	// SHA256 is the SHA-256 over every chunk's SHA-256 in file order:
	// the whole file's fingerprint, checked after assembly, at the cost
	// of hashing each byte once.
	SHA256 string `json:"sha256"`
	// Hashes holds hashBytes of each chunk's SHA-256, in file order.
	Hashes []byte `json:"hashes"`
	// Packs are the packs the chunks are in.
	Packs []packRef `json:"packs"`
	// Runs place the chunks, in file order, all of them: each is
	// [first chunk, chunks, pack index, byte offset in the pack].
	Runs [][4]uint64 `json:"runs"`
}

// packRef names a pack and gives its size.
type packRef struct {
	Name  string `json:"name"`
	Bytes uint64 `json:"bytes"`
}

// chunks is the number of chunks of the file.
func (m *manifest) chunks() uint64 {
	return (m.Bytes + uint64(m.ChunkBytes) - 1) / uint64(m.ChunkBytes)
}

// runBytes is the length of the file bytes run r covers.
func (m *manifest) runBytes(r [4]uint64) uint64 {
	cb := uint64(m.ChunkBytes)
	return min((r[0]+r[1])*cb, m.Bytes) - r[0]*cb
}

// check refuses a manifest that does not place every chunk of a whole
// file exactly once, inside its packs.
func (m *manifest) check() error {
	switch {
	case m.Format != manifestFormat:
		return fmt.Errorf("format %d, this orderd reads %d", m.Format, manifestFormat)
	case m.ChunkBytes <= 0:
		return fmt.Errorf("chunk size %d", m.ChunkBytes)
	case uint64(len(m.Hashes)) != m.chunks()*hashBytes:
		return fmt.Errorf("%d bytes of chunk hashes for %d chunks", len(m.Hashes), m.chunks())
	}
	for _, p := range m.Packs {
		if !strings.HasPrefix(p.Name, packPrefix) {
			return fmt.Errorf("pack %q", p.Name)
		}
	}
	next := uint64(0)
	for _, r := range m.Runs {
		if r[0] != next || r[1] == 0 || r[0]+r[1] > m.chunks() || r[2] >= uint64(len(m.Packs)) ||
			r[3]+m.runBytes(r) > m.Packs[r[2]].Bytes {
			return fmt.Errorf("run %v does not fit", r)
		}
		next = r[0] + r[1]
	}
	if next != m.chunks() {
		return fmt.Errorf("runs place %d of %d chunks", next, m.chunks())
	}
	return nil
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

// latestInfo is the newest snapshot's object: its pointer, else a legacy
// whole-file snapshot; nil when there is none.
func latestInfo(ctx context.Context, obj jetstream.ObjectStore) (*jetstream.ObjectInfo, error) {
	for _, name := range []string{pointerName, legacyName} {
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
// store: a consistent, page-preserving copy (store.CopyPaced), checked in
// full after a start and once a day (fullCheckEvery) and lightly between,
// of which only what the store does not hold yet is uploaded.
// The read of the database is paced at Config.SnapshotReadRate.
func (n *Node) TakeSnapshot(ctx context.Context) (SnapshotInfo, error) {
	// One at a time: the scheduled one and one asked for over HTTP would
	// each remove the other's packs as unused.
	n.snapMu.Lock()
	defer n.snapMu.Unlock()
	tmp := n.store.Path() + ".snapshot-" + nuid.Next()
	defer os.Remove(tmp)
	start := time.Now()
	full := n.lastFullCheck.IsZero() || start.Sub(n.lastFullCheck) >= fullCheckEvery
	si, gcErr, copied, err := takeSnapshot(ctx, n.store, n.obj, tmp, n.cfg.Node, n.cfg.SnapshotReadRate, full)
	if err != nil {
		return SnapshotInfo{}, err
	}
	if full {
		n.lastFullCheck = start
	}
	if gcErr != nil {
		// The snapshot is written; the next one removes what this one
		// left.
		n.cfg.Logger.Warn("snapshot store clean-up failed", "err", gcErr)
	}
	n.m.snapshotSeq.Set(float64(si.Seq))
	n.m.snapshotUploaded.Add(float64(si.UploadedBytes))
	n.cfg.Logger.Info("snapshot written", "seq", si.Seq, "bytes", si.Bytes, "uploadedBytes", si.UploadedBytes,
		"copy", copied.Round(time.Millisecond), "fullCheck", full, "took", time.Since(start).Round(time.Millisecond))
	return si, nil
}

// fullCheckEvery is how often the leader checks its snapshot's copy in
// full (PRAGMA integrity_check) before uploading it: the first snapshot
// after a start, then once a day. The light check of the others costs
// ingest nothing; the full one finds a damaged database while the
// previous snapshots are still good (the snapshot fails and
// OrderdSnapshotFailing pages), not when an empty disk restores it.
const fullCheckEvery = 24 * time.Hour

// takeSnapshot copies the database of st to tmp page for page and
// uploads the copy as the newest snapshot; copied is how long the copy
// took. With full, the copy is checked in full (store.CheckBackup);
// otherwise with store.CheckCopy, lightly: it is this instance's own
// database, and every restore checks the whole file. The copy and the
// hashing read at most readRate bytes a second (0: at full speed), so a
// snapshot takes longer but leaves ingest the CPU.
func takeSnapshot(ctx context.Context, st *store.Store, obj jetstream.ObjectStore, tmp, node string,
	readRate int64, full bool) (si SnapshotInfo, gcErr error, copied time.Duration, err error) {
	pace := readPace(readRate)
	start := time.Now()
	if err := st.CopyPaced(ctx, tmp, pace); err != nil {
		return SnapshotInfo{}, nil, 0, err
	}
	copied = time.Since(start)
	check := store.CheckCopy
	if full {
		check = store.CheckBackup
	}
	si, gcErr, err = uploadSnapshot(ctx, obj, tmp, node, check, pace)
	return si, gcErr, copied, err
}

// paceBytes is how much a paced snapshot reads between two waits.
const paceBytes = 1 << 20

// readPace is a limiter of readRate bytes a second, nil for 0.
func readPace(readRate int64) *rate.Limiter {
	if readRate <= 0 {
		return nil
	}
	return rate.NewLimiter(rate.Limit(readRate), int(min(readRate, paceBytes)))
}

// putSnapshot uploads the database file at dbPath, a consistent copy that
// nothing writes to, as the newest snapshot: it checks the file
// (store.CheckBackup, which gives the log sequence it applied; 0 for a
// seed), uploads the chunks the snapshot store does not hold, writes the
// manifest and points to it (keeping the one before it), and removes what
// neither uses.
func putSnapshot(ctx context.Context, obj jetstream.ObjectStore, dbPath, node string) (SnapshotInfo, error) {
	si, _, err := uploadSnapshot(ctx, obj, dbPath, node, store.CheckBackup, nil)
	return si, err
}

// chunkKey is a chunk's hash as the manifest holds it, a map key that
// costs no allocation (a string of it would, once per chunk).
type chunkKey [hashBytes]byte

// chunkAt is where a chunk's bytes are: a pack (by its index in the
// packs of the manifest being built) and an offset in it.
type chunkAt struct {
	pack int
	off  uint64
}

// uploadSnapshot is putSnapshot with the check of the file given (which
// returns the log sequence the file has applied) and the hashing paced by
// pace (nil: at full speed); gcErr says why removing
// what no kept manifest uses failed, which does not fail the snapshot.
func uploadSnapshot(ctx context.Context, obj jetstream.ObjectStore, dbPath, node string,
	check func(context.Context, string) (uint64, error), pace *rate.Limiter) (si SnapshotInfo, gcErr, err error) {
	seq, err := check(ctx, dbPath)
	if err != nil {
		return SnapshotInfo{}, nil, fmt.Errorf("snapshot: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	prevName, prev, err := readLatest(pctx, obj)
	if err != nil {
		return SnapshotInfo{}, nil, fmt.Errorf("snapshot: %w", err)
	}
	f, err := os.Open(dbPath)
	if err != nil {
		return SnapshotInfo{}, nil, fmt.Errorf("snapshot: %w", err)
	}
	defer f.Close()
	m := &manifest{Format: manifestFormat, Seq: seq, TakenAt: time.Now().UTC(), Node: node, ChunkBytes: chunkBytes}
	if fi, err := f.Stat(); err == nil {
		m.Hashes = make([]byte, 0, (fi.Size()+chunkBytes-1)/chunkBytes*hashBytes)
	}

	// Pass 1: the chunks' hashes and the file's.
	whole := sha256.New()
	buf := make([]byte, chunkBytes)
	r := bufio.NewReaderSize(f, 1<<20)
	perWait := 0 // chunks hashed between two waits of the pace
	if pace != nil {
		perWait = max(1, pace.Burst()/chunkBytes)
	}
	for c := 1; ; c++ {
		if perWait > 0 && c%perWait == 0 {
			if err := pace.WaitN(ctx, min(perWait*chunkBytes, pace.Burst())); err != nil {
				return SnapshotInfo{}, nil, fmt.Errorf("snapshot: %w", err)
			}
		}
		k, err := io.ReadFull(r, buf)
		if k > 0 {
			sum := sha256.Sum256(buf[:k])
			whole.Write(sum[:])
			m.Hashes = append(m.Hashes, sum[:hashBytes]...)
			m.Bytes += uint64(k)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return SnapshotInfo{}, nil, fmt.Errorf("snapshot: read %s: %w", dbPath, err)
		}
	}
	m.SHA256 = hex.EncodeToString(whole.Sum(nil))

	// Where the previous snapshot holds each chunk, and which of its
	// packs stay: those of which at least half is still used.
	type prevAt struct {
		pack int
		off  uint64
	}
	var held map[chunkKey]prevAt
	if prev != nil {
		held = make(map[chunkKey]prevAt, prev.chunks())
	}
	keepPack := map[int]bool{}
	if prev != nil {
		for _, r := range prev.Runs {
			off := r[3]
			for c := r[0]; c < r[0]+r[1]; c++ {
				held[chunkKey(prev.Hashes[c*hashBytes:(c+1)*hashBytes])] = prevAt{int(r[2]), off}
				off += min(uint64(prev.ChunkBytes), prev.Bytes-c*uint64(prev.ChunkBytes))
			}
		}
		live := make([]uint64, len(prev.Packs))
		seen := make(map[chunkKey]bool, len(held))
		for c := range m.chunks() {
			h := chunkKey(m.Hashes[c*hashBytes : (c+1)*hashBytes])
			if at, ok := held[h]; ok && !seen[h] {
				seen[h] = true
				live[at.pack] += m.chunkLen(c)
			}
		}
		for i, p := range prev.Packs {
			keepPack[i] = live[i]*2 >= p.Bytes
			if !keepPack[i] {
				continue
			}
			// A pack is used again only if it is there: a deposed leader's
			// clean-up racing this node's snapshot may have removed it,
			// and the snapshot after that heals by uploading it anew.
			_, err := obj.GetInfo(pctx, p.Name)
			if isNotFound(err) {
				keepPack[i] = false
			} else if err != nil {
				return SnapshotInfo{}, nil, fmt.Errorf("snapshot: %s: %w", p.Name, err)
			}
		}
	}

	// Pass 2: place every chunk; what no kept pack holds goes into new
	// packs.
	var (
		packOf   = map[int]int{} // previous pack index → this manifest's
		placed   = make(map[chunkKey]chunkAt, m.chunks())
		pack     bytes.Buffer
		uploaded uint64
	)
	flush := func(i int) error {
		if pack.Len() == 0 {
			return nil
		}
		n, name, err := putPack(pctx, obj, pack.Bytes())
		if err != nil {
			return err
		}
		uploaded += n
		m.Packs[i] = packRef{Name: name, Bytes: uint64(pack.Len())}
		pack.Reset()
		return nil
	}
	open := -1 // index of the pack being filled, -1 when none
	for c := range m.chunks() {
		h := chunkKey(m.Hashes[c*hashBytes : (c+1)*hashBytes])
		at, ok := placed[h]
		if !ok {
			if p, held := held[h]; held && keepPack[p.pack] {
				i, mapped := packOf[p.pack]
				if !mapped {
					i = len(m.Packs)
					m.Packs = append(m.Packs, prev.Packs[p.pack])
					packOf[p.pack] = i
				}
				at = chunkAt{i, p.off}
			} else {
				if open < 0 {
					open = len(m.Packs)
					m.Packs = append(m.Packs, packRef{})
				}
				k, err := f.ReadAt(buf, int64(c)*chunkBytes)
				if k < int(m.chunkLen(c)) {
					return SnapshotInfo{}, nil, fmt.Errorf("snapshot: read %s: %w", dbPath, err)
				}
				at = chunkAt{open, uint64(pack.Len())}
				pack.Write(buf[:m.chunkLen(c)])
				if pack.Len() >= packBytes {
					if err := flush(open); err != nil {
						return SnapshotInfo{}, nil, err
					}
					open = -1
				}
			}
			placed[h] = at
		}
		// Extend the last run when this chunk follows it in the same pack.
		if n := len(m.Runs); n > 0 {
			r := &m.Runs[n-1]
			if int(r[2]) == at.pack && r[3]+m.runBytes(*r) == at.off {
				r[1]++
				continue
			}
		}
		m.Runs = append(m.Runs, [4]uint64{c, 1, uint64(at.pack), at.off})
	}
	if err := flush(open); err != nil {
		return SnapshotInfo{}, nil, err
	}
	if err := m.check(); err != nil {
		return SnapshotInfo{}, nil, fmt.Errorf("snapshot: built a bad manifest: %w", err)
	}

	raw, err := json.Marshal(m)
	if err != nil {
		return SnapshotInfo{}, nil, err
	}
	name := fmt.Sprintf("%s%020d-%s", manifestPrefix, seq, nuid.Next())
	if _, err := obj.Put(pctx, jetstream.ObjectMeta{Name: name, Description: "orderd snapshot manifest"}, bytes.NewReader(raw)); err != nil {
		return SnapshotInfo{}, nil, fmt.Errorf("snapshot: put the manifest: %w", err)
	}
	uploaded += uint64(len(raw))
	ptr, err := json.Marshal(pointer{Manifest: name, Previous: prevName})
	if err != nil {
		return SnapshotInfo{}, nil, err
	}
	uploaded += uint64(len(ptr))
	meta := jetstream.ObjectMeta{Name: pointerName, Description: "orderd's newest snapshot",
		Headers: nats.Header{
			headerSeq:      {strconv.FormatUint(m.Seq, 10)},
			headerTakenAt:  {m.TakenAt.Format(time.RFC3339Nano)},
			headerNode:     {node},
			headerBytes:    {strconv.FormatUint(m.Bytes, 10)},
			headerUploaded: {strconv.FormatUint(uploaded, 10)},
		}}
	if _, err := obj.Put(pctx, meta, bytes.NewReader(ptr)); err != nil {
		return SnapshotInfo{}, nil, fmt.Errorf("snapshot: point to the manifest: %w", err)
	}
	si = SnapshotInfo{Seq: m.Seq, TakenAt: m.TakenAt, Node: node, Bytes: m.Bytes, UploadedBytes: uploaded}

	keep := map[string]bool{pointerName: true, name: true}
	for _, p := range m.Packs {
		keep[p.Name] = true
	}
	if prev != nil {
		keep[prevName] = true
		for _, p := range prev.Packs {
			keep[p.Name] = true
		}
	}
	_, gcErr = collectGarbage(pctx, obj, keep)
	return si, gcErr, nil
}

// chunkLen is the length of chunk c.
func (m *manifest) chunkLen(c uint64) uint64 {
	return min(uint64(m.ChunkBytes), m.Bytes-c*uint64(m.ChunkBytes))
}

// putPack uploads a pack under its SHA-256, unless the store holds it
// already, and returns the bytes uploaded and its name.
func putPack(ctx context.Context, obj jetstream.ObjectStore, data []byte) (uint64, string, error) {
	sum := sha256.Sum256(data)
	name := packPrefix + hex.EncodeToString(sum[:])
	if _, err := obj.GetInfo(ctx, name); err == nil {
		return 0, name, nil
	} else if !isNotFound(err) {
		return 0, "", fmt.Errorf("snapshot: %s: %w", name, err)
	}
	if _, err := obj.Put(ctx, jetstream.ObjectMeta{Name: name}, bytes.NewReader(data)); err != nil {
		return 0, "", fmt.Errorf("snapshot: put %s: %w", name, err)
	}
	return uint64(len(data)), name, nil
}

// readLatest reads the newest manifest; none (name "") when there is no
// snapshot, or only a legacy one, or its manifest is unreadable: the next
// snapshot then uploads everything.
func readLatest(ctx context.Context, obj jetstream.ObjectStore) (string, *manifest, error) {
	raw, err := obj.GetBytes(ctx, pointerName)
	if isNotFound(err) {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, fmt.Errorf("read %s: %w", pointerName, err)
	}
	var p pointer
	if err := json.Unmarshal(raw, &p); err != nil {
		return "", nil, nil
	}
	m, err := readManifest(ctx, obj, p.Manifest)
	if isNotFound(err) {
		return "", nil, nil
	}
	var bad *badManifestError
	if errors.As(err, &bad) {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	return p.Manifest, m, nil
}

// getNamed reads an object another object names, so it should exist: a
// read may be answered by a replica that lags the write by moments, and
// "not found" is believed only after a few tries over about two seconds.
func getNamed(ctx context.Context, obj jetstream.ObjectStore, name string) ([]byte, error) {
	for try := 1; ; try++ {
		data, err := obj.GetBytes(ctx, name)
		if !isNotFound(err) || try == 5 {
			return data, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(time.Duration(try) * 200 * time.Millisecond):
		}
	}
}

// badManifestError is a manifest that cannot be used.
type badManifestError struct {
	name string
	err  error
}

func (e *badManifestError) Error() string {
	return fmt.Sprintf("snapshot manifest %s: %v", e.name, e.err)
}
func (e *badManifestError) Unwrap() error { return e.err }

// readManifest reads and checks the manifest object name.
func readManifest(ctx context.Context, obj jetstream.ObjectStore, name string) (*manifest, error) {
	if !strings.HasPrefix(name, manifestPrefix) {
		return nil, &badManifestError{name, errors.New("not a manifest's name")}
	}
	raw, err := getNamed(ctx, obj, name)
	if err != nil {
		return nil, fmt.Errorf("read snapshot manifest %s: %w", name, err)
	}
	var m manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, &badManifestError{name, err}
	}
	if err := m.check(); err != nil {
		return nil, &badManifestError{name, err}
	}
	return &m, nil
}

// collectGarbage removes every pack and manifest not in keep, and the
// legacy whole-file snapshot, and returns how many objects it removed.
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
		ours := strings.HasPrefix(oi.Name, packPrefix) || strings.HasPrefix(oi.Name, manifestPrefix) || oi.Name == legacyName
		if !ours || keep[oi.Name] {
			continue
		}
		if err := obj.Delete(ctx, oi.Name); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("remove %s: %w", oi.Name, err))
			continue
		}
		removed++
	}
	return removed, errors.Join(errs...)
}

// snapshotLoop takes a snapshot every SnapshotEvery while this node leads
// (and one soon after it starts leading when the newest is older than
// that).
func (n *Node) snapshotLoop(ctx context.Context) {
	next := n.cfg.SnapshotEvery
	if si, ok, err := n.LatestSnapshot(ctx); err == nil && ok {
		next = max(time.Until(si.TakenAt.Add(n.cfg.SnapshotEvery)), n.cfg.firstSnapshotAfter)
	} else if err == nil {
		next = n.cfg.firstSnapshotAfter
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
// holds a snapshot, it fetches the newest one's packs, checks each against
// its SHA-256, each chunk against the manifest, the whole file against the
// manifest's SHA-256 and the database itself (store.CheckBackup), and only
// then puts it at path. A pack missing or corrupt is an error naming it;
// nothing is put at path then. A whole-file snapshot an older orderd wrote
// is restored too. It reports what it restored; ok is false when path
// exists or there is no snapshot (the node then applies the log from its
// start).
func RestoreSnapshot(ctx context.Context, nc *nats.Conn, cfg Config, path string) (si SnapshotInfo, ok bool, err error) {
	if err := cfg.setDefaults(); err != nil {
		return SnapshotInfo{}, false, err
	}
	if _, err := os.Stat(path); err == nil || !errors.Is(err, os.ErrNotExist) {
		return SnapshotInfo{}, false, nil
	}
	if err := checkServerVersion(nc); err != nil {
		return SnapshotInfo{}, false, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return SnapshotInfo{}, false, err
	}
	// The log says whether this disk may start empty: not while its
	// seed is unfinished, nor when it starts from a base (a seed) or no
	// longer from its first entry, unless a snapshot is restored.
	stream, err := ensure(ctx, func(ctx context.Context) (*jetstream.StreamInfo, error) {
		s, err := js.Stream(ctx, cfg.LogStream)
		if isNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return s.Info(ctx)
	}, func(ctx context.Context) (*jetstream.StreamInfo, error) { return nil, nil })
	if err != nil {
		return SnapshotInfo{}, false, fmt.Errorf("log stream %s: %w", cfg.LogStream, err)
	}
	needBase := ""
	if stream != nil {
		if s := stream.Config.Metadata[seedKey]; s != "" && streamLogID(stream.Config) == "" {
			return SnapshotInfo{}, false, &SeedUnfinishedError{Stream: cfg.LogStream, Seed: s}
		}
		if b, ok := streamBase(stream.Config); ok {
			needBase = fmt.Sprintf("the log %s starts from a seeded database of %d orders (snapshot at sequence %d, SHA-256 %.16s…)", cfg.LogStream, b.Orders, b.Seq, b.SHA256)
		} else if stream.State.FirstSeq > 1 {
			needBase = fmt.Sprintf("the log %s no longer holds its entries before %d", cfg.LogStream, stream.State.FirstSeq)
		}
	}
	noBase := func(why string) error {
		return fmt.Errorf("%s, and the snapshot store %s %s: an empty disk cannot start on this log without it (applying the log onto an empty database would give this instance a state no other has); "+
			"restore the snapshot store, or start this instance from a backup or another instance's database (docs/replicated-mode.md, Replacing an instance)", needBase, cfg.snapshotBucket(), why)
	}
	obj, err := ensure(ctx, func(ctx context.Context) (jetstream.ObjectStore, error) {
		o, err := js.ObjectStore(ctx, cfg.snapshotBucket())
		if isNotFound(err) {
			return nil, nil
		}
		return o, err
	}, func(ctx context.Context) (jetstream.ObjectStore, error) { return nil, nil })
	if err != nil {
		return SnapshotInfo{}, false, fmt.Errorf("snapshot store %s: %w", cfg.snapshotBucket(), err)
	}
	if obj == nil {
		if needBase != "" {
			return SnapshotInfo{}, false, noBase("does not exist")
		}
		return SnapshotInfo{}, false, nil
	}
	tmp := path + ".restore"
	os.Remove(tmp)
	defer os.Remove(tmp)
	// A snapshot written while this one is fetched keeps the packs of the
	// one before it; only a second one can remove packs this fetch still
	// needs. It then starts over from the newest.
	for attempt := 0; ; attempt++ {
		oi, err := waitLatest(ctx, obj)
		if err != nil {
			return SnapshotInfo{}, false, fmt.Errorf("snapshot store %s: %w", cfg.snapshotBucket(), err)
		}
		if oi == nil {
			if needBase != "" {
				return SnapshotInfo{}, false, noBase("holds no snapshot")
			}
			return SnapshotInfo{}, false, nil
		}
		si = snapshotInfo(oi)
		if oi.Name == legacyName {
			err = fetchLegacy(ctx, obj, tmp)
		} else {
			err = fetchChunked(ctx, obj, tmp)
		}
		// A pack or the manifest itself gone.
		if isNotFound(err) && attempt < 3 {
			if now, lerr := latestInfo(ctx, obj); lerr == nil && now != nil && now.NUID != oi.NUID {
				os.Remove(tmp)
				continue
			}
		}
		if err != nil {
			return SnapshotInfo{}, false, fmt.Errorf("snapshot store %s: %w", cfg.snapshotBucket(), err)
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

// missingPackError is a pack the snapshot store does not hold.
type missingPackError struct {
	name  string
	chunk uint64
	err   error
}

func (e *missingPackError) Error() string {
	return fmt.Sprintf("snapshot pack %s (chunks from %d) is missing from the snapshot store: %v", e.name, e.chunk, e.err)
}

func (e *missingPackError) Unwrap() error { return e.err }

// fetchChunked assembles the newest snapshot at tmp, checking every pack,
// every chunk and the whole file against their hashes.
func fetchChunked(ctx context.Context, obj jetstream.ObjectStore, tmp string) error {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	raw, err := obj.GetBytes(dctx, pointerName)
	if err != nil {
		return fmt.Errorf("snapshot: read %s: %w", pointerName, err)
	}
	var p pointer
	if err := json.Unmarshal(raw, &p); err != nil {
		return fmt.Errorf("snapshot: %s: %w", pointerName, err)
	}
	m, err := readManifest(dctx, obj, p.Manifest)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(int64(m.Bytes)); err != nil {
		return err
	}
	// Each chunk's SHA-256, for the manifest's over all of them; every
	// chunk is written by one fetch, so the fetches share it unlocked.
	sums := make([][sha256.Size]byte, m.chunks())
	runs := make([][][4]uint64, len(m.Packs))
	for _, r := range m.Runs {
		runs[r[2]] = append(runs[r[2]], r)
	}
	jobs := make(chan int)
	errs := make(chan error, len(m.Packs))
	fctx, stop := context.WithCancel(dctx)
	defer stop()
	var wg sync.WaitGroup
	for range transfers {
		wg.Go(func() {
			for i := range jobs {
				if err := fetchPack(fctx, obj, m, f, m.Packs[i], runs[i], sums); err != nil {
					errs <- err
					stop()
				}
			}
		})
	}
send:
	for i := range m.Packs {
		if len(runs[i]) == 0 {
			continue
		}
		select {
		case jobs <- i:
		case <-fctx.Done():
			break send
		}
	}
	close(jobs)
	wg.Wait()
	close(errs)
	// The first error names a pack; the others are mostly the
	// cancellation it caused.
	if err := <-errs; err != nil {
		return err
	}
	if err := dctx.Err(); err != nil {
		return fmt.Errorf("fetch snapshot: %w", err)
	}
	whole := sha256.New()
	for c := range m.chunks() {
		whole.Write(sums[c][:])
	}
	if got := hex.EncodeToString(whole.Sum(nil)); got != m.SHA256 {
		return fmt.Errorf("snapshot: the assembled database's chunks hash to %s, manifest %s says %s", got, p.Manifest, m.SHA256)
	}
	return f.Sync()
}

// fetchPack fetches pack p, checks it against its name, and writes the
// runs of chunks it holds, each chunk checked against the manifest.
func fetchPack(ctx context.Context, obj jetstream.ObjectStore, m *manifest, f *os.File, p packRef, runs [][4]uint64, sums [][sha256.Size]byte) error {
	data, err := getNamed(ctx, obj, p.Name)
	if isNotFound(err) {
		return &missingPackError{name: p.Name, chunk: runs[0][0], err: err}
	}
	if err != nil {
		return fmt.Errorf("snapshot pack %s: %w", p.Name, err)
	}
	sum := sha256.Sum256(data)
	if got := packPrefix + hex.EncodeToString(sum[:]); got != p.Name || uint64(len(data)) != p.Bytes {
		return fmt.Errorf("snapshot pack %s (chunks from %d) is corrupt: its %d bytes (the manifest says %d) hash to %s",
			p.Name, runs[0][0], len(data), p.Bytes, strings.TrimPrefix(got, packPrefix))
	}
	for _, r := range runs {
		off := r[3]
		for c := r[0]; c < r[0]+r[1]; c++ {
			chunk := data[off : off+m.chunkLen(c)]
			sum := sha256.Sum256(chunk)
			sums[c] = sum
			if !bytes.Equal(sum[:hashBytes], m.Hashes[c*hashBytes:(c+1)*hashBytes]) {
				return fmt.Errorf("snapshot chunk %d (in pack %s at %d) is corrupt: its hash is not the manifest's", c, p.Name, off)
			}
			off += uint64(len(chunk))
		}
		if _, err := f.WriteAt(data[r[3]:off], int64(r[0])*int64(m.ChunkBytes)); err != nil {
			return err
		}
	}
	return nil
}
