package diffengine

import (
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/api"
)

func loadTemplate(t *testing.T, metrics string) *api.AnalysisTemplate {
	t.Helper()
	doc := `apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata: {name: rate}
spec:
  args: [{name: limit, value: "2"}]
  metrics:
` + metrics
	set := api.Load([]api.Source{{Name: "t.yaml", Data: []byte(doc)}})
	if set.Diagnostics.HasErrors() || len(set.Templates) != 1 {
		t.Fatalf("load: %v", set.Diagnostics)
	}
	return set.Templates[0]
}

func TestDiffTemplates(t *testing.T) {
	const metric = `  - name: ok
    interval: 1m
    failureLimit: 1
    successCondition: result > 0.9
    provider:
      prometheus: {address: "http://p:9090", query: q}
`
	tests := []struct {
		name     string
		metrics  string
		paths    []string
		loosened string // a substring of the failureLimit reason, "" for none
	}{
		{name: "same", metrics: metric},
		{name: "spellings and defaults", metrics: strings.NewReplacer("interval: 1m", "interval: 60s", "failureLimit: 1", "failureLimit: \"1\"\n    consecutiveErrorLimit: 4").Replace(metric)},
		{name: "query", metrics: strings.Replace(metric, "query: q", "query: q2", 1), paths: []string{"spec.metrics[ok].provider.prometheus.query"}},
		{name: "failureLimit raised", metrics: strings.Replace(metric, "failureLimit: 1", "failureLimit: 5", 1),
			paths: []string{"spec.metrics[ok].failureLimit"}, loosened: "loosened from 1 to 5"},
		{name: "failureLimit to an argument", metrics: strings.Replace(metric, "failureLimit: 1", `failureLimit: "{{args.limit}}"`, 1),
			paths: []string{"spec.metrics[ok].failureLimit"}, loosened: "may allow more failures"},
		{name: "failureLimit lowered", metrics: strings.Replace(metric, "failureLimit: 1", "failureLimit: 0", 1),
			paths: []string{"spec.metrics[ok].failureLimit"}},
		{name: "metric added", metrics: metric + strings.Replace(metric, "name: ok", "name: latency", 1),
			paths: []string{"spec.metrics[latency]"}},
	}
	old := loadTemplate(t, metric)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			new := loadTemplate(t, tt.metrics)
			changes := DiffTemplates(old, new)
			var got []string
			for _, c := range changes {
				got = append(got, c.Path)
			}
			if strings.Join(got, ",") != strings.Join(tt.paths, ",") {
				t.Errorf("paths %q, want %q", got, tt.paths)
			}
			reasons := loosenedFailureLimits(old, new)
			switch {
			case tt.loosened == "" && len(reasons) > 0:
				t.Errorf("unexpected reasons %q", reasons)
			case tt.loosened != "" && !strings.Contains(strings.Join(reasons, "|"), tt.loosened):
				t.Errorf("reasons %q, want one with %q", reasons, tt.loosened)
			}
		})
	}
	if c := DiffTemplates(nil, old); len(c) != 1 || c[0].Kind != KindAdded {
		t.Errorf("nil old: %v", c)
	}
	if c := DiffTemplates(old, nil); len(c) != 1 || c[0].Kind != KindRemoved {
		t.Errorf("nil new: %v", c)
	}
}
