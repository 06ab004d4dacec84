package argocompat

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	analysisutil "github.com/argoproj/argo-rollouts/utils/analysis"
	yaml "go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/api"
)

// templateCorpus returns every AnalysisTemplate and ClusterAnalysisTemplate
// document under the module's examples/ and test/e2e/.
func templateCorpus(t *testing.T, moduleDir string) []corpusDoc {
	docs, _ := corpus(t, moduleDir, "AnalysisTemplate", "ClusterAnalysisTemplate")
	return docs
}

// docsOfKind splits a file into documents and re-encodes those of kinds.
func docsOfKind(name string, data []byte, kinds ...string) ([]corpusDoc, error) {
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
		if n.Decode(&head) != nil || !strings.HasPrefix(head.APIVersion, "argoproj.io/") || !slices.Contains(kinds, head.Kind) {
			continue
		}
		b, err := yaml.Marshal(&n)
		if err != nil {
			return nil, err
		}
		out = append(out, corpusDoc{name: fmt.Sprintf("%s#%d", name, i), data: b})
	}
}

// argoTemplateVerdict is what Argo says of a template on its own: it must
// decode (as the API server's CRD schema would) and, once its arguments
// are resolved, pass analysisutil.ValidateMetrics, which the AnalysisRun
// controller applies before it measures. A template whose arguments come
// from the rollout is resolved only with them: the rollout oracle
// (TestArgoOracle) checks it with the rollouts that name it.
func argoTemplateVerdict(data []byte) error {
	var tmpl v1alpha1.AnalysisTemplate
	if err := sigsyaml.Unmarshal(data, &tmpl); err != nil {
		return err
	}
	for _, a := range tmpl.Spec.Args {
		if a.Value == nil {
			return nil
		}
	}
	metrics := make([]v1alpha1.Metric, 0, len(tmpl.Spec.Metrics))
	for _, m := range tmpl.Spec.Metrics {
		resolved, err := analysisutil.ResolveMetricArgs(m, tmpl.Spec.Args)
		if err != nil {
			return err
		}
		metrics = append(metrics, *resolved)
	}
	return analysisutil.ValidateMetrics(metrics)
}

// sluiceTemplateErrors loads one template as `sluice run --kubernetes`
// does and returns its errors.
func sluiceTemplateErrors(name string, data []byte) api.Diagnostics {
	set := api.NewLoader(api.Limits{}).ForKubernetes().Load([]api.Source{{Name: name, Data: data}})
	var errs api.Diagnostics
	for _, d := range set.Diagnostics {
		if d.File == name && d.Severity == api.SeverityError {
			errs = append(errs, d)
		}
	}
	return errs
}

// TestArgoTemplateOracle: every analysis template of Argo's examples and
// e2e inputs, job metrics included, loads in Kubernetes mode exactly when
// Argo accepts it.
func TestArgoTemplateOracle(t *testing.T) {
	docs := templateCorpus(t, argoModuleDir(t))
	if len(docs) < 20 {
		t.Fatalf("found %d template documents, want the whole corpus (at least 20)", len(docs))
	}
	counts := map[string]int{}
	for _, doc := range docs {
		t.Run(doc.name, func(t *testing.T) {
			argoErr := argoTemplateVerdict(doc.data)
			errs := sluiceTemplateErrors(doc.name, doc.data)
			switch {
			case argoErr == nil && len(errs) == 0:
				counts["both accept"]++
				if strings.Contains(string(doc.data), "job:") {
					counts["of which job metrics"]++
				}
			case argoErr != nil && len(errs) > 0:
				counts["both reject"]++
			case argoErr == nil:
				t.Errorf("Argo accepts, sluice rejects:\n%s", diagText(errs))
			default:
				t.Errorf("Argo rejects (%v), sluice accepts", argoErr)
			}
		})
	}
	t.Logf("%d template documents: %v", len(docs), sortedCounts(counts))
}
