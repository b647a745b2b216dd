package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"syscall"

	sd "github.com/coreos/go-systemd/v22/daemon"
)

func runCommand() command {
	return command{
		Name:    "run",
		Summary: "run the daemon",
		Help: "Starts the store, NATS (embedded unless nats.url is set), the relay, the webhook and admin\n" +
			"listeners and the reconciler's schedule. SIGINT/SIGTERM stop it cleanly; SIGHUP reloads\n" +
			"provider.public_keys, receiver.allowed_ips, receiver.trusted_proxies and log.level.",
		Setup: func(fs *flag.FlagSet) func(context.Context, *env) error {
			return func(ctx context.Context, e *env) error {
				if err := noArgs(e); err != nil {
					return err
				}
				cfg, err := e.LoadConfig()
				if err != nil {
					return err
				}
				lg, err := e.NewLogging(cfg.Log)
				if err != nil {
					return err
				}
				for _, w := range cfg.Warnings() {
					lg.Logger.Warn(w)
				}
				return serve(ctx, e, cfg, lg, daemonOptions{}, nil)
			}
		},
	}
}

// serve starts the daemon, tells systemd it is ready, and runs until ctx
// ends; then it stops everything within cfg.ShutdownTimeout. ready, when
// set, is called with the running daemon (the sandbox prints its addresses
// and starts demo traffic there).
func serve(ctx context.Context, e *env, cfg *Config, lg *logging, opts daemonOptions, ready func(context.Context, *daemon) error) error {
	log := lg.Logger
	d, err := startDaemon(ctx, cfg, log, opts)
	if err != nil {
		return err
	}
	// READY=1 only now: listeners bound, store open, migrations applied.
	_, _ = sd.SdNotify(false, sd.SdNotifyReady)
	wdCtx, stopWD := context.WithCancel(ctx)
	go d.watchdog(wdCtx)

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	var readyErr error
	if ready != nil {
		readyErr = ready(ctx, d)
	}
	for readyErr == nil {
		select {
		case <-ctx.Done():
		case <-hup:
			next, err := e.LoadConfig()
			if err == nil {
				err = d.Reload(next, lg)
			}
			if err != nil {
				log.Error("reload failed; keeping the running configuration", "err", err)
			}
			continue
		}
		break
	}
	stopWD()
	_, _ = sd.SdNotify(false, sd.SdNotifyStopping)
	log.Info("orderd stopping")
	closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	if err := d.Close(closeCtx); err != nil {
		log.Error("shutdown incomplete", "err", err)
		if readyErr == nil {
			readyErr = err
		}
	}
	log.Info("orderd stopped")
	return readyErr
}
