package main

import (
	"log/slog"
	"net"
	"net/netip"
)

// adminExposure returns a warning when the admin listener bound at addr
// (host:port as the listener reports it) can be reached from other hosts
// while no admin token is configured: the gateway would then create orders
// at the provider for anyone who can reach the port. It returns "" when
// the listener is on loopback or a token guards it.
func adminExposure(addr string, tokenSet bool) string {
	if tokenSet {
		return ""
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return ""
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.Unmap().IsLoopback() {
		return ""
	}
	return "admin API is reachable beyond loopback without a token: anyone who can reach it can read orders " +
		"and create payments; set admin.token_file (or ORDERD_ADMIN_TOKEN) or bind admin.listen to 127.0.0.1"
}

// warnAdminExposure logs adminExposure's warning, if any, once at start.
func warnAdminExposure(log *slog.Logger, addr string, tokenSet bool) {
	if msg := adminExposure(addr, tokenSet); msg != "" {
		log.Warn(msg, "addr", addr)
	}
}
