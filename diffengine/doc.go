// Package diffengine compares two versions of sluice's strategy files and
// says what changed and what that means for a live rollout.
//
// It owns three things:
//
//   - the semantic diff of two rollouts or analysis templates: a list of
//     FieldChange values with Argo field paths such as
//     spec.strategy.canary.steps[3].setWeight. Noise is ignored: key order,
//     comments and formatting never reach the typed model, and values that
//     equal Argo's defaults are dropped before comparing, so writing a
//     default out explicitly is no change. Steps and other unnamed lists are
//     diffed as sequences (longest common subsequence), so an inserted step is
//     one insertion; lists whose elements carry a name (containers, metrics,
//     managedRoutes, args, ...) are diffed by name; maps by key.
//   - the classification of a rollout change (Class) and the Risky flag with
//     its reasons, which the controller uses to decide whether to start a
//     canary, continue, update endpoints only, do nothing, or wait for
//     `sluice approve`.
//   - the route-table diff of two api.Traffic values in plain words, which
//     the controller logs with every push.
//
// Everything here is pure: no I/O, no clock, no goroutines. Reading two git
// revisions for `sluice diff --repo` lives in the gitfs sub-package.
package diffengine
