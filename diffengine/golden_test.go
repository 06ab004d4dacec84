package diffengine

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/internal/testkit"
)

// pairResult is what a golden file records for one pair of versions.
type pairResult struct {
	Rollouts  []Change         `json:"rollouts"`
	Templates []TemplateChange `json:"templates"`
	// Errors are the new version's load errors.
	Errors []string `json:"errors"`
}

// loadPair loads testdata/pairs/<name>/{old,new}.yaml with the real loader
// and the optional live.json (rollout key -> Live).
func loadPair(t *testing.T, dir string) (old, new *api.Set, live func(api.Key) Live) {
	t.Helper()
	read := func(name string) *api.Set {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		// Both versions are the same file, as in two commits of one repository.
		return api.Load([]api.Source{{Name: "strategy.yaml", Data: data}})
	}
	old, new = read("old.yaml"), read("new.yaml")
	if errs := old.Diagnostics.Errors(); len(errs) > 0 {
		t.Fatalf("old.yaml does not load: %v", errs)
	}
	lives := map[string]Live{}
	if data, err := os.ReadFile(filepath.Join(dir, "live.json")); err == nil {
		if err := json.Unmarshal(data, &lives); err != nil {
			t.Fatalf("live.json: %v", err)
		}
	}
	return old, new, func(k api.Key) Live { return lives[k.String()] }
}

func diffPair(t *testing.T, dir string) pairResult {
	old, new, live := loadPair(t, dir)
	res := pairResult{Rollouts: DiffSets(old, new, live), Errors: []string{}}
	if res.Rollouts == nil {
		res.Rollouts = []Change{}
	}
	for _, tc := range DiffSetTemplates(old, new) {
		if tc.Class != Unchanged {
			res.Templates = append(res.Templates, tc)
		}
	}
	if res.Templates == nil {
		res.Templates = []TemplateChange{}
	}
	for _, d := range new.Diagnostics.Errors() {
		res.Errors = append(res.Errors, d.String())
	}
	return res
}

func TestGoldenPairs(t *testing.T) {
	checkout := api.Key{Namespace: "default", Name: "checkout"}
	tests := []struct {
		name  string
		key   api.Key
		class Class // "" means: the rollout must be absent from the result
		risky bool
		// reason, when set, must appear in one of the reasons.
		reason string
		// path, when set, must be the path of one of the changes.
		path string
	}{
		{name: "unchanged", class: Unchanged},
		{name: "reordered-keys", class: Unchanged},
		{name: "comments-only", class: Unchanged},
		{name: "explicit-defaults", class: Unchanged},
		{name: "duration-spellings", class: Unchanged},
		{name: "endpoint-order", class: Unchanged},
		{name: "image-changed", class: NewVersion, path: "spec.template.spec.containers[app].image"},
		{name: "image-and-steps", class: NewVersion, path: "spec.strategy.canary.steps[4].setWeight"},
		{name: "step-inserted-middle", class: StrategyEdit, path: "spec.strategy.canary.steps[4]"},
		{name: "step-removed", class: StrategyEdit, path: "spec.strategy.canary.steps[1]"},
		{name: "step-weight-modified", class: StrategyEdit, path: "spec.strategy.canary.steps[4].setWeight"},
		{name: "step-pause-duration-modified", class: StrategyEdit, path: "spec.strategy.canary.steps[1].pause.duration"},
		{name: "steps-moved", class: StrategyEdit, path: "spec.strategy.canary.steps[5]"},
		{name: "endpoints-only", class: EndpointsOnly, path: `spec.strategy.canary.trafficRouting.plugins["sluice.io/xds"].endpoints["shop/checkout:v2"][1]`},
		{name: "labels-only", class: Cosmetic, path: "metadata.labels.tier"},
		{name: "labels-and-endpoints", class: EndpointsOnly},
		{name: "rollout-added", class: Added},
		{name: "rollout-removed", class: Removed},
		{name: "rollout-renamed", class: Removed},
		{name: "rollout-renamed", key: api.Key{Namespace: "default", Name: "checkout-v2"}, class: Added},
		{name: "container-added", class: StrategyEdit, path: "spec.template.spec.containers[proxy]"},
		{name: "env-changed", class: StrategyEdit, path: "spec.template.spec.containers[app].env[LOG_LEVEL].value"},
		{name: "header-route-changed", class: StrategyEdit, path: "spec.strategy.canary.steps[2].setHeaderRoute.match[0].headerValue.prefix"},
		{name: "managed-routes-reordered", class: StrategyEdit, path: "spec.strategy.canary.trafficRouting.managedRoutes[testers]"},
		{name: "background-analysis-added", class: StrategyEdit, path: "spec.strategy.canary.analysis"},
		{name: "risky-weight-jump", class: StrategyEdit, risky: true, reason: "from 10% to 80% at spec.strategy.canary.steps[4]"},
		{name: "weight-jump-within-configured-limit", class: StrategyEdit},
		{name: "weight-raise-small", class: StrategyEdit},
		{name: "weight-raise-not-live", class: StrategyEdit},
		{name: "risky-promote-early", class: StrategyEdit, risky: true, reason: "to 100% at promotion"},
		{name: "risky-analysis-step-removed", class: StrategyEdit, risky: true, reason: "analysis step success-rate removed before it ran"},
		{name: "analysis-step-removed-after-it-ran", class: StrategyEdit},
		{name: "risky-all-analysis-removed", class: StrategyEdit, risky: true, reason: "all analysis removed"},
		{name: "risky-failure-limit-loosened", class: StrategyEdit, risky: true, reason: "loosened from 1 to 3",
			path: "analysisTemplates[default/success-rate].spec.metrics[success-rate].failureLimit"},
		{name: "risky-failure-limit-disabled", class: StrategyEdit, risky: true, reason: "loosened from 1 to -1 (disabled)"},
		{name: "failure-limit-tightened", class: StrategyEdit},
		{name: "risky-host-changed", class: StrategyEdit, risky: true, reason: `host changed from "checkout.internal" to "shop.internal"`},
		{name: "template-unreferenced-changed", class: Unchanged},
		{name: "invalid-new-kept"},
		{name: "session-affinity-added", class: StrategyEdit},
		{name: "two-rollouts-one-changed", class: Unchanged},
		{name: "two-rollouts-one-changed", key: api.Key{Namespace: "shop", Name: "cart"}, class: StrategyEdit, path: "spec.strategy.canary.steps[1]"},
		{name: "workload-ref-changed", class: NewVersion, path: "spec.workloadRef.name"},
		{name: "replicas-changed", class: StrategyEdit, path: "spec.replicas"},
		{name: "syntax-error-not-removed"},
		{name: "background-analysis-changed", class: StrategyEdit, path: "spec.strategy.canary.analysis.args[service].value"},
		{name: "mirror-step-added", class: StrategyEdit, path: "spec.strategy.canary.steps[5]"},
		{name: "cookie-route-added", class: StrategyEdit, path: "spec.strategy.canary.steps[3]"},
		{name: "gateway-route-changed", class: StrategyEdit, path: `spec.strategy.canary.trafficRouting.plugins["argoproj-labs/gatewayAPI"].grpcRoute`},
	}
	covered := map[string]bool{}
	for _, tt := range tests {
		covered[tt.name] = true
		key := tt.key
		if key == (api.Key{}) {
			key = checkout
		}
		t.Run(tt.name+"/"+key.String(), func(t *testing.T) {
			dir := filepath.Join("testdata", "pairs", tt.name)
			res := diffPair(t, dir)
			var got *Change
			for i := range res.Rollouts {
				if res.Rollouts[i].Rollout == key {
					got = &res.Rollouts[i]
				}
			}
			if tt.class == "" {
				if got != nil {
					t.Fatalf("%s is in the result as %s, want it left out", key, got.Class)
				}
			} else {
				if got == nil {
					t.Fatalf("%s missing from the result", key)
				}
				if got.Class != tt.class || got.Risky != tt.risky {
					t.Errorf("class %s risky %v, want %s risky %v (reasons %q)", got.Class, got.Risky, tt.class, tt.risky, got.Reasons)
				}
				if tt.reason != "" && !containsSub(got.Reasons, tt.reason) {
					t.Errorf("reasons %q do not mention %q", got.Reasons, tt.reason)
				}
				if tt.path != "" && !hasChangeAt(got.Changes, tt.path) {
					t.Errorf("no change at %s in %+v", tt.path, got.Changes)
				}
				if tt.class != Added && tt.class != Removed && (tt.class == Unchanged) != (len(got.Changes) == 0) {
					t.Errorf("class %s with %d changes", tt.class, len(got.Changes))
				}
			}
			checkGolden(t, filepath.Join(dir, "diff.golden.json"), res)
		})
	}
	entries, err := os.ReadDir(filepath.Join("testdata", "pairs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !covered[e.Name()] {
			t.Errorf("testdata/pairs/%s has no test case", e.Name())
		}
	}
	if len(entries) < 30 {
		t.Errorf("%d pairs, want at least 30", len(entries))
	}
}

func containsSub(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func hasChangeAt(changes []FieldChange, path string) bool {
	for _, c := range changes {
		if c.Path == path {
			return true
		}
	}
	return false
}

func checkGolden(t *testing.T, file string, v any) {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	testkit.Golden(t, file, buf.Bytes())
}
