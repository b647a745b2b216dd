package publish

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
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
)

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
	Logger       *slog.Logger
}

// Embedded is a running in-process NATS server with JetStream.
type Embedded struct {
	srv *server.Server
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
	e := &Embedded{srv: srv}
	log.Info("embedded nats listening", "url", e.ClientURL(), "store_dir", cfg.StoreDir)
	return e, nil
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

// Shutdown stops the server and waits until it has stopped and closed its
// files. Calling it twice is harmless.
func (e *Embedded) Shutdown() {
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
