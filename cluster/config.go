package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of Config.
const (
	DefaultLogStream     = "ORDERD_LOG"
	DefaultReplicas      = 3
	DefaultLeaseTTL      = 10 * time.Second
	DefaultSnapshotEvery = time.Hour
	// DefaultSnapshotReadRate is how fast a snapshot reads the database
	// unless cluster.snapshot_read_rate says otherwise (BENCHMARKS.md,
	// "Snapshots").
	DefaultSnapshotReadRate = 32 << 20
	DefaultLogMaxAge        = 168 * time.Hour
	// DefaultDigestEvery is how many log sequences apart instances
	// compare state digests unless cluster.digest_every says otherwise. A
	// digest reads every replicated row, so its cost grows with the
	// database: far enough apart that a busy hour costs one or two.
	DefaultDigestEvery = 100000
)

// Config configures a Node.
type Config struct {
	// Node is this instance's unique name.
	Node string
	// Release is the orderd release this instance runs, as other
	// instances see it (GET /v1/cluster, the log version's record).
	Release string
	// LogStream names the log's stream; the lease bucket and the snapshot
	// store are named after it (ORDERD_LOG: ORDERD_LEASE, ORDERD_SNAPSHOTS).
	LogStream string
	// Replicas of the log, the lease and the snapshots.
	Replicas int
	// LeaseTTL is how long a lease lasts unrenewed.
	LeaseTTL time.Duration
	// SnapshotEvery is how often the leader writes a snapshot.
	SnapshotEvery time.Duration
	// LogMaxAge bounds the log; snapshots must be newer.
	LogMaxAge time.Duration
	// SnapshotReadRate bounds how fast a snapshot reads the database (its
	// copy and its hashing), in bytes a second; 0 reads at full speed.
	SnapshotReadRate int64
	// DigestEvery is how many log sequences apart the checkpoints are at
	// which instances digest their state and compare (0: the default).
	DigestEvery uint64
	// MaxEntryBytes bounds one log entry (the server's max_payload less
	// headroom); 0 means 1 MiB.
	MaxEntryBytes int
	Logger        *slog.Logger
	// Registerer receives the metrics; nil registers none.
	Registerer prometheus.Registerer

	// firstSnapshotAfter is how soon a new leader writes a snapshot when
	// the newest is due (10 s); tests that take their own set it longer.
	firstSnapshotAfter time.Duration
	// checkEvery is how often an instance compares the log with what it
	// applied (and reports, and compares digests); tests change it.
	checkEvery time.Duration
	// seedFault, when set, is called at each step of a seed and fails it
	// there with its error: the tests' interrupted seeds.
	seedFault func(step string) error
}

func (c *Config) setDefaults() error {
	if c.Node == "" {
		return errors.New("cluster: node name is empty")
	}
	if c.LogStream == "" {
		c.LogStream = DefaultLogStream
	}
	if c.Replicas == 0 {
		c.Replicas = DefaultReplicas
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.SnapshotEvery == 0 {
		c.SnapshotEvery = DefaultSnapshotEvery
	}
	if c.LogMaxAge == 0 {
		c.LogMaxAge = DefaultLogMaxAge
	}
	if c.firstSnapshotAfter == 0 {
		c.firstSnapshotAfter = 10 * time.Second
	}
	if c.checkEvery == 0 {
		c.checkEvery = 5 * time.Second
	}
	if c.DigestEvery == 0 {
		c.DigestEvery = DefaultDigestEvery
	}
	if c.MaxEntryBytes == 0 {
		c.MaxEntryBytes = 1 << 20
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case c.Replicas < 1 || c.Replicas > 5:
		return fmt.Errorf("cluster: replicas %d: want 1 to 5", c.Replicas)
	case c.LeaseTTL < time.Second:
		return fmt.Errorf("cluster: lease ttl %s: want at least 1s", c.LeaseTTL)
	}
	return nil
}

// names of the JetStream assets.
func (c *Config) subject() string { return "orderd_log." + strings.ToLower(c.LogStream) }
func (c *Config) leaseBucket() string {
	return strings.TrimSuffix(c.LogStream, "_LOG") + "_LEASE"
}
func (c *Config) digestBucket() string {
	return strings.TrimSuffix(c.LogStream, "_LOG") + "_DIGESTS"
}
func (c *Config) snapshotBucket() string {
	return strings.TrimSuffix(c.LogStream, "_LOG") + "_SNAPSHOTS"
}
