// Package istio carries a rollout's traffic (api.Traffic) through Istio.
//
// Router (router.go) is the cluster router of issue 14: it patches the
// user's own VirtualServices and DestinationRule, named by the rollout's
// trafficRouting.istio, in place: the weights of the managed http routes,
// sluice's header, cookie, sticky (canary and stable) and mirror routes
// just ahead of them, and the subsets' rollouts-pod-template-hash labels.
// Everything else in those objects stays byte for byte as the user wrote
// it. It verifies a write by what istiod sends a proxyless gRPC client
// when given istiod's address (meshview.go compares; package observer
// subscribes), else as far as Istio's status lets it (the generation, and
// istiod's status when status reporting is on), finds someone else's
// edits of the managed fields (drift) and undoes them, and restores the
// objects on Release.
//
// matches.go translates header, cookie and mirror matches into Istio's
// StringMatch, cookie matches with the same cookie-pair regex as the xDS
// gateway's.
//
// Istio's own types (istio.io/api) build the routes sluice adds and read
// istiod's status; the user's objects themselves are read and patched as
// unstructured JSON, not as istio.io/client-go's typed objects, whose
// round trip would rewrite fields sluice does not manage (patch.go).
//
// It lives apart from package gateway so that the xDS server does not pull
// in Kubernetes types, and it imports no controller package (DESIGN §2).
package istio
