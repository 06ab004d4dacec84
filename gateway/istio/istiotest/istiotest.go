// Package istiotest installs Istio's own CRDs (VirtualService,
// DestinationRule) into a test cluster and plays istiod's status
// reporting, for the tests of gateway/istio and the e2e tests: no istiod
// runs there. It is imported only by tests.
package istiotest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/sluice-dev/sluice/internal/kubetest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// APIModule is the istio.io/api module whose CRDs are installed; keep it
// in step with go.mod.
const APIModule = "istio.io/api@v1.32.0"

// CRDFile is Istio's CRDs file in the module cache.
func CRDFile() (string, error) {
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMODCACHE: %w", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), filepath.FromSlash(APIModule), "kubernetes", "customresourcedefinitions.gen.yaml"), nil
}

// routingCRDs are the CRDs sluice's Istio router writes.
var routingCRDs = []string{"virtualservices.networking.istio.io", "destinationrules.networking.istio.io"}

// InstallCRDs creates the VirtualService and DestinationRule CRDs as Istio
// ships them (or keeps them) and waits until they are Established.
func InstallCRDs(ctx context.Context, dyn dynamic.Interface) error {
	file, err := CRDFile()
	if err != nil {
		return err
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("read Istio CRDs: %w", err)
	}
	docs := map[string]*unstructured.Unstructured{}
	for _, doc := range bytes.Split(b, []byte("\n---\n")) {
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		u := &unstructured.Unstructured{Object: obj}
		docs[u.GetName()] = u
	}
	for _, name := range routingCRDs {
		u, ok := docs[name]
		if !ok {
			return fmt.Errorf("%s has no CRD %s", file, name)
		}
		if err := kubetest.ApplyCRD(ctx, dyn, u); err != nil {
			return err
		}
	}
	return nil
}

// Reconciled is the status istiod's status reporting (PILOT_ENABLE_STATUS)
// writes once every proxy has the object's generation gen; istiod writes
// the int64 the protobuf JSON way, as a string.
func Reconciled(gen int64) map[string]any {
	return map[string]any{
		"observedGeneration": fmt.Sprint(gen),
		"conditions": []any{map[string]any{
			"type": "Reconciled", "status": "True", "message": "all proxies up to date",
		}},
	}
}

// SetStatus writes an object's status through the status subresource, as
// istiod does (field manager pilot-discovery).
func SetStatus(ctx context.Context, dyn dynamic.Interface, res schema.GroupVersionResource, ns, name string, status map[string]any) error {
	c := dyn.Resource(res).Namespace(ns)
	u, err := c.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get %s %s/%s: %w", res.Resource, ns, name, err)
	}
	u.Object["status"] = status
	if _, err := c.UpdateStatus(ctx, u, metav1.UpdateOptions{FieldManager: "pilot-discovery"}); err != nil {
		return fmt.Errorf("update status of %s %s/%s: %w", res.Resource, ns, name, err)
	}
	return nil
}
