package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestNewLogging(t *testing.T) {
	noEnv := func(string) string { return "" }
	journal := func(k string) string {
		if k == "JOURNAL_STREAM" {
			return "8:12345"
		}
		return ""
	}
	tests := []struct {
		name   string
		cfg    LogConfig
		getenv func(string) string
		check  func(t *testing.T, out string)
	}{
		{
			name:   "JSON lines with component, level filtered",
			cfg:    LogConfig{Level: "info", Format: "auto"},
			getenv: noEnv,
			check: func(t *testing.T, out string) {
				lines := strings.Split(strings.TrimSpace(out), "\n")
				if len(lines) != 3 {
					t.Fatalf("want 3 lines (debug filtered out), got %d:\n%s", len(lines), out)
				}
				var first map[string]any
				if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
					t.Fatalf("not JSON: %v\n%s", err, lines[0])
				}
				for k, v := range map[string]any{"level": "info", "msg": "accepted", "component": "receiver", "order": "ord_1", "took": "1.5ms"} {
					if first[k] != v {
						t.Errorf("%s = %v, want %v in %s", k, first[k], v, lines[0])
					}
				}
				ts, err := time.Parse(time.RFC3339, first["time"].(string))
				if err != nil || ts.Location() != time.UTC {
					t.Errorf("time %v is not RFC 3339 UTC: %v", first["time"], err)
				}
				if !strings.Contains(lines[2], `"level":"error"`) || !strings.Contains(lines[2], `"error":"disk full"`) {
					t.Errorf("error line: %s", lines[2])
				}
				// An error is a condition to act on, not a crash: no stack
				// trace of the logging call.
				if strings.Contains(lines[2], "stacktrace") {
					t.Errorf("error line carries a stack trace: %s", lines[2])
				}
			},
		},
		{
			name:   "debug level shows debug",
			cfg:    LogConfig{Level: "debug", Format: "json"},
			getenv: noEnv,
			check: func(t *testing.T, out string) {
				if !strings.Contains(out, `"msg":"details"`) {
					t.Errorf("no debug line:\n%s", out)
				}
			},
		},
		{
			name:   "console format",
			cfg:    LogConfig{Level: "warn", Format: "console"},
			getenv: noEnv,
			check: func(t *testing.T, out string) {
				if strings.Contains(out, "{\"level\"") || strings.Contains(out, "accepted") {
					t.Errorf("want console lines at warn and above only:\n%s", out)
				}
				if !strings.Contains(out, "WARN\tslow commit") || !strings.Contains(out, `"component": "store"`) {
					t.Errorf("console line missing:\n%s", out)
				}
			},
		},
		{
			name:   "journald priorities",
			cfg:    LogConfig{Level: "info", Format: "json"},
			getenv: journal,
			check: func(t *testing.T, out string) {
				lines := strings.Split(strings.TrimSpace(out), "\n")
				for i, prefix := range []string{"<6>{", "<4>{", "<3>{"} {
					if i >= len(lines) || !strings.HasPrefix(lines[i], prefix) {
						t.Errorf("line %d does not start with %s:\n%s", i, prefix, out)
					}
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			lg, err := newLogging(tt.cfg, &buf, tt.getenv)
			if err != nil {
				t.Fatal(err)
			}
			lg.Logger.With("component", "receiver").Info("accepted", "order", "ord_1", "took", 1500*time.Microsecond)
			lg.Logger.Debug("details")
			lg.Logger.With("component", "store").Warn("slow commit")
			lg.Logger.Error("write failed", "error", errors.New("disk full"))
			if err := lg.Sync(); err != nil {
				t.Fatal(err)
			}
			tt.check(t, buf.String())
		})
	}
}

func TestLogging_SetLevel(t *testing.T) {
	var buf bytes.Buffer
	lg, err := newLogging(LogConfig{Level: "error", Format: "json"}, &buf, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	child := lg.Logger.With("component", "relay")
	child.Info("hidden")
	if err := lg.SetLevel("info"); err != nil {
		t.Fatal(err)
	}
	child.Info("shown")
	if strings.Contains(buf.String(), "hidden") || !strings.Contains(buf.String(), "shown") {
		t.Errorf("level change did not reach an existing child logger:\n%s", buf.String())
	}
	if err := lg.SetLevel("chatty"); err == nil || !strings.Contains(err.Error(), "log.level") {
		t.Errorf("SetLevel(chatty) = %v, want an error naming log.level", err)
	}
}

func TestNewLogging_Errors(t *testing.T) {
	for _, cfg := range []LogConfig{{Level: "loud", Format: "json"}, {Level: "info", Format: "xml"}} {
		if _, err := newLogging(cfg, &bytes.Buffer{}, func(string) string { return "" }); err == nil {
			t.Errorf("newLogging(%+v) accepted it", cfg)
		}
	}
}
