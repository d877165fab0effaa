package nfsexport

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Loopback is the default allow-list: this host only.
var Loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// ParseAllow parses a comma-separated list of CIDR prefixes and bare
// addresses ("10.0.0.0/24,192.168.1.7"). An empty list is an error: the
// caller decides what no flag means.
func ParseAllow(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if strings.Contains(f, "/") {
			p, err := netip.ParsePrefix(f)
			if err != nil {
				return nil, fmt.Errorf("nfs: --allow %q: %w", f, err)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("nfs: --allow %q: not an address or CIDR prefix", f)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("nfs: --allow %q names no address", s)
	}
	return out, nil
}

// allowed reports whether addr (a connection's remote address) is in one
// of the prefixes. Anything that is not an IP address is refused.
func allowed(prefixes []netip.Prefix, addr net.Addr) bool {
	ta, ok := addr.(*net.TCPAddr)
	if !ok {
		return false
	}
	ip, ok := netip.AddrFromSlice(ta.IP)
	if !ok {
		return false
	}
	ip = ip.Unmap() // an IPv4 client of a dual-stack listener
	for _, p := range prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
