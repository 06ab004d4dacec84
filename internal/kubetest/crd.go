package kubetest

import (
	"context"
	"fmt"
	"os"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// ApplyCRDFile installs the one CRD in file (see ApplyCRD).
func ApplyCRDFile(ctx context.Context, dyn dynamic.Interface, file string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("read crd: %w", err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(b, &obj); err != nil {
		return fmt.Errorf("decode %s: %w", file, err)
	}
	return ApplyCRD(ctx, dyn, &unstructured.Unstructured{Object: obj})
}

// ApplyCRD creates crd (or keeps it, so that several tests may install
// it) and waits until it is Established.
func ApplyCRD(ctx context.Context, dyn dynamic.Interface, crd *unstructured.Unstructured) error {
	name := crd.GetName()
	if _, err := dyn.Resource(crdResource).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create crd %s: %w", name, err)
	}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := dyn.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("crd %s not Established: %w", name, err)
	}
	return nil
}
