package rollout

import (
	"github.com/sluice-dev/sluice/api"
)

// Action is one piece of work Step asks the caller to do, after the caller
// has persisted the State returned with it. Every action is idempotent:
// executing it twice (after a crash) does no harm.
type Action interface{ isAction() }

// SetTraffic asks the gateway to serve Traffic. Gen numbers it; the ACK
// or NACK for it comes back as TrafficAcked / TrafficNacked with this Gen.
type SetTraffic struct {
	Gen     uint64      `json:"gen"`
	Traffic api.Traffic `json:"traffic"`
}

// StartAnalysis starts analysis run Run of Analysis for Rollout. Args are
// the built-in arguments (api.ArgCanary, api.ArgStable, api.ArgRollout,
// api.ArgNamespace); Analysis.Args override them. Results come back as
// AnalysisResult events naming Run.
type StartAnalysis struct {
	Rollout  api.Key           `json:"rollout"`
	Run      string            `json:"run"`
	Kind     RunKind           `json:"kind"`
	Analysis api.Analysis      `json:"analysis"`
	Args     map[string]string `json:"args"`
}

// StopAnalysis stops run Run; results reported after it are ignored.
type StopAnalysis struct {
	Run string `json:"run"`
}

// StartTimer arms Timer; when it goes off the caller feeds TimerFired.
type StartTimer struct {
	Timer Timer `json:"timer"`
}

// CancelTimer disarms timer ID.
type CancelTimer struct {
	ID string `json:"id"`
}

// Notify sends Alert (through the persistent outbox).
type Notify struct {
	Alert Alert `json:"alert"`
}

func (SetTraffic) isAction()    {}
func (StartAnalysis) isAction() {}
func (StopAnalysis) isAction()  {}
func (StartTimer) isAction()    {}
func (CancelTimer) isAction()   {}
func (Notify) isAction()        {}

// AlertEvent names what happened (DESIGN §7).
type AlertEvent string

// Alert events. AlertRolloutUnmanaged is not in DESIGN §7's list: it is the
// warning sent when a rollout's file is deleted (controller/alert has it).
const (
	AlertRolloutStarted   AlertEvent = "rollout-started"
	AlertStepCompleted    AlertEvent = "step-completed"
	AlertRolloutPaused    AlertEvent = "rollout-paused"
	AlertRolloutCompleted AlertEvent = "rollout-completed"
	AlertRolloutAborted   AlertEvent = "rollout-aborted"
	AlertAnalysisFailed   AlertEvent = "analysis-failed"
	AlertAnalysisError    AlertEvent = "analysis-error"
	AlertStrategyInvalid  AlertEvent = "strategy-invalid"
	AlertXDSNack          AlertEvent = "xds-nack"
	AlertRolloutUnmanaged AlertEvent = "rollout-unmanaged"
	// AlertStateRecovered: sluice had no record of the rollout (its state
	// was lost) and rebuilt its position from git or the cluster
	// (recover.go).
	AlertStateRecovered AlertEvent = "rollout-state-recovered"
)

// Severity of an alert.
type Severity string

// Severities.
const (
	SeverityInfo    Severity = "info"
	SeverityWarning Severity = "warning"
	SeverityError   Severity = "error"
)

// SeverityOf is the severity the machine gives each event.
func SeverityOf(e AlertEvent) Severity {
	switch e {
	case AlertRolloutAborted, AlertAnalysisFailed, AlertAnalysisError, AlertStrategyInvalid, AlertXDSNack:
		return SeverityError
	case AlertRolloutPaused, AlertRolloutUnmanaged, AlertStateRecovered:
		return SeverityWarning
	}
	return SeverityInfo
}

// Alert is an alert without its time, which the runner stamps. ID is
// "namespace/name/<commit7>/<event>[/<detail>]", deterministic so that
// sinks can deduplicate; the runner persists it with the state, so a
// replay after a crash carries the same ID.
type Alert struct {
	ID        string      `json:"id"`
	Event     AlertEvent  `json:"event"`
	Severity  Severity    `json:"severity"`
	Rollout   string      `json:"rollout"`
	Version   string      `json:"version"`
	Commit    string      `json:"commit"`
	Reason    string      `json:"reason"`
	Weights   api.Weights `json:"weights"`
	Metric    string      `json:"metric,omitempty"`
	Value     string      `json:"value,omitempty"`
	Condition string      `json:"condition,omitempty"`
}

// shortCommit is the commit prefix length in alert ids.
const shortCommit = 7
