package main

import (
	"bytes"
	"cmp"
	"crypto"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/shopspring/decimal"
	"go.yaml.in/yaml/v3"

	"orderd/cluster"
	"orderd/internal/telemetry"
	"orderd/provider"
	"orderd/publish"
	"orderd/store"
)

// Environment variables that hold secrets. They are documented in
// config.example.yaml and docs/configuration.md.
const (
	envProviderAPIKey = "ORDERD_PROVIDER_API_KEY"
	envAdminToken     = "ORDERD_ADMIN_TOKEN"
	envConfigPath     = "ORDERD_CONFIG"
	defaultConfigPath = "/etc/orderd/config.yaml"
)

// scheduleOff disables a scheduled job in reconcile.schedules.
const scheduleOff = "off"

// providerAnswerLimit is how long the provider waits for a webhook answer
// before it counts the delivery as failed (spec, "Events").
const providerAnswerLimit = 3 * time.Second

// Config is orderd's whole configuration, as read from YAML. Field names
// mirror the YAML keys; config.example.yaml documents every key and default.
//
// Secrets (the provider's API key, the admin token, the NATS token) are of
// type Secret, which never prints its value; read it with Secret.Reveal.
type Config struct {
	Provider  ProviderConfig  `yaml:"provider"`
	Receiver  ReceiverConfig  `yaml:"receiver"`
	Admin     AdminConfig     `yaml:"admin"`
	Store     StoreConfig     `yaml:"store"`
	NATS      NATSConfig      `yaml:"nats"`
	Publish   PublishConfig   `yaml:"publish"`
	Reconcile ReconcileConfig `yaml:"reconcile"`
	Reports   ReportsConfig   `yaml:"reports"`
	Log       LogConfig       `yaml:"log"`
	Cluster   ClusterConfig   `yaml:"cluster"`
	Telemetry TelemetryConfig `yaml:"telemetry"`

	// ShutdownTimeout bounds a graceful stop: HTTP, cron, relay flush,
	// NATS drain and the database close must fit in it. The systemd unit's
	// TimeoutStopSec is longer.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`

	// file is the path LoadConfig read, and lines maps a key path
	// ("receiver.listen") to the line it was set on, so that errors found
	// after parsing can point at both as well as the key.
	file  string
	lines map[string]int
	// warnings are problems worth an operator's attention that do not stop
	// orderd, such as a secret file other users can read; run logs them.
	warnings []string
}

// Warnings returns what loading found worth a warning, each naming the key.
func (c *Config) Warnings() []string { return c.warnings }

// ProviderConfig is how orderd reaches and trusts the payment provider.
type ProviderConfig struct {
	// BaseURL is the provider's API root, e.g. https://api.example.com.
	BaseURL string `yaml:"base_url"`
	// APIKey authenticates every call. LoadConfig resolves it from
	// APIKeyFile, then ORDERD_PROVIDER_API_KEY, then the inline value.
	APIKey     Secret `yaml:"api_key"`
	APIKeyFile string `yaml:"api_key_file"`
	// PublicKeys are PEM files with the provider's webhook signing keys;
	// several at once during a key rotation.
	PublicKeys []string `yaml:"public_keys"`
	// Timeout bounds one call to the provider.
	Timeout time.Duration `yaml:"timeout"`
	// RateLimit is requests per second over every call to the provider,
	// a token bucket of RateBurst tokens.
	RateLimit float64 `yaml:"rate_limit"`
	RateBurst int     `yaml:"rate_burst"`
}

// ReceiverConfig is the webhook listener.
type ReceiverConfig struct {
	Listen string `yaml:"listen"`
	Path   string `yaml:"path"`
	// AllowedIPs limits who may post webhooks; empty allows everyone (the
	// signature still has to verify). A bare IP in the YAML is a /32 or /128.
	AllowedIPs []netip.Prefix `yaml:"allowed_ips"`
	// TrustedProxies are the peers whose X-Forwarded-For is believed.
	TrustedProxies []netip.Prefix `yaml:"trusted_proxies"`
	MaxBodyBytes   ByteSize       `yaml:"max_body_bytes"`
	// AckBudget is how long the handler waits for the commit before it
	// answers 503; it must stay below the provider's 3 s.
	AckBudget time.Duration `yaml:"ack_budget"`
	// PublicURL is this receiver as the provider reaches it; the gateway
	// sets it as webhookUrl on creations that have none.
	PublicURL string `yaml:"public_url"`
	// MaxConnections caps the webhook listener's open connections, so
	// that one client cannot take the file descriptors the admin listener
	// needs; 0 means half the process's open-file limit, at most 4096.
	MaxConnections int `yaml:"max_connections"`
}

// AdminConfig is the admin listener (health, metrics, API, dashboard).
type AdminConfig struct {
	Listen    string `yaml:"listen"`
	TokenFile string `yaml:"token_file"`
	// Token is resolved by LoadConfig from TokenFile or ORDERD_ADMIN_TOKEN;
	// empty means the admin API takes no token. It is never read from YAML.
	Token Secret `yaml:"-"`
	// Pprof serves Go's profiles under /debug/pprof/ on the admin
	// listener, behind the token like the API; off by default.
	Pprof bool `yaml:"pprof"`
}

// StoreConfig is the SQLite database.
type StoreConfig struct {
	Path string `yaml:"path"`
	// MigrationBatch is how many rows a background migration rewrites
	// per transaction.
	MigrationBatch int `yaml:"migration_batch"`
	// MigrationPause is a wait after each of a background migration's
	// batches, for a disk that webhooks need all of; 0 means none (the
	// migration still gives way to webhooks that are waiting).
	MigrationPause time.Duration `yaml:"migration_pause"`
}

// NATSConfig is where events go: an external NATS server when URL is set,
// otherwise an embedded one.
type NATSConfig struct {
	// URL is one or more comma-separated server URLs; empty starts the
	// embedded server.
	URL             string `yaml:"url"`
	CredentialsFile string `yaml:"credentials_file"`
	TokenFile       string `yaml:"token_file"`
	// Token is resolved by LoadConfig from TokenFile; never read from YAML.
	Token    Secret             `yaml:"-"`
	TLS      NATSTLSConfig      `yaml:"tls"`
	Embedded EmbeddedNATSConfig `yaml:"embedded"`
	Stream   string             `yaml:"stream"`
	// SubjectPrefix replaces the leading "orderd" of every subject; the
	// stream takes "<prefix>.>".
	SubjectPrefix   string        `yaml:"subject_prefix"`
	DuplicateWindow time.Duration `yaml:"duplicate_window"`
	// MaxAge and MaxBytes limit the stream; zero means no limit.
	MaxAge   time.Duration `yaml:"max_age"`
	MaxBytes ByteSize      `yaml:"max_bytes"`
	// UnreachableReadyAfter is how long NATS may be unreachable, or the
	// oldest unpublished event wait, before /readyz fails.
	UnreachableReadyAfter time.Duration `yaml:"unreachable_ready_after"`
	// Replicas of the events stream; 0 means 1, or cluster.replicas when
	// the cluster is enabled (see EventReplicas).
	Replicas int `yaml:"replicas"`
}

// ClusterConfig is replicated mode: several instances on a NATS cluster,
// every write in a replicated log (see docs/replicated-mode.md).
type ClusterConfig struct {
	Enabled bool `yaml:"enabled"`
	// Node is this instance's unique name; default the host name.
	Node string `yaml:"node"`
	// LogStream names the log's stream; the lease bucket and the snapshot
	// store are named after it.
	LogStream string `yaml:"log_stream"`
	// Replicas of the log, the lease and the snapshots.
	Replicas int `yaml:"replicas"`
	// LeaseTTL is how long the leader's lease lasts unrenewed; a dead
	// leader is replaced within two of it.
	LeaseTTL time.Duration `yaml:"lease_ttl"`
	// SnapshotEvery is how often the leader writes a snapshot.
	SnapshotEvery time.Duration `yaml:"snapshot_every"`
	// LogMaxAge bounds the log; it must be well above SnapshotEvery.
	LogMaxAge time.Duration `yaml:"log_max_age"`
	// SnapshotReadRate bounds how fast a snapshot reads the database, a
	// second; 0 reads at full speed.
	SnapshotReadRate ByteSize `yaml:"snapshot_read_rate"`
	// DigestEvery is how many log sequences apart the instances digest
	// their replicated state and compare the digests.
	DigestEvery int `yaml:"digest_every"`
}

// NodeName is cluster.node, or the host name when it is empty (empty
// when that cannot be read; then cluster.node must be set).
func (c ClusterConfig) NodeName() string {
	if c.Node != "" {
		return c.Node
	}
	h, _ := os.Hostname()
	return h
}

// EventSchemaURL is the URL every event's dataschema starts with:
// publish.schema_url when set, else the AsyncAPI document on this
// instance's admin listener (loopback when it listens on every address).
func (c *Config) EventSchemaURL() string {
	if c.Publish.SchemaURL != "" {
		return c.Publish.SchemaURL
	}
	host, port, err := net.SplitHostPort(c.Admin.Listen)
	if err != nil {
		return publish.DefaultSchemaURL
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1" // listening everywhere: loopback reaches it
	}
	return "http://" + net.JoinHostPort(host, port) + "/v1/asyncapi.yaml"
}

// EventReplicas is the events stream's replica count: nats.replicas when
// set, else cluster.replicas in replicated mode, else 1.
func (c *Config) EventReplicas() int {
	switch {
	case c.NATS.Replicas > 0:
		return c.NATS.Replicas
	case c.Cluster.Enabled:
		return c.Cluster.Replicas
	}
	return 1
}

// NATSTLSConfig is TLS towards an external NATS server.
type NATSTLSConfig struct {
	CAFile   string `yaml:"ca_file"`
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// EmbeddedNATSConfig is the embedded NATS server, used when nats.url is empty.
type EmbeddedNATSConfig struct {
	Listen    string   `yaml:"listen"`
	StoreDir  string   `yaml:"store_dir"`
	MaxStore  ByteSize `yaml:"max_store"`
	MaxMemory ByteSize `yaml:"max_memory"`
}

// PublishConfig is the outbox relay.
type PublishConfig struct {
	// Retention is how long published outbox rows are kept before pruning.
	Retention time.Duration `yaml:"retention"`
	// Batch is how many outbox rows the relay reads and marks at once.
	Batch          int           `yaml:"batch"`
	PublishTimeout time.Duration `yaml:"publish_timeout"`
	// SchemaURL is where consumers fetch the AsyncAPI document of the
	// events: each event's dataschema is it plus a fragment naming its
	// data's schema. Empty: this instance's admin listener
	// (EventSchemaURL). Replicated instances should share one value, so
	// that an event names the same schema whichever instance published it.
	SchemaURL string `yaml:"schema_url"`
}

// ReconcileConfig is the reconciler.
type ReconcileConfig struct {
	StaleAfter  time.Duration `yaml:"stale_after"`
	GiveUpAfter time.Duration `yaml:"give_up_after"`
	// DoubtMinAge must exceed provider.timeout so that a creation still in
	// flight is never declared absent.
	DoubtMinAge    time.Duration `yaml:"doubt_min_age"`
	BoundaryWindow time.Duration `yaml:"boundary_window"`
	Schedules      Schedules     `yaml:"schedules"`
	Concurrency    int           `yaml:"concurrency"`
	// DriftTolerance is per lowercase currency; a currency not listed has
	// tolerance zero. See DriftToleranceFor.
	DriftTolerance map[string]decimal.Decimal `yaml:"drift_tolerance"`
	// DriftGrace is how many consecutive balance checks must leave an
	// amount unexplained before a balance_drift finding opens: a movement
	// the provider has made but orderd has not heard of yet explains itself
	// by the next check, and must not page finance.
	DriftGrace int `yaml:"drift_grace"`
	// UnresolvedAfter is how long an in-doubt creation may stay unsettled
	// before it becomes an unresolved_creation finding.
	UnresolvedAfter time.Duration `yaml:"unresolved_after"`
	// BackoffBase and BackoffMax shape the wait before an order, watch or
	// in-doubt creation whose check changed nothing (or failed) is checked
	// again: BackoffBase × 2^checks, at most BackoffMax.
	BackoffBase time.Duration `yaml:"backoff_base"`
	BackoffMax  time.Duration `yaml:"backoff_max"`
}

// DriftToleranceFor returns the drift tolerance for currency (zero when
// none is configured).
func (c ReconcileConfig) DriftToleranceFor(currency string) decimal.Decimal {
	return c.DriftTolerance[strings.ToLower(currency)]
}

// Schedules are robfig/cron specs, evaluated in UTC, or "off".
type Schedules struct {
	Stale      string `yaml:"stale"`
	Doubt      string `yaml:"doubt"`
	Balances   string `yaml:"balances"`
	Requisites string `yaml:"requisites"`
	Report     string `yaml:"report"`
}

// ReportsConfig is where scheduled reports are written.
type ReportsConfig struct {
	Dir string `yaml:"dir"`
	// CSVGuardFormulas prefixes a ' to CSV text cells that start with =,
	// +, -, @, a tab or a CR, for teams that open the CSV in a
	// spreadsheet; off, every value is written exactly as stored.
	CSVGuardFormulas bool `yaml:"csv_guard_formulas"`
}

// LogConfig selects the log level and encoding.
type LogConfig struct {
	// Level is debug, info, warn or error.
	Level string `yaml:"level"`
	// Format is auto (console on a terminal, JSON otherwise), json or console.
	Format string `yaml:"format"`
}

// TelemetryConfig turns on OpenTelemetry traces (docs/operations.md,
// Tracing).
type TelemetryConfig struct {
	// OTLPEndpoint is an OTLP/HTTP collector's base URL
	// (http://collector:4318); spans go to it + /v1/traces. Empty: the
	// standard OTEL_EXPORTER_OTLP_ENDPOINT, else tracing off.
	OTLPEndpoint string `yaml:"otlp_endpoint"`
}

// DefaultConfig returns the configuration used for every key the YAML does
// not set. Only the provider's base URL, API key and public keys have no
// default.
func DefaultConfig() *Config {
	return &Config{
		Provider: ProviderConfig{
			Timeout:   10 * time.Second,
			RateLimit: 10,
			RateBurst: 1,
		},
		Receiver: ReceiverConfig{
			Listen:       ":8080",
			Path:         "/webhooks/orders",
			MaxBodyBytes: 1 << 20,
			AckBudget:    2 * time.Second,
		},
		Admin: AdminConfig{Listen: "127.0.0.1:8081"},
		Store: StoreConfig{Path: "/var/lib/orderd/orderd.db", MigrationBatch: store.DefaultBackgroundBatch},
		NATS: NATSConfig{
			Embedded: EmbeddedNATSConfig{
				Listen:    "127.0.0.1:4222",
				StoreDir:  "/var/lib/orderd/nats",
				MaxStore:  1 << 30,
				MaxMemory: 64 << 20,
			},
			Stream:                "ORDERD",
			SubjectPrefix:         "orderd",
			DuplicateWindow:       20 * time.Minute,
			UnreachableReadyAfter: 30 * time.Second,
		},
		Publish: PublishConfig{
			Retention:      168 * time.Hour,
			Batch:          256,
			PublishTimeout: 5 * time.Second,
		},
		Reconcile: ReconcileConfig{
			StaleAfter:     5 * time.Minute,
			GiveUpAfter:    24 * time.Hour,
			DoubtMinAge:    time.Minute,
			BoundaryWindow: 10 * time.Second,
			Schedules: Schedules{
				Stale:      "@every 1m",
				Doubt:      "@every 30s",
				Balances:   "@every 15m",
				Requisites: "@every 5m",
				Report:     "0 1 * * *",
			},
			Concurrency:     4,
			DriftTolerance:  map[string]decimal.Decimal{},
			DriftGrace:      2,
			UnresolvedAfter: time.Hour,
			BackoffBase:     time.Minute,
			BackoffMax:      time.Hour,
		},
		Reports:         ReportsConfig{Dir: "/var/lib/orderd/reports"},
		Log:             LogConfig{Level: "info", Format: "auto"},
		ShutdownTimeout: 15 * time.Second,
		Cluster: ClusterConfig{
			LogStream:        cluster.DefaultLogStream,
			Replicas:         cluster.DefaultReplicas,
			LeaseTTL:         cluster.DefaultLeaseTTL,
			SnapshotEvery:    cluster.DefaultSnapshotEvery,
			LogMaxAge:        cluster.DefaultLogMaxAge,
			SnapshotReadRate: cluster.DefaultSnapshotReadRate,
			DigestEvery:      cluster.DefaultDigestEvery,
		},
	}
}

// configError is a problem with the configuration. It names the key (a
// dotted path such as "receiver.listen") and, when known, the file and line.
// It maps to exit status 2.
type configError struct {
	File    string
	Line    int
	Key     string
	Problem string
}

func (e *configError) Error() string {
	var b strings.Builder
	b.WriteString("config")
	if e.File != "" {
		b.WriteString(" " + e.File)
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, ": line %d", e.Line)
	}
	if e.Key != "" {
		b.WriteString(": " + e.Key)
	}
	b.WriteString(": " + e.Problem)
	return b.String()
}

// configUse says which parts of the configuration a command uses. A
// command reads only the secret files it uses and requires only the keys it
// uses, so that "orderd report" or "orderd tail" works on the host although
// provider.api_key_file names a credential that exists only inside the
// service. Every key that is set is still checked for its form: the file
// is the daemon's, and a mistake anywhere in it is worth hearing about.
type configUse struct {
	// Provider: provider.base_url and the API key (run, reconcile).
	Provider bool
	// PublicKeys: provider.public_keys (run).
	PublicKeys bool
	// Admin: the admin token (run).
	Admin bool
	// NATS: the NATS token (run, tail).
	NATS bool
	// Files: the files the daemon opens as it starts, checked with the
	// keys so that one run names every problem: provider.public_keys'
	// PEM files and store.path's directory (run).
	Files bool
}

// maxConfigBytes bounds the configuration file's size.
const maxConfigBytes = 1 << 20

// useAll is what the daemon uses: everything.
var useAll = configUse{Provider: true, PublicKeys: true, Admin: true, NATS: true}

// useDaemon is what orderd run loads: everything, and the files it opens
// as it starts.
var useDaemon = configUse{Provider: true, PublicKeys: true, Admin: true, NATS: true, Files: true}

// LoadConfig reads the YAML file at path, resolves secrets and validates
// the result, for the daemon, which uses every part of it. getenv supplies
// the environment (os.Getenv in main).
//
// Secrets are resolved in this order, first found wins:
//   - provider API key: provider.api_key_file, then $ORDERD_PROVIDER_API_KEY,
//     then provider.api_key in the YAML;
//   - admin token: admin.token_file, then $ORDERD_ADMIN_TOKEN;
//   - NATS token: nats.token_file.
//
// A file named in the YAML is the most explicit choice, so it beats the
// environment, and the environment beats a value written into the YAML.
// Every error is a *configError (or several, joined).
func LoadConfig(path string, getenv func(string) string) (*Config, error) {
	return LoadConfigFor(path, getenv, useAll)
}

// LoadConfigFor is LoadConfig for a command that uses only the parts of
// the configuration use names: the secrets of other parts are not read and
// their required keys may be missing.
func LoadConfigFor(path string, getenv func(string) string, use configUse) (*Config, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &configError{Problem: err.Error() + "; name the configuration file with -config FILE or " + envConfigPath +
			" (config.example.yaml shows every key), or try orderd first against a fake provider, with no configuration: orderd sandbox"}
	}
	if err != nil {
		return nil, &configError{Problem: err.Error()}
	}
	defer f.Close()
	// A YAML parser's tree is tens of times the size of its text: a file
	// far larger than any configuration is refused before it is parsed.
	text, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, &configError{File: path, Problem: err.Error()}
	}
	if len(text) > maxConfigBytes {
		return nil, &configError{File: path, Problem: fmt.Sprintf("more than %d KiB; a configuration is a few KiB", maxConfigBytes>>10)}
	}
	cfg, parseErr := parseConfig(bytes.NewReader(text))
	if cfg == nil {
		return nil, withFile(parseErr, path)
	}
	// Every problem of the file in one run: a key that does not decode
	// keeps its default, so the checks after it still see a whole
	// configuration and report the rest.
	cfg.file = path
	errs := []error{parseErr, cfg.resolveSecrets(getenv, use), cfg.validate(use)}
	if use.PublicKeys {
		errs = append(errs, cfg.resolveTelemetry(getenv))
	}
	if use.Files {
		errs = append(errs, cfg.checkFiles())
	}
	if err := collectConfigErrors(errs); err != nil {
		return nil, withFile(err, path)
	}
	return cfg, nil
}

// collectConfigErrors joins the problems found by each stage of loading,
// in the order of their lines in the file (problems of keys the file does
// not set, which have no line, last). A key that did not decode is named
// once, for what is wrong with its value, not again by the checks that saw
// its default in its place.
func collectConfigErrors(stages []error) error {
	var all []error
	var flatten func(error)
	flatten = func(err error) {
		if err == nil {
			return
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				flatten(e)
			}
			return
		}
		all = append(all, err)
	}
	flatten(stages[0])
	undecoded := len(all)
	for _, st := range stages[1:] {
		flatten(st)
	}
	keyOf := func(err error) string {
		var ce *configError
		if errors.As(err, &ce) {
			return ce.Key
		}
		return ""
	}
	covered := func(key string) bool {
		for _, e := range all[:undecoded] {
			k := keyOf(e)
			if k != "" && (key == k || strings.HasPrefix(key, k+".") || strings.HasPrefix(key, k+"[")) {
				return true
			}
		}
		return false
	}
	kept := all[:undecoded:undecoded]
	for _, e := range all[undecoded:] {
		if k := keyOf(e); k == "" || !covered(k) {
			kept = append(kept, e)
		}
	}
	if len(kept) == 0 {
		return nil
	}
	lineOf := func(err error) int {
		var ce *configError
		if errors.As(err, &ce) && ce.Line > 0 {
			return ce.Line
		}
		return math.MaxInt
	}
	slices.SortStableFunc(kept, func(a, b error) int { return cmp.Compare(lineOf(a), lineOf(b)) })
	return errors.Join(kept...)
}

// withFile sets the file name on every configError in err.
func withFile(err error, path string) error {
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	for _, e := range errs {
		var ce *configError
		if errors.As(e, &ce) {
			ce.File = path
		}
	}
	return err
}

// resolveTelemetry takes the standard OTEL_EXPORTER_OTLP_ENDPOINT when
// telemetry.otlp_endpoint is not set, for the commands that trace (the
// daemon). A malformed value is a configuration error naming the
// variable.
func (c *Config) resolveTelemetry(getenv func(string) string) error {
	if c.Telemetry.OTLPEndpoint != "" {
		return nil
	}
	v := strings.TrimSpace(getenv(telemetry.EnvEndpoint))
	if v == "" {
		return nil
	}
	if _, err := telemetry.TracesURL(v); err != nil {
		return &configError{Key: "$" + telemetry.EnvEndpoint, Problem: err.Error() + " (or set telemetry.otlp_endpoint)"}
	}
	c.Telemetry.OTLPEndpoint = v
	return nil
}

// resolveSecrets fills the secret fields of the parts in use from their
// files and the environment, in the order documented on LoadConfig. Secret
// files must be regular files of at most maxSecretFileBytes (see
// openSecretFile); one that other users can read is a warning, and one
// that its group or other users can write is refused (checkPerm). The NATS
// credentials and TLS files, which the NATS client reads itself, are
// checked the same way.
func (c *Config) resolveSecrets(getenv func(string) string, use configUse) error {
	var errs []error
	// checkPerm refuses a file others can write and warns about a secret
	// that others can read; it reports whether the file may be used.
	checkPerm := func(key, path string, perm fs.FileMode, secret bool) bool {
		if err := c.checkWritableByOthers(key, path, perm); err != nil {
			errs = append(errs, err)
			return false
		}
		if secret && othersCanRead(perm) {
			c.warnings = append(c.warnings, fmt.Sprintf("%s: %s is readable by other users; make it readable by orderd only (chmod 600) or pass it as a systemd credential", key, path))
		}
		return true
	}
	fromFile := func(key, path string) (Secret, bool) {
		if path == "" {
			return "", false
		}
		b, perm, err := readSecretFile(path)
		if err != nil {
			errs = append(errs, c.errorf(key, "%v", err))
			return "", false
		}
		if !checkPerm(key, path, perm, true) {
			return "", false
		}
		s := strings.TrimSpace(string(b))
		if s == "" {
			errs = append(errs, c.errorf(key, "%s is empty", path))
			return "", false
		}
		return Secret(s), true
	}
	checkFile := func(key, path string, secret bool) {
		if path == "" {
			return
		}
		perm, err := checkSecretFile(path)
		if err != nil {
			errs = append(errs, c.errorf(key, "%v", err))
			return
		}
		checkPerm(key, path, perm, secret)
	}
	if use.NATS {
		checkFile("nats.credentials_file", c.NATS.CredentialsFile, true)
		checkFile("nats.tls.key_file", c.NATS.TLS.KeyFile, true)
		checkFile("nats.tls.cert_file", c.NATS.TLS.CertFile, false)
		checkFile("nats.tls.ca_file", c.NATS.TLS.CAFile, false)
	}

	if !use.Provider {
		c.Provider.APIKey = ""
	} else if s, ok := fromFile("provider.api_key_file", c.Provider.APIKeyFile); ok {
		c.Provider.APIKey = s
	} else if v := strings.TrimSpace(getenv(envProviderAPIKey)); v != "" && c.Provider.APIKeyFile == "" {
		c.Provider.APIKey = Secret(v)
	}
	if !use.Admin {
		c.Admin.Token = ""
	} else if s, ok := fromFile("admin.token_file", c.Admin.TokenFile); ok {
		c.Admin.Token = s
	} else if v := strings.TrimSpace(getenv(envAdminToken)); v != "" && c.Admin.TokenFile == "" {
		c.Admin.Token = Secret(v)
	}
	if !use.NATS {
		c.NATS.Token = ""
	} else if s, ok := fromFile("nats.token_file", c.NATS.TokenFile); ok {
		c.NATS.Token = s
	}
	return errors.Join(errs...)
}

// errorf builds a configError for key, with the line the key was set on.
func (c *Config) errorf(key, format string, args ...any) *configError {
	return &configError{File: c.file, Line: c.lines[key], Key: key, Problem: fmt.Sprintf(format, args...)}
}

// checkWritableByOthers refuses a key, secret or certificate file that
// users other than its owner can change (group- or world-writable):
// whoever can write it can swap the key orderd trusts, and a warning in a
// log does not undo a forged webhook. The error names the file and the fix.
func (c *Config) checkWritableByOthers(key, path string, perm fs.FileMode) error {
	if !othersCanWrite(perm) {
		return nil
	}
	return c.errorf(key, "%s can be changed by users other than its owner (mode %04o): anyone who can write it can swap the key orderd trusts; "+
		"make it writable by its owner only (chmod go-w %s; chmod 600 %s for a secret) and check that it holds what it should", path, perm, path, path)
}

// ProviderPublicKeys loads the PEM files of provider.public_keys, at start
// and again on a reload. An error is a *configError naming the list entry
// (provider.public_keys[1]) and its line, so a missing or malformed key
// file exits with status 2 and says which one.
func (c *Config) ProviderPublicKeys() ([]crypto.PublicKey, error) {
	if len(c.Provider.PublicKeys) == 0 {
		return nil, c.errorf("provider.public_keys", "missing (PEM files with the provider's webhook signing keys)")
	}
	var keys []crypto.PublicKey
	var errs []error
	for i, f := range c.Provider.PublicKeys {
		key := fmt.Sprintf("provider.public_keys[%d]", i)
		b, perm, err := readSecretFile(f)
		if err != nil {
			errs = append(errs, c.errorf(key, "public key file: %v", err))
			continue
		}
		if err := c.checkWritableByOthers(key, f, perm); err != nil {
			errs = append(errs, err)
			continue
		}
		ks, err := provider.ParsePublicKeys(b)
		if err != nil {
			errs = append(errs, c.errorf(key, "public key file %s: %v", f, err))
			continue
		}
		keys = append(keys, ks...)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if _, err := provider.NewVerifier(keys...); err != nil {
		return nil, c.errorf("provider.public_keys", "%v", err)
	}
	return keys, nil
}

// checkFiles checks the files the daemon opens as it starts (configUse's
// Files), each problem a *configError naming its key.
func (c *Config) checkFiles() error {
	var errs []error
	// A missing list is validate's to report; an empty entry too.
	if len(c.Provider.PublicKeys) > 0 && !slices.ContainsFunc(c.Provider.PublicKeys, func(k string) bool { return strings.TrimSpace(k) == "" }) {
		if _, err := c.ProviderPublicKeys(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Store.Path != "" {
		if err := c.checkStorePath(false); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// checkStorePath makes a store.path that cannot be opened a configuration
// error naming the key, before SQLite reports it as "unable to open
// database file (14)": its directory must exist, and so must the file
// itself when the command only reads it (mustExist).
func (c *Config) checkStorePath(mustExist bool) error {
	dir := filepath.Dir(c.Store.Path)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return c.errorf("store.path", "directory %s does not exist (create it, or point store.path into an existing one)", dir)
	case err != nil:
		return c.errorf("store.path", "%v", err)
	case !fi.IsDir():
		return c.errorf("store.path", "%s is not a directory", dir)
	}
	if !mustExist {
		return nil
	}
	if _, err := os.Stat(c.Store.Path); errors.Is(err, fs.ErrNotExist) {
		return c.errorf("store.path", "%s does not exist (orderd run or orderd migrate creates it)", c.Store.Path)
	} else if err != nil {
		return c.errorf("store.path", "%v", err)
	}
	return nil
}

var (
	subjectTokenRE = regexp.MustCompile(`^[a-z0-9_-]+$`)
	streamNameRE   = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	currencyRE     = regexp.MustCompile(`^[a-z0-9]+$`)
)

// Validate checks every key and reports each problem with the key's name.
// It does no I/O: files named in the config are opened by whoever uses them.
func (c *Config) Validate() error {
	return c.validate(useAll)
}

// validate is Validate for the parts in use: keys that only other parts
// require may be missing, though every key set must have a valid form.
func (c *Config) validate(use configUse) error {
	var errs []error
	add := func(key, format string, args ...any) {
		errs = append(errs, c.errorf(key, format, args...))
	}
	positive := func(key string, d time.Duration) {
		if d <= 0 {
			add(key, "must be a positive duration (got %s)", d)
		}
	}
	notNegative := func(key string, d time.Duration) {
		if d < 0 {
			add(key, "must not be negative (got %s)", d)
		}
	}
	listen := func(key, addr string) {
		if err := checkHostPort(addr); err != nil {
			add(key, "%q is not host:port (%v)", addr, err)
		}
	}
	httpURL := func(key, s string) {
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add(key, "%q is not an http(s) URL", s)
		}
	}
	required := func(key, s string) {
		if strings.TrimSpace(s) == "" {
			add(key, "must not be empty")
		}
	}

	// provider
	p := c.Provider
	if p.BaseURL == "" {
		if use.Provider {
			add("provider.base_url", "missing (the provider's API root, e.g. https://api.example.com)")
		}
	} else {
		httpURL("provider.base_url", p.BaseURL)
	}
	// With api_key_file set, an empty key is the file's problem, which
	// loading names under api_key_file.
	if p.APIKey == "" && use.Provider && p.APIKeyFile == "" {
		add("provider.api_key", "missing (set provider.api_key_file or %s)", envProviderAPIKey)
	}
	if len(p.PublicKeys) == 0 && use.PublicKeys {
		add("provider.public_keys", "missing (PEM files with the provider's webhook signing keys)")
	}
	for i, k := range p.PublicKeys {
		if strings.TrimSpace(k) == "" {
			add(fmt.Sprintf("provider.public_keys[%d]", i), "must not be empty")
		}
	}
	positive("provider.timeout", p.Timeout)
	if !(p.RateLimit > 0) || math.IsInf(p.RateLimit, 0) {
		add("provider.rate_limit", "must be a positive number of requests per second (got %v)", p.RateLimit)
	}
	if p.RateBurst < 1 {
		add("provider.rate_burst", "must be at least 1 (got %d)", p.RateBurst)
	}

	// receiver
	r := c.Receiver
	listen("receiver.listen", r.Listen)
	if !strings.HasPrefix(r.Path, "/") {
		add("receiver.path", "%q must start with /", r.Path)
	}
	if r.MaxConnections < 0 {
		add("receiver.max_connections", "must not be negative (got %d; 0 means automatic)", r.MaxConnections)
	}
	if limit := ByteSize(publish.MaxPayloadLimit - publish.EventOverhead); r.MaxBodyBytes > limit {
		add("receiver.max_body_bytes", "%d is more than an event can carry: NATS messages are at most %d bytes, so at most %d", r.MaxBodyBytes, publish.MaxPayloadLimit, limit)
	}
	if r.MaxBodyBytes <= 0 {
		add("receiver.max_body_bytes", "must be positive (got %d)", r.MaxBodyBytes)
	}
	positive("receiver.ack_budget", r.AckBudget)
	if r.AckBudget >= providerAnswerLimit {
		add("receiver.ack_budget", "%s is not below the provider's %s answer limit", r.AckBudget, providerAnswerLimit)
	}
	if r.PublicURL != "" {
		httpURL("receiver.public_url", r.PublicURL)
	}

	// admin
	listen("admin.listen", c.Admin.Listen)
	if sameFixedAddress(c.Admin.Listen, r.Listen) {
		add("admin.listen", "%q is also receiver.listen", c.Admin.Listen)
	}

	required("store.path", c.Store.Path)

	// nats
	n := c.NATS
	if n.URL != "" {
		for _, s := range strings.Split(n.URL, ",") {
			u, err := url.Parse(strings.TrimSpace(s))
			if err != nil || u.Host == "" || !slices.Contains([]string{"nats", "tls", "ws", "wss"}, u.Scheme) {
				add("nats.url", "%q is not a NATS URL (nats://host:port)", redactURL(strings.TrimSpace(s)))
			}
		}
	} else {
		listen("nats.embedded.listen", n.Embedded.Listen)
		required("nats.embedded.store_dir", n.Embedded.StoreDir)
	}
	if (n.TLS.CertFile == "") != (n.TLS.KeyFile == "") {
		add("nats.tls", "cert_file and key_file must be set together")
	}
	if n.CredentialsFile != "" && n.TokenFile != "" {
		add("nats.token_file", "set either nats.credentials_file or nats.token_file, not both")
	}
	if n.Embedded.MaxStore <= 0 {
		add("nats.embedded.max_store", "must be positive (got %d)", n.Embedded.MaxStore)
	}
	if n.Embedded.MaxMemory <= 0 {
		add("nats.embedded.max_memory", "must be positive (got %d)", n.Embedded.MaxMemory)
	}
	if !streamNameRE.MatchString(n.Stream) {
		add("nats.stream", "%q is not a stream name (letters, digits, _ and -)", n.Stream)
	}
	if !subjectTokenRE.MatchString(n.SubjectPrefix) {
		add("nats.subject_prefix", "%q is not one subject token (lowercase a-z, 0-9, _ and -; no dots or wildcards)", n.SubjectPrefix)
	}
	positive("nats.duplicate_window", n.DuplicateWindow)
	notNegative("nats.max_age", n.MaxAge)
	if n.MaxAge > 0 && n.MaxAge < n.DuplicateWindow {
		add("nats.max_age", "%s is shorter than nats.duplicate_window (%s)", n.MaxAge, n.DuplicateWindow)
	}
	if n.MaxBytes < 0 {
		add("nats.max_bytes", "must not be negative (got %d)", n.MaxBytes)
	}
	if n.URL == "" && n.MaxBytes > n.Embedded.MaxStore {
		add("nats.max_bytes", "%s exceeds nats.embedded.max_store (%s)", n.MaxBytes, n.Embedded.MaxStore)
	}
	positive("nats.unreachable_ready_after", n.UnreachableReadyAfter)
	if n.Replicas < 0 || n.Replicas > 5 {
		add("nats.replicas", "must be 1 to 5 (got %d)", n.Replicas)
	}
	if n.URL == "" && n.Replicas > 1 {
		add("nats.replicas", "%d replicas need a NATS cluster (nats.url); the embedded server is one node", n.Replicas)
	}

	// cluster
	cl := c.Cluster
	if cl.Enabled && n.URL == "" {
		add("cluster.enabled", "replicated mode needs a NATS cluster: set nats.url (the embedded server is one node on this machine's disk)")
	}
	if cl.Enabled && strings.TrimSpace(cl.NodeName()) == "" {
		add("cluster.node", "must not be empty (a unique name per instance; default the host name)")
	}
	if !streamNameRE.MatchString(cl.LogStream) {
		add("cluster.log_stream", "%q is not a stream name (letters, digits, _ and -)", cl.LogStream)
	} else if cl.LogStream == n.Stream {
		add("cluster.log_stream", "%q is also nats.stream", cl.LogStream)
	}
	if cl.Replicas < 1 || cl.Replicas > 5 {
		add("cluster.replicas", "must be 1 to 5 (got %d)", cl.Replicas)
	}
	if cl.LeaseTTL < time.Second {
		add("cluster.lease_ttl", "must be at least 1s (got %s)", cl.LeaseTTL)
	}
	positive("cluster.snapshot_every", cl.SnapshotEvery)
	if cl.LogMaxAge > 0 && cl.LogMaxAge/2 < cl.SnapshotEvery { // halved, not doubled: 2*snapshot_every can overflow
		add("cluster.log_max_age", "%s must be at least twice cluster.snapshot_every (%s): an instance restores the newest snapshot and then needs the log after it", cl.LogMaxAge, cl.SnapshotEvery)
	}
	notNegative("cluster.log_max_age", cl.LogMaxAge)
	if r := cl.SnapshotReadRate; r != 0 && r < minSnapshotReadRate {
		add("cluster.snapshot_read_rate", "must be 0 (full speed) or at least %s a second (got %s)", ByteSize(minSnapshotReadRate), r)
	}
	if cl.DigestEvery < 1 {
		add("cluster.digest_every", "must be at least 1 log sequence (got %d)", cl.DigestEvery)
	}

	// store
	if c.Store.MigrationBatch < 1 {
		add("store.migration_batch", "must be at least 1 row (got %d)", c.Store.MigrationBatch)
	}
	notNegative("store.migration_pause", c.Store.MigrationPause)

	// publish
	positive("publish.retention", c.Publish.Retention)
	if c.Publish.Batch < 1 {
		add("publish.batch", "must be at least 1 (got %d)", c.Publish.Batch)
	}
	positive("publish.publish_timeout", c.Publish.PublishTimeout)
	if c.Publish.SchemaURL != "" {
		if err := publish.ValidateSchemaURL(c.Publish.SchemaURL); err != nil {
			add("publish.schema_url", "%v", err)
		}
	}

	// reconcile
	rc := c.Reconcile
	positive("reconcile.stale_after", rc.StaleAfter)
	positive("reconcile.give_up_after", rc.GiveUpAfter)
	if rc.GiveUpAfter > 0 && rc.GiveUpAfter <= rc.StaleAfter {
		add("reconcile.give_up_after", "%s must be longer than reconcile.stale_after (%s)", rc.GiveUpAfter, rc.StaleAfter)
	}
	positive("reconcile.doubt_min_age", rc.DoubtMinAge)
	if rc.DoubtMinAge <= p.Timeout {
		add("reconcile.doubt_min_age", "%s must be longer than provider.timeout (%s), or a creation still in flight could be declared absent", rc.DoubtMinAge, p.Timeout)
	}
	notNegative("reconcile.boundary_window", rc.BoundaryWindow)
	for _, s := range []struct{ key, spec string }{
		{"reconcile.schedules.stale", rc.Schedules.Stale},
		{"reconcile.schedules.doubt", rc.Schedules.Doubt},
		{"reconcile.schedules.balances", rc.Schedules.Balances},
		{"reconcile.schedules.requisites", rc.Schedules.Requisites},
		{"reconcile.schedules.report", rc.Schedules.Report},
	} {
		if err := checkSchedule(s.spec); err != nil {
			add(s.key, "%q is not a cron spec or %q (%v)", s.spec, scheduleOff, err)
		}
	}
	if rc.Concurrency < 1 {
		add("reconcile.concurrency", "must be at least 1 (got %d)", rc.Concurrency)
	}
	for _, cur := range sortedKeys(rc.DriftTolerance) {
		key := "reconcile.drift_tolerance." + cur
		if !currencyRE.MatchString(cur) {
			add(key, "%q is not a currency code", cur)
		}
		if rc.DriftTolerance[cur].IsNegative() {
			add(key, "must not be negative (got %s)", rc.DriftTolerance[cur])
		}
	}
	if rc.DriftGrace < 1 {
		add("reconcile.drift_grace", "must be at least 1 (got %d)", rc.DriftGrace)
	}
	positive("reconcile.unresolved_after", rc.UnresolvedAfter)
	positive("reconcile.backoff_base", rc.BackoffBase)
	positive("reconcile.backoff_max", rc.BackoffMax)
	if rc.BackoffMax > 0 && rc.BackoffMax < rc.BackoffBase {
		add("reconcile.backoff_max", "%s is below reconcile.backoff_base %s", rc.BackoffMax, rc.BackoffBase)
	}

	required("reports.dir", c.Reports.Dir)

	if !slices.Contains([]string{"debug", "info", "warn", "error"}, c.Log.Level) {
		add("log.level", "%q is not one of debug, info, warn, error", c.Log.Level)
	}
	if !slices.Contains([]string{"auto", "json", "console"}, c.Log.Format) {
		add("log.format", "%q is not one of auto, json, console", c.Log.Format)
	}
	positive("shutdown_timeout", c.ShutdownTimeout)

	if ep := c.Telemetry.OTLPEndpoint; ep != "" {
		if _, err := telemetry.TracesURL(ep); err != nil {
			add("telemetry.otlp_endpoint", "%v", err)
		}
	}

	return errors.Join(errs...)
}

// checkHostPort accepts "host:port" and ":port" with a numeric port
// (0 picks a free one).
func checkHostPort(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("want host:port")
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port %q is not a number from 0 to 65535", port)
	}
	return nil
}

// sameFixedAddress reports whether a and b would both bind the same
// non-zero port on overlapping hosts.
func sameFixedAddress(a, b string) bool {
	ha, pa, err1 := net.SplitHostPort(a)
	hb, pb, err2 := net.SplitHostPort(b)
	if err1 != nil || err2 != nil || pa != pb || pa == "0" {
		return false
	}
	wildcard := func(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }
	return ha == hb || wildcard(ha) || wildcard(hb)
}

// checkSchedule accepts "off" or a standard cron spec, including
// descriptors such as "@every 1m" and "@daily".
func checkSchedule(spec string) error {
	if spec == scheduleOff {
		return nil
	}
	_, err := cron.ParseStandard(spec)
	return err
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// String renders the configuration as YAML with every secret redacted
// (including passwords inside URLs), for "what is orderd running with"
// questions.
func (c Config) String() string {
	cp := c
	cp.Provider.BaseURL = redactURL(cp.Provider.BaseURL)
	cp.NATS.URL = redactURL(cp.NATS.URL)
	b, err := yaml.Marshal(&cp)
	if err != nil {
		return fmt.Sprintf("config: %v", err)
	}
	return string(b)
}

// GoString keeps %#v from printing secrets: it is String.
func (c Config) GoString() string { return c.String() }

// LogValue is what slog prints for a Config: the addresses and paths an
// operator looks for at start-up, never a secret.
func (c Config) LogValue() slog.Value {
	nats := "embedded " + c.NATS.Embedded.Listen
	if c.NATS.URL != "" {
		nats = redactURL(c.NATS.URL)
	}
	return slog.GroupValue(
		slog.String("provider", redactURL(c.Provider.BaseURL)),
		slog.String("receiver", c.Receiver.Listen+c.Receiver.Path),
		slog.String("admin", c.Admin.Listen),
		slog.Bool("admin_token", c.Admin.Token != ""),
		slog.String("store", c.Store.Path),
		slog.String("nats", nats),
		slog.String("stream", c.NATS.Stream),
		slog.String("log_level", c.Log.Level),
	)
}

// redactURL hides the password of every URL in a comma-separated list.
func redactURL(s string) string {
	if s == "" {
		return s
	}
	parts := strings.Split(s, ",")
	for i, p := range parts {
		if u, err := url.Parse(strings.TrimSpace(p)); err == nil && u.User != nil {
			if _, has := u.User.Password(); has {
				parts[i] = u.Redacted()
			} else {
				u.User = url.User("xxxxx")
				parts[i] = u.String()
			}
		}
	}
	return strings.Join(parts, ",")
}

// Secret is a string that never shows its value when printed, logged or
// marshalled. Reveal returns it.
type Secret string

const redacted = "[redacted]"

// Reveal returns the secret's value.
func (s Secret) Reveal() string { return string(s) }

// String returns "[redacted]", or "" for an empty secret.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString keeps %#v from printing the value.
func (s Secret) GoString() string { return strconv.Quote(s.String()) }

// LogValue keeps slog from printing the value.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalYAML keeps Config.String from printing the value.
func (s Secret) MarshalYAML() (any, error) { return s.String(), nil }

// MarshalText keeps JSON and text encoders from printing the value.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// ByteSize is a size in bytes. In YAML it is an integer or a string with a
// unit: B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of
// 1024), e.g. "512MiB".
type ByteSize int64

// minSnapshotReadRate is the least cluster.snapshot_read_rate: slower, a
// snapshot of a few gigabytes would take longer than an hour.
const minSnapshotReadRate = 1 << 20

var byteUnits = map[string]int64{
	"": 1, "b": 1,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
}

// ParseByteSize parses "1048576", "64MiB", "1 GB".
func ParseByteSize(s string) (ByteSize, error) {
	s = strings.TrimSpace(s)
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("%q is not a size (like 1048576, 512MiB or 1GiB)", s)
	}
	n, err := strconv.ParseInt(s[:i], 10, 64)
	mult, ok := byteUnits[strings.ToLower(strings.TrimSpace(s[i:]))]
	if err != nil || !ok {
		return 0, fmt.Errorf("%q is not a size (like 1048576, 512MiB or 1GiB)", s)
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return ByteSize(n * mult), nil
}

// String formats the size with the largest binary unit that divides it.
func (b ByteSize) String() string {
	for _, u := range []struct {
		name string
		n    int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if b != 0 && int64(b)%u.n == 0 {
			return strconv.FormatInt(int64(b)/u.n, 10) + u.name
		}
	}
	return strconv.FormatInt(int64(b), 10)
}

// MarshalYAML writes the size as its String form, which ParseByteSize reads.
func (b ByteSize) MarshalYAML() (any, error) { return b.String(), nil }

// ParseConfig reads YAML from r over DefaultConfig. It is strict: an
// unknown or repeated key, or a value of the wrong type, is an error naming
// the key's full path and line. It does not resolve secrets or validate;
// LoadConfig does both.
func ParseConfig(r io.Reader) (*Config, error) {
	cfg, err := parseConfig(r)
	if err != nil {
		return nil, err
	}
	return cfg, nil
}

// parseConfig is ParseConfig that also returns what it decoded when some
// keys did not decode (those keep their defaults), so that loading can go
// on to report the file's other problems; the Config is nil only when the
// text is not YAML at all.
func parseConfig(r io.Reader) (*Config, error) {
	cfg := DefaultConfig()
	cfg.lines = map[string]int{}
	dec := yaml.NewDecoder(r)
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return cfg, nil // an empty file: all defaults
		}
		return nil, &configError{Problem: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, &configError{Line: extra.Line, Problem: "more than one YAML document"}
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return cfg, nil
		}
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
		return cfg, nil
	}
	d := &decoder{lines: cfg.lines}
	d.decode(root, reflect.ValueOf(cfg).Elem(), "")
	return cfg, errors.Join(d.errs...)
}

// decoder walks a YAML node tree into a Go value by the yaml struct tags,
// collecting errors that name each key's full path. yaml.v3's own strict
// mode names only the last key of a path, and its type errors name no key.
type decoder struct {
	lines map[string]int
	errs  []error
}

var (
	durationType = reflect.TypeFor[time.Duration]()
	byteSizeType = reflect.TypeFor[ByteSize]()
	prefixType   = reflect.TypeFor[netip.Prefix]()
	decimalType  = reflect.TypeFor[decimal.Decimal]()
)

func (d *decoder) fail(n *yaml.Node, path, format string, args ...any) {
	d.errs = append(d.errs, &configError{Line: n.Line, Key: path, Problem: fmt.Sprintf(format, args...)})
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	default:
		return "a scalar"
	}
}

func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if path != "" {
		d.lines[path] = n.Line
	}
	isNull := n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"

	switch {
	case v.Kind() == reflect.Struct && v.Type() != prefixType && v.Type() != decimalType:
		if isNull {
			return // "section:" with nothing under it keeps the defaults
		}
		if n.Kind != yaml.MappingNode {
			d.fail(n, orRoot(path), "want a mapping of keys, got %s", kindName(n))
			return
		}
		d.decodeStruct(n, v, path)
	case v.Kind() == reflect.Map:
		if isNull {
			v.Set(reflect.MakeMap(v.Type()))
			return
		}
		if n.Kind != yaml.MappingNode {
			d.fail(n, path, "want a mapping, got %s", kindName(n))
			return
		}
		m := reflect.MakeMap(v.Type())
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := strings.ToLower(n.Content[i].Value)
			elem := reflect.New(v.Type().Elem()).Elem()
			d.decode(n.Content[i+1], elem, path+"."+k)
			if m.MapIndex(reflect.ValueOf(k)).IsValid() {
				d.fail(n.Content[i], path+"."+k, "defined twice")
			}
			m.SetMapIndex(reflect.ValueOf(k), elem)
		}
		v.Set(m)
	case v.Kind() == reflect.Slice:
		if isNull {
			v.Set(reflect.Zero(v.Type()))
			return
		}
		if n.Kind != yaml.SequenceNode {
			d.fail(n, path, "want a list, got %s", kindName(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, c := range n.Content {
			d.decode(c, s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	default:
		if n.Kind != yaml.ScalarNode {
			d.fail(n, path, "want a single value, got %s", kindName(n))
			return
		}
		d.decodeScalar(n, v, path, isNull)
	}
}

func orRoot(path string) string {
	if path == "" {
		return "(top level)"
	}
	return path
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	fields := map[string]int{}
	var names []string
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || tag == "" || tag == "-" {
			continue
		}
		fields[tag] = i
		names = append(names, tag)
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		key := join(path, kn.Value)
		if kn.Kind != yaml.ScalarNode {
			d.fail(kn, orRoot(path), "a key must be a plain name")
			continue
		}
		if line, dup := seen[kn.Value]; dup {
			d.fail(kn, key, "defined twice (first on line %d)", line)
			continue
		}
		seen[kn.Value] = kn.Line
		idx, ok := fields[kn.Value]
		if !ok {
			d.fail(kn, key, "unknown key%s", suggest(kn.Value, names, path))
			continue
		}
		d.decode(vn, v.Field(idx), key)
	}
}

// suggest names the known keys of a section, so that a typo is easy to fix.
func suggest(got string, names []string, path string) string {
	for _, n := range names {
		if editDistance(got, n) <= 2 {
			return fmt.Sprintf(" (did you mean %s?)", join(path, n))
		}
	}
	return fmt.Sprintf(" (known keys: %s)", strings.Join(names, ", "))
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func (d *decoder) decodeScalar(n *yaml.Node, v reflect.Value, path string, isNull bool) {
	s := n.Value
	switch v.Type() {
	case durationType:
		if isNull {
			d.fail(n, path, "want a duration (like 10s, 5m, 1h30m), got nothing")
			return
		}
		dur, err := time.ParseDuration(s)
		if err != nil {
			d.fail(n, path, "%q is not a duration (like 10s, 5m, 1h30m)", s)
			return
		}
		v.SetInt(int64(dur))
		return
	case byteSizeType:
		b, err := ParseByteSize(s)
		if err != nil {
			d.fail(n, path, "%v", err)
			return
		}
		v.SetInt(int64(b))
		return
	case prefixType:
		p, err := parsePrefix(s)
		if err != nil {
			d.fail(n, path, "%q is not an IP address or CIDR (like 203.0.113.7 or 203.0.113.0/24)", s)
			return
		}
		v.Set(reflect.ValueOf(p))
		return
	case decimalType:
		// The YAML text itself is parsed, so an unquoted 0.01 never passes
		// through a float.
		dec, err := provider.ParseAmount(s)
		if err != nil {
			if len(s) > provider.MaxAmountLen {
				d.fail(n, path, "is too long for an amount (%d characters; at most %d)", len(s), provider.MaxAmountLen)
			} else {
				d.fail(n, path, "%q is not a decimal number", s)
			}
			return
		}
		v.Set(reflect.ValueOf(dec))
		return
	}
	switch v.Kind() {
	case reflect.String:
		if isNull {
			s = ""
		}
		v.SetString(s)
	case reflect.Int, reflect.Int64, reflect.Int32:
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v.OverflowInt(i) {
			d.fail(n, path, "%q is not an integer", s)
			return
		}
		v.SetInt(i)
	case reflect.Float64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) {
			d.fail(n, path, "%q is not a number", s)
			return
		}
		v.SetFloat(f)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			d.fail(n, path, "%q is not true or false", s)
			return
		}
		v.SetBool(b)
	default:
		d.fail(n, path, "cannot hold a value of type %s", v.Type())
	}
}

// parsePrefix reads a CIDR, or a bare IP as a single-address prefix.
func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}
