package replica

import (
	"net"
	"sync"
)

// handoff is one bound listener served first by the follower's HTTP
// server and then, from the moment the leader's daemon first accepts on
// it, by the daemon's: the socket stays open in between, so an API client
// or a probe that connects while the replica takes over waits for its
// answer instead of being refused (closing and binding again left a gap
// as long as the daemon's start).
//
// One goroutine accepts on the socket and hands each connection to
// whichever server asks next. Hand-written because net/http has no way to
// stop a server without closing its listener.
type handoff struct {
	lis      net.Listener
	accepted chan acceptResult
	taken    chan struct{} // closed by the leader's first Accept
	takeOnce sync.Once
	closed   chan struct{} // closed with the socket
	close    sync.Once
}

type acceptResult struct {
	conn net.Conn
	err  error
}

func newHandoff(lis net.Listener) *handoff {
	h := &handoff{lis: lis, accepted: make(chan acceptResult), taken: make(chan struct{}), closed: make(chan struct{})}
	go h.accept()
	return h
}

// accept hands every accepted connection, and every error but the
// socket's closing, to the next Accept of either view; a server that
// retries a temporary error paces this loop.
func (h *handoff) accept() {
	for {
		c, err := h.lis.Accept()
		select {
		case <-h.closed:
			if c != nil {
				_ = c.Close()
			}
			return
		default:
		}
		select {
		case h.accepted <- acceptResult{c, err}:
		case <-h.closed:
			if c != nil {
				_ = c.Close()
			}
			return
		}
	}
}

func (h *handoff) shut() error {
	var err error
	h.close.Do(func() {
		close(h.closed)
		err = h.lis.Close()
	})
	return err
}

// follower is the listener the follower's server serves until the leader
// takes it. Closing it closes the socket only if the leader never took it.
func (h *handoff) follower() net.Listener { return &handoffView{h: h, leading: false} }

// leader is the listener the daemon serves; its first Accept takes the
// socket from the follower, and closing it closes the socket.
func (h *handoff) leader() net.Listener { return &handoffView{h: h, leading: true} }

// takenOver is closed once the leader's server accepts on the socket: the
// follower's server must then stop serving its open connections.
func (h *handoff) takenOver() <-chan struct{} { return h.taken }

type handoffView struct {
	h       *handoff
	leading bool
}

func (v *handoffView) Accept() (net.Conn, error) {
	h := v.h
	if v.leading {
		h.takeOnce.Do(func() { close(h.taken) })
		select {
		case r := <-h.accepted:
			return r.conn, r.err
		case <-h.closed:
			return nil, net.ErrClosed
		}
	}
	// The check first: a follower must not win a connection from the
	// leader once it took over (select picks at random among ready cases).
	select {
	case <-h.taken:
		return nil, net.ErrClosed
	case <-h.closed:
		return nil, net.ErrClosed
	default:
	}
	select {
	case r := <-h.accepted:
		return r.conn, r.err
	case <-h.taken:
		return nil, net.ErrClosed
	case <-h.closed:
		return nil, net.ErrClosed
	}
}

func (v *handoffView) Close() error {
	if !v.leading {
		select {
		case <-v.h.taken:
			return nil // the leader's now
		default:
		}
	}
	return v.h.shut()
}

func (v *handoffView) Addr() net.Addr { return v.h.lis.Addr() }
