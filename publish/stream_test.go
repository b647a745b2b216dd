package publish_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"orderd/publish"
)

func TestEnsureStream(t *testing.T) {
	e := startNATS(t, t.TempDir(), "127.0.0.1:0")
	_, js := connectJS(t, e.ClientURL())
	ctx := t.Context()

	tests := []struct {
		name string
		cfg  publish.StreamConfig
		want jetstream.StreamConfig
	}{
		{
			name: "defaults",
			cfg:  publish.StreamConfig{},
			want: jetstream.StreamConfig{Name: "ORDERD", Subjects: []string{"orderd.>"}, Duplicates: 20 * time.Minute, MaxMsgs: -1, MaxBytes: -1},
		},
		{
			name: "custom name, prefix and limits",
			cfg: publish.StreamConfig{Name: "SHOP", Prefix: "acme.orders", DuplicateWindow: time.Minute,
				MaxAge: time.Hour, MaxBytes: 1 << 20, MaxMsgs: 500},
			want: jetstream.StreamConfig{Name: "SHOP", Subjects: []string{"acme.orders.>"}, Duplicates: time.Minute,
				MaxAge: time.Hour, MaxBytes: 1 << 20, MaxMsgs: 500},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := publish.EnsureStream(ctx, js, tt.cfg)
			if err != nil {
				t.Fatalf("EnsureStream: %v", err)
			}
			got := s.CachedInfo().Config
			if got.Name != tt.want.Name || strings.Join(got.Subjects, ",") != strings.Join(tt.want.Subjects, ",") ||
				got.Duplicates != tt.want.Duplicates || got.MaxAge != tt.want.MaxAge ||
				got.MaxBytes != tt.want.MaxBytes || got.MaxMsgs != tt.want.MaxMsgs ||
				got.Storage != jetstream.FileStorage || got.Replicas != 1 || !got.AllowAtomicPublish {
				t.Errorf("stream config = %+v", got)
			}
		})
	}

	t.Run("update keeps messages", func(t *testing.T) {
		if _, err := js.Publish(ctx, "orderd.orders.payin.new", []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		s, err := publish.EnsureStream(ctx, js, publish.StreamConfig{MaxMsgs: 1000, DuplicateWindow: 5 * time.Minute})
		if err != nil {
			t.Fatalf("update: %v", err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.Config.MaxMsgs != 1000 || info.Config.Duplicates != 5*time.Minute || info.State.Msgs != 1 {
			t.Errorf("after update: max msgs %d, duplicates %s, %d messages; want 1000, 5m, 1",
				info.Config.MaxMsgs, info.Config.Duplicates, info.State.Msgs)
		}
	})

	bad := []struct {
		name string
		cfg  publish.StreamConfig
		want string
	}{
		{"duplicate window above max age", publish.StreamConfig{Name: "BAD1", MaxAge: time.Minute}, "duplicate window"},
		{"wildcard prefix", publish.StreamConfig{Name: "BAD2", Prefix: "orderd.*"}, "prefix"},
		{"negative limit", publish.StreamConfig{Name: "BAD3", MaxMsgs: -5}, "negative"},
		{"subjects overlap another stream", publish.StreamConfig{Name: "OTHER"}, "overlap"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := publish.EnsureStream(ctx, js, tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

// TestEnsureStream_Shared: a shared stream (replicated mode) is created
// with the first caller's settings and never updated by another's;
// CheckStream names the setting that differs, with both values.
func TestEnsureStream_Shared(t *testing.T) {
	e := startNATS(t, t.TempDir(), "127.0.0.1:0")
	_, js := connectJS(t, e.ClientURL())
	ctx := t.Context()
	first := publish.StreamConfig{Shared: true, MaxBytes: 1 << 20, DuplicateWindow: 2 * time.Minute}
	if err := publish.CheckStream(ctx, js, first); err != nil {
		t.Fatalf("CheckStream before the stream exists: %v", err)
	}
	if _, err := publish.EnsureStream(ctx, js, first); err != nil {
		t.Fatal(err)
	}
	if err := publish.CheckStream(ctx, js, first); err != nil {
		t.Fatalf("CheckStream with the creator's settings: %v", err)
	}
	tests := []struct {
		name              string
		cfg               publish.StreamConfig
		setting, have, is string
	}{
		{"max bytes", publish.StreamConfig{Shared: true, MaxBytes: 20 << 10, DuplicateWindow: 2 * time.Minute}, "max_bytes", "20480", "1048576"},
		{"duplicate window", publish.StreamConfig{Shared: true, MaxBytes: 1 << 20}, "duplicate_window", "20m0s", "2m0s"},
		{"max age", publish.StreamConfig{Shared: true, MaxBytes: 1 << 20, DuplicateWindow: 2 * time.Minute, MaxAge: time.Hour}, "max_age", "1h0m0s", "0s"},
		{"prefix", publish.StreamConfig{Shared: true, MaxBytes: 1 << 20, DuplicateWindow: 2 * time.Minute, Prefix: "shop"}, "subject_prefix", "shop.>", "orderd.>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := publish.CheckStream(ctx, js, tt.cfg)
			var se *publish.SettingError
			if !errors.As(err, &se) || se.Setting != tt.setting || se.Have != tt.have || se.StreamValue != tt.is {
				t.Fatalf("CheckStream: %v, want %s %s against %s", err, tt.setting, tt.have, tt.is)
			}
			if tt.setting == "subject_prefix" {
				return // another prefix is another stream's subjects
			}
			s, err := publish.EnsureStream(ctx, js, tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			got := s.CachedInfo().Config
			if got.MaxBytes != 1<<20 || got.Duplicates != 2*time.Minute || got.MaxAge != 0 {
				t.Errorf("EnsureStream changed the shared stream: %+v", got)
			}
		})
	}
}
