package api

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/sluice-dev/sluice/internal/testkit"
)

func diagnosticText(ds Diagnostics) []byte {
	var b strings.Builder
	for _, d := range ds {
		b.WriteString(d.String())
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

// TestInvalidCorpus loads each invalid file on its own and compares every
// diagnostic, with its line, against the file's golden.
func TestInvalidCorpus(t *testing.T) {
	files, _ := filepath.Glob("testdata/invalid/*.yaml")
	if len(files) < 25 {
		t.Fatalf("want at least 25 invalid files, have %d", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			set, err := LoadPaths(f)
			if err != nil {
				t.Fatal(err)
			}
			if !set.Diagnostics.HasErrors() {
				t.Fatalf("no error for an invalid file; diagnostics:\n%s", diagnosticText(set.Diagnostics))
			}
			for _, d := range set.Diagnostics.Errors() {
				if d.Line == 0 || d.File != f {
					t.Errorf("error without file and line: %+v", d)
				}
			}
			testkit.Golden(t, strings.TrimSuffix(f, ".yaml")+".golden", diagnosticText(set.Diagnostics))
		})
	}
}

// TestValidCorpus loads the valid files as one set (templates resolve
// across files) and compares the converted model with its golden JSON.
func TestValidCorpus(t *testing.T) {
	set, err := LoadPaths("testdata/valid")
	if err != nil {
		t.Fatal(err)
	}
	if set.Diagnostics.HasErrors() {
		t.Fatalf("unexpected errors:\n%s", diagnosticText(set.Diagnostics.Errors()))
	}
	if len(set.Rollouts) != 4 || len(set.Templates) != 3 {
		t.Fatalf("got %d rollouts, %d templates; want 4 and 3", len(set.Rollouts), len(set.Templates))
	}
	model := struct {
		Rollouts    []*Rollout
		Templates   []*AnalysisTemplate
		Diagnostics []string
	}{set.Rollouts, set.Templates, strings.Split(strings.TrimSpace(string(diagnosticText(set.Diagnostics))), "\n")}
	got, err := json.MarshalIndent(model, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	testkit.Golden(t, "testdata/valid/model.golden.json", append(got, '\n'))

	everything := set.Rollout(Key{"payments", "everything"})
	if everything == nil {
		t.Fatal("rollout payments/everything missing")
	}
	if everything.Spec.Strategy.Canary.CanaryService != "everything-canary" {
		t.Errorf("Spec does not keep fields sluice does not model: canaryService = %q", everything.Spec.Strategy.Canary.CanaryService)
	}
	if got := everything.MaxUnapprovedWeightJump(); got != 40 {
		t.Errorf("MaxUnapprovedWeightJump = %d, want 40", got)
	}
	if got := set.Rollout(Key{"payments", "referenced"}).Version; got != "workloadRef:Deployment/referenced" {
		t.Errorf("workloadRef version = %q", got)
	}
}

// TestArgoStyleManifests: canary manifests in the shapes Argo Rollouts
// publishes load (with warnings for routers and providers sluice lacks);
// blue-green loads too; experiment and step-plugin manifests are rejected,
// and so are job metrics (these load in standalone mode).
func TestArgoStyleManifests(t *testing.T) {
	files, _ := filepath.Glob("testdata/argo/*.yaml")
	want := map[string]string{
		"experiment-rejected.yaml":  "run sluice with --kubernetes",
		"step-plugin-rejected.yaml": "step plugins are not supported",
		// Kubernetes mode runs it: api/job_convert_test.go.
		"job-standalone-rejected.yaml": "the job provider runs a Kubernetes Job",
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			set, err := LoadPaths(f)
			if err != nil {
				t.Fatal(err)
			}
			errs := set.Diagnostics.Errors()
			msg, rejected := want[filepath.Base(f)]
			switch {
			case rejected && (len(errs) != 1 || !strings.Contains(errs[0].Message, msg)):
				t.Errorf("want one error containing %q, got:\n%s", msg, diagnosticText(errs))
			case !rejected && len(errs) > 0:
				t.Errorf("unexpected errors:\n%s", diagnosticText(errs))
			case !rejected && len(set.Rollouts) != 1:
				t.Errorf("got %d rollouts, want 1", len(set.Rollouts))
			}
		})
	}
}

func TestLoadSetShape(t *testing.T) {
	rollout := func(name, image string) string {
		return "apiVersion: argoproj.io/v1alpha1\nkind: Rollout\nmetadata: {name: " + name + "}\nspec:\n  template: {spec: {containers: [{name: a, image: \"" + image + "\"}]}}\n  strategy: {canary: {steps: [{setWeight: 10}]}}\n"
	}
	tests := []struct {
		name         string
		files        fstest.MapFS
		rollouts     []string
		rejected     []string
		unreadable   []string
		skippedKinds []string
	}{
		{
			name: "other kinds are skipped, not errors",
			files: fstest.MapFS{
				"app/cm.yaml":   {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n---\napiVersion: argoproj.io/v1alpha1\nkind: Experiment\nmetadata: {name: e}\n")},
				"app/ro.yml":    {Data: []byte(rollout("web", "web:1"))},
				"app/notes.txt": {Data: []byte("not yaml: [")},
			},
			rollouts:     []string{"default/web"},
			skippedKinds: []string{"ConfigMap", "Experiment"},
		},
		{
			name: "dot directories are skipped",
			files: fstest.MapFS{
				".git/x.yaml": {Data: []byte(rollout("hidden", "h:1"))},
				"a.yaml":      {Data: []byte(rollout("shown", "s:1"))},
			},
			rollouts: []string{"default/shown"},
		},
		{
			name: "a duplicate rejects the second, keeps the first",
			files: fstest.MapFS{
				"a.yaml": {Data: []byte(rollout("web", "web:1"))},
				"b.yaml": {Data: []byte(rollout("web", "web:2"))},
			},
			rollouts: []string{"default/web"},
		},
		{
			name: "an invalid rollout is rejected by name; others load",
			files: fstest.MapFS{
				"a.yaml": {Data: []byte(strings.Replace(rollout("bad", "b:1"), "setWeight: 10", "setWeight: 300", 1))},
				"b.yaml": {Data: []byte(rollout("good", "g:1"))},
			},
			rollouts: []string{"default/good"},
			rejected: []string{"default/bad"},
		},
		{
			name: "a syntax error marks the file unreadable, keeps documents before it",
			files: fstest.MapFS{
				"a.yaml": {Data: []byte(rollout("first", "f:1") + "---\nkind: [\n")},
			},
			rollouts:   []string{"default/first"},
			unreadable: []string{"a.yaml"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, err := LoadFS(tt.files, ".")
			if err != nil {
				t.Fatal(err)
			}
			var got, rejected, skipped []string
			for _, r := range set.Rollouts {
				got = append(got, r.Key.String())
			}
			for _, r := range set.Rejected {
				rejected = append(rejected, r.Key.String())
			}
			for _, s := range set.Skipped {
				skipped = append(skipped, s.Kind)
			}
			check := func(what string, got, want []string) {
				if strings.Join(got, ",") != strings.Join(want, ",") {
					t.Errorf("%s = %v, want %v\n%s", what, got, want, diagnosticText(set.Diagnostics))
				}
			}
			check("rollouts", got, tt.rollouts)
			check("rejected", rejected, tt.rejected)
			check("unreadable", set.Unreadable, tt.unreadable)
			check("skipped kinds", skipped, tt.skippedKinds)
		})
	}
}

func TestParseKey(t *testing.T) {
	for in, want := range map[string]Key{"web": {"default", "web"}, "shop/web": {"shop", "web"}} {
		if got := ParseKey(in); got != want {
			t.Errorf("ParseKey(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestDurations(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr bool
	}{
		{"30", "30s", false}, {"30s", "30s", false}, {"1h", "1h0m0s", false}, {"1m30s", "1m30s", false},
		{"-1", "", true}, {"-5s", "", true}, {"soon", "", true}, {"", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			d, err := parseDuration(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err == nil && d.String() != tt.want {
				t.Errorf("got %s, want %s", d, tt.want)
			}
		})
	}
}
