package api

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// jobTemplate is Argo's examples/analysis-templates.yaml "pass" template,
// with labels, annotations and an argument in the Job.
const jobTemplate = `apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {name: smoke, namespace: shop}
spec:
  args: [{name: host}]
  metrics:
  - name: smoke
    count: 2
    interval: 5s
    failureLimit: 1
    provider:
      job:
        metadata:
          labels: {team: shop}
          annotations: {owner: qa}
        spec:
          backoffLimit: 0
          template:
            spec:
              containers:
              - name: curl
                image: curlimages/curl:8.5.0
                args: ["{{args.host}}"]
              restartPolicy: Never
`

func loadTemplate(t *testing.T, kube bool, doc string) *Set {
	t.Helper()
	l := NewLoader(Limits{})
	if kube {
		l.ForKubernetes()
	}
	return l.Load([]Source{{Name: "t.yaml", Data: []byte(doc)}})
}

// TestJobProviderKubernetes keeps the Job's metadata and spec as written,
// arguments unresolved (they are substituted when a run starts).
func TestJobProviderKubernetes(t *testing.T) {
	set := loadTemplate(t, true, jobTemplate)
	if len(set.Diagnostics) > 0 {
		t.Fatalf("diagnostics: %s", diagnosticText(set.Diagnostics))
	}
	p := set.Templates[0].Metrics[0].Provider
	if p.Kind != ProviderJob || p.Job == nil || p.Unsupported {
		t.Fatalf("provider = %+v, want a job provider", p)
	}
	if p.Job.Labels["team"] != "shop" || p.Job.Annotations["owner"] != "qa" {
		t.Errorf("metadata: labels %v, annotations %v", p.Job.Labels, p.Job.Annotations)
	}
	spec := p.Job.Spec
	if spec.BackoffLimit == nil || *spec.BackoffLimit != 0 {
		t.Errorf("backoffLimit = %v, want 0", spec.BackoffLimit)
	}
	c := spec.Template.Spec.Containers
	if len(c) != 1 || c[0].Image != "curlimages/curl:8.5.0" || c[0].Args[0] != "{{args.host}}" {
		t.Errorf("containers = %+v", c)
	}
	if spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("restartPolicy = %q", spec.Template.Spec.RestartPolicy)
	}
}

// TestJobProviderStandalone refuses a job metric outside Kubernetes mode,
// at the provider's line, saying which mode runs it.
func TestJobProviderStandalone(t *testing.T) {
	set := loadTemplate(t, false, jobTemplate)
	if len(set.Templates) != 0 {
		t.Errorf("template accepted in standalone mode")
	}
	d := onlyError(t, set)
	if d.Field != "spec.metrics[0].provider.job" || d.Line != 12 || d.File != "t.yaml" {
		t.Errorf("error at %s:%d %s, want t.yaml:12 spec.metrics[0].provider.job", d.File, d.Line, d.Field)
	}
	for _, want := range []string{"sluice cannot run this", "Kubernetes Job", "--kubernetes"} {
		if !strings.Contains(d.Message, want) {
			t.Errorf("message %q does not contain %q", d.Message, want)
		}
	}
}

// TestJobProviderPodChecks refuses, at their lines, the Jobs the API
// server would refuse at every measurement.
func TestJobProviderPodChecks(t *testing.T) {
	for _, tc := range []struct {
		name, from, to, field string
		line                  int
	}{
		{"no containers", `              containers:
              - name: curl
                image: curlimages/curl:8.5.0
                args: ["{{args.host}}"]
`, "              containers: []\n", "spec.metrics[0].provider.job.spec.template.spec.containers", 20},
		{"restart always", "restartPolicy: Never", "restartPolicy: Always", "spec.metrics[0].provider.job.spec.template.spec.restartPolicy", 24},
		// A missing field is reported at its parent's line.
		{"no restart policy", "              restartPolicy: Never\n", "", "spec.metrics[0].provider.job.spec.template.spec.restartPolicy", 19},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := strings.Replace(jobTemplate, tc.from, tc.to, 1)
			d := onlyError(t, loadTemplate(t, true, doc))
			if d.Field != tc.field {
				t.Errorf("field %s, want %s", d.Field, tc.field)
			}
			if d.Line != tc.line {
				t.Errorf("line %d, want %d (%s)", d.Line, tc.line, d.Message)
			}
		})
	}
}

func onlyError(t *testing.T, set *Set) Diagnostic {
	t.Helper()
	var errs Diagnostics
	for _, d := range set.Diagnostics {
		if d.Severity == SeverityError {
			errs = append(errs, d)
		}
	}
	if len(errs) != 1 {
		t.Fatalf("want one error, got: %s", diagnosticText(set.Diagnostics))
	}
	return errs[0]
}
