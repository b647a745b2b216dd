package testaddr

import (
	"errors"
	"fmt"
	"net/netip"
	"syscall"
)

// Reserve binds a socket to a free port on ip and keeps it bound, without
// listening, until Close. It supports IPv4 addresses.
func Reserve(ip netip.Addr) (*Reservation, error) {
	ip = ip.Unmap()
	if !ip.Is4() {
		return nil, fmt.Errorf("reserve a port on %s: only IPv4 addresses are supported", ip)
	}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("reserve a port on %s: socket: %w", ip, err)
	}
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("reserve a port on %s: SO_REUSEADDR: %w", ip, err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: ip.As4()}); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("reserve a port on %s: bind: %w", ip, err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("reserve a port on %s: getsockname: %w", ip, err)
	}
	in4, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		syscall.Close(fd)
		return nil, errors.New("reserve a port: getsockname returned no IPv4 address")
	}
	return &Reservation{addr: netip.AddrPortFrom(ip, uint16(in4.Port)), fd: fd}, nil
}

// Close releases the port.
func (r *Reservation) Close() error {
	if r.fd < 0 {
		return nil
	}
	err := syscall.Close(r.fd)
	r.fd = -1
	return err
}
