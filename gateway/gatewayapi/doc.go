// Package gatewayapi writes a rollout's traffic (api.Traffic) into the
// user's existing Gateway API HTTPRoutes and GRPCRoutes and verifies that
// every parent gateway took it, for clusters that already run a Gateway
// API implementation. It implements gateway.ClusterRouter.
//
// Only the rules sluice manages change: the user's rule whose backendRefs
// name the stable Service (its weights, and the canary backendRef sluice
// adds beside it) and the rules sluice inserts before it, all named
// "sluice-…" (header routes, the sticky-canary and sticky-stable routes,
// mirror routes). The
// user's other rules, matches and filters stay as they were.
//
// spec.rules is a +listType=atomic list, so server-side apply would take
// the whole list from its user; sluice reads the route, rewrites its
// managed rules and updates it with the resourceVersion it read, and
// re-reads and rewrites on a conflict.
package gatewayapi
