package charttest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/sluice-dev/sluice/internal/kubetest"
)

// TestServerSideDryRun: the real kube-apiserver accepts every object the
// chart renders (server-side apply, dryRun=All), with default values, with
// every feature on, and with the state in bbolt on a claim the chart
// creates. The chart's CRDs (charts/sluice/crds) are applied for real
// first, and a schema-less stand-in for the ServiceMonitor CRD.
func TestServerSideDryRun(t *testing.T) {
	c := kubetest.Shared(t)
	applyCRDFile(t, c, "testdata/servicemonitor-crd.yaml")
	for _, crd := range chartCRDFiles(t) {
		applyCRDFile(t, c, crd)
	}
	for _, name := range []string{"default", "full", "bbolt"} {
		t.Run(name, func(t *testing.T) {
			ns := c.Namespace(t)
			vals := loadValues(t, "values-"+name+".yaml")
			if _, ok := vals["watchNamespaces"]; ok {
				// Roles go into namespaces that exist.
				vals["watchNamespaces"] = []any{c.Namespace(t), c.Namespace(t)}
			}
			vals["fullnameOverride"] = ns // ClusterRoles are cluster-wide: one name per run
			r, err := render(t, ns, vals)
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			objs := decodeManifest(t, r.Manifest)
			if len(objs) < 8 {
				t.Fatalf("only %d objects rendered", len(objs))
			}
			for _, obj := range objs {
				if err := dryRunApply(t, c, obj); err != nil {
					t.Errorf("%s %s/%s refused by the apiserver: %v", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
				}
			}
		})
	}
}

// chartCRDFiles are the chart's CRD files (none until the state-in-the-
// cluster work lands; $SLUICE_CRD_DIR reads them from elsewhere).
func chartCRDFiles(t *testing.T) []string {
	dir := chartDir + "/crds"
	if d := os.Getenv("SLUICE_CRD_DIR"); d != "" {
		dir = d
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".yaml") {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	return files
}

// decodeManifest splits a rendered manifest into objects.
func decodeManifest(t *testing.T, manifest string) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	var objs []*unstructured.Unstructured
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("decode manifest: %v", err)
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}

// dryRunApply server-side applies obj with dryRun=All: the apiserver runs
// defaulting, validation and admission, and stores nothing.
func dryRunApply(t *testing.T, c *kubetest.Cluster, obj *unstructured.Unstructured) error {
	t.Helper()
	ri, err := resourceFor(c, obj)
	if err != nil {
		return err
	}
	body, err := obj.MarshalJSON()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{
		FieldManager: "helm", DryRun: []string{metav1.DryRunAll}, Force: ptr(true),
	})
	return err
}

func ptr[T any](v T) *T { return &v }

// resourceFor is the dynamic client for obj's kind, in its namespace when
// the kind is namespaced.
func resourceFor(c *kubetest.Cluster, obj *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(c.Config)
	if err != nil {
		return nil, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	gvk := obj.GroupVersionKind()
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", gvk, err)
	}
	client, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return nil, err
	}
	if mapping.Scope.Name() == "namespace" {
		return client.Resource(mapping.Resource).Namespace(obj.GetNamespace()), nil
	}
	return client.Resource(mapping.Resource), nil
}

// applyCRDFile creates (or updates) the CRDs in file for real and waits
// until they are served.
func applyCRDFile(t *testing.T, c *kubetest.Cluster, file string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	client, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	crds := client.Resource(apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions"))
	for _, obj := range decodeManifest(t, string(b)) {
		body, _ := obj.MarshalJSON()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := crds.Patch(ctx, obj.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "charttest", Force: ptr(true)})
		cancel()
		if err != nil {
			t.Fatalf("apply CRD %s from %s: %v", obj.GetName(), file, err)
		}
		kubetest.Eventually(t, 30*time.Second, "CRD "+obj.GetName()+" established", func() (bool, string) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			u, err := crds.Get(ctx, obj.GetName(), metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			var crd apiextensionsv1.CustomResourceDefinition
			b, _ := yaml.Marshal(u.Object)
			if err := yaml.Unmarshal(b, &crd); err != nil {
				return false, err.Error()
			}
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, ""
				}
			}
			return false, fmt.Sprintf("conditions %v", crd.Status.Conditions)
		})
	}
}
