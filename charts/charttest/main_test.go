package charttest

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/loader"
	kubefake "helm.sh/helm/v4/pkg/kube/fake"
	"helm.sh/helm/v4/pkg/release"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"
	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/internal/kubetest"
)

// chartDir is the chart under test.
const chartDir = "../sluice"

// The control plane starts only for the tests that need it (dry-run, RBAC),
// so that lint and goldens run in a second.
func TestMain(m *testing.M) {
	kubetest.EnterNetns()
	kubetest.Lazy(3)
	code := m.Run()
	kubetest.StopLazy()
	os.Exit(code)
}

// loadValues reads a values file from testdata.
func loadValues(t *testing.T, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var vals map[string]any
	if err := yaml.Unmarshal(b, &vals); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return vals
}

// rendered is what `helm template` gives: the manifest and the notes.
type rendered struct {
	Manifest string
	Notes    string
}

// render renders the chart as `helm template sluice charts/sluice -n
// namespace` does (client-side, schema checked, no cluster).
func render(t *testing.T, namespace string, vals map[string]any) (rendered, error) {
	t.Helper()
	chrt, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	cfg := &action.Configuration{
		Releases:     storage.Init(driver.NewMemory()),
		KubeClient:   &kubefake.PrintingKubeClient{Out: io.Discard},
		Capabilities: common.DefaultCapabilities,
	}
	install := action.NewInstall(cfg)
	install.DryRunStrategy = action.DryRunClient
	install.Replace = true
	install.ReleaseName = "sluice"
	install.Namespace = namespace
	install.KubeVersion = kubeVersion(t)
	rel, err := install.Run(chrt, vals)
	if err != nil {
		return rendered{}, err
	}
	acc, err := release.NewAccessor(rel)
	if err != nil {
		t.Fatal(err)
	}
	return rendered{Manifest: acc.Manifest(), Notes: acc.Notes()}, nil
}

// kubeVersion is the version of the test control plane, so that the
// chart's kubeVersion constraint is checked against what it runs on.
func kubeVersion(t *testing.T) *common.KubeVersion {
	t.Helper()
	v, err := common.ParseKubeVersion(kubetest.Version)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
