package kubestore_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sluice-dev/sluice/controller/store/kubestore/kubestoretest"
)

// TestCRDUpToDate: the CRD shipped in the chart is what controller-gen
// makes of the v1alpha1 types now (run go generate ./controller/store/kubestore/
// after changing them).
func TestCRDUpToDate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs controller-gen (~30s)")
	}
	out := t.TempDir()
	cmd := exec.Command("go", "tool", "controller-gen", "crd", "paths=./v1alpha1/...", "output:crd:dir="+out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("controller-gen: %v\n%s", err, b)
	}
	want, err := os.ReadFile(filepath.Join(out, filepath.Base(kubestoretest.CRDFile())))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(kubestoretest.CRDFile())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: run go generate ./controller/store/kubestore/", kubestoretest.CRDFile())
	}
}
