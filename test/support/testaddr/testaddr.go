// Package testaddr gives tests TCP addresses that no other program can
// take while a test uses them, for the servers a test cannot hand a
// listener to: a child process (nats-server, orderd) that binds the
// address itself and must come back on the same address after a restart,
// a client configured before its server exists, and an address that must
// refuse connections.
//
// Picking a port by listening on :0, closing the listener and passing the
// number on is racy: between the close and the server's bind, any program
// on the machine can get the same port from the kernel. A Reservation
// instead keeps a socket bound to the port, with SO_REUSEADDR and without
// listening, for as long as the test runs. On Linux that socket keeps the
// port out of the kernel's choice of free ports (bind to port 0 and the
// local port of an outgoing connection), while a server that binds the
// address itself with SO_REUSEADDR — every Go listener does — can still
// bind and listen on it, as often as it restarts. Nothing listens on the
// reserved socket, so connecting while no server runs is refused at once.
//
// Where the code under test can take a listener or report the address it
// bound (port 0 and the address read back), tests should do that instead.
package testaddr

import (
	"net/netip"
	"testing"
)

// Reservation is a port held for a test. Close releases it.
type Reservation struct {
	addr netip.AddrPort
	fd   int
}

// Addr returns the reserved address as host:port.
func (r *Reservation) Addr() string { return r.addr.String() }

// Port returns the reserved port.
func (r *Reservation) Port() uint16 { return r.addr.Port() }

// Loopback reserves a port on 127.0.0.1 for the rest of the test and
// returns it as host:port.
func Loopback(tb testing.TB) string {
	tb.Helper()
	r, err := Reserve(netip.MustParseAddr("127.0.0.1"))
	if err != nil {
		tb.Fatalf("reserve a loopback port: %v", err)
	}
	tb.Cleanup(func() { _ = r.Close() })
	return r.Addr()
}
