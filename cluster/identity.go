package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// logIDKey is the log stream's metadata key holding the log's id. The id
// lives with the stream: a log that is lost (the JetStream files of a
// quorum) and created again is another log with another id, and every
// instance reads the same value from the stream it appends to.
const logIDKey = "orderd_log_id"

// seedKey marks a log stream whose seed has not finished: it holds the
// id the seed will give the log. baseKey records, with the id, the state
// the log starts from (a baseInfo). A seed sets both and removes seedKey
// in its last step, so that a log's id and its base appear together.
const (
	seedKey = "orderd_log_seeding"
	baseKey = "orderd_log_base"
)

// baseInfo is the state a seeded log starts from: the database that
// orderd cluster seed wrote as the first snapshot.
type baseInfo struct {
	Seq    uint64 `json:"seq"`
	SHA256 string `json:"sha256"`
	Bytes  uint64 `json:"bytes"`
	Orders int64  `json:"orders"`
}

// streamBase is the base a log stream records; ok is false for a log
// that started empty (or was seeded by a release that recorded none).
func streamBase(cfg jetstream.StreamConfig) (b baseInfo, ok bool) {
	v := cfg.Metadata[baseKey]
	if v == "" || json.Unmarshal([]byte(v), &b) != nil {
		return baseInfo{}, false
	}
	return b, true
}

// SeedUnfinishedError is the refusal of a log whose seed did not finish.
type SeedUnfinishedError struct {
	Stream, Seed string
}

func (e *SeedUnfinishedError) Error() string {
	return fmt.Sprintf("the log %s is being seeded (log %s) and its seed has not finished: no instance follows a log before its base snapshot is uploaded and checked. "+
		"If no seed is running, run orderd cluster seed again with the database it was started from: it finishes or restarts it (docs/replicated-mode.md, Moving to replicated mode)",
		e.Stream, e.Seed)
}

// UnprovenLogError is the refusal of a log stream that holds entries but
// no id, by an instance that cannot prove it follows that log.
type UnprovenLogError struct {
	Stream string
	// Why says what the proof lacked.
	Why string
}

func (e *UnprovenLogError) Error() string {
	return fmt.Sprintf("the log %s has no id and this instance cannot prove it follows it (%s); it writes nothing onto it. "+
		"Start an instance whose database applied this log's entries first: it proves it by the hash of the last entry it applied and gives the log its id back. "+
		"Or set the stream's metadata key %s to the log's id (the \"log\" of GET /v1/cluster on this log's instances) with the NATS CLI (docs/replicated-mode.md, A log without an id)",
		e.Stream, e.Why, logIDKey)
}

// checkIdentity makes sure the database follows this log, and sets
// n.logID. A log stream without an id gets one only from a proof:
// proveLog. A database that records no log yet is to follow this one
// (follow) when it is empty (a first start), or when it proved it
// follows it. One with records that has applied no entry was written in
// single-node mode and is refused: orderd cluster seed makes such a
// database the start of a log. A database recording another log's id is
// refused (*OtherLogError).
func (n *Node) checkIdentity(ctx context.Context, info *jetstream.StreamInfo, seq uint64) (follow bool, err error) {
	have, err := n.store.LogID(ctx)
	if err != nil {
		return false, fmt.Errorf("cluster: %w", err)
	}
	logID := streamLogID(info.Config)
	if s := info.Config.Metadata[seedKey]; s != "" && logID == "" {
		return false, &SeedUnfinishedError{Stream: n.cfg.LogStream, Seed: s}
	}
	if logID == "" {
		id, err := n.proveLog(ctx, info, have, seq)
		if err != nil {
			return false, err
		}
		if logID, err = adoptLogID(ctx, n.js, n.stream, id); err != nil {
			return false, fmt.Errorf("cluster: log stream %s: %w", n.cfg.LogStream, err)
		}
		n.cfg.Logger.Warn("the log stream had no id; it has one now", "log", logID)
	}
	n.logID = logID
	switch {
	case have == logID:
		return false, nil
	case have != "":
		return false, &OtherLogError{Database: have, Log: logID, Stream: n.cfg.LogStream}
	case seq == 0:
		// A database with records that never applied an entry was
		// written in single-node mode: applying the log on top of it
		// would give this instance records no other instance has.
		has, err := n.store.HasRecords(ctx)
		if err != nil {
			return false, fmt.Errorf("cluster: %w", err)
		}
		if has {
			return false, fmt.Errorf("cluster: the database at store.path holds records but follows no log: "+
				"it was written in single-node mode; to move it to replicated mode, stop orderd and run orderd cluster seed on it "+
				"before the log %s holds any entry (docs/replicated-mode.md, Moving to replicated mode), or start this instance on an empty disk", n.cfg.LogStream)
		}
	}
	return true, nil
}

// proveLog decides the id of a log stream that has none, which only the
// first start of an empty deployment or a proof may give: an empty stream
// and an empty database start a new log; a stream with entries takes the
// id of the log this instance proves it follows, by the hash of the entry
// at its applied sequence, which must be the entry it applied. That is
// also how a log written before logs had ids gets one. Any other instance
// is refused (*UnprovenLogError).
func (n *Node) proveLog(ctx context.Context, info *jetstream.StreamInfo, have string, seq uint64) (string, error) {
	refuse := func(why string, args ...any) error {
		return &UnprovenLogError{Stream: n.cfg.LogStream, Why: fmt.Sprintf(why, args...)}
	}
	if info.State.LastSeq == 0 {
		has, err := n.store.HasRecords(ctx)
		if err != nil {
			return "", fmt.Errorf("cluster: %w", err)
		}
		if have != "" || seq != 0 || has {
			return "", refuse("the log is empty, and this database is not: it follows log %s, applied %d entries", orNone(have), seq)
		}
		return newLogID(), nil
	}
	if seq == 0 {
		return "", refuse("the log holds entries up to %d and this database has applied none of them", info.State.LastSeq)
	}
	if seq > info.State.LastSeq || seq < info.State.FirstSeq {
		return "", refuse("this database applied up to entry %d, and the log holds entries %d to %d", seq, info.State.FirstSeq, info.State.LastSeq)
	}
	want, ok, err := n.store.EntryHash(ctx, seq)
	if err != nil {
		return "", fmt.Errorf("cluster: %w", err)
	}
	if !ok {
		return "", refuse("this database records no hash of entry %d, the last it applied (it was applied by an older release)", seq)
	}
	gctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	m, err := n.stream.GetMsg(gctx, seq)
	if err != nil {
		return "", fmt.Errorf("cluster: read log entry %d of %s: %w", seq, n.cfg.LogStream, err)
	}
	if got := msgHash(m); !bytes.Equal(got, want) {
		return "", refuse("the log's entry %d has hash %x, and the entry %d this database applied has hash %x", seq, got[:8], seq, want[:8])
	}
	switch id := m.Header.Get(headerLogID); {
	case have != "":
		return have, nil
	case id != "":
		return id, nil
	}
	return newLogID(), nil
}

// headerLogID carries the id of the log an entry was appended to, so an
// applier never applies an entry of another log, even one appended by an
// instance still following a log since replaced under the same name.
const headerLogID = "Orderd-Log"

// newLogID returns a fresh log id.
func newLogID() string { return uuid.NewString() }

// streamLogID is the log id recorded in a log stream's configuration ("" for
// a log created before logs had ids).
func streamLogID(cfg jetstream.StreamConfig) string { return cfg.Metadata[logIDKey] }

// ErrLogNotEmpty is Seed's refusal of a log that holds an entry, a
// snapshot or a lease: seeding it would give instances that follow it two
// histories.
var ErrLogNotEmpty = errors.New("cluster: the log is in use")

// OtherLogError is the refusal of a database that follows another log
// than the one this instance appends to.
type OtherLogError struct {
	// Database is the id the database records; Log the log stream's.
	Database, Log string
	Stream        string
}

func (e *OtherLogError) Error() string {
	return fmt.Sprintf("the database follows log %s but the log %s is log %s: it is a database of another deployment, or of a log since lost and seeded anew; "+
		"move it away (with its -wal and -shm files) and start on an empty disk, which restores the newest snapshot of this log",
		e.Database, e.Stream, e.Log)
}

// SettingError is the refusal of a setting that differs from the one an
// existing shared asset (the log, the lease, the snapshot store) was
// created with. The instance that creates an asset configures it; no
// instance changes it with its own settings.
type SettingError struct {
	// Key is the configuration key; Asset the asset's name.
	Key, Asset string
	// Have is this instance's value, Asset's the one the asset has.
	Have, AssetValue string
}

func (e *SettingError) Error() string { return e.Key + " is " + e.Problem() }

// Problem is the error without the key: what a message naming the key
// says about it.
func (e *SettingError) Problem() string {
	return fmt.Sprintf("%s but %s has %s: shared assets keep the settings they were created with; "+
		"give this instance the asset's value, or change the asset deliberately first (docs/replicated-mode.md, Changing a shared setting)",
		e.Have, e.Asset, e.AssetValue)
}

// checkSettings compares the existing assets with this instance's
// settings; the first difference is a *SettingError.
func (n *Node) checkSettings(ctx context.Context) error {
	return checkSettings(ctx, n.cfg, n.stream, n.kv, n.obj)
}

func checkSettings(ctx context.Context, c Config, stream jetstream.Stream, kv jetstream.KeyValue, obj jetstream.ObjectStore) error {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	info, err := stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("cluster: log stream %s: %w", c.LogStream, err)
	}
	if r := info.Config.Replicas; r != c.Replicas {
		return &SettingError{Key: "cluster.replicas", Asset: "the log stream " + c.LogStream, Have: fmt.Sprint(c.Replicas), AssetValue: fmt.Sprint(r)}
	}
	if a := info.Config.MaxAge; a != c.LogMaxAge {
		return &SettingError{Key: "cluster.log_max_age", Asset: "the log stream " + c.LogStream, Have: c.LogMaxAge.String(), AssetValue: a.String()}
	}
	ks, err := kv.Status(ctx)
	if err != nil {
		return fmt.Errorf("cluster: lease bucket %s: %w", c.leaseBucket(), err)
	}
	if ttl := ks.TTL(); ttl != c.LeaseTTL {
		return &SettingError{Key: "cluster.lease_ttl", Asset: "the lease bucket " + c.leaseBucket(), Have: c.LeaseTTL.String(), AssetValue: ttl.String()}
	}
	if r := ks.Config().Replicas; r != c.Replicas {
		return &SettingError{Key: "cluster.replicas", Asset: "the lease bucket " + c.leaseBucket(), Have: fmt.Sprint(c.Replicas), AssetValue: fmt.Sprint(r)}
	}
	ost, err := obj.Status(ctx)
	if err != nil {
		return fmt.Errorf("cluster: snapshot store %s: %w", c.snapshotBucket(), err)
	}
	if r := ost.Replicas(); r != c.Replicas {
		return &SettingError{Key: "cluster.replicas", Asset: "the snapshot store " + c.snapshotBucket(), Have: fmt.Sprint(c.Replicas), AssetValue: fmt.Sprint(r)}
	}
	return nil
}

// adoptLogID gives a log stream without an id the id id, changing nothing
// else of its configuration, and returns the id the stream holds
// afterwards (another instance's, when it was quicker).
func adoptLogID(ctx context.Context, js jetstream.JetStream, stream jetstream.Stream, id string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	info, err := stream.Info(ctx)
	if err != nil {
		return "", err
	}
	if id := streamLogID(info.Config); id != "" {
		return id, nil
	}
	if err := setLogID(ctx, js, info.Config, id); err != nil {
		return "", err
	}
	// Two instances adopting at once: the last update wins, and both
	// read it back after a pause longer than an update takes.
	time.Sleep(500 * time.Millisecond)
	info, err = stream.Info(ctx)
	if err != nil {
		return "", err
	}
	return streamLogID(info.Config), nil
}

// setLogID records id in the stream's metadata, keeping the rest of sc.
func setLogID(ctx context.Context, js jetstream.JetStream, sc jetstream.StreamConfig, id string) error {
	return updateMetadata(ctx, js, sc, map[string]string{logIDKey: id})
}

// updateMetadata sets the keys of set in the stream's metadata and removes
// those of del, keeping the rest of sc, in one update.
func updateMetadata(ctx context.Context, js jetstream.JetStream, sc jetstream.StreamConfig, set map[string]string, del ...string) error {
	md := map[string]string{}
	for k, v := range sc.Metadata {
		md[k] = v
	}
	for _, k := range del {
		delete(md, k)
	}
	for k, v := range set {
		md[k] = v
	}
	sc.Metadata = md
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	if _, err := js.UpdateStream(ctx, sc); err != nil {
		return fmt.Errorf("record metadata of stream %s: %w", sc.Name, err)
	}
	return nil
}

// LogID returns the id of the log cfg names, as its stream records it: ""
// when the stream does not exist or records none. It changes nothing.
func LogID(ctx context.Context, nc *nats.Conn, cfg Config) (string, error) {
	if cfg.LogStream == "" {
		cfg.LogStream = DefaultLogStream
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	s, err := js.Stream(ctx, cfg.LogStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("log stream %s: %w", cfg.LogStream, err)
	}
	return streamLogID(s.CachedInfo().Config), nil
}
