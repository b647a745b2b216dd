package publish_test

import (
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"orderd/publish"
	"orderd/test/support/testaddr"
)

// clock is a settable clock safe for the connection's callback goroutines.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// metricValue returns the value of an unlabelled counter or gauge, or the
// sum over its labels.
func metricValue(t testing.TB, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		var sum float64
		for _, m := range mf.GetMetric() {
			sum += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
		return sum
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}

// metricKinds returns a labelled counter's values by its "kind" label,
// for failure messages that say which failure was counted.
func metricKinds(t testing.TB, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && m.GetCounter().GetValue() != 0 {
					kinds[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return kinds
}

// reservedPort returns a loopback port no other program can take for the
// rest of the test, for a NATS server started after its client.
func reservedPort(t *testing.T) string {
	t.Helper()
	_, port, _ := net.SplitHostPort(testaddr.Loopback(t))
	return port
}

func TestConnect_TracksOutages(t *testing.T) {
	dir := t.TempDir()
	port := reservedPort(t)
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	state := publish.NewConnState(clk.Now)
	reg := prometheus.NewRegistry()
	m, err := publish.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}

	// The server is not there yet: Connect still succeeds and keeps trying.
	nc, err := publish.Connect(t.Context(), publish.ConnConfig{
		URL: "nats://127.0.0.1:" + port, State: state, Metrics: m, ReconnectWait: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("Connect with no server: %v", err)
	}
	defer nc.Close()
	if state.Connected() {
		t.Fatal("connected with no server")
	}
	if since, down := state.DisconnectedSince(); !down || !since.Equal(clk.Now()) {
		t.Errorf("DisconnectedSince = %s, %v", since, down)
	}
	clk.Add(30 * time.Second)
	if err := state.Ready(time.Minute); err != nil {
		t.Errorf("Ready(1m) after 30s down = %v, want nil", err)
	}
	if err := state.Ready(10 * time.Second); err == nil || !strings.Contains(err.Error(), "disconnected for 30s") {
		t.Errorf("Ready(10s) after 30s down = %v, want an error saying how long", err)
	}

	e := startNATS(t, dir, "127.0.0.1:"+port)
	waitFor(t, 10*time.Second, "first connect", state.Connected)
	if err := state.Ready(0); err != nil {
		t.Errorf("Ready while connected = %v", err)
	}
	if v := metricValue(t, reg, "orderd_nats_connected"); v != 1 {
		t.Errorf("connected gauge = %v, want 1", v)
	}

	e.Shutdown()
	waitFor(t, 10*time.Second, "disconnect", func() bool { return !state.Connected() })
	if v := metricValue(t, reg, "orderd_nats_connected"); v != 0 {
		t.Errorf("connected gauge after outage = %v, want 0", v)
	}
	if since, down := state.DisconnectedSince(); !down || !since.Equal(clk.Now()) {
		t.Errorf("DisconnectedSince = %s, %v; want %s", since, down, clk.Now())
	}

	startNATS(t, dir, "127.0.0.1:"+port)
	waitFor(t, 10*time.Second, "reconnect", state.Connected)
	if v := metricValue(t, reg, "orderd_nats_connected"); v != 1 {
		t.Errorf("connected gauge after reconnect = %v, want 1", v)
	}
}

func TestConnect_BadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  publish.ConnConfig
		want string
	}{
		{"no url", publish.ConnConfig{}, "url"},
		{"cert without key", publish.ConnConfig{URL: "nats://127.0.0.1:1", TLS: publish.TLSConfig{CertFile: "c.pem"}}, "key_file"},
		{"missing ca file", publish.ConnConfig{URL: "nats://127.0.0.1:1", TLS: publish.TLSConfig{CAFile: t.TempDir() + "/none.pem"}}, "rootCA"},
		{"missing credentials", publish.ConnConfig{URL: "nats://127.0.0.1:1", CredentialsFile: t.TempDir() + "/none.creds"}, "none.creds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nc, err := publish.Connect(t.Context(), tt.cfg)
			if err == nil {
				nc.Close()
				t.Fatal("connected, want an error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %q, want it to mention %q", err, tt.want)
			}
		})
	}
}
