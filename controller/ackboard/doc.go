// Package ackboard carries the ACKs and NACKs that the xDS clients of
// follower replicas send to the leader (Kubernetes mode with
// --leader-elect and --state-store kubernetes), so that a step waits for
// every replica's clients, not only the leader's.
//
// Each follower keeps one ConfigMap, sluice-acks-<identity> in sluice's
// namespace, written by that follower only (Writer): per host, the routes
// its clients all ACKed (a hash of the route configuration, RoutesHash,
// since every replica numbers its xDS versions its own way) or the NACK
// one of them sent for them, rewritten at least every heartbeat. The
// leader watches those ConfigMaps (Board) and its WaitForAck waits, after
// its own clients, until every live follower reports the same routes.
// A follower is live while its ConfigMap changed less than the expiry ago
// as the leader's clock sees it, so a dead follower stops being waited for
// after at most the expiry, and no clocks are compared across pods.
package ackboard
