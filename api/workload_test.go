package api

import (
	"strings"
	"testing"
	"time"
)

const kubeRollout = `apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: checkout, namespace: shop}
spec:
  replicas: 4
  revisionHistoryLimit: 3
  progressDeadlineSeconds: 120
  progressDeadlineAbort: true
  selector: {matchLabels: {app: checkout}}
  template:
    metadata: {labels: {app: checkout}}
    spec:
      containers: [{name: app, image: "shop/checkout:v2"}]
  strategy:
    canary:
      dynamicStableScale: true
      minPodsPerReplicaSet: 2
      abortScaleDownDelaySeconds: 5
      canaryService: checkout-canary
      stableService: checkout-stable
      trafficRouting:
        plugins:
          sluice.io/xds: {host: checkout.shop}
      steps: [{setWeight: 20}]
`

func loadKube(t *testing.T, doc string) *Set {
	t.Helper()
	return NewLoader(Limits{}).ForKubernetes().Load([]Source{{Name: "r.yaml", Data: []byte(doc)}})
}

// TestKubernetesWorkload reads Argo's workload fields, with Argo's
// defaults where the file is silent.
func TestKubernetesWorkload(t *testing.T) {
	set := loadKube(t, kubeRollout)
	if set.Diagnostics.HasErrors() {
		t.Fatalf("errors: %s", diagnosticText(set.Diagnostics))
	}
	w := set.Rollouts[0].Workload
	if w == nil {
		t.Fatal("no Workload in Kubernetes mode")
	}
	want := Workload{
		PodTemplateHash: w.PodTemplateHash, DynamicStableScale: true, MinPodsPerReplicaSet: 2,
		ProgressDeadline: 2 * time.Minute, ProgressDeadlineAbort: true,
		ScaleDownDelay: DefaultScaleDownDelay, AbortScaleDownDelay: 5 * time.Second,
		RevisionHistoryLimit: 3, CanaryService: "checkout-canary", StableService: "checkout-stable",
		BaselineHash: w.BaselineHash,
	}
	if *w != want {
		t.Errorf("workload:\n got %+v\nwant %+v", *w, want)
	}
	standalone := Load([]Source{{Name: "r.yaml", Data: []byte(kubeRollout)}})
	if r := standalone.Rollout(Key{Namespace: "shop", Name: "checkout"}); r != nil {
		t.Errorf("standalone mode must reject a rollout without endpoints; got %+v", r)
	}
}

// TestPodTemplateHash: the hash follows the template (as Argo's does), not
// the rollout's name or strategy, and is a short safe-encoded string.
func TestPodTemplateHash(t *testing.T) {
	hashOf := func(doc string) string {
		t.Helper()
		set := loadKube(t, doc)
		if len(set.Rollouts) != 1 {
			t.Fatalf("not loaded: %s", diagnosticText(set.Diagnostics))
		}
		return set.Rollouts[0].Workload.PodTemplateHash
	}
	base := hashOf(kubeRollout)
	if len(base) < 8 || len(base) > 10 || strings.ContainsAny(base, "aeiou") {
		t.Errorf("hash %q: want Argo's safe-encoded fnv32 (no vowels)", base)
	}
	if h := hashOf(strings.Replace(kubeRollout, "setWeight: 20", "setWeight: 40", 1)); h != base {
		t.Errorf("a strategy edit changed the hash: %s → %s", base, h)
	}
	if h := hashOf(strings.Replace(kubeRollout, "checkout:v2", "checkout:v3", 1)); h == base {
		t.Errorf("a new image kept the hash %s", h)
	}
	if h := hashOf(strings.Replace(kubeRollout, "{labels: {app: checkout}}", "{labels: {app: checkout, tier: web}}", 1)); h == base {
		t.Errorf("a new pod label kept the hash %s", h)
	}
}

// TestKubernetesModeErrors: what Kubernetes mode refuses, with file, line
// and field.
func TestKubernetesModeErrors(t *testing.T) {
	cases := []struct {
		name, old, new, want string
	}{
		{"endpoints from git", "{host: checkout.shop}", "{host: checkout.shop, endpoints: {\"shop/checkout:v2\": [\"10.0.0.1:80\"]}}",
			`r.yaml:23: spec.strategy.canary.trafficRouting.plugins[sluice.io/xds].endpoints: not allowed in Kubernetes mode`},
		{"no selector", "  selector: {matchLabels: {app: checkout}}\n", "",
			`r.yaml:4: spec.selector: required in Kubernetes mode`},
		{"workloadRef and template", "  selector: {matchLabels: {app: checkout}}\n", "  selector: {matchLabels: {app: checkout}}\n  workloadRef: {apiVersion: apps/v1, kind: Deployment, name: checkout}\n",
			`r.yaml:11: spec.template: must be empty for a workloadRef rollout: the pod template comes from the Deployment`},
		{"minPods", "minPodsPerReplicaSet: 2", "minPodsPerReplicaSet: 0",
			`r.yaml:17: spec.strategy.canary.minPodsPerReplicaSet: must be at least 1`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc := strings.Replace(kubeRollout, tc.old, tc.new, 1)
			if doc == kubeRollout {
				t.Fatal("case changed nothing")
			}
			got := string(diagnosticText(loadKube(t, doc).Diagnostics.Errors()))
			if !strings.Contains(got, tc.want) {
				t.Errorf("errors:\n%s\nwant a line containing %q", got, tc.want)
			}
		})
	}
}

// judgeTemplate is an AnalysisTemplate with one metric of provider kind.
func judgeTemplate(provider string) string {
	return `---
apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {name: judged, namespace: shop}
spec:
  metrics:
  - name: m
    provider:
` + provider + "\n"
}

const (
	judgeProvider = `      plugin:
        sluice.io/judge: {address: "http://prom:9090", canaryQuery: "a", baselineQuery: "b"}`
	promProvider = `      prometheus: {address: "http://prom:9090", query: "a"}`
)

// TestBaselineTrigger: a rollout gets a baseline in Kubernetes mode when
// one of its analyses (a step's or the background one) runs a template
// with a sluice.io/judge metric, and only then; its baseline hash differs
// from the pod-template hash, always.
func TestBaselineTrigger(t *testing.T) {
	step := strings.Replace(kubeRollout, "steps: [{setWeight: 20}]", "steps: [{setWeight: 20}, {analysis: {templates: [{templateName: judged}]}}]", 1)
	background := strings.Replace(kubeRollout, "      steps: [{setWeight: 20}]", "      analysis: {templates: [{templateName: judged}]}\n      steps: [{setWeight: 20}]", 1)
	cases := []struct {
		name, rollout, provider string
		want                    bool
	}{
		{"no analysis", kubeRollout, promProvider, false},
		{"step analysis with prometheus", step, promProvider, false},
		{"step analysis with the judge", step, judgeProvider, true},
		{"background analysis with the judge", background, judgeProvider, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			set := loadKube(t, tc.rollout+judgeTemplate(tc.provider))
			if set.Diagnostics.HasErrors() || len(set.Rollouts) != 1 {
				t.Fatalf("errors: %s", diagnosticText(set.Diagnostics))
			}
			w := set.Rollouts[0].Workload
			if w.Baseline != tc.want {
				t.Errorf("Baseline = %v, want %v", w.Baseline, tc.want)
			}
			if w.BaselineHash == "" || w.BaselineHash == w.PodTemplateHash {
				t.Errorf("baseline hash %q must be set and differ from the pod-template hash %q", w.BaselineHash, w.PodTemplateHash)
			}
		})
	}
}
