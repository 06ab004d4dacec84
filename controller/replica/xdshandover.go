package replica

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// handoverListener is a TCP listener that a gRPC server can stop serving
// without closing the socket, so that the next server (the leader's daemon,
// when this follower wins the lease) serves the same socket. Closed and
// bound again instead, the address refuses whoever dials in between, and a
// gRPC xDS client refused before any resource fails its waiting calls
// (see startFollowerXDS). grpc.Server's Stop and GracefulStop close every
// listener they serve, and net.Listener has no other way to end a blocked
// Accept, so Close here only detaches: it wakes Accept with a deadline and
// keeps the socket open; connections the kernel queued meanwhile wait in
// the backlog for the next server.
type handoverListener struct {
	tcp *net.TCPListener

	mu       sync.Mutex
	detached bool
	spare    []net.Conn // accepted while detaching: the next server's
}

func newHandoverListener(l net.Listener) (*handoverListener, error) {
	tcp, ok := l.(*net.TCPListener)
	if !ok {
		return nil, fmt.Errorf("xds listener: %T is not a TCP listener", l)
	}
	return &handoverListener{tcp: tcp}, nil
}

// Accept returns the next connection until Close; then net.ErrClosed, so
// that the server stops accepting (a deadline error is temporary, and gRPC
// would retry it).
func (l *handoverListener) Accept() (net.Conn, error) {
	if l.isDetached() {
		return nil, net.ErrClosed
	}
	c, err := l.tcp.Accept()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.detached {
		// Woken by Close, or a client that came in just as it was
		// called: that one is served by the next server, not dropped.
		if err == nil {
			l.spare = append(l.spare, c)
		}
		return nil, net.ErrClosed
	}
	return c, err
}

func (l *handoverListener) isDetached() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.detached
}

// Close detaches the server from the socket, leaving it open.
func (l *handoverListener) Close() error {
	l.mu.Lock()
	l.detached = true
	l.mu.Unlock()
	if err := l.tcp.SetDeadline(time.Now()); err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("detach xds listener: %w", err)
	}
	return nil
}

func (l *handoverListener) Addr() net.Addr { return l.tcp.Addr() }

// release hands the socket over once the server is detached and no longer
// accepts: the returned listener accepts what came in while detaching
// first, then the socket's backlog, and owns the socket (its Close closes
// it).
func (l *handoverListener) release() (net.Listener, error) {
	if err := l.Close(); err != nil {
		return nil, err
	}
	if err := l.tcp.SetDeadline(time.Time{}); err != nil {
		return nil, fmt.Errorf("hand xds listener over: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	spare := l.spare
	l.spare = nil
	return &spareFirst{Listener: l.tcp, spare: spare}, nil
}

// closeSocket closes the socket itself (a follower that stops without
// handing over), and any connection accepted while detaching.
func (l *handoverListener) closeSocket() error {
	l.mu.Lock()
	l.detached = true
	spare := l.spare
	l.spare = nil
	l.mu.Unlock()
	for _, c := range spare {
		_ = c.Close()
	}
	return l.tcp.Close()
}

// spareFirst accepts the given connections before the listener's own.
type spareFirst struct {
	net.Listener

	mu    sync.Mutex
	spare []net.Conn
}

func (l *spareFirst) Accept() (net.Conn, error) {
	l.mu.Lock()
	if len(l.spare) > 0 {
		c := l.spare[0]
		l.spare = l.spare[1:]
		l.mu.Unlock()
		return c, nil
	}
	l.mu.Unlock()
	return l.Listener.Accept()
}

func (l *spareFirst) Close() error {
	l.mu.Lock()
	spare := l.spare
	l.spare = nil
	l.mu.Unlock()
	for _, c := range spare {
		_ = c.Close()
	}
	return l.Listener.Close()
}
