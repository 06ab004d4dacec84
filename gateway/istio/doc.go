// Package istio renders a rollout's traffic (api.Traffic) as Istio
// networking/v1 VirtualService and DestinationRule objects, for teams that
// already run istiod and want sluice to write routes instead of serving
// xDS itself. The routing is the same as the xDS gateway's: header routes
// in step order, the sticky-canary cookie route, mirror routes, then the
// weighted default; cookie matches compile to the same cookie-pair regex.
// It lives apart from package gateway so that the xDS server does not pull
// in Kubernetes types.
package istio
