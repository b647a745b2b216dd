package publish_test

import (
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
