package cluster

import (
	"context"
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
	md := map[string]string{}
	for k, v := range sc.Metadata {
		md[k] = v
	}
	md[logIDKey] = id
	sc.Metadata = md
	if _, err := js.UpdateStream(ctx, sc); err != nil {
		return fmt.Errorf("record log id in stream %s: %w", sc.Name, err)
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
