package argocompat

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/validation"
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

// corpusDoc is one document of the corpus.
type corpusDoc struct {
	name string // file relative to the module, with the document index
	data []byte
}

// corpus returns every document of the given kinds under the module's
// examples/ and test/e2e/. Files that are not YAML (Helm templates) are
// skipped and counted.
func corpus(t *testing.T, moduleDir string, kinds ...string) (docs []corpusDoc, unparsable int) {
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
			found, err := docsOfKind(rel, data, kinds...)
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

// rolloutCorpus returns every Rollout document, canary and blue-green.
func rolloutCorpus(t *testing.T, moduleDir string) ([]corpusDoc, int) {
	return corpus(t, moduleDir, "Rollout")
}

// argoVerdict is what Argo's validation says of a document: the errors of
// ValidateRollout, plus ValidateRolloutReferencedResources with the
// analysis templates found beside it (refs). Services, Ingresses and
// VirtualServices live in a cluster; with none given Argo checks none.
func argoVerdict(ro *v1alpha1.Rollout, decodeErr error, refs []validation.AnalysisTemplatesWithType) field.ErrorList {
	if decodeErr != nil {
		return field.ErrorList{field.InternalError(field.NewPath("decode"), decodeErr)}
	}
	errs := validation.ValidateRollout(ro)
	return append(errs, validation.ValidateRolloutReferencedResources(ro, validation.ReferencedResources{AnalysisTemplatesWithType: refs})...)
}

func decodeRollout(data []byte) (*v1alpha1.Rollout, error) {
	var ro v1alpha1.Rollout
	if err := sigsyaml.Unmarshal(data, &ro); err != nil {
		return nil, err
	}
	return &ro, nil
}

// templateIndex holds the corpus's analysis templates by kind/name.
type templateIndex map[string][]corpusDoc

func newTemplateIndex(docs []corpusDoc) templateIndex {
	idx := templateIndex{}
	for _, d := range docs {
		var head struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if sigsyaml.Unmarshal(d.data, &head) == nil {
			idx[head.Kind+"/"+head.Metadata.Name] = append(idx[head.Kind+"/"+head.Metadata.Name], d)
		}
	}
	return idx
}

// beside finds the template kind/name the Rollout document rolloutDoc
// names: in its own file first, then in its directory, then anywhere in
// the corpus (Argo's e2e tests apply a directory's files together).
func (idx templateIndex) beside(kind, name, rolloutDoc string) (corpusDoc, bool) {
	cands := idx[kind+"/"+name]
	file, _, _ := strings.Cut(rolloutDoc, "#")
	for _, match := range []func(string) bool{
		func(f string) bool { return f == file },
		func(f string) bool { return filepath.Dir(f) == filepath.Dir(file) },
		func(string) bool { return true },
	} {
		for _, c := range cands {
			if f, _, _ := strings.Cut(c.name, "#"); match(f) {
				return c, true
			}
		}
	}
	return corpusDoc{}, false
}

// referenced is what a Rollout's analyses name, with the templates found.
type referenced struct {
	// sluice is every template the rollout names, for sluice to load: the
	// corpus's own beside it, in the rollout's namespace, or a stub with
	// one Prometheus metric and no arguments where the corpus has none.
	sluice []byte
	// argo are the found templates by analysis, as Argo's controller
	// hands them to ValidateRolloutReferencedResources.
	argo []validation.AnalysisTemplatesWithType
	// found and stubbed count the templates of each origin; jobs counts
	// the found ones with a job metric (they run in Kubernetes mode only).
	found, stubbed, jobs int
}

// templatesFor collects the templates ro (the document docName) names.
func templatesFor(ro *v1alpha1.Rollout, docName string, idx templateIndex) referenced {
	var r referenced
	seen := map[string]bool{}
	var b strings.Builder
	group := func(typ validation.AnalysisTemplateType, step int, refs []v1alpha1.AnalysisTemplateRef, args []v1alpha1.AnalysisRunArgument, forArgo bool) {
		g := validation.AnalysisTemplatesWithType{TemplateType: typ, CanaryStepIndex: step, Args: args}
		for _, ref := range refs {
			kind, ns := "AnalysisTemplate", ro.Namespace
			if ref.ClusterScope != nil && *ref.ClusterScope {
				kind, ns = "ClusterAnalysisTemplate", ""
			}
			if ref.TemplateName == "" {
				continue
			}
			doc, ok := idx.beside(kind, ref.TemplateName, docName)
			if ok && forArgo {
				addArgoTemplate(&g, kind, doc.data)
			}
			if seen[kind+"/"+ref.TemplateName] {
				continue
			}
			seen[kind+"/"+ref.TemplateName] = true
			if !ok {
				r.stubbed++
				fmt.Fprintf(&b, "---\napiVersion: argoproj.io/v1alpha1\nkind: %s\nmetadata: {name: %q, namespace: %q}\nspec: {metrics: [{name: m, provider: {prometheus: {address: 'http://127.0.0.1:9090', query: up}}}]}\n", kind, ref.TemplateName, ns)
				continue
			}
			r.found++
			if strings.Contains(string(doc.data), "job:") {
				r.jobs++
			}
			b.WriteString("---\n")
			b.Write(inNamespace(doc.data, ns))
		}
		if forArgo && (len(g.AnalysisTemplates) > 0 || len(g.ClusterAnalysisTemplates) > 0) {
			r.argo = append(r.argo, g)
		}
	}
	if bg := ro.Spec.Strategy.BlueGreen; bg != nil {
		if a := bg.PrePromotionAnalysis; a != nil {
			group(validation.PrePromotionAnalysis, 0, a.Templates, a.Args, true)
		}
		if a := bg.PostPromotionAnalysis; a != nil {
			group(validation.PostPromotionAnalysis, 0, a.Templates, a.Args, true)
		}
	}
	if c := ro.Spec.Strategy.Canary; c != nil {
		if c.Analysis != nil {
			group(validation.BackgroundAnalysis, 0, c.Analysis.Templates, c.Analysis.Args, true)
		}
		for i, s := range c.Steps {
			if s.Analysis != nil {
				group(validation.InlineAnalysis, i, s.Analysis.Templates, s.Analysis.Args, true)
			}
			if s.Experiment != nil {
				// Argo's rollout validation leaves experiment analyses
				// to the experiment controller.
				for _, a := range s.Experiment.Analyses {
					group(validation.InlineAnalysis, i, []v1alpha1.AnalysisTemplateRef{{TemplateName: a.TemplateName, ClusterScope: a.ClusterScope}}, nil, false)
				}
			}
		}
	}
	r.sluice = []byte(b.String())
	return r
}

// addArgoTemplate decodes a template for Argo's validation.
func addArgoTemplate(g *validation.AnalysisTemplatesWithType, kind string, data []byte) {
	if kind == "ClusterAnalysisTemplate" {
		var t v1alpha1.ClusterAnalysisTemplate
		if sigsyaml.Unmarshal(data, &t) == nil {
			g.ClusterAnalysisTemplates = append(g.ClusterAnalysisTemplates, &t)
		}
		return
	}
	var t v1alpha1.AnalysisTemplate
	if sigsyaml.Unmarshal(data, &t) == nil {
		g.AnalysisTemplates = append(g.AnalysisTemplates, &t)
	}
}

// inNamespace sets a namespaced template's metadata.namespace (Argo's
// e2e tests apply templates and rollouts to one namespace).
func inNamespace(data []byte, ns string) []byte {
	if ns == "" {
		return data
	}
	var obj map[string]any
	if sigsyaml.Unmarshal(data, &obj) != nil {
		return data
	}
	meta, _ := obj["metadata"].(map[string]any)
	if meta == nil {
		return data
	}
	meta["namespace"] = ns
	out, err := sigsyaml.Marshal(obj)
	if err != nil {
		return data
	}
	return out
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
	idx := newTemplateIndex(templateCorpus(t, argoModuleDir(t)))
	counts := map[string]int{}
	for _, doc := range docs {
		ro, decodeErr := decodeRollout(doc.data)
		var refs referenced
		if ro != nil {
			refs = templatesFor(ro, doc.name, idx)
		}
		argoErrs := argoVerdict(ro, decodeErr, refs.argo)
		counts["templates found beside"] += refs.found
		counts["templates stubbed"] += refs.stubbed
		t.Run(doc.name, func(t *testing.T) {
			stubs := refs.sluice
			kube := runsInKubernetes(ro)
			if kube {
				counts["Kubernetes mode (experiment)"]++
				standaloneRefuses(t, doc.name, doc.data, stubs)
			}
			if refs.jobs > 0 {
				// A job metric runs in Kubernetes mode only (standalone
				// mode refuses its template).
				counts["Kubernetes mode (job metric)"]++
				kube = true
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
