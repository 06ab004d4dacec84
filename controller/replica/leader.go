package replica

import (
	"context"
	"errors"
	"log/slog"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"

	"github.com/sluice-dev/sluice/controller/ackboard"
	"github.com/sluice-dev/sluice/controller/daemon"
	election "github.com/sluice-dev/sluice/controller/leader"
)

// leader is a replica's work while it holds the Lease: a whole daemon
// (controller/daemon) that follows git and runs the rollouts, analysis,
// the scheduler and alerts, as a single `sluice run` does. The replica
// adds three things to it: every write to the cluster state is fenced by
// the Lease (the elector); with the state in the cluster, a step's wait
// for ACKs lasts until the followers' clients have ACKed too
// (leaderAckWait); and the daemon serves the follower's sockets, handed
// over open (sockets).
type leader struct {
	opts    daemon.Options
	client  kubernetes.Interface
	elector *election.Elector
}

// run builds the daemon, now that this replica leads, so that it starts
// from the stored state exactly as a restart does, and runs it on s until
// ctx ends: the lease was lost, or the process stops.
func (l *leader) run(ctx context.Context, s sockets) error {
	o := l.opts
	o.Fence = l.elector
	o.HTTPListener, o.XDSListener = s.http, s.xds
	if board := leaderBoard(ctx, l.client, o, l.elector.Identity()); board != nil {
		o.WrapGateway = waitForFollowers(board)
	}
	d, err := daemon.New(o)
	if err != nil {
		return err
	}
	return d.Run(ctx)
}

// leaderBoard watches the followers' ACK reports for the leader's waits
// (ackboard). It cannot fail the leadership: without it (no RBAC to list
// the ConfigMaps) a step waits for the leader's own clients only, as the
// error log says.
func leaderBoard(ctx context.Context, client kubernetes.Interface, opts daemon.Options, identity string) *ackboard.Board {
	board, err := ackboard.NewBoard(ackboard.BoardOptions{Client: client, Namespace: opts.OwnNamespace(), Identity: identity, Logger: opts.Logger})
	if err != nil {
		opts.Logger.Error("followers' xDS acks are not waited for", "err", err)
		return nil
	}
	if err := board.Start(ctx, followerSyncTimeout); err != nil {
		opts.Logger.Error("followers' xDS acks: not listed yet; followers not seen are not waited for", "err", err)
	}
	return board
}

// logLeadFailure logs why the leader's daemon ended before its leadership
// did, at ERROR. A refusal by the apiserver (403) is named as such, with
// the resource it was about, so that the missing RBAC rule is plain from
// the log: the apiserver's message says the verb ("cannot get resource
// \"configmaps\" in API group \"\" in the namespace ...").
func logLeadFailure(log *slog.Logger, err error) {
	if !apierrors.IsForbidden(err) {
		log.Error("leader could not run; giving the Lease up", "err", err)
		return
	}
	attrs := []any{"err", err}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		if d := status.Status().Details; d != nil {
			attrs = append(attrs, "resource", d.Kind, "group", d.Group, "name", d.Name)
		}
	}
	log.Error("the apiserver refused the leader: an RBAC rule is missing (docs/kubernetes.md, RBAC for state and election); giving the Lease up", attrs...)
}
