package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/runner"
	"github.com/sluice-dev/sluice/gateway"
)

// routedTraffic drives sluice's xDS and the cluster routers (Gateway API,
// Istio) together, as one runner.Traffic: SetTraffic publishes the xDS
// traffic and writes every router's objects; WaitForAck returns once the
// xDS clients ACKed and every router verified its write. A router that
// rejects a write is a NACK (its error wraps gateway.ErrNack): the runner
// holds the step and alerts xds-nack, as for an xDS NACK. A write that
// did not reach the apiserver is written again by WaitForAck.
type routedTraffic struct {
	xds     runner.Traffic
	routers []gateway.ClusterRouter
	// applyTimeout bounds one router's writes (SetTraffic has no context).
	applyTimeout time.Duration
	log          *slog.Logger
	// turns orders each rollout's router writes (api.Key → *writeTurn): a
	// write that an older step's WaitForAck retries never lands after a
	// newer SetTraffic's or a release's.
	turns sync.Map
}

// writeTurn is one rollout's: its mutex is held for each router write,
// and seq counts the writes SetTraffic and release started, so that a
// retry of an older one sees it was superseded.
type writeTurn struct {
	mu  sync.Mutex
	seq uint64
}

func (r *routedTraffic) turnOf(key api.Key) *writeTurn {
	t, _ := r.turns.LoadOrStore(key, &writeTurn{})
	return t.(*writeTurn)
}

// next takes the rollout's turn for a new write and returns its number;
// the caller unlocks.
func (w *writeTurn) next() uint64 {
	w.mu.Lock()
	w.seq++
	return w.seq
}

var _ runner.Traffic = (*routedTraffic)(nil)

// routedVersion is the version routedTraffic hands out: the xDS version
// and each router's token, so that WaitForAck needs no state of its own.
type routedVersion struct {
	Rollout api.Key           `json:"rollout"`
	XDS     string            `json:"xds,omitempty"`
	Tokens  map[string]string `json:"tokens,omitempty"`
	// Retry names the routers whose write failed on the way (the
	// apiserver down or overloaded) and Traffic what they are to write:
	// WaitForAck writes it again until it is taken.
	Retry   []string     `json:"retry,omitempty"`
	Traffic *api.Traffic `json:"traffic,omitempty"`
	// Seq is the rollout's write number (writeTurn): a retry stops once a
	// newer write started.
	Seq uint64 `json:"seq,omitempty"`
}

// SetTraffic publishes t to xDS (when it names a host) and writes it into
// every router t.Routing names.
func (r *routedTraffic) SetTraffic(t api.Traffic) (string, error) {
	v := routedVersion{Rollout: t.Rollout}
	if t.Host != "" {
		var err error
		if v.XDS, err = r.xds.SetTraffic(t); err != nil {
			return "", err
		}
	}
	if t.Routing != nil {
		turn := r.turnOf(t.Rollout)
		v.Seq = turn.next()
		defer turn.mu.Unlock()
		v.Tokens = map[string]string{}
		for _, cr := range r.routers {
			ctx, cancel := context.WithTimeout(context.Background(), r.applyTimeout)
			tok, err := cr.Apply(ctx, t)
			cancel()
			switch {
			case err != nil && transientAPIError(err):
				// Not a NACK: nothing refused the routes. A NACK would
				// hold the rollout for good (and survive a restart).
				r.log.Warn("router write failed; retrying while the step waits", "rollout", t.Rollout.String(), "router", cr.Name(), "err", err)
				v.Retry, v.Traffic = append(v.Retry, cr.Name()), &t
			case err != nil:
				return "", fmt.Errorf("%s router: %w", cr.Name(), err)
			case tok != "":
				v.Tokens[cr.Name()] = tok
			}
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("traffic version: %w", err)
	}
	return string(b), nil
}

// WaitForAck waits for the xDS ACK, then for every router's verification.
// A router that cannot tell (Istio without status) lets the step go on
// and says so in the log.
func (r *routedTraffic) WaitForAck(ctx context.Context, host, version string) error {
	var v routedVersion
	if err := json.Unmarshal([]byte(version), &v); err != nil {
		return fmt.Errorf("traffic version %q: %w", version, err)
	}
	if v.XDS != "" {
		if err := r.xds.WaitForAck(ctx, host, v.XDS); err != nil {
			return err
		}
	}
	if err := r.retryWrites(ctx, &v); err != nil {
		return err
	}
	var unverified []string
	for _, cr := range r.routers {
		tok, ok := v.Tokens[cr.Name()]
		if !ok {
			continue
		}
		res, err := cr.Verify(ctx, v.Rollout, tok)
		if err != nil {
			return fmt.Errorf("%s router: %w", cr.Name(), err)
		}
		if !res.Verified {
			r.log.Warn("router write taken but unverified", "rollout", v.Rollout.String(), "router", cr.Name(), "message", res.Message)
			unverified = append(unverified, cr.Name()+": "+res.Message)
		}
	}
	if len(unverified) > 0 {
		return &runner.UnverifiedError{Message: strings.Join(unverified, "; ")}
	}
	return nil
}

// Back-off of a router write retried by WaitForAck.
const (
	routerRetryMin = 200 * time.Millisecond
	routerRetryMax = 5 * time.Second
)

// retryWrites writes v.Traffic with each router of v.Retry until it is
// taken, adding its token to v.Tokens; a wait that runs out first is a
// deadline, as a slow ACK is, and a router that now rejects the write is
// a NACK. Once a newer write of the rollout has started, it stops: the
// wait was superseded (context.Canceled, as the runner cancels it too).
func (r *routedTraffic) retryWrites(ctx context.Context, v *routedVersion) error {
	for _, cr := range r.routers {
		if !slices.Contains(v.Retry, cr.Name()) {
			continue
		}
		tok, err := r.retryUntilTaken(ctx, cr, v)
		if err != nil {
			return fmt.Errorf("%s router: %w", cr.Name(), err)
		}
		if tok != "" {
			if v.Tokens == nil { // omitted from the JSON when empty
				v.Tokens = map[string]string{}
			}
			v.Tokens[cr.Name()] = tok
		}
	}
	return nil
}

// retryUntilTaken writes v.Traffic with cr, backing off, until it is
// taken, refused, superseded or ctx ends.
func (r *routedTraffic) retryUntilTaken(ctx context.Context, cr gateway.ClusterRouter, v *routedVersion) (string, error) {
	last := errors.New("not tried")
	for wait := routerRetryMin; ; wait = min(2*wait, routerRetryMax) {
		tok, err := r.retryWrite(ctx, cr, v)
		switch {
		case err == nil && ctx.Err() == nil:
			return tok, nil
		case ctx.Err() != nil: // a write that landed as the wait ended too
			return "", fmt.Errorf("write not taken: %v: %w", last, ctx.Err())
		case errors.Is(err, errSuperseded) || !transientAPIError(err):
			return "", err
		}
		last = err
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("write not taken: %v: %w", last, ctx.Err())
		case <-time.After(wait):
		}
	}
}

// errSuperseded ends the retry of a write a newer one replaced.
var errSuperseded = fmt.Errorf("superseded by a newer write: %w", context.Canceled)

// retryWrite is one attempt, in the rollout's turn, if no newer write has
// started. The request is not cancelled with ctx: the runner cancels an
// older step's wait as it publishes the next, and a request already sent
// could still be applied by the apiserver after the next one's; letting
// it finish under the turn orders the two.
func (r *routedTraffic) retryWrite(ctx context.Context, cr gateway.ClusterRouter, v *routedVersion) (string, error) {
	turn := r.turnOf(v.Rollout)
	turn.mu.Lock()
	defer turn.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if turn.seq != v.Seq {
		return "", errSuperseded
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.applyTimeout)
	defer cancel()
	return cr.Apply(actx, *v.Traffic)
}

// transientAPIError says an apiserver could not be reached or could not
// answer (down, restarting, overloaded), as opposed to refusing a write.
func transientAPIError(err error) bool {
	return utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		errors.Is(err, context.DeadlineExceeded) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err)
}

// release gives a rollout removed from git its routes back: a single 100%
// stable backend and none of sluice's rules, in every router.
func (r *routedTraffic) release(ctx context.Context, key api.Key, cr *api.ClusterRouting) error {
	if cr == nil {
		return nil
	}
	turn := r.turnOf(key)
	turn.next()
	defer turn.mu.Unlock()
	var errs []error
	for _, rt := range r.routers {
		if err := rt.Release(ctx, key, cr); err != nil {
			errs = append(errs, fmt.Errorf("%s router: %w", rt.Name(), err))
		}
	}
	return errors.Join(errs...)
}
