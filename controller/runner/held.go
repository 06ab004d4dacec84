package runner

import "fmt"

// HeldError is what Traffic.WaitForAck returns when its wait ended while
// the traffic was still held back, never published: in Kubernetes mode a
// side that gets a weight has no Ready endpoint in the cluster yet. Unlike
// a slow ACK, sluice knows the clients are still on their last routes, so
// the step does not go on: the runner waits again, a round of AckTimeout
// at a time, until the traffic is published and ACKed or newer traffic of
// the rollout (its next step, an abort) supersedes it.
type HeldError struct {
	Side string // the side without endpoints: stable, canary or baseline
	Err  error  // why this round's wait ended (its context's error)
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("traffic held: the %s side has no Ready endpoint in the cluster: %v", e.Side, e.Err)
}

func (e *HeldError) Unwrap() error { return e.Err }
