package gateway

import "github.com/sluice-dev/sluice/api"

// EnvoyName is the name of the Listener and RouteConfiguration that Envoy
// uses: one listener on the Envoy port whose route configuration holds the
// virtual host of every rollout.
const EnvoyName = "sluice-http"

// Side is one of a rollout's two clusters.
type Side string

// The two sides of a rollout.
const (
	Stable Side = "stable"
	Canary Side = "canary"
)

// ClusterName is the Cluster (and ClusterLoadAssignment) name of one side of
// a rollout: "ns/name/stable" or "ns/name/canary".
func ClusterName(k api.Key, s Side) string { return k.String() + "/" + string(s) }

// keepWarmHeader is matched by the unreachable routes that keep a cluster
// with no weight referenced (see keepWarmRoutes).
const keepWarmHeader = "x-sluice-keep-warm"
