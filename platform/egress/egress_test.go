package egress_test

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolcrib/toolcrib/platform/egress"
)

func TestCheckURLNamesTheRule(t *testing.T) {
	def := egress.Policy{}
	internal := egress.Policy{CIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, AllowLoopback: true}
	hosts := egress.Policy{Hosts: []string{"mcp.example.com", "*.corp.example"}, CIDRs: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}}
	for _, c := range []struct {
		p    egress.Policy
		url  string
		want egress.Rule // "" = allowed
	}{
		{def, "https://169.254.169.254/latest/meta-data/", egress.RuleMetadata},
		{internal, "https://169.254.169.254/latest/meta-data/", egress.RuleMetadata},
		{def, "https://metadata.google.internal/computeMetadata/v1/", egress.RuleMetadata},
		{def, "https://METADATA.google.internal./x", egress.RuleMetadata},
		{def, "https://[fd00:ec2::254]/latest", egress.RuleMetadata},
		{def, "https://[::ffff:169.254.169.254]/", egress.RuleMetadata},
		{def, "https://100.100.100.200/", egress.RuleMetadata},
		{def, "https://169.254.10.10/", egress.RuleLinkLocal},
		{internal, "https://[fe80::1%25eth0]/", egress.RuleLinkLocal},
		{def, "https://10.0.0.1/mcp", egress.RulePrivate},
		{internal, "https://10.0.0.1/mcp", ""},
		{def, "https://192.168.1.1/", egress.RulePrivate},
		{def, "https://100.64.1.1/", egress.RulePrivate},
		{def, "https://[fd12::1]/", egress.RulePrivate},
		{def, "http://127.0.0.1:5432/", egress.RuleLoopback},
		{def, "http://localhost:5432/", egress.RuleLoopback},
		{def, "http://[::1]:5432/", egress.RuleLoopback},
		{internal, "http://127.0.0.1:5432/", ""},
		{def, "https://0.0.0.0/", egress.RuleSpecial},
		{def, "https://239.1.2.3/", egress.RuleSpecial},
		{def, "https://mcp.example.com/mcp", ""},
		{def, "https://8.8.8.8/mcp", ""},
		{hosts, "https://mcp.example.com/mcp", ""},
		{hosts, "https://a.b.corp.example/mcp", ""},
		{hosts, "https://corp.example/mcp", egress.RuleHost},
		{hosts, "https://evil.example/mcp", egress.RuleHost},
		{hosts, "https://8.8.8.8/mcp", egress.RuleHost},
		{hosts, "https://10.1.2.3/mcp", ""},
		{hosts, "https://metadata.google.internal/", egress.RuleMetadata},
	} {
		err := c.p.CheckURL(c.url)
		got := egress.Rule("")
		if re := egress.Refused(err); re != nil {
			got = re.Rule
		} else if err != nil {
			t.Fatalf("%s: not a RefusedError: %v", c.url, err)
		}
		if got != c.want {
			t.Errorf("%+v %s: rule %q (%v), want %q", c.p, c.url, got, err, c.want)
		}
	}
}

// TestLoopbackPortsAdmitOnlyTheNamedPorts: with a port list, loopback is
// allowed on those ports only, whichever way the destination is written
// (URL with or without a port, address, name, dial); the database, cache
// and toolcrib's own ports are refused with the loopback-port rule.
func TestLoopbackPortsAdmitOnlyTheNamedPorts(t *testing.T) {
	p, err := (&egress.Config{AllowLoopbackPorts: "7301, 7310-7399"}).Policy()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		url  string
		want egress.Rule
	}{
		{"http://127.0.0.1:7301/mcp", ""},
		{"http://localhost:7301/mcp", ""},
		{"http://[::1]:7301/mcp", ""},
		{"http://127.0.0.1:7310/mcp", ""},
		{"http://127.0.0.1:7399/mcp", ""},
		{"http://127.0.0.1:5432/mcp", egress.RuleLoopbackPort},
		{"http://127.0.0.1:6379/mcp", egress.RuleLoopbackPort},
		{"http://localhost:6379/mcp", egress.RuleLoopbackPort},
		{"http://[::1]:5432/mcp", egress.RuleLoopbackPort},
		{"http://127.0.0.2:7101/mcp", egress.RuleLoopbackPort},
		{"http://127.0.0.1:7106/mcp", egress.RuleLoopbackPort},
		{"http://127.0.0.1:9101/metrics", egress.RuleLoopbackPort},
		{"http://127.0.0.1:7302/mcp", egress.RuleLoopbackPort},
		{"http://127.0.0.1:7400/mcp", egress.RuleLoopbackPort},
		{"http://127.0.0.1/mcp", egress.RuleLoopbackPort},  // port 80
		{"https://localhost/mcp", egress.RuleLoopbackPort}, // port 443
		{"http://127.0.0.1:99999/mcp", egress.RuleInvalid},
		{"https://10.0.0.1:7301/mcp", egress.RulePrivate},
		{"https://mcp.example.com:5432/mcp", ""}, // the list is about loopback only
	} {
		got := egress.Rule("")
		if re := egress.Refused(p.CheckURL(c.url)); re != nil {
			got = re.Rule
			if c.want == egress.RuleLoopbackPort && !strings.Contains(re.Error(), "--egress-allow-loopback-ports") {
				t.Errorf("%s: %v does not say how to allow it", c.url, re)
			}
		}
		if got != c.want {
			t.Errorf("%s: rule %q, want %q", c.url, got, c.want)
		}
	}
	if re := egress.Refused(p.CheckAddrPort(netip.MustParseAddrPort("127.0.0.1:5432"))); re == nil || re.Rule != egress.RuleLoopbackPort {
		t.Fatalf("CheckAddrPort 127.0.0.1:5432: %v", re)
	}
	if err := p.CheckAddrPort(netip.MustParseAddrPort("[::1]:7301")); err != nil {
		t.Fatalf("CheckAddrPort [::1]:7301: %v", err)
	}

	// The dial: a listener on a port outside the list is never connected
	// to, by address or by name; one on a listed port is.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	var accepts atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepts.Add(1)
			c.Close()
		}
	}()
	others := egress.Policy{LoopbackPorts: []egress.PortRange{{First: port + 1, Last: port + 1}}}
	for _, addr := range []string{ln.Addr().String(), net.JoinHostPort("localhost", strconv.Itoa(int(port)))} {
		c, err := others.DialContext(&net.Dialer{Timeout: time.Second})(context.Background(), "tcp", addr)
		if err == nil {
			c.Close()
			t.Fatalf("%s: dialled", addr)
		}
		if re := egress.Refused(err); re == nil || re.Rule != egress.RuleLoopbackPort {
			t.Fatalf("%s: %v, want rule loopback-port", addr, err)
		}
	}
	d := &net.Dialer{Timeout: time.Second, Control: others.Control}
	if c, err := d.Dial("tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Fatal("Control did not refuse")
	}
	time.Sleep(50 * time.Millisecond)
	if n := accepts.Load(); n != 0 {
		t.Fatalf("the listener accepted %d connections", n)
	}
	listed := egress.Policy{LoopbackPorts: []egress.PortRange{{First: port, Last: port}}}
	c, err := listed.DialContext(&net.Dialer{})(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

func TestConfigParsesAndRefusesBadEntries(t *testing.T) {
	p, err := (&egress.Config{AllowHosts: " mcp.example.com, *.corp.example ", AllowCIDRs: "10.1.2.3/16", AllowLoopback: true}).Policy()
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Hosts) != 2 || p.CIDRs[0].String() != "10.1.0.0/16" || !p.AllowLoopback {
		t.Fatalf("policy %+v", p)
	}
	if _, err := (&egress.Config{AllowHosts: "http://x", AllowCIDRs: "10.0.0.0"}).Policy(); err == nil ||
		!contains(err.Error(), "--egress-allow-hosts") || !contains(err.Error(), "--egress-allow-cidrs") {
		t.Fatalf("want both flags named, got %v", err)
	}
	p, err = (&egress.Config{AllowLoopbackPorts: "7301,7310-7399"}).Policy()
	if err != nil || len(p.LoopbackPorts) != 2 || p.LoopbackPorts[0] != (egress.PortRange{First: 7301, Last: 7301}) ||
		p.LoopbackPorts[1] != (egress.PortRange{First: 7310, Last: 7399}) {
		t.Fatalf("ports %+v %v", p.LoopbackPorts, err)
	}
	for _, bad := range []string{"0", "65536", "7399-7310", "x", "1-", "-5", "7301-7302-7303"} {
		if _, err := (&egress.Config{AllowLoopbackPorts: bad}).Policy(); err == nil || !contains(err.Error(), "--egress-allow-loopback-ports") {
			t.Errorf("ports %q: %v", bad, err)
		}
	}
	if _, err := (&egress.Config{AllowLoopback: true, AllowLoopbackPorts: "7301"}).Policy(); err == nil {
		t.Error("both --egress-allow-loopback and --egress-allow-loopback-ports were accepted")
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// TestDialRefusesBeforeConnecting: a loopback listener counts accepts while
// the policy forbids loopback; neither the literal address nor a name that
// resolves to it (the resolver is the system's: `localhost` is refused by
// name, an IP literal by the Control hook) reaches it.
func TestDialRefusesBeforeConnecting(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepts atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepts.Add(1)
			c.Close()
		}
	}()
	dial := egress.Policy{}.DialContext(&net.Dialer{Timeout: time.Second})
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	for _, addr := range []string{ln.Addr().String(), net.JoinHostPort("localhost", port)} {
		c, err := dial(context.Background(), "tcp", addr)
		if err == nil {
			c.Close()
			t.Fatalf("%s: dialled", addr)
		}
		if re := egress.Refused(err); re == nil || re.Rule != egress.RuleLoopback {
			t.Fatalf("%s: %v, want rule loopback", addr, err)
		}
	}
	// The Control hook alone (what a resolved name meets).
	d := &net.Dialer{Timeout: time.Second, Control: egress.Policy{}.Control}
	if c, err := d.Dial("tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Fatal("Control did not refuse")
	} else if re := egress.Refused(err); re == nil || re.Rule != egress.RuleLoopback {
		t.Fatalf("Control: %v", err)
	}
	time.Sleep(50 * time.Millisecond)
	if n := accepts.Load(); n != 0 {
		t.Fatalf("the listener accepted %d connections", n)
	}
	// Allowed, it connects: the counter can count.
	c, err := egress.Policy{AllowLoopback: true}.DialContext(&net.Dialer{})(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	deadline := time.Now().Add(2 * time.Second)
	for accepts.Load() != 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if accepts.Load() != 1 {
		t.Fatal("an allowed dial did not connect")
	}
}
