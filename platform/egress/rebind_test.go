package egress_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/toolcrib/toolcrib/platform/egress"
)

// fakeDNS answers every A question with 127.0.0.1 on a loopback UDP port:
// a name that passes every host rule but resolves to loopback, as a
// rebinding attacker's name would.
func fakeDNS(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, addr, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var p dnsmessage.Parser
			h, err := p.Start(buf[:n])
			if err != nil {
				continue
			}
			q, err := p.Question()
			if err != nil {
				continue
			}
			b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true})
			b.EnableCompression()
			_ = b.StartQuestions()
			_ = b.Question(q)
			_ = b.StartAnswers()
			if q.Type == dnsmessage.TypeA {
				_ = b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 1},
					dnsmessage.AResource{A: [4]byte{127, 0, 0, 1}})
			}
			msg, err := b.Finish()
			if err == nil {
				_, _ = pc.WriteTo(msg, addr)
			}
		}
	}()
	return pc.LocalAddr().String()
}

// TestDialRefusesANameThatResolvesToAForbiddenAddress: the name is allowed
// by every host rule (and by an allow-list naming it); only the resolved
// address is forbidden, and the Control hook refuses it before the socket
// connects.
func TestDialRefusesANameThatResolvesToAForbiddenAddress(t *testing.T) {
	dns := fakeDNS(t)
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
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "udp", dns)
	}}
	d := &net.Dialer{Timeout: 2 * time.Second, Resolver: resolver}
	for _, p := range []egress.Policy{{}, {Hosts: []string{"*.rebind.example"}}} {
		addr := net.JoinHostPort("mcp.rebind.example", port)
		if err := p.CheckHost("mcp.rebind.example"); err != nil {
			t.Fatalf("%+v: the name itself was refused: %v", p, err)
		}
		c, err := p.DialContext(d)(context.Background(), "tcp4", addr)
		if err == nil {
			c.Close()
			t.Fatalf("%+v: dialled %s", p, addr)
		}
		if re := egress.Refused(err); re == nil || re.Rule != egress.RuleLoopback {
			t.Fatalf("%+v: %v, want rule loopback", p, err)
		}
	}
	// The resolver does resolve it: allowed, the same dial connects.
	c, err := egress.Policy{AllowLoopback: true}.DialContext(d)(context.Background(), "tcp4", net.JoinHostPort("mcp.rebind.example", port))
	if err != nil {
		t.Fatalf("the fake DNS does not resolve: %v", err)
	}
	c.Close()
	deadline := time.Now().Add(2 * time.Second)
	for accepts.Load() != 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := accepts.Load(); n != 1 {
		t.Fatalf("accepts = %d, want exactly the one allowed dial", n)
	}
}
