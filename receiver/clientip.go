package receiver

import (
	"fmt"
	"net/netip"
	"strings"
)

// clientAddr returns the address of the party that sent the request.
//
// The TCP peer is the sender unless it is a trusted proxy. Then the sender is
// read from X-Forwarded-For, right to left: each trusted proxy appends the
// address it received the request from, so the right-most hop that is not a
// trusted proxy is the first address nobody trusted vouches for. Hops left
// of it were written by the client itself and could be anything. When every
// hop is trusted, the left-most one is the sender.
//
// ok is false when the sender cannot be told: the peer address does not
// parse, or a hop that must be read is not an address.
func clientAddr(remoteAddr string, xff []string, trusted []netip.Prefix) (addr netip.Addr, ok bool) {
	peer, ok := parseHop(remoteAddr)
	if !ok {
		return netip.Addr{}, false
	}
	if !contains(trusted, peer) || len(xff) == 0 {
		return peer, true
	}
	last := peer
	for i := len(xff) - 1; i >= 0; i-- {
		hops := xff[i]
		for hops != "" {
			var hop string
			if j := strings.LastIndexByte(hops, ','); j >= 0 {
				hop, hops = hops[j+1:], hops[:j]
			} else {
				hop, hops = hops, ""
			}
			hop = strings.TrimSpace(hop)
			if hop == "" {
				continue
			}
			a, ok := parseHop(hop)
			if !ok {
				return netip.Addr{}, false
			}
			if !contains(trusted, a) {
				return a, true
			}
			last = a
		}
	}
	return last, true
}

// parseHop parses an address with or without a port ("192.0.2.1",
// "192.0.2.1:443", "2001:db8::1", "[2001:db8::1]:443"). IPv4-mapped IPv6
// addresses are unmapped so that IPv4 prefixes match them, and zones are
// dropped.
func parseHop(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

func contains(prefixes []netip.Prefix, a netip.Addr) bool {
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// normalizePrefixes masks each prefix and unmaps IPv4-mapped IPv6 prefixes,
// so ::ffff:192.0.2.0/120 matches 192.0.2.1 like 192.0.2.0/24 does.
func normalizePrefixes(in []netip.Prefix) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(in))
	for _, p := range in {
		if !p.IsValid() {
			continue
		}
		a, bits := p.Addr(), p.Bits()
		if a.Is4In6() && bits >= 96 {
			a, bits = a.Unmap(), bits-96
		}
		out = append(out, netip.PrefixFrom(a.WithZone(""), bits).Masked())
	}
	return out
}

// ParsePrefixes parses an allow-list as configured: each entry is a CIDR
// prefix ("203.0.113.0/24", "2001:db8::/32") or a single address, which
// stands for itself alone. The error names the first entry that is neither.
func ParsePrefixes(entries []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(entries))
	for i, e := range entries {
		s := strings.TrimSpace(e)
		if strings.Contains(s, "/") {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				return nil, fmt.Errorf("entry %d (%q) is not a CIDR prefix: %w", i+1, e, err)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("entry %d (%q) is neither an address nor a CIDR prefix", i+1, e)
		}
		a = a.WithZone("")
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}
