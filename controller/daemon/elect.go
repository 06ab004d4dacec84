package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/sluice-dev/sluice/controller/ackboard"
	"github.com/sluice-dev/sluice/controller/leader"
)

// RunElected is `sluice run --leader-elect`: the replica campaigns for the
// Lease (leader.LeaseName in the options' namespace) and, only while it
// leads, runs a whole daemon (New, then Run) that follows git, runs the
// rollouts, analysis, the scheduler and alerts, with every write to the
// cluster state fenced by the lease. The daemon is built when leadership
// begins, so it starts from the stored state exactly as a restart does.
// While following, the replica answers /healthz (alive) and /readyz (503:
// not the leader) on the HTTP address, so a Service sends API clients to
// the leader only; with the state in the cluster it also serves xDS from
// the leader's records (followerXDS).
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
	follower, err := serveFollower(opts.HTTPAddr)
	if err != nil {
		return err
	}
	defer follower.stop()
	xdsAddr := ""
	var xds *followerXDS
	if opts.StateStore == StateStoreKubernetes {
		if xds, err = startFollowerXDS(ctx, opts, cfg, elector.Identity(), opts.Logger); err != nil {
			return err
		}
		defer xds.stop()
		xdsAddr = xds.addr.String()
	}
	opts.Logger.Info("campaigning for leadership", "identity", elector.Identity(), "lease", opts.namespace()+"/"+leader.LeaseName,
		"http", follower.lis.Addr().String(), "xds", xdsAddr)
	var leadErr error
	err = elector.Run(ctx, func(ctx context.Context) {
		// The daemon binds the same HTTP address and serves the
		// follower's xDS socket, handed over open: xDS clients of this
		// replica reconnect, keeping their routes meanwhile, and wait in
		// the socket's backlog until the daemon serves.
		follower.stop()
		o := opts
		if xds != nil {
			if o.xdsListener, leadErr = xds.handover(); leadErr != nil {
				return
			}
		}
		o.fence = elector
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

// followerHTTP answers health checks while the replica is not leading.
type followerHTTP struct {
	lis     net.Listener
	srv     *http.Server
	stopped chan struct{}
}

func serveFollower(addr string) (*followerHTTP, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("http listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "not ready: following, not the leader", http.StatusServiceUnavailable)
	})
	f := &followerHTTP{lis: lis, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, stopped: make(chan struct{})}
	go func() { defer close(f.stopped); _ = f.srv.Serve(lis) }()
	return f, nil
}

// stop closes the listener and waits until it is released; calling it
// again is harmless.
func (f *followerHTTP) stop() {
	_ = f.srv.Close()
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
