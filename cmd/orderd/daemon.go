package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	sd "github.com/coreos/go-systemd/v22/daemon"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/time/rate"

	"orderd/api"
	"orderd/cluster"
	"orderd/internal/telemetry"
	"orderd/provider"
	"orderd/publish"
	"orderd/receiver"
	"orderd/reconcile"
	"orderd/store"
)

// daemon is one running orderd: the store, NATS and the relay, the provider
// client, both listeners and the reconciler's schedule. startDaemon builds
// and starts it; Close stops it in the order that loses nothing: HTTP
// first, then the scheduled jobs, then the relay's flush and NATS, and the
// database last.
type daemon struct {
	cfg *Config
	log *slog.Logger
	now func() time.Time
	// started is when this process started the daemon: rates over a
	// window longer than its uptime are over the uptime.
	started time.Time

	store    *store.Store
	embedded *publish.Embedded
	nc       *nats.Conn
	connSt   *publish.ConnState
	relay    *publish.Relay
	stopRel  context.CancelFunc
	relDone  chan error
	client   *provider.Client
	limiter  *rate.Limiter
	webhooks *receiver.Handler
	recvSrv  *receiver.Server
	admin    *receiver.Server
	rec      *reconcile.Reconciler
	registry *prometheus.Registry
	unlock   func() error // the store's lock

	// node is replicated mode's log, lease and snapshots; nil in
	// single-node mode.
	node *cluster.Node

	pubMetrics *publish.Metrics

	// stopMig stops the background migrations; migDone is closed once
	// they stopped.
	stopMig context.CancelFunc
	migDone chan struct{}
	// tracing is the OTLP exporter; nil with tracing off.
	tracing *telemetry.Tracing

	// natsURL is where events can be read: the embedded server's client
	// URL or the configured one.
	natsURL string
}

// daemonOptions adjust startDaemon for the sandbox and for tests.
type daemonOptions struct {
	// HTTPClient is used for provider calls; nil means a fresh client.
	HTTPClient *http.Client
	// Dashboard and Reports are extra admin handlers, when built.
	extraAdmin func(d *daemon, deps *api.Deps) error
	// receiverLn and adminLn, when set, are bound already: the daemon
	// serves on them instead of binding receiver.listen and admin.listen.
	// The sandbox binds its preferred port or any free one and hands the
	// listener over, so that nothing can take the port in between.
	receiverLn, adminLn net.Listener
	// logRoutine logs accepted and repeated webhooks at info (the
	// sandbox, for a person watching), not debug.
	logRoutine bool
}

// startServer starts srv on ln when the caller bound one, else on its
// configured address.
func startServer(srv *receiver.Server, ln net.Listener) error {
	if ln != nil {
		return srv.StartOn(ln)
	}
	return srv.Start()
}

// startDaemon opens every part of orderd and starts serving. On error,
// whatever was started is stopped again.
func startDaemon(ctx context.Context, cfg *Config, logger *slog.Logger, opts daemonOptions) (_ *daemon, err error) {
	d := &daemon{cfg: cfg, log: logger, now: time.Now, started: time.Now(), registry: prometheus.NewRegistry()}
	defer func() {
		if err != nil {
			closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
			defer cancel()
			_ = d.Close(closeCtx)
		}
	}()

	// The files the configuration names come first, so that a missing key
	// file or store directory is a configuration error naming its key
	// (exit 2) before the database and the NATS store are created.
	verifier, err := loadVerifier(cfg)
	if err != nil {
		return nil, err
	}
	if err := cfg.checkStorePath(false); err != nil {
		return nil, err
	}
	if d.unlock, err = cfg.lockStore(lockOwner); err != nil {
		return nil, err
	}
	// What a snapshot, a seed or a restore killed earlier left beside the
	// database: no other orderd holds the lock, so none of it is in use.
	if removed, err := cfg.removeTempFiles(); err != nil {
		logger.Warn("removing temporary files left beside the database failed", "component", "store", "err", err)
	} else if len(removed) > 0 {
		logger.Info("removed temporary files a killed operation left beside the database", "component", "store", "files", removed)
	}
	replicated := cfg.Cluster.Enabled
	if d.tracing, err = startTracing(ctx, cfg); err != nil {
		return nil, err
	}
	tp := d.tracing.Provider()
	if tp != nil {
		logger.Info("tracing on: spans go to the OTLP endpoint", "endpoint", redactURL(cfg.Telemetry.OTLPEndpoint))
	}

	// In replicated mode NATS comes first: an empty disk starts from the
	// newest snapshot.
	if replicated {
		if err := d.connectNATS(ctx); err != nil {
			return nil, err
		}
		if err := d.restoreSnapshot(ctx); err != nil {
			return nil, err
		}
	}

	// The store comes next: nothing may be accepted before it can commit.
	var pm *processMetrics
	d.store, err = store.Open(ctx, cfg.Store.Path, store.Options{
		Logger:     logger.With("component", "store"),
		CheckAfter: cfg.Reconcile.StaleAfter,
		OnCommit: func(batch int, dur time.Duration) {
			if pm != nil {
				pm.onCommit(batch, dur)
			}
		},
		// Replicated: the log's quorum holds every write.
		RelaxedSync: replicated,
	})
	if err != nil {
		return nil, cfg.storeError(err)
	}
	pm = newProcessMetrics(d.registry, d.store.Stats)
	d.registry.MustRegister(newMigrationCollector(d.store.BackgroundMigrations))
	if !replicated {
		// Creations that were in flight when orderd last stopped have an
		// unknown outcome: they become in doubt and the reconciler
		// settles them. (Replicated: another instance may be making such
		// a call right now; the reconciler settles pending attempts once
		// they are old enough instead.)
		if n, err := d.store.RecoverPendingAttempts(ctx); err != nil {
			return nil, fmt.Errorf("recover pending attempts: %w", err)
		} else if n > 0 {
			logger.Warn("creations in flight at the last stop are now in doubt", "component", "gateway", "attempts", n)
		}
		if err := d.connectNATS(ctx); err != nil {
			return nil, err
		}
	}
	if err := d.newRelay(); err != nil {
		return nil, err
	}
	if replicated {
		if err := d.joinCluster(ctx); err != nil {
			return nil, err
		}
	} else {
		d.startRelay(ctx)
	}

	// One token bucket paces every call to the provider: polls, creations,
	// balances and lists.
	d.limiter = reconcile.NewLimiter(cfg.Provider.RateLimit, cfg.Provider.RateBurst)
	hc := opts.HTTPClient
	if hc == nil {
		hc = providerHTTPClient(cfg)
	}
	d.client, err = newProviderClient(cfg, hc, d.limiter, pm.observeProvider)
	if err != nil {
		return nil, err
	}
	// The jobs' calls: in replicated mode only the leader's go out.
	jobClient := d.client
	if replicated {
		// The jobs' own client: the same connections, each request sent
		// only under the lease.
		jhc := *hc
		next := jhc.Transport
		if next == nil {
			next = http.DefaultTransport
		}
		jhc.Transport = leaseTransport{next: next, until: d.node.LeaseUntil}
		if jobClient, err = newProviderClient(cfg, &jhc, leaderLimiter{d.limiter, d.node.Leading}, pm.observeProvider); err != nil {
			return nil, err
		}
	}

	rm, err := receiver.NewMetrics(d.registry)
	if err != nil {
		return nil, fmt.Errorf("receiver metrics: %w", err)
	}
	maxBody, err := d.webhookBodyLimit()
	if err != nil {
		return nil, err
	}
	d.webhooks = receiver.New(receiver.Config{
		Path:           cfg.Receiver.Path,
		AllowedIPs:     cfg.Receiver.AllowedIPs,
		TrustedProxies: cfg.Receiver.TrustedProxies,
		MaxBodyBytes:   maxBody,
		AckBudget:      cfg.Receiver.AckBudget,
		LogRoutine:     opts.logRoutine,
	}, receiver.Deps{
		Store:    d.store,
		Verifier: verifier,
		Logger:   logger.With("component", "receiver"),
		Metrics:  rm,
		Tracer:   telemetry.Tracer(tp, "orderd/receiver"),
	})

	d.rec = newReconciler(cfg, d.store, withTracing(jobClient, tp), logger, reconcile.NewMetrics(d.registry), nil, tp)

	deps := api.Deps{
		Store:    d.store,
		Provider: withTracing(d.client, tp),
		Checks:   []api.Check{{Name: "nats", Check: d.natsReady}},
		Cluster:  d.clusterAPI(),
		Metrics:  promhttp.HandlerFor(d.registry, promhttp.HandlerOpts{Registry: d.registry}),
		// The background migrations' progress is /readyz's detail.
		Migrations: d.store.BackgroundMigrations,
	}
	if d.node != nil {
		// Ready when this instance can append to the log.
		deps.Checks = append(deps.Checks, api.Check{Name: "log", Check: d.node.Ready})
	} else {
		// The one instance publishes: ready only while events get out.
		deps.Checks = append(deps.Checks, api.Check{Name: "outbox", Check: d.outboxReady})
	}
	if err := wireReports(d, &deps); err != nil {
		return nil, err
	}
	if opts.extraAdmin != nil {
		if err := opts.extraAdmin(d, &deps); err != nil {
			return nil, err
		}
	}
	adminHandler := api.New(api.Config{
		Token:     cfg.Admin.Token.Reveal(),
		PublicURL: cfg.Receiver.PublicURL,
		Logger:    logger.With("component", "api"),
	}, deps)

	adminHandler = traceGateway(adminHandler, tp)
	if cfg.Admin.Pprof {
		adminHandler = withPprof(adminHandler, cfg.Admin.Token.Reveal())
	}
	maxConns, warn := webhookConnCap(cfg.Receiver.MaxConnections, openFileLimit())
	if warn != "" {
		logger.Warn(warn)
	}
	d.recvSrv = receiver.NewServer(receiver.ServerConfig{Addr: cfg.Receiver.Listen, MaxConns: maxConns}, d.webhooks, logger)
	if err := startServer(d.recvSrv, opts.receiverLn); err != nil {
		return nil, fmt.Errorf("receiver.listen: %w", err)
	}
	d.admin = receiver.NewServer(receiver.ServerConfig{
		Addr:        cfg.Admin.Listen,
		Name:        "admin",
		Component:   "api",
		ReadTimeout: 30 * time.Second,
		// Reports stream large bodies; the write bound is generous.
		WriteTimeout: 10 * time.Minute,
	}, guardAdmin(adminHandler, cfg.Admin.Token == "" && adminExposure(cfg.Admin.Listen, false) == ""), logger)
	if err := startServer(d.admin, opts.adminLn); err != nil {
		return nil, fmt.Errorf("admin.listen: %w", err)
	}
	warnAdminExposure(logger.With("component", "api"), d.admin.Addr(), cfg.Admin.Token != "")
	if replicated {
		// The relay, the jobs and the snapshots run while this instance
		// leads.
		d.node.Start(d.lead)
		d.catchUp(ctx)
	} else if err := d.rec.Start(ctx); err != nil {
		return nil, fmt.Errorf("reconcile schedules: %w", err)
	}
	// Schema steps that rewrite existing rows run now, while orderd
	// serves.
	d.startBackgroundMigrations(ctx)
	logger.Info("orderd started",
		"webhooks", d.recvSrv.Addr(), "admin", d.admin.Addr(), "nats", d.natsURL,
		"store", cfg.Store.Path, "replicated", replicated)
	return d, nil
}

// connectNATS starts the embedded server when nats.url is empty and
// connects. In single-node mode it returns while NATS is still
// unreachable: the relay provisions the stream itself when NATS comes up,
// so orderd takes webhooks while NATS is down.
func (d *daemon) connectNATS(ctx context.Context) error {
	cfg := d.cfg
	log := d.log.With("component", "publish")
	url := cfg.NATS.URL
	if url == "" {
		emb, err := publish.StartEmbedded(publish.EmbeddedConfig{
			Listen:    cfg.NATS.Embedded.Listen,
			StoreDir:  cfg.NATS.Embedded.StoreDir,
			MaxStore:  int64(cfg.NATS.Embedded.MaxStore),
			MaxMemory: int64(cfg.NATS.Embedded.MaxMemory),
			// Every event orderd can make of a webhook fits.
			MaxPayload: publish.EmbeddedPayloadFor(int64(cfg.Receiver.MaxBodyBytes)),
			Logger:     d.log.With("component", "nats"),
		})
		if err != nil {
			return fmt.Errorf("nats.embedded: %w", err)
		}
		d.embedded = emb
		url = emb.ClientURL()
	}
	d.natsURL = url
	pubMetrics, err := publish.NewMetrics(d.registry)
	if err != nil {
		return fmt.Errorf("publish metrics: %w", err)
	}
	d.pubMetrics = pubMetrics
	d.connSt = publish.NewConnState(d.now)
	d.nc, err = publish.Connect(ctx, publish.ConnConfig{
		URL:             url,
		CredentialsFile: cfg.NATS.CredentialsFile,
		Token:           cfg.NATS.Token.Reveal(),
		TLS: publish.TLSConfig{
			CAFile:   cfg.NATS.TLS.CAFile,
			CertFile: cfg.NATS.TLS.CertFile,
			KeyFile:  cfg.NATS.TLS.KeyFile,
		},
		Logger:  log,
		Metrics: pubMetrics,
		State:   d.connSt,
	})
	if err != nil {
		return fmt.Errorf("nats.url: %w", err)
	}
	return nil
}

// newRelay builds the relay (not yet running).
func (d *daemon) newRelay() error {
	cfg := d.cfg
	js, err := publish.NewJetStream(d.nc, cfg.Publish.PublishTimeout)
	if err != nil {
		return err
	}
	var gate func() bool
	if d.cfg.Cluster.Enabled {
		// Set once the node exists (joinCluster); until then, closed.
		gate = func() bool { return d.node != nil && d.node.Leading() }
	}
	d.relay, err = publish.NewRelay(publish.RelayConfig{
		Gate:           gate,
		Prefix:         cfg.NATS.SubjectPrefix,
		SchemaURL:      cfg.EventSchemaURL(),
		BatchSize:      cfg.Publish.Batch,
		PublishTimeout: cfg.Publish.PublishTimeout,
		Retention:      cfg.Publish.Retention,
		Stream:         d.eventStream(),
		Logger:         d.log.With("component", "publish"),
		Metrics:        d.pubMetrics,
		TracerProvider: d.tracing.Provider(),
	}, d.store, js)
	if err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	return nil
}

// eventStream is the events stream as this instance's settings describe
// it. In replicated mode it is shared: created by the first leader, never
// updated by another instance's settings.
func (d *daemon) eventStream() *publish.StreamConfig {
	cfg := d.cfg
	return &publish.StreamConfig{
		Name:            cfg.NATS.Stream,
		Prefix:          cfg.NATS.SubjectPrefix,
		DuplicateWindow: cfg.NATS.DuplicateWindow,
		MaxAge:          cfg.NATS.MaxAge,
		MaxBytes:        int64(cfg.NATS.MaxBytes),
		Replicas:        cfg.EventReplicas(),
		Shared:          cfg.Cluster.Enabled,
	}
}

// startRelay runs the relay until Close (single-node mode).
func (d *daemon) startRelay(ctx context.Context) {
	relCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	d.stopRel = cancel
	d.relDone = make(chan error, 1)
	go func() { d.relDone <- d.relay.Run(relCtx) }()
}

// Reload applies what can change safely while running: the provider's
// public keys, the receiver's allow-lists and the log level. Everything
// else needs a restart, and the log says so.
func (d *daemon) Reload(cfg *Config, lg *logging) error {
	verifier, err := loadVerifier(cfg)
	if err != nil {
		return err
	}
	d.webhooks.SetVerifier(verifier)
	d.webhooks.SetAllowedIPs(cfg.Receiver.AllowedIPs)
	d.webhooks.SetTrustedProxies(cfg.Receiver.TrustedProxies)
	if lg != nil {
		if err := lg.SetLevel(cfg.Log.Level); err != nil {
			return err
		}
	}
	d.log.Info("configuration reloaded: provider.public_keys, receiver.allowed_ips, receiver.trusted_proxies, log.level; other keys need a restart",
		"public_keys", len(cfg.Provider.PublicKeys))
	return nil
}

// watchdog pings systemd's watchdog while the store can still commit, so a
// wedged writer gets the service restarted. It returns when ctx ends.
func (d *daemon) watchdog(ctx context.Context) {
	interval, err := sd.SdWatchdogEnabled(false)
	if err != nil || interval <= 0 {
		return
	}
	t := time.NewTicker(interval / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			rctx, cancel := context.WithTimeout(ctx, interval/3)
			err := d.store.Ready(rctx)
			cancel()
			if err != nil {
				d.log.Error("store cannot commit; withholding the watchdog ping", "err", err)
				continue
			}
			_, _ = sd.SdNotify(false, sd.SdNotifyWatchdog)
		}
	}
}

// maxStoreCloseReserve bounds the part of the shutdown bound kept for the
// database (a fifth of it, at most this): the writer's last batch and the
// close take milliseconds.
const maxStoreCloseReserve = 2 * time.Second

// Close stops orderd: HTTP listeners (in-flight webhooks get their answer),
// the scheduled jobs (waiting for running ones), the relay's flush, NATS,
// and the database last. It is safe on a partly started daemon.
//
// The steps before the database end a reserve ahead of ctx's deadline, so
// that a flush retrying an unreachable NATS server until its bound still
// leaves the writer time to commit what is queued and the database time to
// close; its events stay in the outbox for the next start.
func (d *daemon) Close(ctx context.Context) error {
	var errs []error
	storeCtx := ctx
	if deadline, ok := ctx.Deadline(); ok {
		reserve := min(time.Until(deadline)/5, maxStoreCloseReserve)
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-reserve))
		defer cancel()
	}
	if d.recvSrv != nil {
		errs = append(errs, d.recvSrv.Close(ctx))
	}
	if d.admin != nil {
		errs = append(errs, d.admin.Close(ctx))
	}
	if d.node != nil {
		// Steps down (the relay and the jobs stop, the lease goes to
		// another instance at once), then stops following the log.
		d.node.Close(ctx)
	}
	if d.rec != nil {
		errs = append(errs, d.rec.Stop(ctx))
	}
	if d.stopRel != nil {
		d.stopRel()
		select {
		case <-d.relDone:
		case <-ctx.Done():
		}
	}
	d.stopBackgroundMigrations(ctx)
	relay := d.relay
	if d.node != nil {
		relay = nil // only a leader publishes; it flushed when it stepped down
	}
	errs = append(errs, publish.Stop(ctx, relay, d.nc, d.embedded))
	if d.store != nil {
		errs = append(errs, d.store.Close(storeCtx))
	}
	if d.unlock != nil {
		errs = append(errs, d.unlock())
	}
	// Last: the spans of the stop itself (the relay's flush) go out too.
	// A collector that is gone costs the spans, not the stop.
	if err := d.tracing.Shutdown(storeCtx); err != nil {
		d.log.Warn("tracing: spans not sent at stop", "err", err)
	}
	return errors.Join(errs...)
}

// loadVerifier reads the provider's public keys from the PEM files of
// provider.public_keys; an error names the key and its line.
func loadVerifier(cfg *Config) (*provider.Verifier, error) {
	keys, err := cfg.ProviderPublicKeys()
	if err != nil {
		return nil, err
	}
	v, err := provider.NewVerifier(keys...)
	if err != nil {
		return nil, cfg.errorf("provider.public_keys", "%v", err)
	}
	return v, nil
}
