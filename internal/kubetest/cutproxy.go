package kubetest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// CutProxy forwards TCP to target until Cut: then every connection drops
// and new ones are refused, as a network partition from the apiserver
// (point a kubeconfig at Addr, then Cut).
type CutProxy struct {
	lis    net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	cut    bool
}

// NewCutProxy listens on a free loopback port; the test's cleanup cuts it.
func NewCutProxy(t testing.TB, target string) *CutProxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &CutProxy{lis: lis, target: target}
	t.Cleanup(p.Cut)
	go p.serve()
	return p
}

// Addr is the address to dial instead of the target.
func (p *CutProxy) Addr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lis.Addr().String()
}

func (p *CutProxy) serve() {
	p.mu.Lock()
	lis := p.lis
	p.mu.Unlock()
	for {
		in, err := lis.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		if !p.track(in, out) {
			return
		}
		go func() { _, _ = io.Copy(out, in); _ = out.Close() }()
		go func() { _, _ = io.Copy(in, out); _ = in.Close() }()
	}
}

func (p *CutProxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		for _, c := range cs {
			_ = c.Close()
		}
		return false
	}
	p.conns = append(p.conns, cs...)
	return true
}

// Cut drops every connection and refuses new ones.
func (p *CutProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	_ = p.lis.Close()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// Restore ends a Cut: the proxy listens on the same address again, as a
// healed partition. A no-op while not cut.
func (p *CutProxy) Restore(t testing.TB) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.cut {
		return
	}
	lis, err := net.Listen("tcp", p.lis.Addr().String())
	if err != nil {
		t.Fatalf("restore proxy on %s: %v", p.lis.Addr(), err)
	}
	p.lis, p.cut = lis, false
	go p.serve()
}
