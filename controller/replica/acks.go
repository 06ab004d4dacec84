package replica

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/ackboard"
	"github.com/sluice-dev/sluice/controller/runner"
	"github.com/sluice-dev/sluice/gateway"
)

// The ACKs of a step span the replicas: a follower reports its own xDS
// clients' ACKs (ackReporter) and the leader's wait lasts until its
// clients and every live follower's have ACKed (leaderAckWait), through
// the ackboard ConfigMaps.

// ackReporter is a follower's gateway as daemon.ClusterTraffic sees it:
// after each publish it follows its own clients' ACKs of the new routes
// and reports the outcome to the leader through the ackboard.
type ackReporter struct {
	gw  *gateway.Server
	out *ackboard.Writer
	log *slog.Logger
	ctx context.Context // the follower's lifetime

	mu      sync.Mutex
	waiting map[string]context.CancelFunc // by host: the wait a newer publish supersedes
}

// followerAckWait bounds a follower's wait for its clients' ACKs; the
// leader's own wait (--ack-timeout) is what bounds a step.
const followerAckWait = 10 * time.Minute

var _ runner.Traffic = (*ackReporter)(nil)

func (r *ackReporter) SetTraffic(t api.Traffic) (string, error) {
	version, err := r.gw.SetTraffic(t)
	if err != nil {
		return "", err
	}
	routes, err := ackboard.RoutesHash(t)
	if err != nil {
		return version, nil // published, so it translates; cannot happen
	}
	ctx, cancel := context.WithTimeout(r.ctx, followerAckWait)
	r.mu.Lock()
	if prev := r.waiting[t.Host]; prev != nil {
		prev()
	}
	r.waiting[t.Host] = cancel
	r.mu.Unlock()
	go func() {
		defer cancel()
		err := r.gw.WaitForAck(ctx, t.Host, version)
		switch {
		case err == nil:
			r.out.Set(t.Host, ackboard.HostAck{Routes: routes})
		case errors.Is(err, gateway.ErrNack):
			r.log.Warn("follower: an xDS client rejected the routes; reported to the leader", "host", t.Host, "version", version, "err", err)
			r.out.Set(t.Host, ackboard.HostAck{Routes: routes, Nack: err.Error()})
		}
		// Superseded, stopped or timed out: nothing to report; the
		// leader's bounded wait reports the timeout.
	}()
	return version, nil
}

func (r *ackReporter) WaitForAck(ctx context.Context, host, version string) error {
	return r.gw.WaitForAck(ctx, host, version)
}

// leaderAckWait is the leader's gateway as its daemon.ClusterTraffic
// sees it: a wait for the ACKs of a publish lasts until the leader's
// clients and then every live follower's clients have ACKed the same
// routes (ackboard).
type leaderAckWait struct {
	next  runner.Traffic
	board *ackboard.Board

	mu     sync.Mutex
	routes map[string][]publishedRoutes // by host, newest last
}

// publishedRoutes ties a gateway version to the routes it carries.
type publishedRoutes struct{ version, routes string }

// keepVersions is how many recent versions per host leaderAckWait keeps:
// the runner waits for the newest only.
const keepVersions = 4

var _ runner.Traffic = (*leaderAckWait)(nil)

func (l *leaderAckWait) SetTraffic(t api.Traffic) (string, error) {
	version, err := l.next.SetTraffic(t)
	if err != nil {
		return "", err
	}
	if routes, err := ackboard.RoutesHash(t); err == nil {
		l.mu.Lock()
		prs := append(l.routes[t.Host], publishedRoutes{version, routes})
		if len(prs) > keepVersions {
			prs = prs[len(prs)-keepVersions:]
		}
		l.routes[t.Host] = prs
		l.mu.Unlock()
	}
	return version, nil
}

func (l *leaderAckWait) WaitForAck(ctx context.Context, host, version string) error {
	if err := l.next.WaitForAck(ctx, host, version); err != nil {
		return err
	}
	routes := ""
	l.mu.Lock()
	for _, pr := range l.routes[host] {
		if pr.version == version {
			routes = pr.routes
		}
	}
	l.mu.Unlock()
	if routes == "" {
		return nil
	}
	return l.board.Wait(ctx, host, routes)
}

// waitForFollowers wraps the leader's gateway (daemon.Options.WrapGateway)
// so that its waits include the followers' clients of board.
func waitForFollowers(board *ackboard.Board) func(next runner.Traffic) runner.Traffic {
	return func(next runner.Traffic) runner.Traffic {
		return &leaderAckWait{next: next, board: board, routes: map[string][]publishedRoutes{}}
	}
}
