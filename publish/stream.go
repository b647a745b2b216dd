package publish

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Stream defaults.
const (
	DefaultStreamName      = "ORDERD"
	DefaultDuplicateWindow = 20 * time.Minute
)

// StreamConfig describes the stream that holds orderd's events. Zero limits
// mean unlimited.
type StreamConfig struct {
	// Name defaults to ORDERD.
	Name string
	// Prefix is the subject prefix; the stream takes "<Prefix>.>".
	// Default "orderd".
	Prefix string
	// DuplicateWindow is how long JetStream remembers Nats-Msg-Id values
	// to drop a second publication of the same event; default 20m. A
	// relay that resends after an outage longer than this can store an
	// event twice (consumers still see the same id).
	DuplicateWindow time.Duration
	MaxAge          time.Duration
	MaxBytes        int64
	MaxMsgs         int64
	// Replicas defaults to 1 (the embedded server is a single node).
	Replicas int
}

// EnsureStream creates the stream, or updates it to cfg when it exists, and
// returns it. Storage is always file storage. Changing the storage type or
// the name of an existing stream is refused by the server; the error says so.
func EnsureStream(ctx context.Context, js jetstream.JetStream, cfg StreamConfig) (jetstream.Stream, error) {
	sc, err := cfg.streamConfig()
	if err != nil {
		return nil, err
	}
	s, err := js.CreateOrUpdateStream(ctx, sc)
	if err != nil {
		return nil, fmt.Errorf("ensure stream %s: %w", sc.Name, err)
	}
	return s, nil
}

func (cfg StreamConfig) streamConfig() (jetstream.StreamConfig, error) {
	name := cfg.Name
	if name == "" {
		name = DefaultStreamName
	}
	prefix := cfg.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if err := ValidatePrefix(prefix); err != nil {
		return jetstream.StreamConfig{}, fmt.Errorf("ensure stream %s: %w", name, err)
	}
	dup := cfg.DuplicateWindow
	if dup <= 0 {
		dup = DefaultDuplicateWindow
	}
	if cfg.MaxAge > 0 && dup > cfg.MaxAge {
		return jetstream.StreamConfig{}, fmt.Errorf("ensure stream %s: duplicate window %s exceeds max age %s", name, dup, cfg.MaxAge)
	}
	if cfg.MaxBytes < 0 || cfg.MaxMsgs < 0 || cfg.MaxAge < 0 {
		return jetstream.StreamConfig{}, errors.New("ensure stream: negative limit (use 0 for unlimited)")
	}
	replicas := cfg.Replicas
	if replicas <= 0 {
		replicas = 1
	}
	sc := jetstream.StreamConfig{
		Name:        name,
		Description: "orderd order events (CloudEvents JSON)",
		Subjects:    []string{prefix + ".>"},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		Duplicates:  dup,
		// Lets the relay send runs of events as atomic batches, which a
		// single server with SyncAlways stores with one fsync each.
		AllowAtomicPublish: true,
		MaxAge:             cfg.MaxAge,
		MaxBytes:           -1,
		MaxMsgs:            -1,
		Replicas:           replicas,
	}
	if cfg.MaxBytes > 0 {
		sc.MaxBytes = cfg.MaxBytes
	}
	if cfg.MaxMsgs > 0 {
		sc.MaxMsgs = cfg.MaxMsgs
	}
	return sc, nil
}
