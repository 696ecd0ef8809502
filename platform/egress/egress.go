package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"

	"github.com/toolcrib/toolcrib/platform/config"
)

// Rule names the rule of the policy that refused a destination.
type Rule string

// The rules; [RefusedError.Rule] is one of them.
const (
	RuleMetadata  Rule = "metadata"
	RuleLinkLocal Rule = "link-local"
	RuleSpecial   Rule = "special-address"
	RuleLoopback  Rule = "loopback"
	// RuleLoopbackPort refuses a loopback destination on a port outside
	// [Policy.LoopbackPorts].
	RuleLoopbackPort Rule = "loopback-port"
	RulePrivate      Rule = "private-address"
	RuleHost         Rule = "host-not-allowed"
	RuleInvalid      Rule = "invalid-host"
)

// explain says what each rule means and how an operator lifts it (if at
// all); it is part of every refusal's text.
var explain = map[Rule]string{
	RuleMetadata:  "cloud metadata addresses and names are never allowed",
	RuleLinkLocal: "link-local addresses (169.254.0.0/16, fe80::/10) are never allowed",
	RuleSpecial:   "unspecified, multicast and broadcast addresses are never allowed",
	RuleLoopback:  "loopback is allowed only on the ports of --egress-allow-loopback-ports (or on every port with --egress-allow-loopback)",
	RuleLoopbackPort: "loopback is allowed only on the ports of --egress-allow-loopback-ports; databases, caches and toolcrib's own services " +
		"listen on other loopback ports",
	RulePrivate: "non-public addresses are allowed only inside an --egress-allow-cidrs range",
	RuleHost:    "the host matches no --egress-allow-hosts pattern",
	RuleInvalid: "the host is not a valid name or address",
}

// metadataAddrs are cloud instance-metadata endpoints outside link-local
// (and the link-local ones, so that they are named as what they are).
var metadataAddrs = map[netip.Addr]bool{
	netip.MustParseAddr("169.254.169.254"): true, // AWS, GCP, Azure, OCI, …
	netip.MustParseAddr("169.254.170.2"):   true, // AWS ECS task metadata
	netip.MustParseAddr("fd00:ec2::254"):   true, // AWS IMDS over IPv6
	netip.MustParseAddr("100.100.100.200"): true, // Alibaba Cloud
}

// metadataNames are host names of cloud metadata services.
var metadataNames = map[string]bool{
	"metadata.google.internal":   true,
	"metadata.goog":              true,
	"metadata":                   true,
	"instance-data":              true,
	"instance-data.ec2.internal": true,
	"metadata.azure.internal":    true,
	"metadata.tencentyun.com":    true,
}

// cgnat is the shared address space (RFC 6598), not covered by
// [netip.Addr.IsPrivate].
var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// Policy is the egress policy. The zero value allows public addresses only.
type Policy struct {
	// Hosts are allowed host patterns: `mcp.example.com` (exactly that
	// name) or `*.corp.example` (any name below corp.example). Empty allows
	// any host name whose addresses the other rules allow.
	Hosts []string
	// CIDRs are non-public ranges that may be reached (e.g. 10.20.0.0/16).
	// They never lift the metadata, link-local, special and loopback rules.
	CIDRs []netip.Prefix
	// AllowLoopback allows 127.0.0.0/8, ::1 and localhost on every port
	// (tests whose fixtures listen on random ports). Prefer LoopbackPorts.
	AllowLoopback bool
	// LoopbackPorts, when not empty, allow 127.0.0.0/8, ::1 and localhost
	// on these ports only (and take precedence over AllowLoopback): a
	// loopback URL on any other port, such as a database's, is refused
	// ([RuleLoopbackPort]).
	LoopbackPorts []PortRange
}

// PortRange is an inclusive range of TCP ports, First ≤ Last.
type PortRange struct{ First, Last uint16 }

// Contains reports whether port is in r.
func (r PortRange) Contains(port uint16) bool { return r.First <= port && port <= r.Last }

func (r PortRange) String() string {
	if r.First == r.Last {
		return strconv.Itoa(int(r.First))
	}
	return strconv.Itoa(int(r.First)) + "-" + strconv.Itoa(int(r.Last))
}

// noPort is the port of a check that knows no port (a bare host): the
// loopback port rule is then left to the dial, which knows it.
const noPort = -1

// checkLoopback applies the loopback rules to a loopback host or address
// at port (or noPort).
func (p Policy) checkLoopback(what string, port int) error {
	if len(p.LoopbackPorts) == 0 {
		if !p.AllowLoopback {
			return refuse(RuleLoopback, what)
		}
		return nil
	}
	if port == noPort {
		return nil
	}
	for _, r := range p.LoopbackPorts {
		if port >= 0 && port <= 65535 && r.Contains(uint16(port)) {
			return nil
		}
	}
	return refuse(RuleLoopbackPort, net.JoinHostPort(what, strconv.Itoa(port)))
}

// RefusedError says the policy refuses a destination. What is a bounded,
// printable form of the host or address refused.
type RefusedError struct {
	Rule Rule
	What string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("the egress policy refuses %s (rule %s: %s)", e.What, e.Rule, explain[e.Rule])
}

// Description is the text of a field violation for a refused URL: it
// names the rule, not the value.
func (e *RefusedError) Description() string {
	return fmt.Sprintf("refused by the egress policy, rule %s: %s", e.Rule, explain[e.Rule])
}

func refuse(rule Rule, what string) error {
	const maxWhat = 64
	if len(what) > maxWhat {
		what = what[:maxWhat] + "…"
	}
	return &RefusedError{Rule: rule, What: fmt.Sprintf("%q", what)}
}

// CheckURL checks the host and port of an absolute URL (registration time:
// no name is resolved; [Policy.DialContext] checks the addresses). A URL
// without a port has its scheme's (http 80, https 443).
func (p Policy) CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return refuse(RuleInvalid, "")
	}
	port := noPort
	switch ps := u.Port(); {
	case ps != "":
		n, err := strconv.ParseUint(ps, 10, 16)
		if err != nil {
			return refuse(RuleInvalid, u.Host)
		}
		port = int(n)
	case u.Scheme == "http":
		port = 80
	case u.Scheme == "https":
		port = 443
	}
	return p.checkHost(u.Hostname(), port)
}

// CheckHost checks a host name or address literal whose port is not known
// yet; the dial ([Policy.DialContext]) checks the port.
func (p Policy) CheckHost(host string) error { return p.checkHost(host, noPort) }

// CheckHostPort checks a host name or address literal and the port it is
// reached on.
func (p Policy) CheckHostPort(host string, port uint16) error { return p.checkHost(host, int(port)) }

func (p Policy) checkHost(host string, port int) error {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if h == "" || strings.ContainsFunc(h, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return refuse(RuleInvalid, host)
	}
	if a, err := netip.ParseAddr(h); err == nil {
		if err := p.checkAddr(a, port); err != nil {
			return err
		}
		if len(p.Hosts) > 0 && !p.inCIDRs(a.WithZone("").Unmap()) && !a.Unmap().IsLoopback() {
			return refuse(RuleHost, host)
		}
		return nil
	}
	switch {
	case metadataNames[h]:
		return refuse(RuleMetadata, host)
	case h == "localhost" || strings.HasSuffix(h, ".localhost"):
		return p.checkLoopback(host, port)
	}
	if len(p.Hosts) > 0 && !p.hostAllowed(h) {
		return refuse(RuleHost, host)
	}
	return nil
}

func (p Policy) hostAllowed(h string) bool {
	for _, pat := range p.Hosts {
		pat = strings.ToLower(pat)
		if suffix, ok := strings.CutPrefix(pat, "*."); ok {
			if strings.HasSuffix(h, "."+suffix) {
				return true
			}
		} else if h == pat {
			return true
		}
	}
	return false
}

func (p Policy) inCIDRs(a netip.Addr) bool {
	for _, c := range p.CIDRs {
		if c.Contains(a) {
			return true
		}
	}
	return false
}

// CheckAddr checks one address (what a name resolved to) whose port is not
// known.
func (p Policy) CheckAddr(a netip.Addr) error { return p.checkAddr(a, noPort) }

// CheckAddrPort checks one address and the port it is reached on.
func (p Policy) CheckAddrPort(ap netip.AddrPort) error { return p.checkAddr(ap.Addr(), int(ap.Port())) }

func (p Policy) checkAddr(a netip.Addr, port int) error {
	a = a.WithZone("").Unmap()
	what := a.String()
	switch {
	case !a.IsValid():
		return refuse(RuleInvalid, what)
	case metadataAddrs[a]:
		return refuse(RuleMetadata, what)
	case a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast():
		return refuse(RuleLinkLocal, what)
	case a.IsUnspecified() || a.IsMulticast() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return refuse(RuleSpecial, what)
	case a.IsLoopback():
		return p.checkLoopback(what, port)
	case p.inCIDRs(a):
		return nil
	case a.IsPrivate() || cgnat.Contains(a) || !a.IsGlobalUnicast():
		return refuse(RulePrivate, what)
	}
	return nil
}

// Control is a [net.Dialer] Control hook: it refuses a connection to an
// address the policy forbids before the socket connects.
func (p Policy) Control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return refuse(RuleInvalid, address)
	}
	return p.CheckAddrPort(ap)
}

// DialContext returns d's DialContext with the policy applied: the host
// name is checked before it is resolved, and every resolved address before
// its socket connects (d's own Control, if any, runs after the policy's).
func (p Policy) DialContext(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	dd := *d
	inner := d.Control
	dd.Control = func(network, address string, c syscall.RawConn) error {
		if err := p.Control(network, address, c); err != nil {
			return err
		}
		if inner != nil {
			return inner(network, address, c)
		}
		return nil
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, ps, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, refuse(RuleInvalid, addr)
		}
		port, err := strconv.ParseUint(ps, 10, 16)
		if err != nil {
			return nil, refuse(RuleInvalid, addr)
		}
		if err := p.CheckHostPort(host, uint16(port)); err != nil {
			return nil, err
		}
		return dd.DialContext(ctx, network, addr)
	}
}

// Refused returns the policy refusal in err's chain, or nil.
func Refused(err error) *RefusedError {
	var re *RefusedError
	if errors.As(err, &re) {
		return re
	}
	return nil
}

// Config is the policy as flags: --egress-allow-hosts, --egress-allow-cidrs,
// --egress-allow-loopback-ports (comma-separated) and
// --egress-allow-loopback, with environment twins
// TOOLCRIB_EGRESS_ALLOW_HOSTS, … .
type Config struct {
	// AllowHosts is the comma-separated list of [Policy.Hosts].
	AllowHosts string
	// AllowCIDRs is the comma-separated list of [Policy.CIDRs].
	AllowCIDRs string
	// AllowLoopback is [Policy.AllowLoopback].
	AllowLoopback bool
	// AllowLoopbackPorts is the comma-separated list of
	// [Policy.LoopbackPorts]: ports (7301) and ranges (7310-7399).
	AllowLoopbackPorts string
}

// Register adds the egress flags to s.
func (c *Config) Register(s *config.Set) {
	s.String(&c.AllowHosts, "egress-allow-hosts", "", "",
		"comma-separated host patterns MCP servers may have (name or *.domain); empty allows any name the address rules allow")
	s.String(&c.AllowCIDRs, "egress-allow-cidrs", "", "",
		"comma-separated non-public CIDRs MCP servers may be reached in (e.g. 10.20.0.0/16); link-local and metadata addresses are always refused")
	s.Bool(&c.AllowLoopback, "egress-allow-loopback", "", false,
		"allow MCP servers on loopback (127.0.0.0/8, ::1, localhost) on every port, databases' and toolcrib's own included; prefer --egress-allow-loopback-ports")
	s.String(&c.AllowLoopbackPorts, "egress-allow-loopback-ports", "", "",
		"comma-separated ports and ranges (7301,7310-7399) MCP servers on loopback may listen on; every other loopback port is refused")
}

// Policy parses the flags into a policy; errors name the flag.
func (c *Config) Policy() (Policy, error) {
	p := Policy{AllowLoopback: c.AllowLoopback}
	var errs []error
	for _, h := range splitList(c.AllowHosts) {
		name := strings.TrimPrefix(h, "*.")
		if name == "" || strings.ContainsAny(name, "*/:@ ") || strings.ContainsFunc(name, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			errs = append(errs, fmt.Errorf("--egress-allow-hosts: %q is not a host name or *.domain pattern", h))
			continue
		}
		p.Hosts = append(p.Hosts, strings.ToLower(h))
	}
	for _, s := range splitList(c.AllowCIDRs) {
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("--egress-allow-cidrs: %q is not a CIDR (e.g. 10.20.0.0/16)", s))
			continue
		}
		p.CIDRs = append(p.CIDRs, pfx.Masked())
	}
	for _, s := range splitList(c.AllowLoopbackPorts) {
		r, ok := parsePortRange(s)
		if !ok {
			errs = append(errs, fmt.Errorf("--egress-allow-loopback-ports: %q is not a port (1-65535) or a range of ports (7310-7399)", bound(s)))
			continue
		}
		p.LoopbackPorts = append(p.LoopbackPorts, r)
	}
	if c.AllowLoopback && len(p.LoopbackPorts) > 0 {
		errs = append(errs, errors.New("--egress-allow-loopback allows every loopback port and --egress-allow-loopback-ports only some: give one of them"))
	}
	return p, errors.Join(errs...)
}

// parsePortRange parses `7301` or `7310-7399` (ports 1-65535, first ≤ last).
func parsePortRange(s string) (PortRange, bool) {
	first, last, isRange := strings.Cut(s, "-")
	if !isRange {
		last = first
	}
	a, err1 := strconv.ParseUint(strings.TrimSpace(first), 10, 16)
	b, err2 := strconv.ParseUint(strings.TrimSpace(last), 10, 16)
	if err1 != nil || err2 != nil || a == 0 || a > b {
		return PortRange{}, false
	}
	return PortRange{First: uint16(a), Last: uint16(b)}, true
}

// bound shortens a flag value for an error message.
func bound(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
