package publish

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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
	// Shared marks a stream several instances publish to (replicated
	// mode): the instance that creates it configures it, and an existing
	// one is used as it is, never updated to this instance's settings
	// (CheckStream tells when they differ).
	Shared bool
}

// EnsureStream creates the stream, or updates it to cfg when it exists, and
// returns it. Storage is always file storage. Changing the storage type or
// the name of an existing stream is refused by the server; the error says so.
func EnsureStream(ctx context.Context, js jetstream.JetStream, cfg StreamConfig) (jetstream.Stream, error) {
	sc, err := cfg.streamConfig()
	if err != nil {
		return nil, err
	}
	if cfg.Shared {
		s, err := js.Stream(ctx, sc.Name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			s, err = js.CreateStream(ctx, sc)
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				// Another instance created it meanwhile, maybe with
				// other settings: that one stands.
				s, err = js.Stream(ctx, sc.Name)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("ensure stream %s: %w", sc.Name, err)
		}
		return s, nil
	}
	s, err := js.CreateOrUpdateStream(ctx, sc)
	if err != nil {
		return nil, fmt.Errorf("ensure stream %s: %w", sc.Name, err)
	}
	return s, nil
}

// SettingError is a setting of StreamConfig that differs from the existing
// stream's.
type SettingError struct {
	// Stream is the stream's name; Setting names the setting as the
	// configuration's nats section does (replicas, max_age, max_bytes,
	// duplicate_window, subject_prefix).
	Stream, Setting string
	// Have is the value asked for, StreamValue the stream's.
	Have, StreamValue string
}

func (e *SettingError) Error() string {
	return fmt.Sprintf("stream %s has %s %s, not %s", e.Stream, e.Setting, e.StreamValue, e.Have)
}

// CheckStream compares the existing stream with cfg and returns a
// *SettingError for the first setting that differs (replicas, max age, max
// bytes, duplicate window, subjects); nil when they agree or the stream
// does not exist yet. It changes nothing.
func CheckStream(ctx context.Context, js jetstream.JetStream, cfg StreamConfig) error {
	want, err := cfg.streamConfig()
	if err != nil {
		return err
	}
	s, err := js.Stream(ctx, want.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("stream %s: %w", want.Name, err)
	}
	have := s.CachedInfo().Config
	limit := func(v int64) string {
		if v <= 0 {
			return "unlimited"
		}
		return fmt.Sprint(v)
	}
	diff := func(setting, wantV, haveV string) error {
		return &SettingError{Stream: want.Name, Setting: setting, Have: wantV, StreamValue: haveV}
	}
	switch {
	case have.Replicas != want.Replicas:
		return diff("replicas", fmt.Sprint(want.Replicas), fmt.Sprint(have.Replicas))
	case have.MaxAge != want.MaxAge:
		return diff("max_age", want.MaxAge.String(), have.MaxAge.String())
	case limit(have.MaxBytes) != limit(want.MaxBytes):
		return diff("max_bytes", limit(want.MaxBytes), limit(have.MaxBytes))
	case have.Duplicates != want.Duplicates:
		return diff("duplicate_window", want.Duplicates.String(), have.Duplicates.String())
	case !slices.Equal(have.Subjects, want.Subjects):
		return diff("subject_prefix", strings.Join(want.Subjects, ","), strings.Join(have.Subjects, ","))
	}
	return nil
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
