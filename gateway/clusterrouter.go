package gateway

import (
	"context"

	"github.com/sluice-dev/sluice/api"
)

// ReasonReapplied is the reason of the Warning Event a cluster router
// records on an object whose managed fields it wrote again after someone
// else changed them (both routers use it, so one alert rule or
// `kubectl get events --field-selector reason=SluiceReapplied` finds both).
const ReasonReapplied = "SluiceReapplied"

// ClusterRouter writes a rollout's traffic into cluster objects it does
// not own (HTTPRoute, GRPCRoute, VirtualService, DestinationRule) and
// verifies it. gateway/gatewayapi and gateway/istio implement it; the
// daemon drives them beside the xDS gateway. It lives in package gateway
// because the routers may import only api and gateway (DESIGN §2).
type ClusterRouter interface {
	// Name is "gatewayAPI" or "istio", for logs, status and events.
	Name() string
	// Apply writes t's weights, header/cookie routes, mirror routes and
	// sticky routes into the objects t.Routing names for this router; it
	// returns a token that Verify takes ("" and nil when t names no object
	// of this router). Unmanaged rules, filters and fields stay exactly as
	// they were. A conflict is re-read and re-applied, never overwritten
	// blindly.
	Apply(ctx context.Context, t api.Traffic) (token string, err error)
	// Verify returns once the router's controllers have taken the write
	// named by token: Verified (Gateway API: every parent Accepted and
	// ResolvedRefs True at the written generation or later), or not
	// Verified with a Message when the router cannot tell (Istio without
	// status). It returns an error wrapping ErrNack with the
	// condition's reason when a parent rejected the write, or ctx.Err().
	// An empty token is verified at once.
	Verify(ctx context.Context, key api.Key, token string) (Verification, error)
	// Release restores the managed rules to a single 100% stable backend
	// and removes sluice's header, mirror and sticky rules (the rollout
	// was deleted from git or is no longer managed).
	Release(ctx context.Context, key api.Key, r *api.ClusterRouting) error
}

// Verification is a ClusterRouter's answer when its write was taken.
type Verification struct {
	// Verified is true when the router's controllers reported the write
	// taken; false with Message when the router cannot tell.
	Verified bool
	// Message says why the weight is unverified ("" when Verified).
	Message string
}
