package e2e

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// xdsService stands for the Kubernetes Service in front of the replicas'
// xDS ports (the chart's, with publishNotReadyAddresses): each connection
// a client opens goes to a live replica, the next one round the list, and
// one whose replica dies is closed, so that the client reconnects through
// the Service to a replica that lives. A replica that refuses (not bound
// yet) is skipped, as the next endpoint would be tried.
type xdsService struct {
	lis  net.Listener
	live func() []*haReplica // in start order

	mu     sync.Mutex
	next   int
	closed bool
	conns  []net.Conn
	dials  []serviceDial
}

// serviceDial is one client connection the Service made.
type serviceDial struct {
	at      time.Time
	replica *haReplica
}

// startXDSService listens on a free loopback port until the test ends;
// first is where its first connection goes (a slot per Service spreads
// the clients over the replicas).
func startXDSService(t *testing.T, live func() []*haReplica, first int) *xdsService {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &xdsService{lis: lis, live: live, next: first}
	go s.serve()
	t.Cleanup(s.close)
	return s
}

func (s *xdsService) addr() string { return s.lis.Addr().String() }

func (s *xdsService) serve() {
	for {
		in, err := s.lis.Accept()
		if err != nil {
			return
		}
		go s.forward(in)
	}
}

// forward dials a live replica for in and copies both ways until either
// side ends; then both are closed, as a dead endpoint's connections are.
func (s *xdsService) forward(in net.Conn) {
	out, r := s.dial()
	if out == nil {
		_ = in.Close()
		return
	}
	if !s.track(in, out, r) {
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
	go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
	<-done
	_ = in.Close()
	_ = out.Close()
}

// dial connects to the live replicas in turn, starting with the next one.
func (s *xdsService) dial() (net.Conn, *haReplica) {
	live := s.live()
	s.mu.Lock()
	start := s.next
	s.next++
	s.mu.Unlock()
	for i := range live {
		r := live[(start+i)%len(live)]
		if out, err := net.DialTimeout("tcp", r.xdsAddr, time.Second); err == nil {
			return out, r
		}
	}
	return nil, nil
}

func (s *xdsService) track(in, out net.Conn, r *haReplica) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		_ = in.Close()
		_ = out.Close()
		return false
	}
	s.conns = append(s.conns, in, out)
	s.dials = append(s.dials, serviceDial{at: time.Now(), replica: r})
	return true
}

// connections is every connection the Service made, in order.
func (s *xdsService) connections() []serviceDial {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]serviceDial(nil), s.dials...)
}

func (s *xdsService) close() {
	_ = s.lis.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, c := range s.conns {
		_ = c.Close()
	}
}
