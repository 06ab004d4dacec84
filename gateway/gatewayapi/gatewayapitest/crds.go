// Package gatewayapitest installs the Gateway API route CRDs into a test
// cluster and plays a gateway controller there: no gateway implementation
// runs in the tests, so the fake controller writes route status the way
// the Gateway API conformance rules say a controller does (an entry per
// parentRef with Accepted and ResolvedRefs at the route's generation), and
// can reject a route or hold its status back.
package gatewayapitest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// CRDFiles are the experimental-channel CRDs the tests install (a
// superset of the standard channel's fields), from the module cache.
var CRDFiles = []string{"gateway.networking.k8s.io_httproutes.yaml", "gateway.networking.k8s.io_grpcroutes.yaml"}

// CRDDir is config/crd/experimental of the sigs.k8s.io/gateway-api module
// this build uses.
func CRDDir() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api").Output()
	if err != nil {
		return "", fmt.Errorf("go list sigs.k8s.io/gateway-api: %w", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "experimental"), nil
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallCRDs creates (or keeps) the route CRDs and waits until they are
// Established; several tests may call it.
func InstallCRDs(ctx context.Context, cfg *rest.Config) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dir, err := CRDDir()
	if err != nil {
		return err
	}
	for _, f := range CRDFiles {
		if err := installCRD(ctx, dyn, filepath.Join(dir, f)); err != nil {
			return err
		}
	}
	return nil
}

func installCRD(ctx context.Context, dyn dynamic.Interface, file string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("read crd: %w", err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(b, &obj); err != nil {
		return fmt.Errorf("decode %s: %w", file, err)
	}
	u := &unstructured.Unstructured{Object: obj}
	if _, err := dyn.Resource(crdResource).Create(ctx, u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create crd %s: %w", u.GetName(), err)
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := dyn.Resource(crdResource).Get(ctx, u.GetName(), metav1.GetOptions{})
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
}
