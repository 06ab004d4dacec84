// Package probe is sluice's traffic probe: real gRPC workloads that make a
// rollout visible from the outside.
//
// A Backend is a tiny gRPC service (one hand-written method, no generated
// code) that answers with its version name, can fail a share of requests and
// add latency, and publishes its own counters both as Prometheus text
// (/metrics) and as a small JSON document (/stats) that the analysis `web`
// provider reads with jsonPath.
//
// A LoadGen is a set of independent proxyless gRPC xDS clients, each with
// its own xDS client and bootstrap, that dial xds:///<host> through sluice's
// xDS server, send a fixed total request rate (part of it tagged with
// request headers such as `x-canary: always`), and count which version
// answered over a sliding window: the observed split, as opposed to the
// declared one. It also records when each version first answered, which is
// how `sluice demo` and the end-to-end tests measure push-to-traffic time.
package probe
