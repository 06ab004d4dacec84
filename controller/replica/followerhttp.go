package replica

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sluice-dev/sluice/controller/daemon"
	"github.com/sluice-dev/sluice/controller/httpapi"
)

// followerHTTP serves the HTTP address while the replica follows, until
// the leader's daemon takes the listener over.
type followerHTTP struct {
	handoff *handoff
	srv     *http.Server
	// closeStreams ends the API's event streams (a client reconnects, to
	// the leader after a takeover).
	closeStreams func()
	// registry is served at /metrics: the follower's own (its xDS
	// gateway, the process), not the leader's.
	registry *prometheus.Registry
	stopped  chan struct{}
	quit     chan struct{} // closed by stop
	quitOnce sync.Once
}

// followerStopTimeout bounds the wait for the follower's requests in
// flight when it stops; event streams are ended at once.
const followerStopTimeout = 5 * time.Second

// serveFollower binds the HTTP address and serves the read API of view.
func serveFollower(opts daemon.Options, view *followerAPI) (*followerHTTP, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	srv, closeStreams, err := followerServer(opts, view, reg)
	if err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", opts.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("http listener: %w", err)
	}
	f := &followerHTTP{handoff: newHandoff(lis), srv: srv, closeStreams: closeStreams, registry: reg,
		stopped: make(chan struct{}), quit: make(chan struct{})}
	go func() { defer close(f.stopped); _ = f.srv.Serve(f.handoff.follower()) }()
	go func() {
		select {
		case <-f.handoff.takenOver():
			f.release()
		case <-f.quit:
		}
	}()
	return f, nil
}

// followerServer is the HTTP server of a follower: the API handler, with
// its limits, tokens and host names, on view. closeStreams ends its event streams.
func followerServer(opts daemon.Options, view *followerAPI, reg *prometheus.Registry) (_ *http.Server, closeStreams func(), err error) {
	apiOpts, err := opts.APIAccess(httpapi.Options{Backend: view, Ready: view.ready, Registry: reg, Logger: opts.Logger.With("role", "follower")})
	if err != nil {
		return nil, nil, err
	}
	h, err := httpapi.New(apiOpts)
	if err != nil {
		return nil, nil, fmt.Errorf("follower http api: %w", err)
	}
	return h.NewServer(), h.CloseStreams, nil
}

// release lets the follower's open connections go once the leader took
// the listener: each answers the request it has (no keep-alive from now
// on, idle ones are closed) and event streams end, so clients reconnect
// to the leader. Not Shutdown: net/http's Shutdown drops, unanswered, a
// connection whose request it reads after Shutdown began, and the
// follower may have just accepted one.
func (f *followerHTTP) release() {
	f.srv.SetKeepAlivesEnabled(false)
	f.closeStreams()
}

// stop ends serving: open connections finish their request (event
// streams end), then the server is gone. The socket is closed too unless
// the leader took it. Calling it again is harmless.
func (f *followerHTTP) stop() {
	f.quitOnce.Do(func() { close(f.quit) })
	ctx, cancel := context.WithTimeout(context.Background(), followerStopTimeout)
	defer cancel()
	if f.srv.Shutdown(ctx) != nil {
		_ = f.srv.Close()
	}
	<-f.stopped
}
