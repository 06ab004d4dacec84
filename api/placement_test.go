package api

import (
	"strings"
	"testing"
	"time"
)

func placementDoc(annotations string) []Source {
	return []Source{{Name: "r.yaml", Data: []byte(`apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: web
  annotations:
` + annotations + `spec:
  selector: {matchLabels: {app: web}}
  template: {metadata: {labels: {app: web}}, spec: {containers: [{name: app, image: "shop/web:1"}]}}
  strategy: {canary: {steps: [{setWeight: 10}]}}
`)}}
}

// TestPlacement reads the multi-cluster annotations into the model, with
// Argo-free defaults.
func TestPlacement(t *testing.T) {
	set := NewLoader(Limits{}).ForKubernetes().Load(placementDoc(`    sluice.io/clusters: "region in (eu,us),tier=prod"
    sluice.io/waves: "1,50%,100%"
    sluice.io/wave-soak: 10m
`))
	if set.Diagnostics.HasErrors() || len(set.Rollouts) != 1 {
		t.Fatalf("diagnostics:\n%s", diagnosticText(set.Diagnostics))
	}
	p := set.Rollouts[0].Placement
	if p == nil || p.Clusters != "region in (eu,us),tier=prod" || len(p.Waves) != 3 || p.Waves[1].Percent != 50 || p.WaveSoak != 10*time.Minute || p.OnWaveFailure != OnWaveFailureRollbackAll {
		t.Fatalf("placement %+v", p)
	}
	if w := annotationDiags(set.Diagnostics); len(w) != 0 {
		t.Errorf("want no diagnostics about the annotations, got:\n%s", diagnosticText(w))
	}
	if set := Load(placementDoc("    team: web\n")); set.Rollouts[0].Placement != nil {
		t.Errorf("no annotation: placement %+v, want nil (home cluster only)", set.Rollouts[0].Placement)
	}
}

// TestPlacementErrors: each bad annotation is an error at its line.
func TestPlacementErrors(t *testing.T) {
	for name, tc := range map[string]struct{ annotations, want string }{
		"selector": {"    sluice.io/clusters: \"region in eu\"\n", "r.yaml:6: metadata.annotations[sluice.io/clusters]: not a label selector"},
		"waves":    {"    sluice.io/clusters: region=eu\n    sluice.io/waves: \"2,1,100%\"\n", "r.yaml:7: metadata.annotations[sluice.io/waves]: wave 2 \"1\": sizes are cumulative"},
		"soak":     {"    sluice.io/clusters: region=eu\n    sluice.io/wave-soak: soon\n", "r.yaml:7: metadata.annotations[sluice.io/wave-soak]: not a duration"},
		"failure":  {"    sluice.io/clusters: region=eu\n    sluice.io/on-wave-failure: panic\n", "metadata.annotations[sluice.io/on-wave-failure]: must be rollback-all or hold"},
	} {
		t.Run(name, func(t *testing.T) {
			errs := NewLoader(Limits{}).ForKubernetes().Load(placementDoc(tc.annotations)).Diagnostics.Errors()
			if len(errs) != 1 || !strings.Contains(errs[0].String(), tc.want) {
				t.Errorf("want one error containing %q, got:\n%s", tc.want, diagnosticText(errs))
			}
		})
	}
	warns := annotationDiags(Load(placementDoc("    sluice.io/waves: \"1,100%\"\n")).Diagnostics)
	if len(warns) != 1 || !strings.Contains(warns[0].Message, "has no effect without sluice.io/clusters") {
		t.Errorf("waves alone: %s", diagnosticText(warns))
	}
}

// annotationDiags are the diagnostics about annotations (the test file's
// rollout has other warnings: no selector, no trafficRouting).
func annotationDiags(ds Diagnostics) Diagnostics {
	var out Diagnostics
	for _, d := range ds {
		if strings.HasPrefix(d.Field, "metadata.annotations") {
			out = append(out, d)
		}
	}
	return out
}

// TestPlacementLimits: what a rollout across clusters cannot do yet is an
// error at its own field.
func TestPlacementLimits(t *testing.T) {
	standalone := Load(placementDoc("    sluice.io/clusters: region=eu\n")).Diagnostics.Errors()
	if len(standalone) != 1 || !strings.Contains(standalone[0].String(), "r.yaml:6: metadata.annotations[sluice.io/clusters]: a rollout across clusters runs in Kubernetes mode only") {
		t.Errorf("standalone: %s", diagnosticText(standalone))
	}
}

// TestPlacementRouting: every router may move a rollout's traffic across
// clusters: sluice's xDS (each cluster's clients get their own part), and
// the cluster routers, which act in each part's own cluster.
func TestPlacementRouting(t *testing.T) {
	for name, routing := range map[string]string{
		"xds":        "{plugins: {sluice.io/xds: {host: web.internal}}}",
		"gatewayAPI": "{plugins: {argoproj-labs/gatewayAPI: {httpRoute: web}}}",
		"istio":      "{istio: {virtualService: {name: web, routes: [primary]}}}",
	} {
		t.Run(name, func(t *testing.T) {
			set := routedPlacement(t, routing)
			if errs := set.Diagnostics.Errors(); len(errs) != 0 {
				t.Fatalf("want no errors, got:\n%s", diagnosticText(errs))
			}
			if r := set.Rollouts[0]; r.Placement == nil || (name != "xds" && r.Routing == nil) {
				t.Errorf("placement %+v, routing %+v: want both", r.Placement, r.Routing)
			}
		})
	}
}

// routedPlacement loads, in Kubernetes mode, a rollout across clusters
// whose canary has the trafficRouting block routing (YAML flow style).
func routedPlacement(t *testing.T, routing string) *Set {
	t.Helper()
	return NewLoader(Limits{}).ForKubernetes().Load([]Source{{Name: "r.yaml", Data: []byte(`apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: web
  annotations: {sluice.io/clusters: region=eu}
spec:
  selector: {matchLabels: {app: web}}
  template: {metadata: {labels: {app: web}}, spec: {containers: [{name: app, image: "shop/web:1"}]}}
  strategy:
    canary:
      canaryService: web-canary
      stableService: web-stable
      trafficRouting: ` + routing + `
      steps: [{setWeight: 10}]
`)}})
}

// TestPlacementBlueGreen: a blue-green rollout may run across clusters
// (each part switches its own cluster's Services, in its wave), with its
// Services, its cluster routers or its xDS hosts; a workloadRef stays
// refused at its field.
func TestPlacementBlueGreen(t *testing.T) {
	doc := func(annotations, spec string) []Source {
		return []Source{{Name: "r.yaml", Data: []byte(`apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: web
  annotations:
    sluice.io/clusters: region=eu
    sluice.io/waves: "1,100%"
` + annotations + `spec:
  selector: {matchLabels: {app: web}}
` + spec + `  strategy:
    blueGreen: {activeService: web, previewService: web-preview, prePromotionAnalysis: {templates: [{templateName: gate}]}}
---
apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {name: gate}
spec: {metrics: [{name: ok, provider: {web: {url: "http://gate/ok"}}, successCondition: "result == true"}]}
`)}}
	}
	const template = "  template: {metadata: {labels: {app: web}}, spec: {containers: [{name: app, image: \"shop/web:1\"}]}}\n"
	for name, annotations := range map[string]string{
		"services": "",
		"routers":  "    sluice.io/traffic-routing: \"{plugins: {argoproj-labs/gatewayAPI: {httpRoute: web}}}\"\n",
		"xds":      "    sluice.io/xds: \"{host: web.internal, previewHost: preview.web.internal}\"\n",
	} {
		t.Run(name, func(t *testing.T) {
			set := NewLoader(Limits{}).ForKubernetes().Load(doc(annotations, template))
			if errs := set.Diagnostics.Errors(); len(errs) != 0 {
				t.Fatalf("want no errors, got:\n%s", diagnosticText(errs))
			}
			r := set.Rollouts[0]
			if r.Placement == nil || r.Strategy != StrategyBlueGreen || r.Routing == nil || r.Routing.ActiveService != "web" || len(r.Steps) == 0 {
				t.Errorf("placement %+v, strategy %q, routing %+v, %d steps: want a blue-green rollout across clusters", r.Placement, r.Strategy, r.Routing, len(r.Steps))
			}
		})
	}
	ref := NewLoader(Limits{}).ForKubernetes().Load(doc("", "  workloadRef: {apiVersion: apps/v1, kind: Deployment, name: web}\n")).Diagnostics.Errors()
	found := false
	for _, e := range ref {
		found = found || e.Field == "spec.workloadRef" && strings.Contains(e.Message, "not supported with sluice.io/clusters yet")
	}
	if !found {
		t.Errorf("workloadRef across clusters: want an error at spec.workloadRef, got:\n%s", diagnosticText(ref))
	}
}
