// Package gateway turns the desired traffic of each rollout (api.Traffic)
// into Envoy v3 xDS resources, validates them as a whole, and serves them
// over ADS (state of the world and delta) to Envoy and to proxyless gRPC
// clients dialing xds:///<host>. It tracks which version each connected
// client ACKed or NACKed so the controller can wait until new routes are
// live (Server.WaitForAck). It can also render the same traffic as Istio
// VirtualService and DestinationRule objects (RenderIstio).
//
// Resource shapes and names follow DESIGN §6:
//
//	cluster          ns/name/stable, ns/name/canary (EDS over ADS)
//	endpoints        ClusterLoadAssignment named like its cluster
//	route config     <host> (one virtual host), and sluice-http (all hosts)
//	listener         <host> (api_listener for gRPC), sluice-http (Envoy port)
//
// Resources are immutable once built: every SetTraffic builds a new set,
// validates it, and publishes it as a new generation; nothing is mutated in
// place, so streams can encode and send a generation without locks.
package gateway
