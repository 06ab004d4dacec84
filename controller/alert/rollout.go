package alert

import (
	"time"

	"github.com/sluice-dev/sluice/controller/rollout"
)

// FromRollout stamps an alert action of the state machine with the time the
// runner executes it. The machine's event and severity names are the ones
// of DESIGN §7, as here.
func FromRollout(a rollout.Alert, at time.Time) Alert {
	return Alert{
		ID:        a.ID,
		Event:     Event(a.Event),
		Severity:  Severity(a.Severity),
		Rollout:   a.Rollout,
		Version:   a.Version,
		Commit:    a.Commit,
		Reason:    a.Reason,
		Time:      at.UTC().Truncate(time.Second),
		Weights:   a.Weights,
		Metric:    a.Metric,
		Value:     a.Value,
		Condition: a.Condition,
	}
}
