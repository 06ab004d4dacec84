package rollout

import "github.com/sluice-dev/sluice/api"

// Event is one input to Step.
type Event interface{ isEvent() }

// Class mirrors diffengine's change classes; wiring maps one onto the
// other. The machine trusts versions over Class (a change of the first
// image is a new version whatever Class says); it acts on ClassRemoved and
// records Class in a pending approval.
type Class string

// Change classes.
const (
	ClassNewVersion    Class = "NewVersion"
	ClassStrategyEdit  Class = "StrategyEdit"
	ClassEndpointsOnly Class = "EndpointsOnly"
	ClassCosmetic      Class = "Cosmetic"
	ClassRemoved       Class = "Removed"
	ClassAdded         Class = "Added"
)

// Change is a new valid version of the rollout's strategy from commit
// Commit. Rollout is nil when Class is ClassRemoved. Risky lists why the
// change needs approval; it must be computed against State.Spec, the spec
// in force, not against the previous commit. ResumeStep, when set, is
// where a same-version edit continues: the index in the new steps of the
// step being executed (the diff engine aligns old and new steps, so a step
// inserted before the current one shifts it rather than re-running it).
type Change struct {
	Commit     string       `json:"commit"`
	Class      Class        `json:"class"`
	Rollout    *api.Rollout `json:"rollout,omitempty"`
	Risky      []string     `json:"risky,omitempty"`
	ResumeStep *int32       `json:"resumeStep,omitempty"`
	// Ticket is the change's place in commit order when a limit on
	// concurrent canaries is in force: a new canary that finds no slot
	// waits in State.Queued (queue.go). 0: no limit, it starts at once.
	Ticket uint64 `json:"ticket,omitempty"`
}

// Invalid reports that commit Commit holds this rollout's file but it
// failed to load; the spec in force keeps running.
type Invalid struct {
	Commit string          `json:"commit"`
	Errors api.Diagnostics `json:"errors"`
}

// TimerFired is the timer with the given id going off.
type TimerFired struct {
	ID string `json:"id"`
}

// AnalysisResult reports on run Run: progress while Phase is Pending or
// Running, the verdict once it is terminal. Metric, Value and Condition
// name the metric that decided a Failed or Error verdict.
type AnalysisResult struct {
	Run       string         `json:"run"`
	Phase     AnalysisPhase  `json:"phase"`
	Message   string         `json:"message,omitempty"`
	Metrics   []MetricStatus `json:"metrics,omitempty"`
	Metric    string         `json:"metric,omitempty"`
	Value     string         `json:"value,omitempty"`
	Condition string         `json:"condition,omitempty"`
}

// TrafficAcked says every connected client for the host ACKed the traffic
// of SetTraffic generation Gen (or a later one). Unverified, when set,
// says that a router took the traffic but cannot tell whether its proxies
// use it (Istio without istiod's status reporting), and why.
type TrafficAcked struct {
	Gen        uint64 `json:"gen"`
	Unverified string `json:"unverified,omitempty"`
}

// TrafficNacked says a client rejected generation Gen, or the gateway
// refused to publish it.
type TrafficNacked struct {
	Gen    uint64 `json:"gen"`
	Reason string `json:"reason"`
}

// TrafficAckTimeout says the bounded wait for the ACK of generation Gen
// ran out.
type TrafficAckTimeout struct {
	Gen uint64 `json:"gen"`
}

// CommandKind is an operator command (DESIGN §4, §5).
type CommandKind string

// Commands.
const (
	CmdPromote     CommandKind = "promote"
	CmdPromoteFull CommandKind = "promote-full"
	CmdAbort       CommandKind = "abort"
	CmdRetry       CommandKind = "retry"
	CmdApprove     CommandKind = "approve"
	CmdPause       CommandKind = "pause"
	CmdResume      CommandKind = "resume"
)

// Command is an operator command. Step ignores a command that State.Allows
// refuses; callers ask Allows first to answer the operator.
type Command struct {
	Kind CommandKind `json:"kind"`
}

// Restart is fed once to every stored rollout when the runner starts: the
// machine answers with the actions that re-arm its timer, restart its
// unfinished analysis runs and push its traffic again.
type Restart struct{}

func (Change) isEvent()            {}
func (Invalid) isEvent()           {}
func (TimerFired) isEvent()        {}
func (AnalysisResult) isEvent()    {}
func (TrafficAcked) isEvent()      {}
func (TrafficNacked) isEvent()     {}
func (TrafficAckTimeout) isEvent() {}
func (Command) isEvent()           {}
func (Restart) isEvent()           {}
