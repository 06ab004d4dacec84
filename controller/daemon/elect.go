package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/client-go/kubernetes"

	"github.com/sluice-dev/sluice/controller/ackboard"
	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/leader"
)

// RunElected is `sluice run --leader-elect`: the replica campaigns for the
// Lease (leader.LeaseName in the options' namespace) and, only while it
// leads, runs a whole daemon (New, then Run) that follows git, runs the
// rollouts, analysis, the scheduler and alerts, with every write to the
// cluster state fenced by the lease. The daemon is built when leadership
// begins, so it starts from the stored state exactly as a restart does.
// The state must be in the cluster (Options.defaults refuses bbolt: the
// next leader would find no record). While following, the replica serves
// xDS and the read API from the leader's records (followerXDS,
// followerAPI), is Ready once it does, and refuses writes with 503 naming
// the leader. On becoming leader it hands its bound HTTP listener to the
// daemon (handoff).
//
// It returns leader.ErrLostLeadership when the lease was lost: the process
// should exit, and its restart campaigns again as a follower.
func RunElected(ctx context.Context, opts Options) error {
	if err := opts.defaults(); err != nil {
		return err
	}
	if !opts.LeaderElect {
		return errors.New("RunElected needs LeaderElect")
	}
	cfg, err := kubeConfig(opts.Kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	elector, err := leader.New(leader.Options{Client: client, Namespace: opts.namespace(), Logger: opts.Logger})
	if err != nil {
		return err
	}
	var view *followerAPI
	if opts.StateStore == StateStoreKubernetes {
		view = newFollowerAPI(elector.Leader)
	}
	follower, err := serveFollower(opts, view)
	if err != nil {
		return err
	}
	defer follower.stop()
	xdsAddr := ""
	var xds *followerXDS
	if opts.StateStore == StateStoreKubernetes {
		if xds, err = startFollowerXDS(ctx, opts, cfg, elector.Identity(), opts.Logger, follower.registry, view); err != nil {
			return err
		}
		defer xds.stop()
		xdsAddr = xds.addr.String()
	}
	opts.Logger.Info("campaigning for leadership", "identity", elector.Identity(), "lease", opts.namespace()+"/"+leader.LeaseName,
		"http", follower.handoff.lis.Addr().String(), "xds", xdsAddr)
	var leadErr error
	err = elector.Run(ctx, func(ctx context.Context) {
		// The daemon serves the follower's xDS socket, handed over open:
		// xDS clients of this replica reconnect, keeping their routes
		// meanwhile, and wait in the socket's backlog until the daemon
		// serves. The HTTP listener is handed over too: the follower
		// serves it until the daemon's server accepts.
		o := opts
		if xds != nil {
			if o.xdsListener, leadErr = xds.handover(); leadErr != nil {
				return
			}
		}
		o.fence = elector
		o.httpListener = follower.handoff.leader()
		if opts.StateStore == StateStoreKubernetes {
			o.followerAcks = leaderBoard(ctx, client, opts, elector.Identity())
		}
		d, err := New(o)
		if err != nil {
			leadErr = err
			return
		}
		leadErr = d.Run(ctx)
	})
	if leadErr != nil {
		logLeadFailure(opts.Logger, leadErr)
		return leadErr
	}
	return err
}

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

// serveFollower binds the HTTP address and serves the read API of view
// (nil with the state in bbolt, which a follower cannot read: then only
// health checks, and /readyz 503).
func serveFollower(opts Options, view *followerAPI) (*followerHTTP, error) {
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
// its limits and token, on view; or health checks only. closeStreams ends
// its event streams.
func followerServer(opts Options, view *followerAPI, reg *prometheus.Registry) (_ *http.Server, closeStreams func(), err error) {
	if view == nil {
		mux := http.NewServeMux()
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
		mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "not ready: following, not the leader (the state is in the leader's bbolt file)", http.StatusServiceUnavailable)
		})
		return &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, func() {}, nil
	}
	token := ""
	if opts.APITokenFile != "" {
		if token, err = httpapi.ReadToken(opts.APITokenFile); err != nil {
			return nil, nil, fmt.Errorf("api token: %w", err)
		}
	}
	h, err := httpapi.New(httpapi.Options{Backend: view, Ready: view.ready, Registry: reg, Token: token,
		Limits: opts.HTTPLimits, Logger: opts.Logger.With("role", "follower")})
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

// leaderBoard watches the followers' ACK reports for the leader's waits
// (ackboard). It cannot fail the leadership: without it (no RBAC to list
// the ConfigMaps) a step waits for the leader's own clients only, as the
// error log says.
func leaderBoard(ctx context.Context, client kubernetes.Interface, opts Options, identity string) *ackboard.Board {
	board, err := ackboard.NewBoard(ackboard.BoardOptions{Client: client, Namespace: opts.namespace(), Identity: identity, Logger: opts.Logger})
	if err != nil {
		opts.Logger.Error("followers' xDS acks are not waited for", "err", err)
		return nil
	}
	if err := board.Start(ctx, followerSyncTimeout); err != nil {
		opts.Logger.Error("followers' xDS acks: not listed yet; followers not seen are not waited for", "err", err)
	}
	return board
}
