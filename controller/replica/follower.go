package replica

import (
	"context"
	"net"

	"k8s.io/client-go/rest"

	"github.com/sluice-dev/sluice/controller/daemon"
	election "github.com/sluice-dev/sluice/controller/leader"
)

// follower is a replica's work while another replica leads: it serves,
// read only, what the leader wrote into the cluster. With the state in
// the cluster that is xDS built from the leader's records (followerXDS),
// whose clients' ACKs it reports to the leader (ackReporter), and the
// read API on the same records, which refuses writes naming the leader
// (followerAPI), on its own HTTP server with its own /metrics
// (followerHTTP). The state is always in the cluster: daemon.Options
// refuses --leader-elect with bbolt.
type follower struct {
	http *followerHTTP
	xds  *followerXDS
}

// startFollower binds the HTTP and xDS addresses and serves them; it
// returns once the records are read (or followerSyncTimeout passed).
func startFollower(ctx context.Context, opts daemon.Options, cfg *rest.Config, elector *election.Elector) (*follower, error) {
	view := newFollowerAPI(elector.Leader)
	h, err := serveFollower(opts, view)
	if err != nil {
		return nil, err
	}
	f := &follower{http: h}
	if f.xds, err = startFollowerXDS(ctx, opts, cfg, elector.Identity(), opts.Logger, h.registry, view); err != nil {
		h.stop()
		return nil, err
	}
	return f, nil
}

// sockets are a follower's bound addresses, still open, for the leader's
// daemon: a client that dials the replica while it changes roles waits
// in a backlog instead of being refused.
type sockets struct {
	http net.Listener // serves the follower's requests until the daemon's server accepts (handoff)
	xds  net.Listener
}

// handOver ends the follower's xDS serving and hands both sockets over.
// The follower's HTTP server answers until the daemon's first Accept,
// then lets its connections go (followerHTTP.release).
func (f *follower) handOver() (sockets, error) {
	xds, err := f.xds.handover()
	if err != nil {
		return sockets{}, err
	}
	return sockets{http: f.http.handoff.leader(), xds: xds}, nil
}

// stop ends following; a socket handed over stays the leader's. Calling
// it again is harmless.
func (f *follower) stop() {
	f.xds.stop()
	f.http.stop()
}

// addrs are the bound HTTP and xDS addresses, for the log.
func (f *follower) addrs() (http, xds string) {
	return f.http.handoff.lis.Addr().String(), f.xds.addr.String()
}
