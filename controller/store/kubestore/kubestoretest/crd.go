// Package kubestoretest installs the SluiceRollout CRD, as the chart does,
// into a test cluster.
package kubestoretest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// CRDFile is the generated CRD shipped in the chart.
func CRDFile() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "charts", "sluice", "crds", "sluice.io_sluicerollouts.yaml")
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallCRD creates (or keeps) the CRD and waits until it is Established.
// Installing it twice, from several tests, is fine.
func InstallCRD(ctx context.Context, dyn dynamic.Interface) error {
	b, err := os.ReadFile(CRDFile())
	if err != nil {
		return fmt.Errorf("read crd: %w", err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(b, &obj); err != nil {
		return fmt.Errorf("decode %s: %w", CRDFile(), err)
	}
	u := &unstructured.Unstructured{Object: obj}
	if _, err := dyn.Resource(crdResource).Create(ctx, u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create crd: %w", err)
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := dyn.Resource(crdResource).Get(ctx, u.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
}
