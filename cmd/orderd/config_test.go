package main

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

func TestParseConfig_Defaults(t *testing.T) {
	for name, in := range map[string]string{
		"empty file":     "",
		"only a comment": "# nothing here\n",
		"empty sections": "receiver:\nnats:\n  embedded:\n",
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := ParseConfig(strings.NewReader(in))
			if err != nil {
				t.Fatalf("ParseConfig: %v", err)
			}
			want := DefaultConfig()
			want.lines, cfg.lines = nil, nil
			if !reflect.DeepEqual(cfg, want) {
				t.Errorf("got\n%s\nwant the defaults\n%s", cfg, want)
			}
		})
	}

	// Spot-check the defaults the design names, so that a changed default
	// is a deliberate act.
	d := DefaultConfig()
	for _, c := range []struct {
		key       string
		got, want any
	}{
		{"provider.timeout", d.Provider.Timeout, 10 * time.Second},
		{"provider.rate_limit", d.Provider.RateLimit, 10.0},
		{"provider.rate_burst", d.Provider.RateBurst, 1},
		{"receiver.listen", d.Receiver.Listen, ":8080"},
		{"receiver.path", d.Receiver.Path, "/webhooks/orders"},
		{"receiver.max_body_bytes", d.Receiver.MaxBodyBytes, ByteSize(1048576)},
		{"receiver.ack_budget", d.Receiver.AckBudget, 2 * time.Second},
		{"admin.listen", d.Admin.Listen, "127.0.0.1:8081"},
		{"nats.url", d.NATS.URL, ""},
		{"nats.stream", d.NATS.Stream, "ORDERD"},
		{"nats.subject_prefix", d.NATS.SubjectPrefix, "orderd"},
		{"nats.duplicate_window", d.NATS.DuplicateWindow, 20 * time.Minute},
		{"reconcile.doubt_min_age", d.Reconcile.DoubtMinAge, time.Minute},
		{"reconcile.boundary_window", d.Reconcile.BoundaryWindow, 10 * time.Second},
		{"reconcile.drift_grace", d.Reconcile.DriftGrace, 2},
		{"reconcile.schedules", d.Reconcile.Schedules, Schedules{"@every 1m", "@every 30s", "@every 15m", "@every 5m", "0 1 * * *"}},
		{"log.level", d.Log.Level, "info"},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("default %s = %v, want %v", c.key, c.got, c.want)
		}
	}
}

func TestParseConfig_Values(t *testing.T) {
	in := `provider:
  base_url: https://api.provider.example
  public_keys: [a.pem, b.pem]
  timeout: 3s
  rate_limit: 2.5
receiver:
  allowed_ips: [203.0.113.7, "198.51.100.0/24", "2001:db8::1", "10.1.2.3/8"]
  max_body_bytes: 512KiB
nats:
  embedded:
    max_store: 2GB
    max_memory: 1048576
reconcile:
  drift_tolerance:
    USD: 0.01
    eur: "0.10"
shutdown_timeout: 1m30s
`
	cfg, err := ParseConfig(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	wantIPs := []netip.Prefix{
		netip.MustParsePrefix("203.0.113.7/32"),
		netip.MustParsePrefix("198.51.100.0/24"),
		netip.MustParsePrefix("2001:db8::1/128"),
		netip.MustParsePrefix("10.0.0.0/8"),
	}
	for _, c := range []struct {
		key       string
		got, want any
	}{
		{"provider.public_keys", cfg.Provider.PublicKeys, []string{"a.pem", "b.pem"}},
		{"provider.timeout", cfg.Provider.Timeout, 3 * time.Second},
		{"provider.rate_limit", cfg.Provider.RateLimit, 2.5},
		{"receiver.allowed_ips", cfg.Receiver.AllowedIPs, wantIPs},
		{"receiver.max_body_bytes", cfg.Receiver.MaxBodyBytes, ByteSize(512 * 1024)},
		{"nats.embedded.max_store", cfg.NATS.Embedded.MaxStore, ByteSize(2_000_000_000)},
		{"nats.embedded.max_memory", cfg.NATS.Embedded.MaxMemory, ByteSize(1 << 20)},
		{"shutdown_timeout", cfg.ShutdownTimeout, 90 * time.Second},
		// Untouched keys of a section that is present keep their defaults.
		{"provider.rate_burst", cfg.Provider.RateBurst, 1},
		{"receiver.listen", cfg.Receiver.Listen, ":8080"},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.key, c.got, c.want)
		}
	}
	// Decimals are read from the YAML text, never through a float, and
	// currencies are lowercased.
	if got := cfg.Reconcile.DriftToleranceFor("usd"); got.String() != "0.01" {
		t.Errorf("drift_tolerance usd = %s, want 0.01", got)
	}
	if got := cfg.Reconcile.DriftToleranceFor("EUR"); !got.Equal(decimal.RequireFromString("0.1")) {
		t.Errorf("drift_tolerance eur = %s, want 0.10", got)
	}
	if got := cfg.Reconcile.DriftToleranceFor("gbp"); !got.IsZero() {
		t.Errorf("drift_tolerance of an unlisted currency = %s, want 0", got)
	}
}

func TestParseConfig_Errors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		// want are substrings of the error message.
		want []string
	}{
		{
			name: "unknown top-level key",
			yaml: "provider:\n  timeout: 1s\nrecieve:\n  listen: :1\n",
			want: []string{"line 3: recieve: unknown key"},
		},
		{
			name: "unknown nested key names the full path and a suggestion",
			yaml: "receiver:\n  listen: :8080\n  lisen: :9090\n",
			want: []string{"line 3: receiver.lisen: unknown key (did you mean receiver.listen?)"},
		},
		{
			name: "unknown key two levels down",
			yaml: "nats:\n  embedded:\n    max_stor: 1GiB\n",
			want: []string{"line 3: nats.embedded.max_stor: unknown key"},
		},
		{
			name: "unknown key lists the known ones when nothing is close",
			yaml: "log:\n  colour: yes\n",
			want: []string{"log.colour: unknown key (known keys: level, format)"},
		},
		{
			name: "bad duration",
			yaml: "provider:\n  timeout: 10\n",
			want: []string{`line 2: provider.timeout: "10" is not a duration`},
		},
		{
			name: "bad nested duration",
			yaml: "reconcile:\n  schedules:\n    stale: off\n  stale_after: five minutes\n",
			want: []string{`line 4: reconcile.stale_after: "five minutes" is not a duration`},
		},
		{
			name: "bad CIDR names the list index",
			yaml: "receiver:\n  allowed_ips:\n    - 10.0.0.0/8\n    - 10.0.0.300\n",
			want: []string{`line 4: receiver.allowed_ips[1]: "10.0.0.300" is not an IP address or CIDR`},
		},
		{
			name: "bad size",
			yaml: "receiver:\n  max_body_bytes: 1 megabyte\n",
			want: []string{`receiver.max_body_bytes: "1 megabyte" is not a size`},
		},
		{
			name: "bad integer",
			yaml: "publish:\n  batch: many\n",
			want: []string{`publish.batch: "many" is not an integer`},
		},
		{
			name: "bad number",
			yaml: "provider:\n  rate_limit: fast\n",
			want: []string{`provider.rate_limit: "fast" is not a number`},
		},
		{
			name: "bad decimal",
			yaml: "reconcile:\n  drift_tolerance:\n    usd: 1e-2\n",
			want: []string{`reconcile.drift_tolerance.usd: "1e-2" is not a decimal number`},
		},
		{
			name: "decimal too long",
			yaml: "reconcile:\n  drift_tolerance:\n    usd: 0." + strings.Repeat("1", 70) + "\n",
			want: []string{`reconcile.drift_tolerance.usd: is too long for an amount (72 characters; at most 64)`},
		},
		{
			name: "section given a scalar",
			yaml: "receiver: 8080\n",
			want: []string{"receiver: want a mapping of keys, got a scalar"},
		},
		{
			name: "list given a scalar",
			yaml: "provider:\n  public_keys: key.pem\n",
			want: []string{"provider.public_keys: want a list, got a scalar"},
		},
		{
			name: "scalar given a list",
			yaml: "store:\n  path: [a, b]\n",
			want: []string{"store.path: want a single value, got a list"},
		},
		{
			name: "key defined twice",
			yaml: "log:\n  level: info\n  level: debug\n",
			want: []string{"line 3: log.level: defined twice (first on line 2)"},
		},
		{
			name: "every error is reported, not only the first",
			yaml: "recieve: {}\nlog:\n  lvl: debug\n",
			want: []string{"line 1: recieve: unknown key", "line 3: log.lvl: unknown key"},
		},
		{
			name: "top level is not a mapping",
			yaml: "- a\n- b\n",
			want: []string{"(top level): want a mapping of keys, got a list"},
		},
		{
			name: "YAML syntax error",
			yaml: "provider:\n  timeout: [1s\n",
			want: []string{"config: "},
		},
		{
			name: "two documents",
			yaml: "log: {}\n---\nlog: {}\n",
			want: []string{"more than one YAML document"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := ParseConfig(strings.NewReader(tt.yaml))
			if err == nil {
				t.Fatalf("ParseConfig accepted it:\n%s", cfg)
			}
			var ce *configError
			if !errors.As(err, &ce) {
				t.Errorf("error %v (%T) is not a *configError", err, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestConfig_Validate(t *testing.T) {
	tests := []struct {
		name  string
		extra string // YAML appended to validYAML
		want  string // "" means valid
	}{
		{name: "minimal config", want: ""},
		{name: "listen without port", extra: "receiver:\n  listen: x", want: `line 6: receiver.listen: "x" is not host:port`},
		{name: "listen with a bad port", extra: "admin:\n  listen: 127.0.0.1:99999", want: `admin.listen: "127.0.0.1:99999" is not host:port (port "99999" is not a number from 0 to 65535)`},
		{name: "listen on a random port", extra: "receiver:\n  listen: 127.0.0.1:0\nadmin:\n  listen: 127.0.0.1:0", want: ""},
		{name: "admin on the receiver's address", extra: "admin:\n  listen: :8080", want: `admin.listen: ":8080" is also receiver.listen`},
		{name: "path without slash", extra: "receiver:\n  path: webhooks", want: `receiver.path: "webhooks" must start with /`},
		{name: "ack budget at the provider's limit", extra: "receiver:\n  ack_budget: 3s", want: "receiver.ack_budget: 3s is not below the provider's 3s answer limit"},
		{name: "zero ack budget", extra: "receiver:\n  ack_budget: 0s", want: "receiver.ack_budget: must be a positive duration"},
		{name: "public url not a url", extra: "receiver:\n  public_url: orderd.example/hook", want: `receiver.public_url: "orderd.example/hook" is not an http(s) URL`},
		{name: "bad cron spec", extra: "reconcile:\n  schedules:\n    stale: every minute", want: `line 7: reconcile.schedules.stale: "every minute" is not a cron spec or "off"`},
		{name: "cron with six fields", extra: "reconcile:\n  schedules:\n    report: 0 0 1 * * *", want: `reconcile.schedules.report: "0 0 1 * * *" is not a cron spec`},
		{name: "bad descriptor", extra: "reconcile:\n  schedules:\n    doubt: \"@every soon\"", want: `reconcile.schedules.doubt: "@every soon" is not a cron spec`},
		{name: "schedules off, descriptors and plain specs", extra: "reconcile:\n  schedules:\n    stale: \"off\"\n    doubt: off\n    balances: \"@hourly\"\n    requisites: \"*/5 * * * *\"\n    report: \"@daily\"", want: ""},
		{name: "doubt_min_age not above provider.timeout", extra: "reconcile:\n  doubt_min_age: 10s", want: "reconcile.doubt_min_age: 10s must be longer than provider.timeout (10s)"},
		{name: "give_up_after not above stale_after", extra: "reconcile:\n  give_up_after: 5m", want: "reconcile.give_up_after: 5m0s must be longer than reconcile.stale_after (5m0s)"},
		{name: "zero concurrency", extra: "reconcile:\n  concurrency: 0", want: "reconcile.concurrency: must be at least 1 (got 0)"},
		{name: "backoff_max below backoff_base", extra: "reconcile:\n  backoff_base: 10m\n  backoff_max: 1m", want: "reconcile.backoff_max: 1m0s is below reconcile.backoff_base 10m0s"},
		{name: "drift grace below one", extra: "reconcile:\n  drift_grace: 0", want: "reconcile.drift_grace: must be at least 1 (got 0)"},
		{name: "negative drift tolerance", extra: "reconcile:\n  drift_tolerance:\n    usd: \"-0.01\"", want: "reconcile.drift_tolerance.usd: must not be negative (got -0.01)"},
		{name: "subject prefix with a dot", extra: "nats:\n  subject_prefix: acme.orderd", want: `nats.subject_prefix: "acme.orderd" is not one subject token`},
		{name: "subject prefix with a wildcard", extra: "nats:\n  subject_prefix: \"*\"", want: `nats.subject_prefix: "*" is not one subject token`},
		{name: "subject prefix in capitals", extra: "nats:\n  subject_prefix: Orderd", want: `nats.subject_prefix: "Orderd" is not one subject token`},
		{name: "stream name with a space", extra: "nats:\n  stream: ORDER D", want: `nats.stream: "ORDER D" is not a stream name`},
		{name: "nats url of the wrong scheme", extra: "nats:\n  url: http://nats.example:4222", want: `nats.url: "http://nats.example:4222" is not a NATS URL`},
		{name: "nats url password is not echoed", extra: "nats:\n  url: ftp://user:hunter2@nats.example:4222", want: `nats.url: "ftp://user:xxxxx@nats.example:4222" is not a NATS URL`},
		{name: "nats cluster urls", extra: "nats:\n  url: nats://a.example:4222, tls://b.example:4222", want: ""},
		{name: "snapshots far apart, a short log", extra: "cluster:\n  snapshot_every: 2000000h\n  log_max_age: 1h",
			want: "cluster.log_max_age: 1h0m0s must be at least twice cluster.snapshot_every (2000000h0m0s)"},
		{name: "snapshot read rate too slow", extra: "cluster:\n  snapshot_read_rate: 64KiB",
			want: "cluster.snapshot_read_rate: must be 0 (full speed) or at least 1MiB a second (got 64KiB)"},
		{name: "snapshot read rate at full speed", extra: "cluster:\n  snapshot_read_rate: 0", want: ""},
		{name: "digest every zero", extra: "cluster:\n  digest_every: 0",
			want: "cluster.digest_every: must be at least 1 log sequence (got 0)"},
		{name: "digest every negative", extra: "cluster:\n  digest_every: -5",
			want: "cluster.digest_every: must be at least 1 log sequence (got -5)"},
		{name: "digest every", extra: "cluster:\n  digest_every: 5000", want: ""},
		{name: "tls cert without key", extra: "nats:\n  url: nats://a.example:4222\n  tls:\n    cert_file: c.pem", want: "nats.tls: cert_file and key_file must be set together"},
		{name: "max_age below the duplicate window", extra: "nats:\n  max_age: 10m", want: "nats.max_age: 10m0s is shorter than nats.duplicate_window (20m0s)"},
		{name: "stream larger than the embedded store", extra: "nats:\n  max_bytes: 2GiB", want: "nats.max_bytes: 2GiB exceeds nats.embedded.max_store (1GiB)"},
		{name: "zero batch", extra: "publish:\n  batch: 0", want: "publish.batch: must be at least 1 (got 0)"},
		{name: "relative schema url", extra: "publish:\n  schema_url: /v1/asyncapi.yaml", want: `publish.schema_url: schema URL "/v1/asyncapi.yaml" is not absolute`},
		{name: "schema url with a fragment", extra: "publish:\n  schema_url: https://x.example/a.yaml#/c", want: `publish.schema_url: schema URL "https://x.example/a.yaml#/c" has a fragment`},
		{name: "schema url", extra: "publish:\n  schema_url: https://events.example.com/orderd/asyncapi.yaml", want: ""},
		{name: "empty store path", extra: "store:\n  path: \"\"", want: "store.path: must not be empty"},
		{name: "bad log level", extra: "log:\n  level: verbose", want: `log.level: "verbose" is not one of debug, info, warn, error`},
		{name: "bad log format", extra: "log:\n  format: xml", want: `log.format: "xml" is not one of auto, json, console`},
		{name: "zero shutdown timeout", extra: "shutdown_timeout: 0s", want: "shutdown_timeout: must be a positive duration"},
		{name: "otlp endpoint over grpc scheme", extra: "telemetry:\n  otlp_endpoint: grpc://collector:4317",
			want: `telemetry.otlp_endpoint: "grpc://collector:4317" is not an http(s) URL`},
		{name: "otlp endpoint without a host", extra: "telemetry:\n  otlp_endpoint: http://",
			want: `telemetry.otlp_endpoint: "http://" has no host`},
		{name: "otlp endpoint with a query", extra: "telemetry:\n  otlp_endpoint: http://collector:4318/?x=1",
			want: `telemetry.otlp_endpoint: "http://collector:4318/?x=1" has a query or fragment`},
		{name: "otlp endpoint", extra: "telemetry:\n  otlp_endpoint: http://collector:4318", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := ParseConfig(strings.NewReader(withLines(tt.extra)))
			if err != nil {
				t.Fatalf("ParseConfig: %v", err)
			}
			err = cfg.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate accepted it, want %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate error\n%s\ndoes not contain\n%s", err, tt.want)
			}
			var ce *configError
			if !errors.As(err, &ce) {
				t.Errorf("error is %T, not a *configError", err)
			}
		})
	}
}

func TestConfig_EventSchemaURL(t *testing.T) {
	tests := []struct{ extra, want string }{
		{"", "http://127.0.0.1:8081/v1/asyncapi.yaml"},
		{"admin:\n  listen: \":9000\"", "http://127.0.0.1:9000/v1/asyncapi.yaml"},
		{"admin:\n  listen: 0.0.0.0:9000", "http://127.0.0.1:9000/v1/asyncapi.yaml"},
		{"admin:\n  listen: \"[::1]:9000\"", "http://[::1]:9000/v1/asyncapi.yaml"},
		{"admin:\n  listen: admin.internal:9000", "http://admin.internal:9000/v1/asyncapi.yaml"},
		{"publish:\n  schema_url: https://events.example.com/a.yaml", "https://events.example.com/a.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			cfg, err := ParseConfig(strings.NewReader(withLines(tt.extra)))
			if err != nil {
				t.Fatal(err)
			}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			if got := cfg.EventSchemaURL(); got != tt.want {
				t.Errorf("EventSchemaURL = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestConfig_ValidateMissingProvider(t *testing.T) {
	cfg, err := ParseConfig(strings.NewReader("log:\n  level: debug\n"))
	if err != nil {
		t.Fatal(err)
	}
	err = cfg.Validate()
	if err == nil {
		t.Fatal("Validate accepted a config without a provider")
	}
	for _, want := range []string{
		"provider.base_url: missing",
		"provider.api_key: missing (set provider.api_key_file or ORDERD_PROVIDER_API_KEY)",
		"provider.public_keys: missing",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error\n%s\ndoes not contain %q", err, want)
		}
	}
}

func TestLoadConfig_Secrets(t *testing.T) {
	dir := t.TempDir()
	keyFile := writeFile(t, dir, "api-key", "  file-key\n")
	tokenFile := writeFile(t, dir, "admin-token", "file-token\n")
	emptyFile := writeFile(t, dir, "empty", "\n")
	missing := filepath.Join(dir, "no-such-file")

	conf := func(providerExtra, adminExtra string) string {
		return "provider:\n  base_url: https://api.provider.example\n  public_keys: [k.pem]\n" + providerExtra +
			"admin:\n  listen: 127.0.0.1:8081\n" + adminExtra
	}
	tests := []struct {
		name      string
		yaml      string
		env       map[string]string
		wantKey   string
		wantToken string
		wantErr   string
	}{
		{
			name:    "inline key",
			yaml:    conf("  api_key: inline-key\n", ""),
			wantKey: "inline-key",
		},
		{
			name:    "environment beats inline",
			yaml:    conf("  api_key: inline-key\n", ""),
			env:     map[string]string{"ORDERD_PROVIDER_API_KEY": "env-key"},
			wantKey: "env-key",
		},
		{
			name:    "file beats environment and inline, trimmed",
			yaml:    conf("  api_key: inline-key\n  api_key_file: "+keyFile+"\n", ""),
			env:     map[string]string{"ORDERD_PROVIDER_API_KEY": "env-key"},
			wantKey: "file-key",
		},
		{
			name:    "unreadable file is an error, not a fall back to the environment",
			yaml:    conf("  api_key_file: "+missing+"\n", ""),
			env:     map[string]string{"ORDERD_PROVIDER_API_KEY": "env-key"},
			wantErr: "provider.api_key_file: open " + missing,
		},
		{
			name:    "empty key file",
			yaml:    conf("  api_key_file: "+emptyFile+"\n", ""),
			wantErr: "provider.api_key_file: " + emptyFile + " is empty",
		},
		{
			name:    "no key anywhere names provider.api_key",
			yaml:    conf("", ""),
			wantErr: "provider.api_key: missing (set provider.api_key_file or ORDERD_PROVIDER_API_KEY)",
		},
		{
			name:      "admin token from the environment",
			yaml:      conf("", ""),
			env:       map[string]string{"ORDERD_PROVIDER_API_KEY": "env-key", "ORDERD_ADMIN_TOKEN": "env-token"},
			wantKey:   "env-key",
			wantToken: "env-token",
		},
		{
			name:      "admin token file beats the environment",
			yaml:      conf("", "  token_file: "+tokenFile+"\n"),
			env:       map[string]string{"ORDERD_PROVIDER_API_KEY": "env-key", "ORDERD_ADMIN_TOKEN": "env-token"},
			wantKey:   "env-key",
			wantToken: "file-token",
		},
		{
			name:    "admin token file unreadable",
			yaml:    conf("", "  token_file: "+missing+"\n"),
			env:     map[string]string{"ORDERD_PROVIDER_API_KEY": "env-key"},
			wantErr: "line 6: admin.token_file: open " + missing,
		},
		{
			name:    "admin token is never read from YAML",
			yaml:    conf("  api_key: k\n", "  token: secret\n"),
			wantErr: "admin.token: unknown key",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, t.TempDir(), "config.yaml", tt.yaml)
			cfg, err := LoadConfig(path, func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("LoadConfig accepted it; api key %q", cfg.Provider.APIKey.Reveal())
				}
				if !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "config "+path) {
					t.Errorf("error\n%s\ndoes not name the file and contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("LoadConfig: %v", err)
			}
			if got := cfg.Provider.APIKey.Reveal(); got != tt.wantKey {
				t.Errorf("api key = %q, want %q", got, tt.wantKey)
			}
			if got := cfg.Admin.Token.Reveal(); got != tt.wantToken {
				t.Errorf("admin token = %q, want %q", got, tt.wantToken)
			}
		})
	}
}

func TestConfig_SecretsNeverPrinted(t *testing.T) {
	dir := t.TempDir()
	tokenFile := writeFile(t, dir, "nats-token", "nats-s3cret")
	path := writeFile(t, dir, "config.yaml", `provider:
  base_url: https://user:url-s3cret@api.provider.example
  api_key: key-s3cret
  public_keys: [k.pem]
nats:
  url: nats://orderd:nats-pass-s3cret@nats.example:4222
  token_file: `+tokenFile+`
`)
	env := map[string]string{"ORDERD_ADMIN_TOKEN": "admin-s3cret"}
	cfg, err := LoadConfig(path, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NATS.Token.Reveal() != "nats-s3cret" || cfg.Admin.Token.Reveal() != "admin-s3cret" {
		t.Fatalf("secrets not resolved: nats %q admin %q", cfg.NATS.Token.Reveal(), cfg.Admin.Token.Reveal())
	}

	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("start", "config", cfg, "key", cfg.Provider.APIKey)
	var zapLogged bytes.Buffer
	lg, err := newLogging(LogConfig{Level: "info", Format: "json"}, &zapLogged, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	lg.Logger.Info("start", "config", cfg, "key", cfg.Provider.APIKey, "token", cfg.Admin.Token)

	outputs := map[string]string{
		"String":   cfg.String(),
		"%v":       fmt.Sprintf("%v", cfg),
		"%+v":      fmt.Sprintf("%+v", *cfg),
		"%#v":      fmt.Sprintf("%#v", *cfg),
		"slog":     logged.String(),
		"zap slog": zapLogged.String(),
	}
	for name, out := range outputs {
		for _, secret := range []string{"key-s3cret", "nats-s3cret", "admin-s3cret", "url-s3cret", "nats-pass-s3cret"} {
			if strings.Contains(out, secret) {
				t.Errorf("%s output shows %q:\n%s", name, secret, out)
			}
		}
	}
	if !strings.Contains(cfg.String(), "api_key: '[redacted]'") {
		t.Errorf("String does not show the key as redacted:\n%s", cfg.String())
	}
	if !strings.Contains(zapLogged.String(), `"store":"/var/lib/orderd/orderd.db"`) {
		t.Errorf("the logged config lacks the store path: %s", zapLogged.String())
	}
}

// TestConfigExample checks that config.example.yaml, with the provider's
// API root the operator must supply filled in, parses and validates, sets
// every key orderd knows, and shows each key's true default.
func TestConfigExample(t *testing.T) {
	example, err := os.ReadFile(filepath.Join("..", "..", "config.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	filled := strings.Replace(string(example), `base_url: ""`, "base_url: https://api.provider.example", 1)
	if filled == string(example) {
		t.Fatal(`config.example.yaml has no line base_url: ""`)
	}
	path := writeFile(t, t.TempDir(), "config.yaml", filled)
	env := map[string]string{"ORDERD_PROVIDER_API_KEY": "example-key"}
	cfg, err := LoadConfig(path, func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("LoadConfig(config.example.yaml with base_url set): %v", err)
	}

	for _, key := range yamlKeys(reflect.TypeFor[Config](), "") {
		if _, ok := cfg.lines[key]; !ok {
			t.Errorf("config.example.yaml does not show %s", key)
		}
	}

	// Apart from the provider keys that have no default, the example's
	// values are the defaults.
	want := DefaultConfig()
	want.Provider.BaseURL = cfg.Provider.BaseURL
	want.Provider.APIKey = cfg.Provider.APIKey
	want.Provider.PublicKeys = cfg.Provider.PublicKeys
	want.Receiver.AllowedIPs = []netip.Prefix{}
	want.Receiver.TrustedProxies = []netip.Prefix{}
	want.lines, want.file = cfg.lines, cfg.file
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("config.example.yaml differs from the defaults:\nexample:\n%s\ndefaults:\n%s", cfg, want)
	}
}

// yamlKeys lists every key path of a config struct type.
func yamlKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || tag == "" || tag == "-" {
			continue
		}
		key := join(prefix, tag)
		keys = append(keys, key)
		if f.Type.Kind() == reflect.Struct && f.Type != prefixType && f.Type != decimalType {
			keys = append(keys, yamlKeys(f.Type, key)...)
		}
	}
	return keys
}

func TestParseByteSize(t *testing.T) {
	tests := []struct {
		in   string
		want ByteSize
		err  bool
	}{
		{in: "0", want: 0},
		{in: "1048576", want: 1 << 20},
		{in: "64MiB", want: 64 << 20},
		{in: "1 GiB", want: 1 << 30},
		{in: "2gb", want: 2_000_000_000},
		{in: "10KB", want: 10_000},
		{in: "7B", want: 7},
		{in: "1.5GiB", err: true},
		{in: "-1", err: true},
		{in: "MiB", err: true},
		{in: "12 parsecs", err: true},
		{in: "99999999999TiB", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseByteSize(tt.in)
			if tt.err {
				if err == nil {
					t.Fatalf("ParseByteSize(%q) = %d, want an error", tt.in, got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseByteSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
			// String gives back something ParseByteSize reads as the same size.
			again, err := ParseByteSize(got.String())
			if err != nil || again != got {
				t.Errorf("round trip through %q gave %d, %v", got.String(), again, err)
			}
		})
	}
}

func TestRun_ConfigErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{"unknown key", withLines("receiver:\n  recieve: x"), "receiver.recieve: unknown key"},
		{"bad duration", withLines("shutdown_timeout: soon"), `shutdown_timeout: "soon" is not a duration`},
		{"bad nested duration", withLines("publish:\n  retention: a week"), `publish.retention: "a week" is not a duration`},
		{"bad address", withLines("receiver:\n  listen: x"), `receiver.listen: "x" is not host:port`},
		{"bad CIDR", withLines("receiver:\n  trusted_proxies: [300.1.1.1]"), `receiver.trusted_proxies[0]: "300.1.1.1" is not an IP address or CIDR`},
		{"bad cron spec", withLines("reconcile:\n  schedules:\n    balances: sometimes"), `reconcile.schedules.balances: "sometimes" is not a cron spec`},
		{"missing provider key", "provider:\n  base_url: https://p.example\n  public_keys: [k.pem]\n", "provider.api_key: missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, dir, strings.ReplaceAll(tt.name, " ", "-")+".yaml", tt.yaml)
			// -config after the command, before it, and from the environment.
			for _, args := range [][]string{
				{"run", "-config", path},
				{"-config", path, "run"},
			} {
				r := runOrderd(t, nil, nil, args...)
				assertConfigFailure(t, r, path, tt.want)
			}
			r := runOrderd(t, map[string]string{"ORDERD_CONFIG": path}, nil, "run")
			assertConfigFailure(t, r, path, tt.want)
		})
	}

	t.Run("missing config file", func(t *testing.T) {
		path := filepath.Join(dir, "absent.yaml")
		r := runOrderd(t, nil, nil, "run", "-config", path)
		assertConfigFailure(t, r, "", "open "+path+": no such file or directory")
		// Where a configuration comes from, and how to try orderd
		// without one.
		for _, w := range []string{"-config FILE", "ORDERD_CONFIG", "orderd sandbox"} {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("stderr does not name %s:\n%s", w, r.stderr)
			}
		}
	})
	t.Run("flag beats environment", func(t *testing.T) {
		bad := writeFile(t, dir, "flag.yaml", withLines("log:\n  level: loud"))
		r := runOrderd(t, map[string]string{"ORDERD_CONFIG": filepath.Join(dir, "absent.yaml")}, nil, "run", "-config", bad)
		assertConfigFailure(t, r, bad, `log.level: "loud"`)
	})
}

func assertConfigFailure(t *testing.T, r result, path, want string) {
	t.Helper()
	if r.code != 2 {
		t.Errorf("exit code %d, want 2; stderr:\n%s", r.code, r.stderr)
	}
	prefix := "orderd run: config"
	if path != "" {
		prefix += " " + path + ": "
	}
	if !strings.Contains(r.stderr, prefix) || !strings.Contains(r.stderr, want) {
		t.Errorf("stderr\n%s\ndoes not say %q for %s", r.stderr, want, path)
	}
}

// FuzzParseConfig checks that no input makes the parser or the validator
// panic, that every rejection is a *configError, and that an accepted,
// valid config survives a trip through its own String form.
func FuzzParseConfig(f *testing.F) {
	example, err := os.ReadFile(filepath.Join("..", "..", "config.example.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(example))
	f.Add(validYAML)
	f.Add(withLines("receiver:\n  allowed_ips: [10.0.0.1, \"::1\"]\n  max_body_bytes: 2MiB", "reconcile:\n  drift_tolerance: {usd: 0.10, EUR: \"1\"}"))
	f.Add("a: &x [1, 2]\nb: *x\n")
	f.Add("receiver:\n  listen: :1\n  listen: :2\n")
	f.Add("provider: {timeout: 1h1m1s, rate_limit: .5}\n")
	f.Add("- [\n")
	f.Fuzz(func(t *testing.T, in string) {
		cfg, err := ParseConfig(strings.NewReader(in))
		if err != nil {
			var ce *configError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v (%T) is not a *configError", err, err)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			return
		}
		first := cfg.String()
		again, err := ParseConfig(strings.NewReader(first))
		if err != nil {
			t.Fatalf("String output does not parse: %v\n%s", err, first)
		}
		if second := again.String(); second != first {
			t.Fatalf("round trip changed the config:\n%s\nthen\n%s", first, second)
		}
	})
}

// TestConfigExample_unchanged: the example used as it is installed
// (copied to config.yaml, the API key in the environment) does not start:
// it exits 2 naming provider.base_url, the value only the operator can
// supply, rather than run against a made-up provider.
func TestConfigExample_unchanged(t *testing.T) {
	path, err := filepath.Abs(filepath.Join("..", "..", "config.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"ORDERD_PROVIDER_API_KEY": "example-key"}
	_, err = LoadConfig(path, func(k string) string { return env[k] })
	var ce *configError
	if !errors.As(err, &ce) || ce.Key != "provider.base_url" || strings.Count(err.Error(), "\n") != 0 {
		t.Errorf("LoadConfig(config.example.yaml) = %v; want one error, naming provider.base_url", err)
	}
	r := runOrderd(t, env, nil, "run", "-config", path)
	assertConfigFailure(t, r, path, "provider.base_url: missing")
}

// TestRun_ConfigErrorsTogether: every problem of a configuration file is
// named in one run, each with its key and line, in the file's order: a
// value of the wrong type, an invalid value, a missing secret, a key file
// that is not there and a store directory that is not there.
func TestRun_ConfigErrorsTogether(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "config.yaml", fmt.Sprintf(`provider:
  base_url: https://p.example
  timeout: "5"
  api_key_file: %[1]s/absent-key
  public_keys: [%[1]s/absent.pem]
reconcile:
  schedules:
    stale: "every minute"
store:
  path: %[1]s/absent-dir/orderd.db
receiver:
  listen: x
`, dir))
	r := runOrderd(t, nil, nil, "run", "-config", path)
	if r.code != 2 {
		t.Fatalf("exit %d, want 2; stderr:\n%s", r.code, r.stderr)
	}
	want := []string{
		`line 3: provider.timeout: "5" is not a duration`,
		"line 4: provider.api_key_file: ",
		"line 5: provider.public_keys[0]: public key file: ",
		`line 8: reconcile.schedules.stale: "every minute" is not a cron spec`,
		"line 10: store.path: directory " + dir + "/absent-dir does not exist",
		`line 12: receiver.listen: "x" is not host:port`,
	}
	at := 0
	for _, w := range want {
		i := strings.Index(r.stderr[at:], w)
		if i < 0 {
			t.Errorf("stderr does not say %q (after the ones before it):\n%s", w, r.stderr)
			continue
		}
		at += i + len(w)
	}
	// The missing key file is named once, not again as a missing key.
	if strings.Contains(r.stderr, "provider.api_key:") {
		t.Errorf("stderr names provider.api_key as well as its file:\n%s", r.stderr)
	}
}

// TestLoadConfig_undecodedKeyNamedOnce: a key whose value does not
// decode is named for that, not again by a check that saw its default.
func TestLoadConfig_undecodedKeyNamedOnce(t *testing.T) {
	path := writeFile(t, t.TempDir(), "config.yaml", `provider:
  base_url: https://p.example
  api_key: k
  public_keys: 5
`)
	_, err := LoadConfig(path, func(string) string { return "" })
	if err == nil || strings.Count(err.Error(), "provider.public_keys") != 1 || !strings.Contains(err.Error(), "want a list") {
		t.Errorf("LoadConfig = %v; want provider.public_keys named once, for its value", err)
	}
}

// A configuration file far larger than any configuration (a YAML parser's
// tree is tens of times its text) is refused before it is parsed, with
// exit 2.
func TestLoadConfig_TooLarge(t *testing.T) {
	dir := t.TempDir()
	big := "# " + strings.Repeat("x", maxConfigBytes) + "\nprovider:\n  base_url: https://api.provider.example\n"
	path := writeFile(t, dir, "config.yaml", big)
	_, err := LoadConfig(path, func(string) string { return "" })
	var ce *configError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "more than 1024 KiB") {
		t.Fatalf("LoadConfig of a %d-byte file = %v, want a configError naming the file and the limit", len(big), err)
	}
	r := runOrderd(t, nil, nil, "migrate", "-config", path)
	if r.code != 2 || !strings.Contains(r.stderr, "more than 1024 KiB") {
		t.Errorf("migrate with it: exit %d, stderr %.200q; want 2", r.code, r.stderr)
	}
}
