package api

import (
	"strings"
	"testing"
	"time"
)

// experimentRollout is kubeRollout with the given steps and extra
// trafficRouting fields, beside a template "check" with no arguments.
func experimentRollout(steps, routing string) string {
	doc := strings.Replace(kubeRollout, "steps: [{setWeight: 20}]", "steps: "+steps, 1)
	doc = strings.Replace(doc, "        plugins:\n", "        "+routing+"\n        plugins:\n", 1)
	return doc + `---
apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {name: check, namespace: shop}
spec: {metrics: [{name: m, provider: {web: {url: "http://127.0.0.1:1/x"}}}]}
`
}

// TestExperimentStep: Kubernetes mode reads an experiment step into the
// model with Argo's defaults; standalone mode refuses it and names
// --kubernetes.
func TestExperimentStep(t *testing.T) {
	step := `[{setWeight: 20}, {experiment: {duration: 10s, templates: [
      {name: base, specRef: stable},
      {name: cand, specRef: canary, replicas: 2, metadata: {labels: {tier: exp}, annotations: {a: b}}}],
    analyses: [{name: cmp, templateName: check, requiredForCompletion: true,
      args: [{name: h, value: "{{templates.cand.podTemplateHash}}"}]}]}}]`
	set := loadKube(t, experimentRollout(step, ""))
	if set.Diagnostics.HasErrors() || len(set.Rollouts) != 1 {
		t.Fatalf("rejected:\n%s", diagnosticText(set.Diagnostics))
	}
	st := set.Rollouts[0].Steps[1]
	if st.Kind != StepExperiment || st.String() != "experiment base+cand 10s" {
		t.Fatalf("step = %s %q", st.Kind, st)
	}
	e := st.Experiment
	if e.Duration != 10*time.Second || len(e.Templates) != 2 || len(e.Analyses) != 1 || !e.Required() {
		t.Fatalf("experiment = %+v", e)
	}
	if b := e.Templates[0]; b.SpecRef != SpecRefStable || b.Replicas != 1 {
		t.Errorf("template base = %+v, want stable with Argo's default of 1 replica", b)
	}
	if c := e.Templates[1]; c.SpecRef != SpecRefCanary || c.Replicas != 2 || c.Labels["tier"] != "exp" || c.Annotations["a"] != "b" {
		t.Errorf("template cand = %+v", c)
	}
	a := e.Analyses[0]
	if a.Name != "cmp" || a.Analysis.TemplateNames() != "check" || len(a.Analysis.Args) != 1 {
		t.Errorf("analysis = %+v", a)
	}

	standalone := Load([]Source{{Name: "r.yaml", Data: []byte(experimentRollout(step, ""))}})
	found := false
	for _, e := range standalone.Diagnostics.Errors() {
		found = found || e.Field == "spec.strategy.canary.steps[1].experiment" &&
			strings.Contains(e.Message, "sluice cannot run this: experiment steps start ReplicaSets") && strings.Contains(e.Message, "--kubernetes")
	}
	if !found {
		t.Errorf("standalone: want a cannot-run error at the step naming --kubernetes, got:\n%s", diagnosticText(standalone.Diagnostics))
	}
}

// TestExperimentHash: an experiment template's pods have a hash of their
// own, apart from the version's and from another template of the same
// version, and stable under a reload.
func TestExperimentHash(t *testing.T) {
	r := loadKube(t, kubeRollout).Rollouts[0]
	a := ExperimentHash(r, ExperimentTemplate{Name: "a", SpecRef: SpecRefCanary})
	b := ExperimentHash(r, ExperimentTemplate{Name: "b", SpecRef: SpecRefCanary})
	if a == r.Workload.PodTemplateHash || b == r.Workload.PodTemplateHash || a == b || a == r.Workload.BaselineHash {
		t.Errorf("hashes not distinct: version %s, baseline %s, a %s, b %s", r.Workload.PodTemplateHash, r.Workload.BaselineHash, a, b)
	}
	if again := ExperimentHash(r, ExperimentTemplate{Name: "a", SpecRef: SpecRefStable}); again != a {
		t.Errorf("hash depends on the template of the version only: %s, then %s", a, again)
	}
	if r.Spec.Template.Labels[ExperimentLabel] != "" {
		t.Error("ExperimentHash changed the rollout's template")
	}
	args := ResolveExperimentArgs([]Arg{{Name: "h", Value: "hash={{templates.a.podTemplateHash}} rs={{ templates.a.replicaset.name }} {{templates.x.podTemplateHash}}"}}, "checkout", map[string]string{"a": a})
	if want := "hash=" + a + " rs=checkout-a-" + a + " {{templates.x.podTemplateHash}}"; args[0].Value != want {
		t.Errorf("resolved %q, want %q", args[0].Value, want)
	}
}

// TestExperimentChecks: what Argo's validation rejects, what its
// experiment controller would fail on at run time (sluice cannot run
// it), and what sluice only warns about.
func TestExperimentChecks(t *testing.T) {
	cases := []struct {
		name, steps, routing string
		wantErr, wantWarn    string
	}{
		{name: "weight routed by the plugin", steps: `[{experiment: {duration: 1m, templates: [{name: a, specRef: canary, weight: 5}]}}]`,
			wantWarn: "weight 5 is not routed"},
		{name: "no duration, nothing required", steps: `[{experiment: {templates: [{name: a, specRef: canary}]}}]`,
			wantWarn: "runs until promoted"},
		{name: "service", steps: `[{experiment: {duration: 1m, templates: [{name: a, specRef: canary, service: {name: s}}]}}]`,
			wantWarn: "creates no Service"},
		{name: "unknown specRef", steps: `[{experiment: {duration: 1m, templates: [{name: a, specRef: preview}]}}]`,
			wantErr: "sluice cannot run this: must be stable or canary"},
		{name: "repeated template", steps: `[{experiment: {duration: 1m, templates: [{name: a, specRef: canary}, {name: a, specRef: stable}]}}]`,
			wantErr: `template "a" is listed twice`},
		{name: "template name not a label", steps: `[{experiment: {duration: 1m, templates: [{name: A_b, specRef: canary}]}}]`,
			wantErr: "is not a DNS-1123 label"},
		{name: "select everything", steps: `[{experiment: {duration: 1m, templates: [{name: a, specRef: canary, selector: {}}]}}]`,
			wantErr: "an empty selector selects every pod"},
		{name: "bad duration", steps: `[{experiment: {duration: soon, templates: [{name: a, specRef: canary}]}}]`,
			wantErr: "not a duration"},
		{name: "missing template", steps: `[{experiment: {duration: 1m, templates: [{name: a, specRef: canary}], analyses: [{name: x, templateName: nope}]}}]`,
			wantErr: `AnalysisTemplate "nope" not found`},
		{name: "argument naming a template the experiment does not have", steps: `[{experiment: {duration: 1m, templates: [{name: a, specRef: canary}], analyses: [{name: x, templateName: check, args: [{name: h, value: "{{templates.b.podTemplateHash}}"}]}]}}]`,
			wantErr: `names template "b", which the experiment does not have`},
		{name: "argument with a tag sluice does not resolve", steps: `[{experiment: {duration: 1m, templates: [{name: a, specRef: canary}], analyses: [{name: x, templateName: check, args: [{name: h, value: "{{experiment.availableAt}}"}]}]}}]`,
			wantErr: "sluice resolves only"},
		{name: "analysis without a name", steps: `[{experiment: {duration: 1m, templates: [{name: a, specRef: canary}], analyses: [{templateName: check}]}}]`,
			wantErr: "it names the analysis"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			set := loadKube(t, experimentRollout(tc.steps, tc.routing))
			text := string(diagnosticText(set.Diagnostics))
			if tc.wantErr != "" {
				if !set.Diagnostics.HasErrors() || !strings.Contains(text, tc.wantErr) {
					t.Fatalf("want error %q, got:\n%s", tc.wantErr, text)
				}
				return
			}
			if set.Diagnostics.HasErrors() || !strings.Contains(text, tc.wantWarn) {
				t.Fatalf("want only warning %q, got:\n%s", tc.wantWarn, text)
			}
		})
	}
}
