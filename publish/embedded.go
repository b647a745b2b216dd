package publish

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Defaults of the embedded server.
const (
	DefaultEmbeddedListen = "127.0.0.1:4222"
	DefaultMaxStore       = 8 << 30  // bytes of JetStream file storage
	DefaultMaxMemory      = 64 << 20 // bytes of JetStream memory storage
	// DefaultMaxPayload leaves room for a webhook body of the receiver's
	// largest size (1 MiB) wrapped in a CloudEvent; NATS's own default,
	// 1 MiB, would not.
	DefaultMaxPayload = 4 << 20
	// MaxPayloadLimit is the largest max_payload a NATS server accepts.
	MaxPayloadLimit = 64 << 20
	// EventOverhead is room enough for what an order event adds to the
	// order's own JSON: the CloudEvent's attributes and the message's
	// subject and headers. An order body of B bytes fits in a message of
	// B+EventOverhead.
	EventOverhead = 4 << 10
)

// EmbeddedPayloadFor is the max_payload the embedded server gets for
// webhook bodies of up to maxBody bytes: room for the largest event orderd
// makes of them — a finding that carries two versions of an order — and at
// least DefaultMaxPayload, at most MaxPayloadLimit.
func EmbeddedPayloadFor(maxBody int64) int32 {
	return int32(min(max(DefaultMaxPayload, 2*maxBody+EventOverhead), MaxPayloadLimit))
}

// EmbeddedConfig configures the NATS server orderd runs in-process when no
// external server is configured.
type EmbeddedConfig struct {
	// Listen is host:port for clients; default 127.0.0.1:4222. Port 0
	// picks a free port (see ClientURL).
	Listen string
	// StoreDir holds JetStream's files; required.
	StoreDir string
	// MaxStore and MaxMemory cap JetStream's file and memory storage in
	// bytes; defaults DefaultMaxStore and DefaultMaxMemory.
	MaxStore  int64
	MaxMemory int64
	// MaxPayload is the largest message the server takes; default
	// DefaultMaxPayload.
	MaxPayload int32
	// ReadyTimeout bounds the wait for the server to accept clients;
	// default 10s.
	ReadyTimeout time.Duration
	// CheckInterval is how often JetStream's health is checked (see
	// Embedded.JetStreamErr); default 2s.
	CheckInterval time.Duration
	Logger        *slog.Logger
}

// Embedded is a running in-process NATS server with JetStream.
type Embedded struct {
	srv  *server.Server
	opts *server.Options
	log  *slog.Logger

	stop    chan struct{}
	stopped chan struct{}
	once    sync.Once

	mu    sync.Mutex
	jsErr error // the last health check's finding; nil when healthy
}

// StartEmbedded starts a NATS server with JetStream in this process and
// waits until it accepts connections. Every message is fsynced before it is
// acknowledged (SyncAlways), so an event JetStream has acked survives a power
// loss, like a committed SQLite row.
func StartEmbedded(cfg EmbeddedConfig) (*Embedded, error) {
	if cfg.StoreDir == "" {
		return nil, errors.New("embedded nats: store_dir is empty")
	}
	listen := cfg.Listen
	if listen == "" {
		listen = DefaultEmbeddedListen
	}
	host, portText, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: listen %q: %w", listen, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("embedded nats: listen %q: bad port", listen)
	}
	if port == 0 {
		// nats-server reads 0 as "the default port"; it spells "any free
		// port" as -1.
		port = server.RANDOM_PORT
	}
	if host == "" {
		host = "0.0.0.0"
	}
	maxStore, maxMem := cfg.MaxStore, cfg.MaxMemory
	if maxStore <= 0 {
		maxStore = DefaultMaxStore
	}
	if maxMem <= 0 {
		maxMem = DefaultMaxMemory
	}
	maxPayload := cfg.MaxPayload
	if maxPayload <= 0 {
		maxPayload = DefaultMaxPayload
	}
	wait := cfg.ReadyTimeout
	if wait <= 0 {
		wait = 10 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := &server.Options{
		ServerName:             "orderd",
		Host:                   host,
		Port:                   port,
		JetStream:              true,
		StoreDir:               cfg.StoreDir,
		JetStreamMaxStore:      maxStore,
		JetStreamMaxMemory:     maxMem,
		SyncAlways:             true,
		MaxPayload:             maxPayload,
		NoSigs:                 true,
		DisableJetStreamBanner: true,
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	sl := serverLogger{l: log, fatal: make(chan string, 1)}
	srv.SetLoggerV2(sl, false, false, false)
	srv.Start()
	if err := waitReady(srv, sl.fatal, wait); err != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, fmt.Errorf("embedded nats on %s: %w", listen, err)
	}
	if !srv.JetStreamEnabled() {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, errors.New("embedded nats: jetstream did not start")
	}
	every := cfg.CheckInterval
	if every <= 0 {
		every = 2 * time.Second
	}
	e := &Embedded{srv: srv, opts: opts, log: log, stop: make(chan struct{}), stopped: make(chan struct{})}
	go e.watch(every)
	log.Info("embedded nats listening", "url", e.ClientURL(), "store_dir", cfg.StoreDir)
	return e, nil
}

// Recovery from a stuck write error: the first attempt soon after the
// error is seen, later ones further apart while it persists.
const (
	minRecoverWait = 2 * time.Second
	maxRecoverWait = 30 * time.Second
)

// JetStreamErr returns why JetStream cannot store events now, as of the
// last health check (every CheckInterval), or nil. A write error (the disk
// was full, say) is one such reason: JetStream's file store keeps it and
// refuses every later write to the stream, even once space returns, until
// the stream is loaded again. The watchdog does that (RecoverJetStream).
func (e *Embedded) JetStreamErr() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.jsErr
}

// watch checks JetStream's health every interval and restarts JetStream
// while a stream is stuck on a write error, with growing pauses, until
// Shutdown.
func (e *Embedded) watch(every time.Duration) {
	defer close(e.stopped)
	t := time.NewTicker(every)
	defer t.Stop()
	var next time.Time // earliest next recovery attempt
	wait := minRecoverWait
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
		}
		err := e.checkJetStream()
		e.mu.Lock()
		was := e.jsErr
		e.jsErr = err
		e.mu.Unlock()
		switch {
		case err == nil && was != nil:
			e.log.Info("embedded nats: jetstream healthy again")
			next, wait = time.Time{}, minRecoverWait
		case err == nil:
		case was == nil:
			e.log.Error("embedded nats: jetstream cannot store events; restarting it until it can", "err", err)
			next = time.Now().Add(wait)
		case time.Now().After(next):
			if rerr := e.RecoverJetStream(); rerr != nil {
				e.log.Warn("embedded nats: restarting jetstream failed", "err", rerr)
			}
			wait = min(2*wait, maxRecoverWait)
			next = time.Now().Add(wait)
		}
	}
}

// checkJetStream asks the server's own health check (that of its /healthz
// endpoint) whether JetStream runs and every stream can be written.
func (e *Embedded) checkJetStream() error {
	if !e.srv.JetStreamEnabled() {
		return errors.New("jetstream is not running")
	}
	h := e.srv.Healthz(&server.HealthzOptions{})
	if h == nil || h.StatusCode == 0 || h.StatusCode == 200 {
		return nil
	}
	if h.Error != "" {
		return errors.New(h.Error)
	}
	return fmt.Errorf("jetstream unhealthy (%s)", h.Status)
}

// RecoverJetStream restarts JetStream inside the running server: its
// streams are loaded again from their files, which clears a write error the
// file store would otherwise keep until the process restarts, and a
// half-written record left by the failed write is dropped. Messages
// JetStream acknowledged are on disk and stay; the relay sends again what
// was not acknowledged, and the duplicate window, rebuilt from the stream,
// drops what did land. Clients stay connected.
func (e *Embedded) RecoverJetStream() error {
	e.log.Warn("embedded nats: restarting jetstream to clear a write error")
	if err := e.srv.ShutdownJetStream(); err != nil {
		return fmt.Errorf("stop jetstream: %w", err)
	}
	err := e.srv.EnableJetStream(&server.JetStreamConfig{
		StoreDir:   e.opts.StoreDir,
		SyncAlways: e.opts.SyncAlways,
		MaxMemory:  e.opts.JetStreamMaxMemory,
		MaxStore:   e.opts.JetStreamMaxStore,
		Strict:     true,
	})
	if err != nil {
		return fmt.Errorf("start jetstream: %w", err)
	}
	return nil
}

// ClientURL returns the URL clients use, nats://host:port, with the port
// actually bound.
func (e *Embedded) ClientURL() string {
	return e.srv.ClientURL()
}

// Server returns the underlying server, for callers that need more than a
// URL (tests that inspect it, in-process connections).
func (e *Embedded) Server() *server.Server {
	return e.srv
}

// Shutdown stops the health watchdog and the server and waits until it has
// stopped and closed its files. Calling it twice is harmless.
func (e *Embedded) Shutdown() {
	e.once.Do(func() { close(e.stop) })
	<-e.stopped
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}

// waitReady waits until srv accepts clients, failing early when the server
// reported a fatal error (a port in use) instead of waiting out the bound.
func waitReady(srv *server.Server, fatal <-chan string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		if srv.ReadyForConnections(100 * time.Millisecond) {
			return nil
		}
		select {
		case msg := <-fatal:
			return errors.New(msg)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready within %s", wait)
		}
	}
}

// serverLogger routes nats-server's log through slog. The server's notices
// (its start-up banner, one line per setting) go to debug so that orderd's
// own log stays readable; warnings and errors keep their level. Fatalf does
// not exit: only orderd's main decides to stop the process; the first fatal
// message is handed to StartEmbedded instead.
type serverLogger struct {
	l     *slog.Logger
	fatal chan string
}

func (s serverLogger) Noticef(format string, v ...any) { s.l.Debug(fmt.Sprintf(format, v...)) }
func (s serverLogger) Warnf(format string, v ...any)   { s.l.Warn(fmt.Sprintf(format, v...)) }
func (s serverLogger) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	s.l.Error(msg)
	select {
	case s.fatal <- msg:
	default:
	}
}
func (s serverLogger) Errorf(format string, v ...any) { s.l.Error(fmt.Sprintf(format, v...)) }
func (s serverLogger) Debugf(format string, v ...any) { s.l.Debug(fmt.Sprintf(format, v...)) }
func (s serverLogger) Tracef(format string, v ...any) { s.l.Debug(fmt.Sprintf(format, v...)) }
