// Package replica is one replica of `sluice run --kubernetes
// --leader-elect`: its role, follower or leader, the work of each, and
// the moves between them (this file).
//
// A follower serves what the leader wrote into the cluster, read only:
// xDS built from the SluiceRollout records with the endpoints of its own
// informers, its clients' ACKs reported back to the leader, and the read
// API and dashboard on the same records, with writes refused (503, naming
// the leader). The state is always in the cluster: --leader-elect with
// bbolt is refused (daemon.Options).
//
// A leader adds everything that acts: a whole daemon (controller/daemon)
// that follows git and runs the rollouts, analysis, the scheduler and
// alerts, with its writes to the cluster state fenced by the Lease and
// its waits for ACKs extended to the followers' clients. It takes the
// follower's sockets over open, so no client is refused in between.
package replica

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/client-go/kubernetes"

	"github.com/sluice-dev/sluice/controller/daemon"
	election "github.com/sluice-dev/sluice/controller/leader"
)

// Run is `sluice run --leader-elect`. A replica's life, in order:
//
//  1. Follow: bind the HTTP and xDS addresses and serve as a follower
//     (follower.go); with the state in the cluster it is Ready once it
//     serves xDS from the leader's records.
//  2. Campaign for the Lease (controller/leader's LeaseName, in sluice's
//     own namespace), following meanwhile.
//  3. Lead, on winning it: the follower stops serving xDS and hands its
//     still-open sockets over; the leader builds its daemon on them
//     (leader.go), from the stored state, exactly as a restart does.
//  4. Exit when the lease is lost: Run returns controller/leader's
//     ErrLostLeadership and the process should exit; its restart follows
//     and campaigns again. A leader never goes back to following.
//
// If the leader's daemon cannot run (say, the apiserver refuses it an
// RBAC rule), Run logs why, gives the Lease up and returns that error.
func Run(ctx context.Context, opts daemon.Options) error {
	if err := opts.Complete(); err != nil {
		return err
	}
	if !opts.LeaderElect {
		return errors.New("replica.Run needs LeaderElect")
	}
	cfg, err := opts.KubeConfig()
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	elector, err := election.New(election.Options{Client: client, Namespace: opts.OwnNamespace(), Logger: opts.Logger})
	if err != nil {
		return err
	}

	// 1. Follow.
	f, err := startFollower(ctx, opts, cfg, elector)
	if err != nil {
		return err
	}
	defer f.stop()

	// 2. Campaign.
	httpAddr, xdsAddr := f.addrs()
	opts.Logger.Info("campaigning for leadership", "identity", elector.Identity(), "lease", opts.OwnNamespace()+"/"+election.LeaseName,
		"http", httpAddr, "xds", xdsAddr)
	var leadErr error
	err = elector.Run(ctx, func(ctx context.Context) {
		// 3. Lead: xDS clients of this replica reconnect, keeping their
		// routes meanwhile, and wait in the socket's backlog until the
		// daemon serves; HTTP clients are answered by the follower until
		// the daemon's server accepts.
		s, err := f.handOver()
		if err != nil {
			leadErr = err
			return
		}
		l := &leader{opts: opts, client: client, elector: elector}
		leadErr = l.run(ctx, s)
	})

	// 4. Exit.
	if leadErr != nil {
		logLeadFailure(opts.Logger, leadErr)
		return leadErr
	}
	return err
}
