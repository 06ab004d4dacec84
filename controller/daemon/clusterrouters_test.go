package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	dynfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/runner"
	"github.com/sluice-dev/sluice/gateway/gatewayapi"
	"github.com/sluice-dev/sluice/gateway/istio"
	"github.com/sluice-dev/sluice/gateway/kubeservice"
)

// fakeCluster is one cluster's route objects: the user's HTTPRoute "web"
// and VirtualService "web" in namespace shop, each sending everything to
// web-stable. The clients are client-go's and gateway-api's fake
// clientsets: this test is about which cluster a part's write goes to, and
// each fake is a separate object store as each cluster is; that real
// apiservers take the writes is TestKubeMultiClusterRoutes (e2e).
type fakeCluster struct {
	gw      *gwfake.Clientset
	dyn     *dynfake.FakeDynamicClient
	routers *clusterRouters
}

func newFakeCluster(t *testing.T) *fakeCluster {
	t.Helper()
	// The gateway "edge" took the route (the fake clientset keeps the
	// generation at 0, so any write is taken).
	taken := []metav1.Condition{
		{Type: string(gwv1.RouteConditionAccepted), Status: metav1.ConditionTrue, Reason: "Accepted"},
		{Type: string(gwv1.RouteConditionResolvedRefs), Status: metav1.ConditionTrue, Reason: "ResolvedRefs"},
	}
	route := &gwv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"},
		Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "edge"}}},
			Rules: []gwv1.HTTPRouteRule{{
				BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: "web-stable", Port: ptr.To(gwv1.PortNumber(80))}}}},
			}},
		},
		Status: gwv1.HTTPRouteStatus{RouteStatus: gwv1.RouteStatus{Parents: []gwv1.RouteParentStatus{{
			ParentRef: gwv1.ParentReference{Name: "edge"}, ControllerName: "example.com/edge", Conditions: taken,
		}}}},
	}
	dest := func(host string, weight int64) map[string]any {
		return map[string]any{"destination": map[string]any{"host": host}, "weight": weight}
	}
	vs := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
		"metadata": map[string]any{"name": "web", "namespace": "shop"},
		"spec": map[string]any{"hosts": []any{"web"}, "http": []any{
			map[string]any{"name": "primary", "route": []any{dest("web-stable", 100), dest("web-canary", 0)}},
		}},
	}}
	c := &fakeCluster{gw: gwfake.NewSimpleClientset(route), dyn: dynfake.NewSimpleDynamicClient(runtime.NewScheme(), vs)}
	events := kubefake.NewClientset()
	gwr, err := gatewayapi.New(gatewayapi.Options{Client: c.gw, Events: events})
	if err != nil {
		t.Fatal(err)
	}
	mesh, err := istio.New(istio.RouterOptions{Client: c.dyn, Events: events})
	if err != nil {
		t.Fatal(err)
	}
	c.routers = &clusterRouters{services: kubeservice.New(events, slog.New(slog.DiscardHandler)), gateway: gwr, mesh: mesh}
	return c
}

// weights is the HTTPRoute's and the VirtualService's backends with their
// weights, e.g. "route[web-stable:50 web-canary:50] vs[web-stable:50 web-canary:50]".
func (c *fakeCluster) weights(t *testing.T) string {
	t.Helper()
	route, err := c.gw.GatewayV1().HTTPRoutes("shop").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var refs, dests []string
	for _, b := range route.Spec.Rules[0].BackendRefs {
		refs = append(refs, fmt.Sprintf("%s:%d", b.Name, ptr.Deref(b.Weight, 1)))
	}
	vs := c.virtualService(t)
	http, _, _ := unstructured.NestedSlice(vs.Object, "spec", "http")
	route0, _ := http[0].(map[string]any)
	rs, _, _ := unstructured.NestedSlice(route0, "route")
	for _, d := range rs {
		dm, _ := d.(map[string]any)
		host, _, _ := unstructured.NestedString(dm, "destination", "host")
		dests = append(dests, fmt.Sprintf("%s:%v", host, dm["weight"]))
	}
	return "route[" + strings.Join(refs, " ") + "] vs[" + strings.Join(dests, " ") + "]"
}

func (c *fakeCluster) virtualService(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	vs, err := c.dyn.Resource(istio.VirtualServices).Namespace("shop").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

// TestPartRoutesGoToTheirCluster: a part's traffic ("shop/web@eu-2") is
// written into eu-2's HTTPRoute and VirtualService only, under the
// rollout's own key (Istio's ledger names shop/web), and verified there;
// the home part's into home's; a part's release restores its cluster's
// routes only.
func TestPartRoutesGoToTheirCluster(t *testing.T) {
	home, eu2 := newFakeCluster(t), newFakeCluster(t)
	k := &kubeParts{homeName: "eu-1", routers: home.routers, remotes: map[string]*remoteCluster{"eu-2": {name: "eu-2"}}}
	k.remotes["eu-2"].routes.connect(eu2.routers, 5*time.Second, discard)
	routed := newTestRouted(k)
	rollout := api.Key{Namespace: "shop", Name: "web"}

	v, err := routed.SetTraffic(webTraffic(rollout.InCluster("eu-2"), 50))
	if err != nil {
		t.Fatal(err)
	}
	if got := eu2.weights(t); got != half {
		t.Errorf("eu-2 after its part's write: %s, want %s", got, half)
	}
	if got := home.weights(t); got != untouched {
		t.Errorf("home after eu-2's part's write: %s, want it untouched: %s", got, untouched)
	}
	ledger := eu2.virtualService(t).GetAnnotations()[istio.LedgerAnnotation]
	if !strings.Contains(ledger, `"shop/web"`) || strings.Contains(ledger, "@") {
		t.Errorf("eu-2's VirtualService ledger %s: want the rollout's own key shop/web", ledger)
	}
	if err := waitForAck(t, routed, v); err != nil {
		t.Errorf("eu-2's write not verified: %v", err)
	}

	if _, err := routed.SetTraffic(webTraffic(rollout.InCluster("eu-1"), 20)); err != nil {
		t.Fatal(err)
	}
	if got, want := home.weights(t), "route[web-stable:80 web-canary:20] vs[web-stable:80 web-canary:20]"; got != want {
		t.Errorf("home after its part's write: %s, want %s", got, want)
	}
	if got := eu2.weights(t); got != half {
		t.Errorf("eu-2 after home's part's write: %s, want %s", got, half)
	}

	if err := routed.release(context.Background(), rollout.InCluster("eu-2"), webTraffic(rollout, 0).Routing); err != nil {
		t.Fatal(err)
	}
	if got := eu2.weights(t); got != stable {
		t.Errorf("eu-2 after its part's release: %s, want %s", got, stable)
	}
	if got := home.weights(t); !strings.Contains(got, "web-canary:20") {
		t.Errorf("home after eu-2's release: %s, want its 20 %% kept", got)
	}
}

// TestPartRoutesHeldUntilConnected: the traffic of a part whose cluster is
// not connected yet (what the runner pushes for every restored part as
// soon as sluice starts) is not refused: it is written when the cluster
// connects, and the wait for its ACK ends with that write's verification.
func TestPartRoutesHeldUntilConnected(t *testing.T) {
	home, us1 := newFakeCluster(t), newFakeCluster(t)
	k := &kubeParts{homeName: "eu-1", routers: home.routers, remotes: map[string]*remoteCluster{"us-1": {name: "us-1"}}}
	routed := newTestRouted(k)
	part := api.Key{Namespace: "shop", Name: "web"}.InCluster("us-1")

	if _, err := routed.SetTraffic(webTraffic(part, 20)); err != nil {
		t.Fatalf("traffic of a part whose cluster is not connected: %v", err)
	}
	v, err := routed.SetTraffic(webTraffic(part, 50))
	if err != nil {
		t.Fatal(err)
	}
	acked := make(chan error, 1)
	go func() { acked <- waitForAck(t, routed, v) }()
	select {
	case err := <-acked:
		t.Fatalf("the ACK wait ended before us-1 connected: %v", err)
	default:
	}
	if got := us1.weights(t); got != untouched {
		t.Errorf("us-1 before it connected: %s, want %s", got, untouched)
	}
	k.remotes["us-1"].routes.connect(us1.routers, 5*time.Second, discard)
	if err := <-acked; err != nil {
		t.Errorf("the ACK wait after us-1 connected: %v", err)
	}
	if got := us1.weights(t); got != half {
		t.Errorf("us-1 once connected: %s, want the latest traffic %s", got, half)
	}
	if got := home.weights(t); got != untouched {
		t.Errorf("home: %s, want it untouched: %s", got, untouched)
	}
}

// The HTTPRoute and VirtualService as newFakeCluster makes them (the
// user's route names web-stable without a weight, 1 of 1), released by
// sluice (100 to stable), and at 50 %.
const (
	untouched = "route[web-stable:1] vs[web-stable:100 web-canary:0]"
	stable    = "route[web-stable:100] vs[web-stable:100 web-canary:0]"
	half      = "route[web-stable:50 web-canary:50] vs[web-stable:50 web-canary:50]"
)

var discard = slog.New(slog.DiscardHandler)

func newTestRouted(k *kubeParts) *routedTraffic {
	return &routedTraffic{routers: k.partRouters(), applyTimeout: 5 * time.Second, log: discard}
}

// webTraffic is the traffic of shop/web's part with canary % to
// web-canary through the HTTPRoute and the VirtualService web.
func webTraffic(part api.Key, canary int32) api.Traffic {
	return api.Traffic{Rollout: part, Weights: api.CanaryWeights(canary), Routing: &api.ClusterRouting{
		StableService: "web-stable", CanaryService: "web-canary",
		GatewayAPI: &api.GatewayAPIRouting{Namespace: "shop", HTTPRoutes: []api.GatewayRouteRef{{Name: "web"}}},
		Istio:      &api.IstioRouting{VirtualServices: []api.IstioVirtualService{{Name: "web", Namespace: "shop", Routes: []string{"primary"}}}},
	}}
}

// waitForAck waits for the version's verification; Istio, which has no
// istiod here, is taken unverified, as without status reporting.
func waitForAck(t *testing.T, routed *routedTraffic, version string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := routed.WaitForAck(ctx, "", version)
	var unverified *runner.UnverifiedError
	if errors.As(err, &unverified) && strings.HasPrefix(unverified.Message, "istio:") && !strings.Contains(unverified.Message, "gatewayAPI") {
		return nil
	}
	return err
}
