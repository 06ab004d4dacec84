package diffengine

import (
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/api"
)

// loadRollout loads one rollout with the real loader from a YAML steps
// block, so tests read like strategy files.
func loadRollout(t testing.TB, steps string) *api.Rollout {
	t.Helper()
	doc := `apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: checkout}
spec:
  selector: {matchLabels: {app: checkout}}
  template:
    metadata: {labels: {app: checkout}}
    spec:
      containers: [{name: app, image: "shop/checkout:v1"}]
  strategy:
    canary:
      steps:
` + steps + `
      trafficRouting:
        plugins:
          sluice.io/xds:
            host: checkout.internal
            endpoints: {"shop/checkout:v1": ["127.0.0.1:9001"]}
`
	set := api.Load([]api.Source{{Name: "r.yaml", Data: []byte(doc)}})
	if set.Diagnostics.HasErrors() || len(set.Rollouts) != 1 {
		t.Fatalf("load: %v", set.Diagnostics)
	}
	return set.Rollouts[0]
}

func TestDiffRolloutsResumeAndRisk(t *testing.T) {
	const steps = `      - setWeight: 10
      - pause: {duration: 30s}
      - setWeight: 30
      - pause: {}`
	tests := []struct {
		name     string
		newSteps string
		live     Live
		resume   int
		risky    string // a reason substring, "" for not risky
	}{
		{name: "pause inserted before current step", newSteps: `      - setWeight: 10
      - pause: {duration: 10s}
      - pause: {duration: 30s}
      - setWeight: 30
      - pause: {}`, live: Live{InFlight: true, StepIndex: 1, CanaryWeight: 10}, resume: 2},
		{name: "current pause removed lands on next step", newSteps: `      - setWeight: 10
      - setWeight: 30
      - pause: {}`, live: Live{InFlight: true, StepIndex: 1, CanaryWeight: 10}, resume: 1},
		{name: "jump inserted right after current step", newSteps: `      - setWeight: 10
      - pause: {duration: 30s}
      - setWeight: 60
      - setWeight: 30
      - pause: {}`, live: Live{InFlight: true, StepIndex: 1, CanaryWeight: 10}, resume: 1, risky: "from 10% to 60%"},
		{name: "no risk when not in flight", newSteps: `      - setWeight: 10
      - pause: {duration: 30s}
      - setWeight: 90
      - pause: {}`, live: Live{}, resume: 0},
		{name: "configured threshold from old and new, smaller wins", newSteps: `      - setWeight: 10
      - pause: {duration: 30s}
      - setWeight: 40
      - pause: {}`, live: Live{InFlight: true, StepIndex: 1, CanaryWeight: 10}, resume: 1, risky: "more than 25"},
	}
	old := loadRollout(t, steps)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DiffRollouts(old, loadRollout(t, tt.newSteps), tt.live)
			if c.Class != StrategyEdit {
				t.Fatalf("class %s, want StrategyEdit", c.Class)
			}
			if c.ResumeStep != tt.resume {
				t.Errorf("resume %d, want %d", c.ResumeStep, tt.resume)
			}
			if tt.risky == "" && c.Risky {
				t.Errorf("risky: %q", c.Reasons)
			}
			if tt.risky != "" && (!c.Risky || !strings.Contains(strings.Join(c.Reasons, "|"), tt.risky)) {
				t.Errorf("reasons %q, want one with %q", c.Reasons, tt.risky)
			}
		})
	}
}

func TestDiffRolloutsAddedRemovedUnchanged(t *testing.T) {
	r := loadRollout(t, "      - setWeight: 10")
	tests := []struct {
		name     string
		old, new *api.Rollout
		want     Class
	}{
		{"added", nil, r, Added},
		{"removed", r, nil, Removed},
		{"same pointer", r, r, Unchanged},
		{"same content", r, loadRollout(t, "      - setWeight: 10"), Unchanged},
		{"both nil", nil, nil, Unchanged},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DiffRollouts(tt.old, tt.new, Live{InFlight: true, StepIndex: 0, CanaryWeight: 10})
			if c.Class != tt.want || c.Risky || len(c.Changes) != 0 {
				t.Errorf("got %s risky %v changes %v, want %s", c.Class, c.Risky, c.Changes, tt.want)
			}
		})
	}
}

func TestNewVersionRestartsFromFirstStep(t *testing.T) {
	old := loadRollout(t, "      - setWeight: 10\n      - pause: {}")
	next := loadRollout(t, "      - setWeight: 10\n      - setWeight: 90\n      - pause: {}")
	next.Version = "shop/checkout:v2" // as if the image had changed
	c := DiffRollouts(old, next, Live{InFlight: true, StepIndex: 1, CanaryWeight: 10})
	if c.Class != NewVersion || c.ResumeStep != 0 {
		t.Errorf("class %s resume %d, want NewVersion from step 0", c.Class, c.ResumeStep)
	}
	if c.Risky {
		t.Errorf("a new version starts from 0%%, no live jump: %q", c.Reasons)
	}
}

// TestMultiTypeStepKeepsEmptyPause: in a step that combines types (Argo
// allows setCanaryScale, setHeaderRoute and setMirrorRoute beside one
// main type), an added `pause: {}` is a change, not an empty field.
func TestMultiTypeStepKeepsEmptyPause(t *testing.T) {
	old := loadRollout(t, "      - setCanaryScale: {replicas: 1}")
	next := loadRollout(t, "      - setCanaryScale: {replicas: 1}\n        pause: {}")
	if c := DiffRollouts(old, next, Live{InFlight: true, StepIndex: 0, CanaryWeight: 10}); c.Class != StrategyEdit {
		t.Errorf("class %s (changes %v), want %s", c.Class, c.Changes, StrategyEdit)
	}
}
