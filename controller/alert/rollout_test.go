package alert_test

import (
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/alert"
	"github.com/sluice-dev/sluice/controller/rollout"
)

func TestFromRollout(t *testing.T) {
	at := time.Date(2026, 12, 2, 11, 0, 0, 123456789, time.FixedZone("CET", 3600))
	tests := []struct {
		name string
		in   rollout.Alert
		want alert.Alert
	}{
		{"aborted", rollout.Alert{
			ID: "default/checkout/9f8d111/aborted", Event: rollout.AlertRolloutAborted, Severity: rollout.SeverityError,
			Rollout: "default/checkout", Version: "shop/checkout:v2", Commit: "9f8d111aaa", Reason: "sluice abort",
			Weights: api.Weights{Stable: 100},
		}, alert.Alert{
			ID: "default/checkout/9f8d111/aborted", Event: alert.EventRolloutAborted, Severity: alert.SeverityError,
			Rollout: "default/checkout", Version: "shop/checkout:v2", Commit: "9f8d111aaa", Reason: "sluice abort",
			Time: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC), Weights: api.Weights{Stable: 100},
		}},
		{"analysis failed keeps metric", rollout.Alert{
			ID: "x", Event: rollout.AlertAnalysisFailed, Severity: rollout.SeverityError,
			Metric: "success-rate", Value: "0.91", Condition: "result >= 0.99",
		}, alert.Alert{
			ID: "x", Event: alert.EventAnalysisFailed, Severity: alert.SeverityError,
			Metric: "success-rate", Value: "0.91", Condition: "result >= 0.99",
			Time: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC),
		}},
		{"unmanaged", rollout.Alert{ID: "y", Event: rollout.AlertRolloutUnmanaged, Severity: rollout.SeverityWarning},
			alert.Alert{ID: "y", Event: alert.EventRolloutUnmanaged, Severity: alert.SeverityWarning, Time: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := alert.FromRollout(tt.in, at); got != tt.want {
				t.Errorf("FromRollout = %+v, want %+v", got, tt.want)
			}
		})
	}
}
