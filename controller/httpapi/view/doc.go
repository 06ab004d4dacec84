// Package view renders rollout status for people: the `sluice get
// rollouts` table, the `sluice get rollout NAME` detail view with its
// weight bar, and the one-line event log used by --watch when the output
// is not a terminal.
package view
