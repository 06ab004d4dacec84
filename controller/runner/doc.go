// Package runner executes the rollout state machine (controller/rollout)
// for every rollout: a keyed work queue feeds each rollout's events to
// rollout.Step one at a time while different rollouts proceed in parallel,
// and a panic or error in one never stops the others.
//
// For every transition the runner first persists the new state (with the
// alerts it produced) through Store, then carries out the actions: traffic
// through Traffic (whose ACK, NACK or ACK timeout comes back as an event),
// analysis runs through Analyzer (results come back as events), timers
// with time.AfterFunc (firing comes back as an event), ReplicaSets through
// Workloads in the background (an Ahead one, an abort's mark, is applied
// before the actions after it, for up to 5 s) and alerts through
// Alerter's durable outbox. A crash between persisting and acting loses
// nothing: on Start the runner replays the stored alerts (deduplicated by
// id downstream) and feeds rollout.Restart to every stored rollout, which
// re-arms its timer, restarts its unfinished analysis runs and pushes its
// traffic again.
//
// When a state cannot be persisted nothing of it is acted on: an operator
// command or a commit gets the error, an internal event (ACK, timer,
// verdict) is retried with back-off.
//
// Every status change is published to subscribers (the HTTP API's event
// stream and the live view).
package runner
