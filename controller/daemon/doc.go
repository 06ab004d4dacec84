// Package daemon composes sluice's parts into the long-running process
// behind `sluice run`: it opens the store, serves xDS (gateway) and the HTTP
// API, follows the repository (gitwatch), turns each commit into per-rollout
// changes (diffengine), feeds them to the runner, runs analysis, and
// delivers alerts. It owns no rollout logic itself.
//
// With --leader-elect, controller/replica runs a Daemon on the replica
// that holds the Lease and serves a follower's part on the others; it uses
// what both roles share from here (Options.Complete, KubeConfig,
// ClusterTraffic, WithClients) and hands the leader's Daemon its sockets
// and fence through Options.
package daemon
