package httpapi

import "github.com/sluice-dev/sluice/api"

// RolloutStatus is the RolloutStatus of DESIGN §5; its JSON field names
// are the contract (testdata/status.golden is the DESIGN example). The
// runner fills it from the state machine's State.
type RolloutStatus struct {
	Namespace     string            `json:"namespace"`
	Name          string            `json:"name"`
	Phase         string            `json:"phase"`
	Message       string            `json:"message"`
	Commit        string            `json:"commit"`
	StableVersion string            `json:"stableVersion"`
	CanaryVersion string            `json:"canaryVersion"`
	StepIndex     int32             `json:"stepIndex"`
	StepCount     int32             `json:"stepCount"`
	Weights       api.Weights       `json:"weights"`
	HeaderRoutes  []api.HeaderRoute `json:"headerRoutes"`
	AnalysisRuns  []AnalysisRun     `json:"analysisRuns"`
	Aborted       bool              `json:"aborted"`
	Errors        []LoadError       `json:"errors"`
}

// Key is the rollout's namespace/name.
func (s RolloutStatus) Key() api.Key { return api.Key{Namespace: s.Namespace, Name: s.Name} }

// Phases of a rollout (DESIGN §5).
const (
	PhaseProgressing = "Progressing"
	PhasePaused      = "Paused"
	PhaseHealthy     = "Healthy"
	PhaseDegraded    = "Degraded"
)

// AnalysisRun is one analysis run of the current canary.
type AnalysisRun struct {
	Name    string         `json:"name"`
	Phase   string         `json:"phase"`
	Metrics []MetricStatus `json:"metrics"`
}

// MetricStatus is the latest measurement of one metric; Value is a string.
type MetricStatus struct {
	Name    string `json:"name"`
	Phase   string `json:"phase"`
	Value   string `json:"value"`
	Message string `json:"message"`
}

// LoadError is a current load error of one of the rollout's files.
type LoadError struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Command is an operator command, the last element of the URL.
type Command string

// Commands (DESIGN §4, §5). PromoteFull is promote?full=true.
const (
	Promote     Command = "promote"
	PromoteFull Command = "promote-full"
	Abort       Command = "abort"
	Retry       Command = "retry"
	Approve     Command = "approve"
	Pause       Command = "pause"
	Resume      Command = "resume"
)

// Verbs are the commands as written in URLs and on the command line.
var Verbs = []Command{Promote, Abort, Retry, Approve, Pause, Resume}
