package view

import (
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// TestDetailTimeline checks what `sluice get rollout` (and --watch) adds
// for the timeline: each step's state and reason, the ACK state per
// version, and mirror routes.
func TestDetailTimeline(t *testing.T) {
	base := httpapi.RolloutStatus{Namespace: "default", Name: "checkout", Phase: rollout.PhasePaused,
		StableVersion: "shop/checkout:v1", CanaryVersion: "shop/checkout:v2", StepIndex: 1, StepCount: 3,
		Weights: api.Weights{Stable: 80, Canary: 20},
		Steps: []rollout.StepStatus{{Name: "setWeight 20", State: rollout.StepDone},
			{Name: "pause (until promoted)", State: rollout.StepHeld, Reason: "paused by operator"},
			{Name: "setWeight 50", State: rollout.StepPending}},
		Traffic: rollout.TrafficStatus{Generation: 3, AckedGeneration: 3, Acked: true}}
	tests := []struct {
		name string
		edit func(s *httpapi.RolloutStatus)
		want []string
	}{
		{"held step and ACKed traffic", func(*httpapi.RolloutStatus) {}, []string{
			"Steps:\n  done     1. setWeight 20\n  held     2. pause (until promoted): paused by operator\n  pending  3. setWeight 50\n",
			"stable  shop/checkout:v1  80%  ACKed by every connected xDS client",
			"canary  shop/checkout:v2  20%  ACKed by every connected xDS client",
		}},
		{"waiting for an ACK", func(s *httpapi.RolloutStatus) {
			s.Traffic = rollout.TrafficStatus{Generation: 4, AckedGeneration: 3, AckTimedOut: true}
		}, []string{"canary  shop/checkout:v2  20%  waiting for the xDS clients to ACK push 4 (last ACKed 3); an earlier step went on without its ACK"}},
		{"aborted step", func(s *httpapi.RolloutStatus) {
			s.Steps[1] = rollout.StepStatus{Name: "analysis success-rate", State: rollout.StepAborted, Reason: "analysis success-rate-1 failed: 0.5 < 0.95"}
		}, []string{"aborted  2. analysis success-rate: analysis success-rate-1 failed: 0.5 < 0.95"}},
		{"baseline", func(s *httpapi.RolloutStatus) {
			s.Weights = api.Weights{Stable: 60, Canary: 20, Baseline: 20}
		}, []string{"baseline  shop/checkout:v1  20%  ACKed"}},
		{"mirror route", func(s *httpapi.RolloutStatus) {
			s.MirrorRoutes = []api.MirrorRoute{{Name: "shadow", Percentage: 20,
				Match: []api.RouteMatch{{Method: &api.StringMatch{Exact: "GET"}, Path: &api.StringMatch{Prefix: "/api"}}}}}
		}, []string{"Mirror routes (copies to canary):\n  shadow: 20% of method = \"GET\" and path starts with \"/api\"\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := base
			s.Steps = append([]rollout.StepStatus(nil), base.Steps...)
			tt.edit(&s)
			var b strings.Builder
			if err := Detail(&b, s, nil); err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, b.String())
				}
			}
		})
	}
}
