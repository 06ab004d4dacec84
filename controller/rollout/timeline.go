package rollout

import (
	"strings"

	"github.com/sluice-dev/sluice/api"
)

// Step states in Status.Steps, the timeline the dashboard and
// `sluice get rollout --watch` draw.
const (
	StepDone    = "done"
	StepCurrent = "current"
	StepHeld    = "held"
	StepAborted = "aborted"
	StepPending = "pending"
)

// StepStatus is one step of the spec in force as the timeline shows it.
type StepStatus struct {
	// Name is the step as people write it: "setWeight 10", "pause 30s".
	Name string `json:"name"`
	// State is done, current, held (the current step, stopped by a hold,
	// an operator pause or a pending approval), aborted or pending.
	State string `json:"state"`
	// Reason says why a held or aborted step stays where it is.
	Reason string `json:"reason,omitempty"`
}

// TrafficStatus says whether the xDS clients have ACKed the traffic in
// force: Generation numbers the pushes, AckedGeneration is the last one
// every connected client ACKed.
type TrafficStatus struct {
	Generation      uint64 `json:"generation"`
	AckedGeneration uint64 `json:"ackedGeneration"`
	// Acked is true when the declared weights are the ACKed ones.
	Acked bool `json:"acked"`
	// AckTimedOut: a step went on without the ACK of its traffic.
	AckTimedOut bool `json:"ackTimedOut"`
	// Clients are the xDS clients connected to this daemon that hold the
	// rollout's host, those without the current routes first, at most
	// MaxClients of them; ClientCount counts them all (absent: 0). The
	// state does not hold them: the daemon adds them to the status of one
	// rollout (GET /api/v1/rollouts/{namespace}/{name}), never to the list
	// or to events. Absent when not known.
	Clients     []ClientStatus `json:"clients,omitzero"`
	ClientCount int            `json:"clientCount,omitempty"`
}

// MaxClients bounds TrafficStatus.Clients.
const MaxClients = 50

// ClientStatus is one connected xDS client of a rollout's host.
type ClientStatus struct {
	// Node is the client's node id; Cluster and Locality what its node
	// says of itself (locality as region/zone/sub_zone).
	Node     string `json:"node"`
	Cluster  string `json:"cluster,omitempty"`
	Locality string `json:"locality,omitempty"`
	// Transport is "sotw" (state of the world) or "delta"; Stream the
	// server's id of the stream, as logs and NACK alerts name it.
	Transport string `json:"transport"`
	Stream    uint64 `json:"stream"`
	// Version is the gateway generation of the host's routes the client
	// ACKed last ("" before its first ACK), Nonce the nonce of that
	// response.
	Version string `json:"version"`
	Nonce   string `json:"nonce,omitempty"`
	// Current: the client ACKed the routes served now (the current
	// weights) and what else of the rollout it subscribes to.
	Current bool `json:"current"`
	// Nack is the message of its NACK of the rollout's resources that no
	// later ACK has cleared; "" for none.
	Nack string `json:"nack,omitempty"`
}

// timeline derives the step list of the status from the cursor, the
// hold and the abort: steps before StepIndex are done, the one at it is
// current, held or aborted, the rest are pending.
func (s State) timeline() []StepStatus {
	steps := s.Steps()
	out := make([]StepStatus, 0, len(steps))
	for i, st := range steps {
		ss := StepStatus{Name: st.String(), State: StepPending}
		switch {
		case int32(i) < s.StepIndex:
			ss.State = StepDone
		case int32(i) == s.StepIndex && s.Aborted:
			ss.State, ss.Reason = StepAborted, s.AbortReason
		case int32(i) == s.StepIndex && s.CanaryVersion != "":
			ss.State, ss.Reason = s.currentStepState()
		}
		out = append(out, ss)
	}
	return out
}

// currentStepState says whether the current step is held, and why.
func (s State) currentStepState() (string, string) {
	switch {
	case s.Pending != nil:
		return StepHeld, "waiting for approval: " + strings.Join(s.Pending.Reasons, "; ")
	case s.UserPaused:
		return StepHeld, "paused by operator"
	case s.Hold != nil:
		return StepHeld, s.Hold.Reason
	}
	return StepCurrent, ""
}

func (s State) trafficStatus() TrafficStatus {
	return TrafficStatus{
		Generation:      s.TrafficGen,
		AckedGeneration: s.AckedGen,
		Acked:           s.AckedGen >= s.TrafficGen,
		AckTimedOut:     s.AckTimedOut,
	}
}

func mirrorRoutes(in []api.MirrorRoute) []api.MirrorRoute {
	return append([]api.MirrorRoute{}, in...)
}
