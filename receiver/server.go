package receiver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Server timeouts used for the zero values of ServerConfig. They keep slow
// or stuck clients from pinning connections: a sender has 5 s for its
// headers and 10 s for the whole request, the answer (which waits at most
// the ack budget for the store) must be written within 15 s, and an idle
// keep-alive connection is closed after 60 s.
const (
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 10 * time.Second
	DefaultWriteTimeout      = 15 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	DefaultMaxHeaderBytes    = 64 << 10
)

// ServerConfig configures the webhook listener. Zero durations and sizes
// take the defaults above.
type ServerConfig struct {
	// Addr is the TCP address to listen on, such as ":8080" or
	// "127.0.0.1:0".
	Addr              string
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	MaxHeaderBytes    int
	// Name says which listener this is in log lines ("webhook" by
	// default); Component is the log lines' component tag ("receiver" by
	// default). The daemon runs its admin listener on the same server type.
	Name      string
	Component string
	// MaxConns caps the connections open at once; 0 means no cap. At the
	// cap, new connections wait in the kernel's listen queue until one
	// closes (see limitListener).
	MaxConns int
}

// Server runs a handler on its own listener. Start binds and serves; Close
// stops accepting, lets requests in flight finish, and waits for the
// serving goroutine.
type Server struct {
	srv      *http.Server
	name     string
	log      *slog.Logger
	maxConns int
	ln       net.Listener
	done     chan struct{}
	err      error

	// fresh holds the connections that have not sent a byte yet
	// (http.StateNew), which Close closes at once: net/http's Shutdown
	// waits up to 5 s for them to send a request.
	mu      sync.Mutex
	fresh   map[net.Conn]struct{}
	closing bool
}

// NewServer returns a server for h with the timeouts of cfg. It does not
// listen until Start.
func NewServer(cfg ServerConfig, h http.Handler, logger *slog.Logger) *Server {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	name, component := cfg.Name, cfg.Component
	if name == "" {
		name = "webhook"
	}
	if component == "" {
		component = "receiver"
	}
	logger = logger.With("component", component)
	or := func(d, def time.Duration) time.Duration {
		if d <= 0 {
			return def
		}
		return d
	}
	maxHeader := cfg.MaxHeaderBytes
	if maxHeader <= 0 {
		maxHeader = DefaultMaxHeaderBytes
	}
	s := &Server{
		name:     name,
		log:      logger,
		maxConns: cfg.MaxConns,
		fresh:    make(map[net.Conn]struct{}),
		srv: &http.Server{
			Addr:              cfg.Addr,
			Handler:           h,
			ReadHeaderTimeout: or(cfg.ReadHeaderTimeout, DefaultReadHeaderTimeout),
			ReadTimeout:       or(cfg.ReadTimeout, DefaultReadTimeout),
			WriteTimeout:      or(cfg.WriteTimeout, DefaultWriteTimeout),
			IdleTimeout:       or(cfg.IdleTimeout, DefaultIdleTimeout),
			MaxHeaderBytes:    maxHeader,
			ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		},
	}
	s.srv.ConnState = s.connState
	return s
}

// connState keeps track of the connections that have not sent a byte yet,
// and closes a new one at once while the server is closing.
func (s *Server) connState(c net.Conn, state http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if state != http.StateNew {
		delete(s.fresh, c)
		return
	}
	if s.closing {
		c.Close()
		return
	}
	s.fresh[c] = struct{}{}
}

// closeFresh closes the connections that have not sent a byte of a
// request: nothing of theirs is in flight, and a client that sends on one
// later sees it closed and retries, as after any restart.
func (s *Server) closeFresh() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closing = true
	for c := range s.fresh {
		c.Close()
		delete(s.fresh, c)
	}
}

// Start listens on the configured address and serves in a goroutine that
// Close stops.
func (s *Server) Start() error {
	if s.done != nil {
		return errors.New("receiver server already started")
	}
	ln, err := net.Listen("tcp", s.srv.Addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", s.srv.Addr, err)
	}
	return s.StartOn(ln)
}

// StartOn serves on ln, a listener the caller bound (the configured
// address is then not used), in a goroutine that Close stops; the server
// owns ln from now on and closes it.
func (s *Server) StartOn(ln net.Listener) error {
	if s.done != nil {
		return errors.New("receiver server already started")
	}
	if s.maxConns > 0 {
		ln = newLimitListener(ln, s.maxConns, s.name, s.log)
	}
	s.ln = ln
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			s.err = err
			s.log.Error(s.name+" listener stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
	s.log.Info(s.name+" listener started", "addr", ln.Addr().String(), "max_connections", s.maxConns)
	return nil
}

// Addr returns the address the server listens on, with the port the system
// chose for ":0"; empty before Start.
func (s *Server) Addr() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Close stops accepting connections and waits for requests in flight, so
// that every commit under way is answered. When ctx ends first, the
// remaining connections are closed.
func (s *Server) Close(ctx context.Context) error {
	if s.done == nil {
		return nil
	}
	// Shutdown counts a connection that has not sent a request yet as
	// busy for its first 5 s; such a connection has nothing to answer.
	s.closeFresh()
	err := s.srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(fmt.Errorf("shut down %s listener: %w", s.name, err), s.srv.Close())
	}
	<-s.done
	return errors.Join(err, s.err)
}
