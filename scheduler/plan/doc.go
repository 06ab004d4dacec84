// Package plan is the offline planning tool behind `sluice schedule`: it
// reads a nodes file and a rollout, turns the rollout's pod template into
// canary (and baseline) pods, places them with the scheduler, and reports
// the placements, per-domain counts and skew, and optionally an
// explanation for one pod.
package plan
