package istio

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/gateway/istio/istiotest"
	"github.com/sluice-dev/sluice/internal/kubetest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// The tests run against a real kube-apiserver (internal/kubetest) with
// Istio's own CRDs, from the istio.io/api module, installed. No istiod
// runs: where a test needs Istio's status reporting (Verified, a
// rejection) it writes the status itself, as istiod does with
// PILOT_ENABLE_STATUS, and says so.

func TestMain(m *testing.M) {
	kubetest.EnterNetns()
	kubetest.Lazy(1) // the render tests need no cluster
	code := m.Run()
	kubetest.StopLazy()
	os.Exit(code)
}

// rig is one test's cluster, namespace and clients.
type rig struct {
	ns     string
	config *rest.Config
	dyn    dynamic.Interface
	raw    rest.Interface
}

var crdOnce struct {
	sync.Once
	err error
}

func newRig(t testing.TB) *rig {
	t.Helper()
	c := kubetest.Shared(t)
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	crdOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		crdOnce.err = istiotest.InstallCRDs(ctx, dyn)
	})
	if crdOnce.err != nil {
		t.Fatalf("install Istio CRDs: %v", crdOnce.err)
	}
	return &rig{ns: c.Namespace(t), config: c.Config, dyn: dyn, raw: c.Client.Discovery().RESTClient()}
}

// create creates the object in testdata/fixtures/<file> in the rig's
// namespace, as a user's GitOps tool would.
func (r *rig) create(t testing.TB, file string) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "fixtures", file))
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(b, &obj); err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	res := VirtualServices
	if u.GetKind() == "DestinationRule" {
		res = DestinationRules
	}
	out, err := r.dyn.Resource(res).Namespace(r.ns).Create(context.Background(), u, metav1.CreateOptions{FieldManager: "argocd-controller"})
	if err != nil {
		t.Fatalf("create %s: %v", file, err)
	}
	return out
}

func (r *rig) get(t testing.TB, res schema.GroupVersionResource, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := r.dyn.Resource(res).Namespace(r.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// rawJSON is the object exactly as the API server serves it, to compare
// fields byte for byte.
func (r *rig) rawJSON(t testing.TB, res schema.GroupVersionResource, name string) []byte {
	t.Helper()
	b, err := r.raw.Get().AbsPath("/apis", res.Group, res.Version, "namespaces", r.ns, res.Resource, name).DoRaw(context.Background())
	if err != nil {
		t.Fatalf("get %s %s: %v", res.Resource, name, err)
	}
	return b
}

// edit changes an object as someone else (a person with kubectl, a GitOps
// sync) would, with its own field manager.
func (r *rig) edit(t testing.TB, res schema.GroupVersionResource, name string, change func(u *unstructured.Unstructured)) {
	t.Helper()
	u := r.get(t, res, name)
	change(u)
	if _, err := r.dyn.Resource(res).Namespace(r.ns).Update(context.Background(), u, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatalf("edit %s %s: %v", res.Resource, name, err)
	}
}

// setStatus writes an object's status the way istiod's status reporting
// does (no istiod runs in these tests).
func (r *rig) setStatus(t testing.TB, res schema.GroupVersionResource, name string, status map[string]any) {
	t.Helper()
	if err := istiotest.SetStatus(context.Background(), r.dyn, res, r.ns, name, status); err != nil {
		t.Fatal(err)
	}
}

func (r *rig) router(t testing.TB, opts RouterOptions) *Router {
	t.Helper()
	if opts.Client == nil {
		opts.Client = r.dyn
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = 20 * time.Millisecond
	}
	rt, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// goldenYAML is what the goldens hold of objects: kind, name,
// annotations and spec (the rest is the API server's bookkeeping), with
// the test's namespace written as <ns>.
func (r *rig) goldenYAML(t testing.TB, objs ...*unstructured.Unstructured) []byte {
	t.Helper()
	var buf bytes.Buffer
	for i, u := range objs {
		meta := map[string]any{"name": u.GetName()}
		if a := u.GetAnnotations(); len(a) > 0 {
			meta["annotations"] = a
		}
		b, err := yaml.Marshal(map[string]any{"apiVersion": u.GetAPIVersion(), "kind": u.GetKind(), "metadata": meta, "spec": u.Object["spec"]})
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(b)
	}
	return bytes.ReplaceAll(buf.Bytes(), []byte(r.ns+"/"), []byte("<ns>/"))
}

// Hashes of the two pod templates in the tests.
const (
	hashV1 = "5d4f8b"
	hashV2 = "7c9b6a"
)

// subsetRouting names the fixtures virtualservice-subsets.yaml and
// destinationrule.yaml.
func subsetRouting() *api.ClusterRouting {
	return &api.ClusterRouting{
		StableService: "checkout-stable",
		CanaryService: "checkout-canary",
		Istio: &api.IstioRouting{
			VirtualServices: []api.IstioVirtualService{{Name: "checkout", Routes: []string{"primary"}}},
			DestinationRule: &api.IstioDestinationRule{Name: "checkout", StableSubsetName: "stable", CanarySubsetName: "canary"},
		},
	}
}

// serviceRouting names the fixture virtualservice-services.yaml.
func serviceRouting() *api.ClusterRouting {
	return &api.ClusterRouting{
		StableService: "checkout-stable",
		CanaryService: "checkout-canary",
		Istio:         &api.IstioRouting{VirtualServices: []api.IstioVirtualService{{Name: "checkout-edge"}}},
	}
}

// canaryTraffic is a canary of v2 over v1 at weight w in namespace ns.
func canaryTraffic(ns string, rt *api.ClusterRouting, w int32, mod func(*api.Traffic)) api.Traffic {
	t := api.Traffic{
		Rollout:        api.Key{Namespace: ns, Name: "checkout"},
		StableVersion:  "shop/checkout:v1",
		CanaryVersion:  "shop/checkout:v2",
		StableWorkload: hashV1,
		CanaryWorkload: hashV2,
		Weights:        api.CanaryWeights(w),
		Routing:        rt,
	}
	if mod != nil {
		mod(&t)
	}
	return t
}

// Step changes shared by the goldens and the property test.
var (
	testersRoute = api.HeaderRoute{Name: "testers", Match: []api.HeaderMatch{{HeaderName: "X-Canary", HeaderValue: api.StringMatch{Exact: "always"}}}}
	cookieRoute  = api.HeaderRoute{Name: "beta-cookie", Match: []api.HeaderMatch{{HeaderName: "Cookie", HeaderValue: api.StringMatch{Exact: "beta=1"}}}}
	shadowMirror = api.MirrorRoute{Name: "shadow", Percentage: 35, Match: []api.RouteMatch{
		{Method: &api.StringMatch{Exact: "POST"}, Path: &api.StringMatch{Prefix: "/api/"}},
	}}
	stickyCanary = &api.SessionAffinity{CookieName: "sluice-canary", MaxAge: 3600}
	pinnedStable = &api.SessionAffinity{CookieName: "sluice-canary", MaxAge: 3600, PinStable: true}
)

// jsonPath reads one value of a raw JSON document, keeping its bytes.
func jsonPath(t testing.TB, doc []byte, path ...any) json.RawMessage {
	t.Helper()
	cur := json.RawMessage(doc)
	for _, p := range path {
		switch k := p.(type) {
		case string:
			var m map[string]json.RawMessage
			if err := json.Unmarshal(cur, &m); err != nil {
				t.Fatalf("%v at %q: %v", path, k, err)
			}
			cur = m[k]
		case int:
			var l []json.RawMessage
			if err := json.Unmarshal(cur, &l); err != nil || k >= len(l) {
				t.Fatalf("%v at [%d]: %v (len %d)", path, k, err, len(l))
			}
			cur = l[k]
		}
	}
	return cur
}
