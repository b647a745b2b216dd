package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"orderd/cluster"
	"orderd/store"
)

func clusterCommand() command {
	return command{
		Name:    "cluster",
		Summary: "replicated mode's one-off operations: seed (start a log from this database)",
		Args:    "seed",
		Help: "orderd cluster seed [-config FILE] starts a replicated log from the database at store.path:\n" +
			"a single-node database moving to replicated mode, or a replicated instance's database\n" +
			"after its log was lost. It needs cluster.enabled and nats.url, and no orderd running on\n" +
			"the database or on the log. It creates the log's assets if missing, gives the log a new\n" +
			"id recorded in the database, writes the database as the log's first snapshot and prints\n" +
			"what it seeded. Afterwards orderd run carries on with every record on this database, and\n" +
			"instances on empty disks restore the snapshot.",
		Setup: func(fs *flag.FlagSet) func(context.Context, *env) error {
			return func(ctx context.Context, e *env) error {
				if len(e.Args) == 0 {
					return e.usagef("a subcommand is required: seed")
				}
				if e.Args[0] != "seed" {
					return e.usagef("unknown subcommand %q (known: seed)", e.Args[0])
				}
				// Flags may also follow the subcommand: orderd cluster seed -config FILE.
				sub := flag.NewFlagSet("orderd cluster seed", flag.ContinueOnError)
				sub.SetOutput(io.Discard)
				config := sub.String("config", "", "read the configuration from `FILE`")
				if err := sub.Parse(e.Args[1:]); err != nil {
					if errors.Is(err, flag.ErrHelp) {
						fmt.Fprintln(e.Stdout, "Usage: orderd cluster seed [-config FILE]\n\nStarts a replicated log from the database at store.path (orderd cluster -h says more).")
						return nil
					}
					return e.usagef("%v", err)
				}
				if sub.NArg() > 0 {
					return e.usagef("unexpected argument %q", sub.Arg(0))
				}
				if *config != "" {
					e.ConfigPath = *config
				}
				return seedLog(ctx, e)
			}
		},
	}
}

// seedLog is orderd cluster seed.
func seedLog(ctx context.Context, e *env) error {
	cfg, err := e.LoadConfigFor(configUse{NATS: true})
	if err != nil {
		return err
	}
	if !cfg.Cluster.Enabled {
		return cfg.errorf("cluster.enabled", "orderd cluster seed starts a replicated log: set cluster.enabled: true (with nats.url) in the configuration the instances will run with")
	}
	if cfg.NATS.URL == "" {
		return cfg.errorf("nats.url", "orderd cluster seed needs the NATS cluster's address")
	}
	if err := cfg.checkStorePath(true); err != nil {
		return err
	}
	// The seed is the database's last state before the log: nothing may
	// have it open, as for a restore or a migrate.
	unlock, err := cfg.lockStore(lockAlone)
	if err != nil {
		return err
	}
	defer unlock()
	lg, err := e.NewLogging(cfg.Log)
	if err != nil {
		return err
	}
	logger := lg.Logger
	d := &daemon{cfg: cfg, log: logger, now: time.Now, registry: prometheus.NewRegistry()}
	if err := d.connectNATS(ctx); err != nil {
		return err
	}
	defer d.nc.Close()
	st, err := store.Open(ctx, cfg.Store.Path, store.Options{Logger: logger.With("component", "store")})
	if err != nil {
		return cfg.storeError(err)
	}
	defer st.Close(context.WithoutCancel(ctx))
	// Creations in flight when the database's daemon stopped have an
	// unknown outcome, as at a single-node start: they become in doubt,
	// and the cluster's reconciler settles them.
	if n, err := st.RecoverPendingAttempts(ctx); err != nil {
		return err
	} else if n > 0 {
		logger.Warn("creations in flight at the last stop are now in doubt", "component", "gateway", "attempts", n)
	}
	cc := d.clusterConfig()
	cc.Registerer = nil
	cc.Logger = logger.With("component", "cluster")
	res, err := cluster.Seed(ctx, d.nc, st, cc)
	if err != nil {
		return clusterError(cfg, err)
	}
	fmt.Fprintf(e.Stdout, "seeded log %s from %s: %d orders, snapshot %d bytes\n", res.Log, cfg.Store.Path, res.Orders, res.Snapshot.Bytes)
	return nil
}

// clusterError maps the cluster's refusals to the configuration keys they
// concern: a NATS server too old (exit 2 naming nats.url), a shared
// asset's setting (exit 2 naming the key), a log in use (exit 2 naming
// cluster.log_stream), a database of another log (exit 1 naming
// store.path). The others (a seed that did not finish, a log without an
// id this instance cannot prove it follows, a log that fails
// verification, a missing base snapshot) exit 1 with their own message.
func clusterError(cfg *Config, err error) error {
	var se *cluster.SettingError
	var ol *cluster.OtherLogError
	var ve *cluster.ServerVersionError
	switch {
	case errors.As(err, &ve):
		return cfg.errorf("nats.url", "%v", ve)
	case errors.As(err, &se):
		return cfg.errorf(se.Key, "%s", se.Problem())
	case errors.Is(err, cluster.ErrLogNotEmpty):
		return cfg.errorf("cluster.log_stream", "%v", err)
	case errors.As(err, &ol):
		return fmt.Errorf("store.path %s: %w", cfg.Store.Path, ol)
	}
	return err
}
