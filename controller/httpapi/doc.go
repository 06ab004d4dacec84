// Package httpapi is sluice's HTTP API (DESIGN §5): health and readiness,
// Prometheus metrics, rollout status, operator commands, the server-sent
// event stream, and the git webhook handler mounted at /hook/.
//
// The handler owns HTTP concerns only (routing, auth, limits, encoding,
// SSE framing); what a command does and what the status says come from a
// Backend, which the controller runner implements. Broker is a ready-made
// fan-out for the event stream that a Backend can embed.
package httpapi
