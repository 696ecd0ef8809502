package servicetest

import (
	"net"
	"sync"
	"testing"
)

// Proxy is a loopback TCP proxy in front of a service that a test can
// sever (every connection closed, new ones refused until [Proxy.Heal]) or
// freeze (connections stay open and no byte passes until [Proxy.Thaw]: a
// stalled stream). It is closed, thawed and severed when the test ends.
type Proxy struct {
	lis    net.Listener
	mu     sync.Mutex
	target string
	cut    bool          // connections refused while cut
	frozen chan struct{} // non-nil while frozen; closed to thaw
	conns  []net.Conn
}

// NewProxy listens on a random loopback port and forwards to target.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{lis: lis, target: target}
	t.Cleanup(func() { lis.Close(); p.Thaw(); p.Sever() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			cut, target := p.cut, p.target
			p.mu.Unlock()
			if cut {
				c.Close()
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go p.pipe(up, c)
			go p.pipe(c, up)
		}
	}()
	return p
}

func (p *Proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			f := p.frozen
			p.mu.Unlock()
			if f != nil {
				<-f
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Retarget makes new connections go to target (a service restarted on
// another address); open ones are left alone.
func (p *Proxy) Retarget(target string) {
	p.mu.Lock()
	p.target = target
	p.mu.Unlock()
}

// Addr is the address to dial instead of the target.
func (p *Proxy) Addr() string { return p.lis.Addr().String() }

// Sever closes every proxied connection and refuses new ones until Heal.
func (p *Proxy) Sever() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// Heal accepts new connections again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// Freeze stops every byte on open and new connections until Thaw.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.frozen == nil {
		p.frozen = make(chan struct{})
	}
}

// Thaw lets bytes pass again.
func (p *Proxy) Thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.frozen != nil {
		close(p.frozen)
		p.frozen = nil
	}
}
