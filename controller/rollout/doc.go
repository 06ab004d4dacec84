// Package rollout is the pure state machine of one canary rollout, in the
// style of etcd's raft: every input is an Event handed to Step, which
// returns the next State and the Actions the caller must carry out (set
// traffic, start or stop an analysis run, arm or cancel a timer, send an
// alert). Step does no I/O, reads no clock and starts no goroutine; time
// arrives as TimerFired events and every external fact (an xDS ACK, an
// analysis verdict, an operator command) as its own event.
//
// The caller (controller/runner) persists the State Step returned before it
// executes the Actions, so a crash in between re-executes idempotent actions
// instead of losing them, and a restart feeds Restart to re-arm the timer,
// the running analysis runs and the traffic described by the persisted State.
//
// State is plain data and JSON-serialisable; Status converts it into the
// RolloutStatus of the HTTP API (DESIGN §5) and Traffic into the gateway's
// api.Traffic.
//
// In Kubernetes mode (api.Rollout.Workload set) the machine also decides
// how many pods each version runs (replicas.go, share.go), holds traffic
// back until they are Ready (pods.go, podwait.go) and keeps a version's
// pods after it lost its traffic until the ACK and a delay (drain.go); it
// emits ScaleWorkloads and reads PodsReady, and runs experiment steps
// (experiment.go). Standalone mode is unchanged.
//
// TRANSITIONS.md lists every transition; TestTransitions covers each one,
// and the scenario scripts in testdata/ (replayed by TestInteraction,
// regenerated with -rewrite) show whole rollouts event by event.
package rollout
