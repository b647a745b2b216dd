package publish

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TLSConfig names the PEM files for a TLS connection to NATS. CAFile alone
// verifies the server; CertFile and KeyFile together add a client
// certificate.
type TLSConfig struct {
	CAFile   string
	CertFile string
	KeyFile  string
}

// ConnConfig describes the connection to a NATS server or cluster.
type ConnConfig struct {
	// URL is one server URL or a comma-separated list ("nats://a:4222,nats://b:4222").
	URL string
	// CredentialsFile is a NATS .creds file (user JWT and seed).
	CredentialsFile string
	// Token authenticates with a plain token.
	Token string
	TLS   TLSConfig
	// Name shows up in the server's connection list; default "orderd".
	Name string
	// ReconnectWait is the pause between reconnect attempts (default 1s),
	// with up to a second of jitter (two with TLS) added.
	ReconnectWait time.Duration
	Logger        *slog.Logger
	// Metrics, when set, gets the connected gauge.
	Metrics *Metrics
	// State, when set, tracks whether the connection is up for readiness.
	State *ConnState
	// OnDown and OnUp, when set, are called as the connection goes down
	// (with the error, nil for a clean close by the server) and comes back
	// (with the server's redacted URL), after the connection first came
	// up: for a command that tells a person watching it, as orderd tail
	// does.
	OnDown func(err error)
	OnUp   func(url string)
}

// Connect dials NATS. It retries forever: unlimited reconnects and a retry
// when the first connect fails, so Connect returns at once even when the
// server is down and orderd keeps taking webhooks into its outbox until NATS
// comes back. Publishes are not buffered by the client while it reconnects
// (they fail at once): the outbox is the buffer, and the relay backs off.
// Connection changes are logged and reflected in cfg.Metrics and cfg.State.
func Connect(ctx context.Context, cfg ConnConfig) (*nats.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("connect to nats: %w", err)
	}
	if cfg.URL == "" {
		return nil, errors.New("connect to nats: url is empty")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	name := cfg.Name
	if name == "" {
		name = "orderd"
	}
	wait := cfg.ReconnectWait
	if wait <= 0 {
		wait = time.Second
	}
	up := func(bool) {}
	if cfg.State != nil || cfg.Metrics != nil {
		up = func(v bool) {
			cfg.State.set(v)
			cfg.Metrics.setConnected(v)
		}
	}
	opts := []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(true),
		nats.ReconnectWait(wait),
		nats.ReconnectJitter(time.Second, 2*time.Second),
		nats.ReconnectBufSize(-1),
		// Notice a server that vanished without closing the socket
		// within about half a minute.
		nats.PingInterval(10 * time.Second),
		nats.MaxPingsOutstanding(3),
		nats.ConnectHandler(func(nc *nats.Conn) {
			log.Info("nats connected", "url", nc.ConnectedUrlRedacted())
			up(true)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats reconnected", "url", nc.ConnectedUrlRedacted())
			up(true)
			if cfg.OnUp != nil {
				cfg.OnUp(nc.ConnectedUrlRedacted())
			}
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "err", err)
			} else {
				log.Info("nats disconnected")
			}
			up(false)
			if cfg.OnDown != nil {
				cfg.OnDown(err)
			}
		}),
		nats.ClosedHandler(func(*nats.Conn) {
			log.Info("nats connection closed")
			up(false)
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if sub != nil {
				log.Error("nats async error", "subject", sub.Subject, "err", err)
				return
			}
			log.Error("nats async error", "err", err)
		}),
	}
	if cfg.CredentialsFile != "" {
		opts = append(opts, nats.UserCredentials(cfg.CredentialsFile))
	}
	if cfg.Token != "" {
		opts = append(opts, nats.Token(cfg.Token))
	}
	if cfg.TLS.CAFile != "" {
		opts = append(opts, nats.RootCAs(cfg.TLS.CAFile))
	}
	if (cfg.TLS.CertFile == "") != (cfg.TLS.KeyFile == "") {
		return nil, errors.New("connect to nats: tls cert_file and key_file must be set together")
	}
	if cfg.TLS.CertFile != "" {
		opts = append(opts, nats.ClientCert(cfg.TLS.CertFile, cfg.TLS.KeyFile))
	}
	nc, err := nats.Connect(cfg.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to nats: %w", err)
	}
	if nc.IsConnected() {
		// The first connect succeeded synchronously; ConnectHandler
		// only runs for a connect that succeeds on a later retry.
		up(true)
	} else {
		log.Warn("nats not reachable yet; retrying in the background", "url", cfg.URL)
		up(false)
	}
	return nc, nil
}

// NewJetStream wraps nc in a JetStream client whose asynchronous publishes
// give up after ackTimeout (default 5s), so that an ack that never comes does
// not stay pending in the client for ever.
func NewJetStream(nc *nats.Conn, ackTimeout time.Duration) (jetstream.JetStream, error) {
	if ackTimeout <= 0 {
		ackTimeout = defaultPublishTimeout
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(ackTimeout))
	if err != nil {
		return nil, fmt.Errorf("jetstream client: %w", err)
	}
	return js, nil
}

// ConnState records whether the NATS connection is up and since when it is
// down, for a readiness check that tolerates short outages. The zero value
// is not usable; create it with NewConnState. A nil *ConnState ignores
// updates.
type ConnState struct {
	now       func() time.Time
	mu        sync.Mutex
	connected bool
	downSince time.Time
}

// NewConnState returns a state that starts disconnected at now().
func NewConnState(now func() time.Time) *ConnState {
	if now == nil {
		now = time.Now
	}
	return &ConnState{now: now, downSince: now()}
}

func (s *ConnState) set(up bool) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if up == s.connected {
		return
	}
	s.connected = up
	if !up {
		s.downSince = s.now()
	}
}

// Connected reports whether the connection is up.
func (s *ConnState) Connected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.connected
}

// DisconnectedSince returns when the connection went down, and false while
// it is up.
func (s *ConnState) DisconnectedSince() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.connected {
		return time.Time{}, false
	}
	return s.downSince, true
}

// Ready returns nil while the connection is up or has been down for less
// than maxDown, else an error saying since when it is down. Events wait in
// the outbox meanwhile, so a short outage need not take orderd out of
// rotation.
func (s *ConnState) Ready(maxDown time.Duration) error {
	since, down := s.DisconnectedSince()
	if !down {
		return nil
	}
	if d := s.now().Sub(since); d >= maxDown {
		return fmt.Errorf("nats disconnected for %s (since %s)", d.Round(time.Second), since.UTC().Format(time.RFC3339))
	}
	return nil
}
