package argocompat

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/validation"
	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/api"
)

// Marks that separate the two kinds of deliberate difference from Argo:
// an error for a file sluice cannot run, and a warning for a rule of
// Argo's that sluice does not need.
const (
	cannotRunMark  = "sluice cannot run this: "
	argoRejectMark = "Argo Rollouts rejects this: "
)

// argoModuleDir finds the argo-rollouts module sluice builds against, in
// the module cache (present after `go mod download`).
func argoModuleDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/argoproj/argo-rollouts").Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		t.Fatalf("locate the argo-rollouts module (run `go mod download`): %v", err)
	}
	return dir
}

// corpusDoc is one Rollout document of the corpus.
type corpusDoc struct {
	name string // file relative to the module, with the document index
	data []byte
}

// rolloutCorpus returns every Rollout document (canary and blue-green)
// under the module's examples/ and test/e2e/. Files that are not YAML (Helm templates) are
// skipped and counted.
func rolloutCorpus(t *testing.T, moduleDir string) (docs []corpusDoc, unparsable int) {
	t.Helper()
	for _, sub := range []string{"examples", "test/e2e"} {
		err := filepath.WalkDir(filepath.Join(moduleDir, sub), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(moduleDir, path)
			found, err := rolloutDocs(rel, data)
			if err != nil {
				unparsable++
				return nil
			}
			docs = append(docs, found...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return docs, unparsable
}

// rolloutDocs splits a file into documents and re-encodes each Rollout.
func rolloutDocs(name string, data []byte) ([]corpusDoc, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var out []corpusDoc
	for i := 0; ; i++ {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		var head struct {
			APIVersion string `yaml:"apiVersion"`
			Kind       string `yaml:"kind"`
		}
		if n.Decode(&head) != nil || head.Kind != "Rollout" || !strings.HasPrefix(head.APIVersion, "argoproj.io/") {
			continue
		}
		b, err := yaml.Marshal(&n)
		if err != nil {
			return nil, err
		}
		out = append(out, corpusDoc{name: fmt.Sprintf("%s#%d", name, i), data: b})
	}
}

// argoVerdict is what Argo's validation says of a document: the errors of
// ValidateRollout, plus ValidateRolloutReferencedResources with no
// referenced objects. The referenced objects (Services, Ingresses,
// VirtualServices, AnalysisTemplates) live in a cluster; with none given
// Argo checks none, and the sluice side gets stub templates (stubTemplates)
// so that neither side fails only for a missing object.
func argoVerdict(data []byte) (*v1alpha1.Rollout, field.ErrorList) {
	var ro v1alpha1.Rollout
	if err := sigsyaml.Unmarshal(data, &ro); err != nil {
		return nil, field.ErrorList{field.InternalError(field.NewPath("decode"), err)}
	}
	errs := validation.ValidateRollout(&ro)
	errs = append(errs, validation.ValidateRolloutReferencedResources(&ro, validation.ReferencedResources{})...)
	return &ro, errs
}

// stubTemplates defines every analysis template ro names, with one metric
// and no arguments, standing in for the cluster's templates.
func stubTemplates(ro *v1alpha1.Rollout) []byte {
	seen := map[string]bool{}
	var b strings.Builder
	add := func(refs []v1alpha1.AnalysisTemplateRef) {
		for _, ref := range refs {
			kind, ns := "AnalysisTemplate", ro.Namespace
			if ref.ClusterScope != nil && *ref.ClusterScope {
				kind, ns = "ClusterAnalysisTemplate", ""
			}
			if ref.TemplateName == "" || seen[kind+"/"+ref.TemplateName] {
				continue
			}
			seen[kind+"/"+ref.TemplateName] = true
			fmt.Fprintf(&b, "---\napiVersion: argoproj.io/v1alpha1\nkind: %s\nmetadata: {name: %q, namespace: %q}\nspec: {metrics: [{name: m, provider: {prometheus: {address: 'http://127.0.0.1:9090', query: up}}}]}\n", kind, ref.TemplateName, ns)
		}
	}
	if bg := ro.Spec.Strategy.BlueGreen; bg != nil {
		for _, a := range []*v1alpha1.RolloutAnalysis{bg.PrePromotionAnalysis, bg.PostPromotionAnalysis} {
			if a != nil {
				add(a.Templates)
			}
		}
	}
	if c := ro.Spec.Strategy.Canary; c != nil {
		if c.Analysis != nil {
			add(c.Analysis.Templates)
		}
		for _, s := range c.Steps {
			if s.Analysis != nil {
				add(s.Analysis.Templates)
			}
			if s.Experiment != nil {
				for _, a := range s.Experiment.Analyses {
					add([]v1alpha1.AnalysisTemplateRef{{TemplateName: a.TemplateName, ClusterScope: a.ClusterScope}})
				}
			}
		}
	}
	return []byte(b.String())
}

// sluiceVerdict loads the document with stub templates, in Kubernetes
// mode for a rollout that only runs there (runsInKubernetes); it returns
// the document's errors and warnings.
func sluiceVerdict(name string, data, stubs []byte, kubernetes bool) (errs, warns api.Diagnostics) {
	sources := []api.Source{{Name: name, Data: data}, {Name: "stubs.yaml", Data: stubs}}
	set := api.Load(sources)
	if kubernetes {
		set = api.NewLoader(api.Limits{}).ForKubernetes().Load(sources)
	}
	for _, d := range set.Diagnostics {
		if d.File != name {
			continue
		}
		if d.Severity == api.SeverityError {
			errs = append(errs, d)
		} else {
			warns = append(warns, d)
		}
	}
	return errs, warns
}

// Reasons sluice gives for the corpus files it cannot run.
const (
	reasonPlugin = "step plugins are not supported: they are Argo Rollouts controller binaries"
	// reasonStandaloneExperiment is standalone mode's error for an
	// experiment step; the oracle checks those files in Kubernetes mode.
	reasonStandaloneExperiment = "experiment steps start ReplicaSets, and standalone sluice runs no pods: run sluice with --kubernetes"
)

// runsInKubernetes reports whether ro has a step that only Kubernetes mode
// runs (an experiment): the oracle compares Argo's verdict with sluice's
// in Kubernetes mode, and checks that standalone mode refuses it for that
// reason alone.
func runsInKubernetes(ro *v1alpha1.Rollout) bool {
	if ro == nil || ro.Spec.Strategy.Canary == nil {
		return false
	}
	for _, s := range ro.Spec.Strategy.Canary.Steps {
		if s.Experiment != nil {
			return true
		}
	}
	return false
}

// cannotRun lists the corpus documents Argo accepts and sluice rejects, with
// the reason sluice's error must give. Each uses a feature sluice does not
// have (see docs/argo-compatibility.md).
var cannotRun = map[string]string{
	"test/e2e/step-plugin/disabled-rollout.yaml#0": reasonPlugin,
	"test/e2e/step-plugin/invalid-rollout.yaml#0":  reasonPlugin,
}

// argoOnly lists the corpus documents Argo rejects for a rule sluice does
// not repeat, with the field path of Argo's error. sluice does not run
// Kubernetes' pod template validation (it needs Kubernetes' internal
// packages, and standalone sluice starts no pods).
var argoOnly = map[string]string{
	// A placeholder container name, "REPLACEME", that the e2e test
	// replaces before applying the file.
	"test/e2e/functional/nginx-template.yaml#3": "spec.template.spec.containers[0].name",
}

// TestArgoOracle: on every Rollout of Argo's examples and e2e
// tests, sluice accepts exactly when Argo's validation does, except the
// listed files sluice cannot run, whose errors say why.
func TestArgoOracle(t *testing.T) {
	docs, unparsable := rolloutCorpus(t, argoModuleDir(t))
	if len(docs) < 50 {
		t.Fatalf("found %d Rollout documents, want the whole corpus (at least 50)", len(docs))
	}
	counts := map[string]int{}
	for _, doc := range docs {
		ro, argoErrs := argoVerdict(doc.data)
		t.Run(doc.name, func(t *testing.T) {
			var stubs []byte
			if ro != nil {
				stubs = stubTemplates(ro)
			}
			kube := runsInKubernetes(ro)
			if kube {
				counts["Kubernetes mode (experiment)"]++
				standaloneRefuses(t, doc.name, doc.data, stubs)
			}
			errs, warns := sluiceVerdict(doc.name, doc.data, stubs, kube)
			reason, listed := cannotRun[doc.name]
			if listed && len(argoErrs) > 0 {
				t.Errorf("listed as cannot-run, but Argo rejects it too: %v", argoErrs)
			}
			switch {
			case len(argoErrs) == 0 && len(errs) == 0:
				counts["both accept"]++
			case len(argoErrs) > 0 && len(errs) > 0:
				counts["both reject"]++
			case len(argoErrs) == 0 && listed:
				counts["sluice cannot run"]++
				for _, e := range errs {
					if !strings.Contains(e.Message, cannotRunMark) || !strings.Contains(e.Message, reason) {
						t.Errorf("error is not the listed reason %q: %s", reason, e)
					}
				}
			case len(argoErrs) == 0:
				t.Errorf("Argo accepts, sluice rejects:\n%s", diagText(errs))
			case argoOnly[doc.name] != "":
				counts["Argo only (pod template)"]++
				for _, e := range argoErrs {
					if e.Field != argoOnly[doc.name] {
						t.Errorf("Argo error outside the listed field %s: %v", argoOnly[doc.name], e)
					}
				}
			default:
				t.Errorf("Argo rejects, sluice accepts:\nArgo: %v\nsluice warnings:\n%s", argoErrs, diagText(warns))
			}
		})
	}
	t.Logf("%d Rollout documents (%d files not YAML, skipped): %v", len(docs), unparsable, sortedCounts(counts))
}

// standaloneRefuses checks that standalone mode refuses a rollout with an
// experiment step at the experiment, naming Kubernetes mode.
func standaloneRefuses(t *testing.T, name string, data, stubs []byte) {
	t.Helper()
	errs, _ := sluiceVerdict(name, data, stubs, false)
	found := false
	for _, e := range errs {
		found = found || strings.Contains(e.Message, cannotRunMark+reasonStandaloneExperiment)
	}
	if !found {
		t.Errorf("standalone mode does not refuse the experiment step naming --kubernetes:\n%s", diagText(errs))
	}
}

func diagText(ds api.Diagnostics) string {
	var b strings.Builder
	for _, d := range ds {
		b.WriteString("  " + d.String() + "\n")
	}
	return b.String()
}

func sortedCounts(m map[string]int) []string {
	var out []string
	for k, v := range m {
		out = append(out, fmt.Sprintf("%s: %d", k, v))
	}
	sort.Strings(out)
	return out
}
