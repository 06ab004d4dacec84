package gateway

import "github.com/sluice-dev/sluice/api"

// EnvoyName is the name of the Listener and RouteConfiguration that Envoy
// uses: one listener on the Envoy port whose route configuration holds the
// virtual host of every rollout.
const EnvoyName = "sluice-http"

// Side is one of a rollout's clusters.
type Side string

// The sides of a rollout. Baseline exists only for a rollout with a
// baseline (api.Traffic.BaselineWorkload set, Kubernetes mode).
const (
	Stable   Side = "stable"
	Canary   Side = "canary"
	Baseline Side = "baseline"
)

// ClusterName is the Cluster (and ClusterLoadAssignment) name of one side of
// a rollout: "ns/name/stable", "ns/name/canary" or "ns/name/baseline".
func ClusterName(k api.Key, s Side) string { return k.String() + "/" + string(s) }

// keepWarmHeader is matched by the unreachable routes that keep a cluster
// with no weight referenced (see keepWarmRoutes).
const keepWarmHeader = "x-sluice-keep-warm"
