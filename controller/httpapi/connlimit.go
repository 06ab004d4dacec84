package httpapi

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// Every API connection holds a file descriptor, and the daemon shares its
// descriptors with xDS, the git cache and the store: 250 idle keep-alive
// connections under a limit of 200 descriptors broke /healthz and xDS,
// and the git cache, unable to open its packs, was re-cloned. connLimiter
// caps the open API connections at MaxConnections. Rather than stop
// accepting when full (netutil.LimitListener's way, which would leave
// /healthz waiting behind idle connections for --http-idle-timeout), a
// new connection takes the place of the longest-idle keep-alive
// connection, or else of the oldest one that has not yet sent a request
// (a slow or silent client); only when every connection is serving a
// request is the new one closed at once. An evicted keep-alive
// connection is what --http-idle-timeout would have closed anyway: HTTP
// clients retry on a fresh connection.
type connLimiter struct {
	net.Listener
	max     int
	refused func(reason string)

	mu    sync.Mutex
	conns map[*limitedConn]struct{}
}

// limitedConn is one counted connection with its last http.ConnState.
type limitedConn struct {
	net.Conn
	l     *connLimiter
	once  sync.Once
	state http.ConnState // guarded by l.mu
	since time.Time      // when state was entered; guarded by l.mu
}

func (c *limitedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

// LimitConnections caps the connections srv serves from lis at the
// handler's MaxConnections, and tracks their state through srv.ConnState.
// Call it before srv.Serve(returned listener).
func (h *Handler) LimitConnections(srv *http.Server, lis net.Listener) net.Listener {
	l := &connLimiter{Listener: lis, max: h.limits.MaxConnections, conns: map[*limitedConn]struct{}{},
		refused: func(reason string) { h.refused.WithLabelValues(reason).Inc() }}
	prev := srv.ConnState
	srv.ConnState = func(c net.Conn, s http.ConnState) {
		l.track(c, s)
		if prev != nil {
			prev(c, s)
		}
	}
	return l
}

func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		lc := &limitedConn{Conn: c, l: l, state: http.StateNew, since: time.Now()}
		victim, ok := l.admit(lc)
		if victim != nil {
			l.refused(refusedConnectionEvicted)
			_ = victim.Close()
		}
		if ok {
			return lc, nil
		}
		l.refused(refusedConnectionsFull)
		_ = c.Close()
	}
}

// admit counts c in, making room by choosing a victim when full; false
// when every connection is serving a request.
func (l *connLimiter) admit(c *limitedConn) (victim *limitedConn, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.conns) >= l.max {
		victim = l.victim()
		if victim == nil {
			return nil, false
		}
		delete(l.conns, victim) // its Close finds it gone
	}
	l.conns[c] = struct{}{}
	return victim, true
}

// victim is the longest-idle connection, else the oldest that has sent no
// request yet, else nil. Callers hold l.mu.
func (l *connLimiter) victim() *limitedConn {
	var idle, fresh *limitedConn
	for c := range l.conns {
		switch c.state {
		case http.StateIdle:
			if idle == nil || c.since.Before(idle.since) {
				idle = c
			}
		case http.StateNew:
			if fresh == nil || c.since.Before(fresh.since) {
				fresh = c
			}
		}
	}
	if idle != nil {
		return idle
	}
	return fresh
}

func (l *connLimiter) track(c net.Conn, s http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	lc.state, lc.since = s, time.Now()
}
