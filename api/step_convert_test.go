package api

import (
	"strings"
	"testing"
)

// stepsRollout is a rollout with sluice's router, one managed route
// "testers", and the given steps and extra canary and trafficRouting
// fields (YAML flow, one line each).
func stepsRollout(steps, canaryExtra, routingExtra string) []byte {
	return []byte(`apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: app, image: "shop/web:v1"}]}
  strategy:
    canary:
      ` + canaryExtra + `
      steps: ` + steps + `
      trafficRouting:
        ` + routingExtra + `
        managedRoutes: [{name: testers}]
        plugins:
          sluice.io/xds: {host: web.internal, endpoints: {"shop/web:v1": ["127.0.0.1:9001"]}}
`)
}

// TestMultiTypeSteps: a step may combine types as Argo allows (at most one
// of setWeight, pause, experiment and analysis, anything else beside it);
// Kind is the main type and every part is kept.
func TestMultiTypeSteps(t *testing.T) {
	header := `setHeaderRoute: {name: testers, match: [{headerName: x-canary, headerValue: {exact: "yes"}}]}`
	cases := []struct {
		name     string
		steps    string
		wantKind StepKind
		wantDesc string
		wantErr  string
	}{
		{name: "setCanaryScale and setHeaderRoute", steps: `[{setCanaryScale: {weight: 20}, ` + header + `}]`,
			wantKind: StepSetHeaderRoute, wantDesc: "header route testers, setCanaryScale"},
		{name: "setWeight and setHeaderRoute", steps: `[{setWeight: 20, ` + header + `}]`,
			wantKind: StepSetWeight, wantDesc: "setWeight 20, header route testers"},
		{name: "pause and mirror route", steps: `[{pause: {duration: 1m}, setMirrorRoute: {name: testers, match: [{method: {exact: GET}}]}}]`,
			wantKind: StepPause, wantDesc: "pause 1m0s, mirror route testers 100%"},
		{name: "setWeight and pause", steps: `[{setWeight: 20, pause: {}}]`,
			wantErr: "a step may have only one of setWeight, pause, experiment and analysis, got pause and setWeight"},
		{name: "setWeight and experiment", steps: `[{setWeight: 20, experiment: {templates: [{name: a, specRef: canary}]}}]`,
			wantErr: "sluice cannot run this: experiment steps start ReplicaSets, and standalone sluice runs no pods: run sluice with --kubernetes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			set := Load([]Source{{Name: "r.yaml", Data: stepsRollout(tc.steps, "", "")}})
			errs := set.Diagnostics.Errors()
			if tc.wantErr != "" {
				if len(errs) == 0 || !strings.Contains(errs[0].Message, tc.wantErr) {
					t.Fatalf("want an error containing %q, got:\n%s", tc.wantErr, diagnosticText(set.Diagnostics))
				}
				return
			}
			if len(errs) > 0 || len(set.Rollouts) != 1 {
				t.Fatalf("rejected:\n%s", diagnosticText(set.Diagnostics))
			}
			st := set.Rollouts[0].Steps[0]
			if st.Kind != tc.wantKind || st.String() != tc.wantDesc {
				t.Errorf("step = %s %q, want %s %q", st.Kind, st.String(), tc.wantKind, tc.wantDesc)
			}
		})
	}
}

// TestArgoAcceptsSluiceWarns: fields Argo accepts and sluice only warns
// about load, with the warning.
func TestArgoAcceptsSluiceWarns(t *testing.T) {
	cases := []struct {
		name, steps, canary, routing, wantWarn string
	}{
		{"background startingStep past the end", `[{setWeight: 10}]`, `analysis: {startingStep: 5, templates: [{templateName: bg}]}`, ``,
			"5 is past the last step (1 steps): the background analysis never starts"},
		{"setCanaryScale with two fields", `[{setCanaryScale: {weight: 10, replicas: 2}}]`, ``, ``,
			"set exactly one of weight, replicas or matchTrafficWeight"},
		{"zero pause", `[{pause: {duration: 0}}]`, ``, ``,
			"a zero pause waits until promoted in sluice"},
		{"mirror match with no condition", `[{setMirrorRoute: {name: testers, match: [{}]}}]`, ``, ``,
			"matches every request"},
		{"weight not a whole percent of maxTrafficWeight", `[{setWeight: 333}]`, ``, `maxTrafficWeight: 1000`,
			"333 of maxTrafficWeight 1000 is not a whole percent: sluice routes 33 %"},
	}
	tmpl := []byte("apiVersion: argoproj.io/v1alpha1\nkind: AnalysisTemplate\nmetadata: {name: bg}\nspec: {metrics: [{name: m, provider: {prometheus: {address: 'http://127.0.0.1:9090', query: up}}}]}\n")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			set := Load([]Source{{Name: "r.yaml", Data: stepsRollout(tc.steps, tc.canary, tc.routing)}, {Name: "t.yaml", Data: tmpl}})
			if set.Diagnostics.HasErrors() || len(set.Rollouts) != 1 {
				t.Fatalf("rejected:\n%s", diagnosticText(set.Diagnostics))
			}
			if !strings.Contains(string(diagnosticText(set.Diagnostics.Warnings())), tc.wantWarn) {
				t.Errorf("want a warning containing %q, got:\n%s", tc.wantWarn, diagnosticText(set.Diagnostics))
			}
		})
	}
}
