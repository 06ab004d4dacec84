// Package kubestoretest installs the SluiceRollout CRD, as the chart does,
// into a test cluster.
package kubestoretest

import (
	"context"
	"path/filepath"
	"runtime"

	"github.com/sluice-dev/sluice/internal/kubetest"
	"k8s.io/client-go/dynamic"
)

// CRDFile is the generated CRD shipped in the chart.
func CRDFile() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "charts", "sluice", "crds", "sluice.io_sluicerollouts.yaml")
}

// InstallCRD creates (or keeps) the CRD and waits until it is Established.
// Installing it twice, from several tests, is fine.
func InstallCRD(ctx context.Context, dyn dynamic.Interface) error {
	return kubetest.ApplyCRDFile(ctx, dyn, CRDFile())
}
