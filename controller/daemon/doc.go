// Package daemon composes sluice's parts into the long-running process
// behind `sluice run`: it opens the store, serves xDS (gateway) and the HTTP
// API, follows the repository (gitwatch), turns each commit into per-rollout
// changes (diffengine), feeds them to the runner, runs analysis, and
// delivers alerts. It owns no rollout logic itself.
package daemon
