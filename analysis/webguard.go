package analysis

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// A web metric's URL comes from git, so whoever can push chooses where
// the daemon sends a request, and its jsonPath value lands in the read
// API. webGuard keeps those requests off the addresses that only make
// sense from inside the host: loopback (the daemon's own ports, sidecars),
// link-local (cloud metadata at 169.254.169.254, fd00:ec2::254) and the
// other metadata endpoints below. The check runs on the address being
// dialled, after DNS (net.Dialer.Control), so a name that resolves to a
// public address when validated and to 169.254.169.254 when dialled
// (DNS rebinding) is still refused; every redirect hop dials again and is
// checked again.
type webGuard struct {
	names map[string]bool // host names allowed whatever they resolve to
	nets  []netip.Prefix  // addresses allowed although blocked below
}

// blockedNets are refused unless allowed; each with the reason the error
// gives.
var blockedNets = []struct {
	prefix netip.Prefix
	why    string
}{
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified (reaches this host)"},
	{netip.MustParsePrefix("::/128"), "unspecified (reaches this host)"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local (cloud metadata)"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fd00:ec2::254/128"), "cloud metadata (AWS IPv6)"},
	{netip.MustParsePrefix("100.100.100.200/32"), "cloud metadata (Alibaba)"},
}

// newWebGuard reads --analysis-allow-hosts entries: an IP address, a CIDR
// prefix, or a host name (allowed whatever it resolves to: the operator
// vouches for that name's DNS).
func newWebGuard(allow []string) (*webGuard, error) {
	g := &webGuard{names: map[string]bool{}}
	for _, raw := range allow {
		entry := strings.TrimSpace(raw)
		switch {
		case entry == "":
			continue
		case strings.Contains(entry, "/"):
			p, err := netip.ParsePrefix(entry)
			if err != nil {
				return nil, fmt.Errorf("allowed host %q: %w", entry, err)
			}
			g.nets = append(g.nets, p.Masked())
		default:
			if a, err := netip.ParseAddr(strings.Trim(entry, "[]")); err == nil {
				g.nets = append(g.nets, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
				continue
			}
			g.names[strings.ToLower(strings.TrimSuffix(entry, "."))] = true
		}
	}
	return g, nil
}

// BlockedAddressError is a web request refused because of where it would
// connect.
type BlockedAddressError struct {
	Addr netip.Addr
	Why  string
}

func (e *BlockedAddressError) Error() string {
	return fmt.Sprintf("web metrics may not reach %s, a %s address: allow it with --analysis-allow-hosts", e.Addr, e.Why)
}

// check refuses a resolved address that is blocked and not allowed.
func (g *webGuard) check(addr netip.Addr) error {
	addr = addr.Unmap()
	for _, p := range g.nets {
		if p.Contains(addr) {
			return nil
		}
	}
	for _, b := range blockedNets {
		if b.prefix.Contains(addr) {
			return &BlockedAddressError{Addr: addr, Why: b.why}
		}
	}
	return nil
}

// control is the net.Dialer hook: address is the IP and port being
// connected to, after resolution.
func (g *webGuard) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("web dial %s: %w", address, err)
	}
	return g.check(ap.Addr())
}

// dialContext dials like net.Dialer, with the check, except to host
// names the operator allowed by name.
func (g *webGuard) dialContext() func(ctx context.Context, network, addr string) (net.Conn, error) {
	open := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	checked := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: g.control}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err == nil && g.names[strings.ToLower(strings.TrimSuffix(host, "."))] {
			return open.DialContext(ctx, network, addr)
		}
		return checked.DialContext(ctx, network, addr)
	}
}

// transport is the web provider's transport: the engine's, dialling
// through the guard and never through a proxy (a proxy would dial the
// target itself, out of the guard's sight).
func (g *webGuard) transport(base http.RoundTripper) http.RoundTripper {
	t, ok := base.(*http.Transport)
	if !ok {
		t = http.DefaultTransport.(*http.Transport)
	}
	t = t.Clone()
	t.Proxy = nil
	t.DialContext = g.dialContext()
	return t
}
