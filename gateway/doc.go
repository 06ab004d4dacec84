// Package gateway turns the desired traffic of each rollout (api.Traffic)
// into Envoy v3 xDS resources, validates them as a whole, and serves them
// over ADS (state of the world and delta) to Envoy and to proxyless gRPC
// clients dialing xds:///<host>. It tracks which version each connected
// client ACKed or NACKed so the controller can wait until new routes are
// live. Package gateway/istio renders the same traffic as Istio objects.
//
// Resource shapes and names follow DESIGN §6:
//
//	cluster          ns/name/stable, ns/name/canary (EDS over ADS)
//	endpoints        ClusterLoadAssignment named like its cluster
//	route config     <host> (one virtual host)
//	route scope      <host> (Envoy: key <host>, selects route config <host>)
//	listener         <host> (api_listener for gRPC), sluice-http (Envoy port)
//
// The sluice-http listener picks a host's route configuration through
// scoped RDS keyed on :authority (layout.go says why not VHDS), so a change
// to one rollout sends a delta subscriber that rollout's resources only,
// whatever the number of rollouts. Options.EnvoyRoutes = EnvoyRoutesCombined
// keeps the older layout: one route configuration sluice-http with every
// virtual host.
//
// Routes in a virtual host, in order: header routes (step order), the
// sticky-canary cookie route (session affinity with canary weight > 0),
// the sticky-stable cookie route (PinStable, while a step is in progress),
// mirror routes (the weighted split plus request_mirror_policies), the
// weighted default, and keep-warm routes that sit after the catch-all and
// only keep a weightless cluster referenced (gRPC drops unreferenced
// clusters and reconnecting costs seconds at scale). A header match on
// "cookie" matches one cookie pair; see CookieRegex for exact, prefix and
// regex semantics.
//
// Use:
//
//	s, err := gateway.New(gateway.Options{Logger: l, Registry: reg, EnvoyPort: 10000, TLS: tlsOpts, OnNack: f})
//	go s.Serve(ctx, lis)                       // blocks until ctx ends
//	v, err := s.SetTraffic(traffic)            // validate + publish; never waits for clients
//	err = s.WaitForAck(ctx, traffic.Host, v)   // nil, ErrNack-wrapped, or ctx error
//	err = s.Remove(key)
//
// Every publish is a new immutable generation: resources whose bytes did
// not change keep their identity and generation, each resource type has
// its own version, so a weight change re-sends only route configurations.
// A generation lives in immutable radix trees that share all but the
// changed paths with the previous one: publishing one change costs
// O(log n) in the number of rollouts, and a delta stream that is caught up,
// or a few generations behind, compares only the names that changed since
// (changelog.go).
// Streams are woken without blocking the publisher; a slow stream only ever
// gets the newest state. A state-of-the-world response is encoded once per
// distinct subscription and generation and the same bytes are written to
// every stream with that subscription. A NACKed response is recorded
// (sluice_xds_nacks_total, Options.OnNack, WaitForAck) and not sent again
// until something in it changes.
//
// Peers are not trusted. A NACK counts only against resources the stream
// was sent and had not ACKed before, and only when it answers the response
// last sent on that stream; its detail is cut to 1 KiB (detail.go). What a
// peer can make the server hold is bounded by Options.Limits (limits.go):
// streams per connection and in all, names per request and subscription,
// name length, and the bytes of all subscribed names. A cached response
// lives only while a stream holds its subscription, and subscriptions to
// names that do not exist are never cached. Options.AllowedNodes refuses
// streams by node id. With mutual TLS a node id must match the client
// certificate's identity (identity.go), so a client ACKs and NACKs only as
// itself.
package gateway
