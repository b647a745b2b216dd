//go:build !linux

package testaddr

import (
	"errors"
	"net/netip"
)

// Reserve needs Linux: elsewhere SO_REUSEADDR does not let a server bind
// a port another socket holds, so a reservation cannot be handed over.
func Reserve(ip netip.Addr) (*Reservation, error) {
	return nil, errors.New("testaddr: port reservations need Linux")
}

// Close releases the port.
func (r *Reservation) Close() error { return nil }
