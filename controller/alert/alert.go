package alert

import (
	"time"

	"github.com/sluice-dev/sluice/api"
)

// Event names what happened to a rollout (DESIGN §7).
type Event string

// Events sluice sends.
const (
	EventRolloutStarted   Event = "rollout-started"
	EventStepCompleted    Event = "step-completed"
	EventRolloutPaused    Event = "rollout-paused"
	EventRolloutCompleted Event = "rollout-completed"
	EventRolloutAborted   Event = "rollout-aborted"
	EventAnalysisFailed   Event = "analysis-failed"
	EventAnalysisError    Event = "analysis-error"
	EventStrategyInvalid  Event = "strategy-invalid"
	EventXDSNack          Event = "xds-nack"
	// EventRolloutUnmanaged is sent when a rollout's file is deleted: sluice
	// stops managing it and leaves its last traffic in place.
	EventRolloutUnmanaged Event = "rollout-unmanaged"
	// EventStateRecovered is sent when sluice had no record of a rollout
	// (its state was lost) and rebuilt its position from git or the
	// cluster: what it found and what it decided.
	EventStateRecovered Event = "rollout-state-recovered"
	// EventWritebackSkipped is sent when --git-writeback revert leaves an
	// aborted canary's version in git because someone changed the rollout
	// meanwhile (controller/writeback).
	EventWritebackSkipped Event = "writeback-skipped"
	// EventWritebackFailed is sent when the revert cannot be made at all:
	// the file cannot be edited in place.
	EventWritebackFailed Event = "writeback-failed"
)

// Severity is how loud an alert is.
type Severity string

// Severities, in Alertmanager's usual vocabulary.
const (
	SeverityInfo    Severity = "info"
	SeverityWarning Severity = "warning"
	SeverityError   Severity = "error"
)

// Alert is one notification, exactly the JSON of DESIGN §7. Metric, Value
// and Condition are set for analysis-failed.
type Alert struct {
	// ID deduplicates deliveries: a sink receives each id once (or more
	// than once only when a delivery's answer was lost).
	ID       string   `json:"id"`
	Event    Event    `json:"event"`
	Severity Severity `json:"severity"`
	// Rollout is "namespace/name", or the file path for a file that cannot
	// be tied to a rollout.
	Rollout   string      `json:"rollout"`
	Version   string      `json:"version"`
	Commit    string      `json:"commit"`
	Reason    string      `json:"reason"`
	Time      time.Time   `json:"time"`
	Weights   api.Weights `json:"weights"`
	Metric    string      `json:"metric,omitempty"`
	Value     string      `json:"value,omitempty"`
	Condition string      `json:"condition,omitempty"`
	// TraceID is the OpenTelemetry trace of the alert's commit (32 hex
	// digits), set only when tracing is on: the trace from the commit to
	// the verdict that this alert reports.
	TraceID string `json:"traceId,omitempty"`
}

// ShortCommit is the length of the commit prefix used in ids.
const ShortCommit = 7

// ID builds the conventional alert id "rollout/shortcommit/suffix", e.g.
// "default/checkout/9f8d111/aborted". The suffix must make the id unique per
// logical event (add a step index or run name where an event can repeat
// within one commit).
func ID(rollout, commit, suffix string) string {
	if len(commit) > ShortCommit {
		commit = commit[:ShortCommit]
	}
	return rollout + "/" + commit + "/" + suffix
}

// SeverityOf is the default severity of an event.
func SeverityOf(e Event) Severity {
	switch e {
	case EventRolloutAborted, EventAnalysisFailed, EventAnalysisError, EventStrategyInvalid, EventXDSNack, EventWritebackFailed:
		return SeverityError
	case EventRolloutPaused, EventRolloutUnmanaged, EventWritebackSkipped, EventStateRecovered:
		return SeverityWarning
	}
	return SeverityInfo
}
