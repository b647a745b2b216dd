package publish

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// EmbeddedClusterConfig configures a NATS cluster run in this process: for
// tests and the sandbox's replicated mode, never for production (one
// process is one machine).
type EmbeddedClusterConfig struct {
	// Nodes is the number of servers; default 3.
	Nodes int
	// Dir holds each server's JetStream files, in a directory per server.
	Dir string
	// Name is the cluster's name; default "orderd".
	Name   string
	Logger *slog.Logger
}

// EmbeddedCluster is a running in-process NATS cluster with JetStream, on
// loopback, every message fsynced before its ack (sync_interval: always).
type EmbeddedCluster struct {
	servers []*server.Server
	opts    []*server.Options
}

// StartEmbeddedCluster starts cfg.Nodes servers routed to each other and
// waits until JetStream has a meta leader. Route ports are picked free
// first; a start that loses a port to another process is retried.
func StartEmbeddedCluster(cfg EmbeddedClusterConfig) (*EmbeddedCluster, error) {
	if cfg.Dir == "" {
		return nil, errors.New("embedded cluster: dir is empty")
	}
	if cfg.Nodes == 0 {
		cfg.Nodes = 3
	}
	if cfg.Name == "" {
		cfg.Name = "orderd"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	var last error
	for range 5 {
		c, err := startCluster(cfg)
		if err == nil {
			return c, nil
		}
		last = err
	}
	return nil, last
}

func startCluster(cfg EmbeddedClusterConfig) (*EmbeddedCluster, error) {
	ports := make([]int, cfg.Nodes)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	var routes []*url.URL
	for _, p := range ports {
		routes = append(routes, &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", p)})
	}
	c := &EmbeddedCluster{}
	for i := range cfg.Nodes {
		name := fmt.Sprintf("%s-%d", cfg.Name, i+1)
		o := &server.Options{
			ServerName:             name,
			Host:                   "127.0.0.1",
			Port:                   server.RANDOM_PORT,
			JetStream:              true,
			StoreDir:               filepath.Join(cfg.Dir, name),
			SyncAlways:             true,
			MaxPayload:             DefaultMaxPayload,
			NoSigs:                 true,
			DisableJetStreamBanner: true,
			Cluster:                server.ClusterOpts{Name: cfg.Name, Host: "127.0.0.1", Port: ports[i]},
			Routes:                 routes,
		}
		srv, err := server.NewServer(o)
		if err != nil {
			c.Shutdown()
			return nil, fmt.Errorf("embedded cluster: %w", err)
		}
		sl := serverLogger{l: cfg.Logger.With("nats", name), fatal: make(chan string, 1)}
		srv.SetLoggerV2(sl, false, false, false)
		srv.Start()
		c.servers = append(c.servers, srv)
		c.opts = append(c.opts, o)
		if err := waitReady(srv, sl.fatal, 10*time.Second); err != nil {
			c.Shutdown()
			return nil, fmt.Errorf("embedded cluster %s: %w", name, err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for !c.placesOnAll() {
		if time.Now().After(deadline) {
			c.Shutdown()
			return nil, errors.New("embedded cluster: no JetStream meta leader that knows every node within 20s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return c, nil
}

// placesOnAll reports whether a JetStream meta leader is elected and has
// every node's current state, so that a stream with a replica on each
// node can be placed at once (before that, creating one is refused with
// "no suitable peers for placement").
func (c *EmbeddedCluster) placesOnAll() bool {
	for _, s := range c.servers {
		if s.Running() && s.JetStreamIsLeader() {
			return len(s.JetStreamClusterPeers()) == len(c.servers)
		}
	}
	return false
}

// ClientURL returns a URL list naming every server, for nats.Connect.
func (c *EmbeddedCluster) ClientURL() string {
	var urls []string
	for _, s := range c.servers {
		if s.Running() {
			urls = append(urls, s.ClientURL())
		}
	}
	return strings.Join(urls, ",")
}

// Server returns server i.
func (c *EmbeddedCluster) Server(i int) *server.Server { return c.servers[i] }

// Shutdown stops every server and waits for each.
func (c *EmbeddedCluster) Shutdown() {
	for _, s := range c.servers {
		s.Shutdown()
	}
	for _, s := range c.servers {
		s.WaitForShutdown()
	}
}
