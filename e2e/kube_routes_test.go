package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/gateway/gatewayapi/gatewayapitest"
	"github.com/sluice-dev/sluice/gateway/istio/istiotest"
	"github.com/sluice-dev/sluice/internal/kubetest"
)

// routeWorld is a namespace with the cluster routers' objects in it and
// fake controllers that write their status. The fake
// (gatewayapitest.Controller: Accepted/ResolvedRefs at the route's
// generation, per the Gateway API conformance rules) stays here on
// purpose: these tests are about sluice's own logic, which needs a gateway
// told what to answer (hold its status back to prove a step waits, reject
// a route on cue to prove a NACK holds it). That a real implementation
// writes such status and moves traffic with it is TestKubeGatewayAPIIstiod
// (istiod). Istio's CRDs are installed too, with no istiod: a
// VirtualService's weight stays "unverified", as it is in a mesh without
// istiod's status reporting.
type routeWorld struct {
	c    *kubetest.Cluster
	ns   string
	gw   gwclient.Interface
	dyn  dynamic.Interface
	fake *gatewayapitest.Controller
}

var virtualServices = schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "virtualservices"}

func newRouteWorld(t *testing.T, c *kubetest.Cluster, ns string) *routeWorld {
	t.Helper()
	ctx := t.Context()
	if err := gatewayapitest.InstallCRDs(ctx, c.Config); err != nil {
		t.Fatal(err)
	}
	gw, err := gwclient.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := istiotest.InstallCRDs(ctx, dyn); err != nil {
		t.Fatal(err)
	}
	w := &routeWorld{c: c, ns: ns, gw: gw, dyn: dyn, fake: gatewayapitest.NewController(gw)}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.fake.Run(runCtx, 50*time.Millisecond) }()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

// services creates the rollout's stable and canary Services, whose
// selectors sluice pins to each side's pods.
func (w *routeWorld) services(t *testing.T, app string, names ...string) {
	t.Helper()
	for _, n := range names {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: w.ns},
			Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": app}, Ports: []corev1.ServicePort{{Port: 80}}},
		}
		if _, err := w.c.Client.CoreV1().Services(w.ns).Create(t.Context(), svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// httpRoute creates the user's HTTPRoute: a rule of their own (/static)
// and the rule to the stable Service that sluice manages.
func (w *routeWorld) httpRoute(t *testing.T, name, stable string) {
	t.Helper()
	route := &gwv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns},
		Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "edge"}}},
			Rules: []gwv1.HTTPRouteRule{{
				Name:        ptr.To(gwv1.SectionName("static")),
				Matches:     []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: ptr.To(gwv1.PathMatchPathPrefix), Value: ptr.To("/static")}}},
				BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: "static-files", Port: ptr.To(gwv1.PortNumber(80))}}}},
			}, {
				BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: gwv1.ObjectName(stable), Port: ptr.To(gwv1.PortNumber(80))}}}},
			}},
		},
	}
	if _, err := w.gw.GatewayV1().HTTPRoutes(w.ns).Create(t.Context(), route, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// routeShape is the route's rules in a few plain words: each rule's name
// ("-" for none) and its backends with weights, e.g.
// "static[static-files:1] sluice-header-beta[kg-canary:1] -[kg-stable:80 kg-canary:20]".
func (w *routeWorld) routeShape(t *testing.T, name string) string {
	t.Helper()
	r, err := w.gw.GatewayV1().HTTPRoutes(w.ns).Get(ctxFor(t, 10*time.Second), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, rule := range r.Spec.Rules {
		backends := make([]gwv1.BackendRef, len(rule.BackendRefs))
		for i, b := range rule.BackendRefs {
			backends[i] = b.BackendRef
		}
		var mirrors []string
		for _, f := range rule.Filters {
			if f.RequestMirror != nil {
				mirrors = append(mirrors, fmt.Sprintf("mirror:%s@%d%%", f.RequestMirror.BackendRef.Name, ptr.Deref(f.RequestMirror.Percent, 100)))
			}
		}
		parts = append(parts, ruleShape(rule.Name, backends, mirrors...))
	}
	return strings.Join(parts, " ")
}

// ruleShape is one rule in routeShape's words: its name ("-" for none)
// and its backends with weights, then extra (the mirrors).
func ruleShape(name *gwv1.SectionName, backends []gwv1.BackendRef, extra ...string) string {
	n := "-"
	if name != nil {
		n = string(*name)
	}
	var refs []string
	for _, b := range backends {
		refs = append(refs, fmt.Sprintf("%s:%d", b.Name, ptr.Deref(b.Weight, 1)))
	}
	return n + "[" + strings.Join(append(refs, extra...), " ") + "]"
}

// virtualService creates the user's VirtualService: a route of their own
// (static) and the route "primary" to the stable and canary Services that
// sluice manages.
func (w *routeWorld) virtualService(t *testing.T, name, stable, canary string) {
	t.Helper()
	dest := func(host string, weight int64) map[string]any {
		return map[string]any{"destination": map[string]any{"host": host}, "weight": weight}
	}
	vs := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
		"metadata": map[string]any{"name": name, "namespace": w.ns},
		"spec": map[string]any{
			"hosts": []any{name},
			"http": []any{
				map[string]any{"name": "static", "match": []any{map[string]any{"uri": map[string]any{"prefix": "/static"}}},
					"route": []any{map[string]any{"destination": map[string]any{"host": "static-files"}}}, "timeout": "1500ms"},
				map[string]any{"name": "primary", "route": []any{dest(stable, 100), dest(canary, 0)}},
			},
		},
	}}
	if _, err := w.dyn.Resource(virtualServices).Namespace(w.ns).Create(t.Context(), vs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// vsShape is the VirtualService's http routes in the words of routeShape:
// "static[static-files:-] beta[kg-canary:100] primary[kg-stable:80 kg-canary:20]"
// ("-" for no weight), mirrors as mirror:host@percent.
func (w *routeWorld) vsShape(t *testing.T, name string) string {
	t.Helper()
	vs, err := w.dyn.Resource(virtualServices).Namespace(w.ns).Get(ctxFor(t, 10*time.Second), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	routes, _, _ := unstructured.NestedSlice(vs.Object, "spec", "http")
	var parts []string
	for _, r := range routes {
		route, _ := r.(map[string]any)
		n, _ := route["name"].(string)
		var refs []string
		dests, _, _ := unstructured.NestedSlice(route, "route")
		for _, d := range dests {
			dm, _ := d.(map[string]any)
			host, _, _ := unstructured.NestedString(dm, "destination", "host")
			weight := "-"
			if wv, ok := dm["weight"]; ok {
				weight = fmt.Sprint(wv)
			}
			refs = append(refs, host+":"+weight)
		}
		if host, ok, _ := unstructured.NestedString(route, "mirror", "host"); ok {
			pct, _, _ := unstructured.NestedFieldNoCopy(route, "mirrorPercentage", "value")
			refs = append(refs, fmt.Sprintf("mirror:%s@%v%%", host, pct))
		}
		parts = append(parts, n+"["+strings.Join(refs, " ")+"]")
	}
	return strings.Join(parts, " ")
}

// waitRoutes waits until the HTTPRoute and the VirtualService, both named
// name, have the shapes wanted.
func (w *routeWorld) waitRoutes(t *testing.T, name, httpRoute, virtualService string) {
	t.Helper()
	w.waitRoute(t, name, httpRoute)
	kubetest.Eventually(t, 30*time.Second, "VirtualService "+name+" = "+virtualService, func() (bool, string) {
		got := w.vsShape(t, name)
		return got == virtualService, got
	})
}

func (w *routeWorld) waitRoute(t *testing.T, name, want string) {
	t.Helper()
	kubetest.Eventually(t, 30*time.Second, "HTTPRoute "+name+" = "+want, func() (bool, string) {
		got := w.routeShape(t, name)
		return got == want, got
	})
}

// TestKubeClusterRoutes runs a Kubernetes-mode canary of a Rollout that
// names an HTTPRoute and a VirtualService (and no xDS, but for the
// session-affinity canary, whose option lives in the xDS plugin's block)
// through the real binary: both are right after every step (weights,
// header route, cookie route, mirror, promotion, separately an abort, and
// stable users pinned by a cookie until a promotion), each step waits
// until the fake gateway reports the route taken, and the user's own
// rules are never touched.
func TestKubeClusterRoutes(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	w := newRouteWorld(t, c, ns)
	w.services(t, "kg", "kg-stable", "kg-canary")
	w.httpRoute(t, "kg", "kg-stable")
	w.virtualService(t, "kg", "kg-stable", "kg-canary")
	repo := newGitRepo(t)
	spec := kubeRollout{Name: "kg", Namespace: ns, Version: v1, Replicas: 2,
		Canary: "stableService: kg-stable\ncanaryService: kg-canary\n",
		Steps: `- setWeight: 20
- pause: {}
- setHeaderRoute: {name: beta, match: [{headerName: X-Canary, headerValue: {exact: "yes"}}]}
- pause: {}
- setHeaderRoute: {name: beta-cookie, match: [{headerName: cookie, headerValue: {exact: "beta=1"}}]}
- pause: {}
- setMirrorRoute: {name: shadow, percentage: 50, match: [{path: {prefix: /api}}]}
- pause: {}
`,
		TrafficRouting: `managedRoutes: [{name: beta}, {name: beta-cookie}, {name: shadow}]
plugins:
  argoproj-labs/gatewayAPI: {httpRoute: kg}
istio:
  virtualService: {name: kg, routes: [primary]}
`}
	repo.push("v1", map[string]string{"rollouts/kg.yaml": spec.yaml()})
	d := startDaemon(t, repo, "--kubernetes", "--kubeconfig", c.Kubeconfig, "--watch-namespaces", ns, "--ack-timeout", "2m")
	d.waitStatus(ns+"/kg", 60*time.Second, "stable v1", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v1
	})
	const user, vsUser = "static[static-files:1] ", "static[static-files:-] "
	const hrStable, vsStable = user + "-[kg-stable:100]", vsUser + "primary[kg-stable:100 kg-canary:0]"
	w.waitRoutes(t, "kg", hrStable, vsStable)

	// The gateway holds its status: the step has written the route but
	// waits for the gateway before it goes on.
	w.fake.Set(ns, "kg", gatewayapitest.Hold)
	spec.Version = v2
	commit := repo.push("v2", map[string]string{"rollouts/kg.yaml": spec.yaml()})
	w.waitRoutes(t, "kg", user+"-[kg-stable:80 kg-canary:20]", vsUser+"primary[kg-stable:80 kg-canary:20]")
	held := time.Now()
	for time.Since(held) < 3*time.Second {
		if st, ok := d.status(ns + "/kg"); ok && st.Phase == rollout.PhasePaused {
			t.Fatalf("the step went on before the gateway reported the route taken: %+v", st)
		}
		time.Sleep(100 * time.Millisecond) // sampling a state that must not change, not synchronising
	}
	w.fake.Set(ns, "kg", gatewayapitest.Accept)
	st := d.waitStatus(ns+"/kg", 60*time.Second, "paused at 20 % once verified", func(s httpapi.RolloutStatus) bool {
		return s.Commit == commit && s.Phase == rollout.PhasePaused && s.Weights.Canary == 20
	})
	// No istiod reports status here: the VirtualService's weight is taken
	// but unverified, and the status says so.
	if !strings.Contains(st.Message, "istio: weight unverified") {
		t.Errorf("status does not say the Istio weight is unverified: %q", st.Message)
	}

	d.cli("promote", ns+"/kg")
	w.waitRoutes(t, "kg", user+"sluice-header-beta[kg-canary:1] -[kg-stable:80 kg-canary:20]",
		vsUser+"beta[kg-canary:100] primary[kg-stable:80 kg-canary:20]")
	d.waitStatus(ns+"/kg", 60*time.Second, "paused after the header route", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhasePaused && s.StepIndex == 3
	})
	d.cli("promote", ns+"/kg")
	w.waitRoutes(t, "kg", user+"sluice-header-beta[kg-canary:1] sluice-header-beta-cookie[kg-canary:1] -[kg-stable:80 kg-canary:20]",
		vsUser+"beta[kg-canary:100] beta-cookie[kg-canary:100] primary[kg-stable:80 kg-canary:20]")
	d.waitStatus(ns+"/kg", 60*time.Second, "paused after the cookie route", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhasePaused && s.StepIndex == 5
	})
	d.cli("promote", ns+"/kg")
	w.waitRoutes(t, "kg", user+"sluice-header-beta[kg-canary:1] sluice-header-beta-cookie[kg-canary:1] sluice-mirror-shadow[kg-stable:80 kg-canary:20 mirror:kg-canary@50%] -[kg-stable:80 kg-canary:20]",
		vsUser+"beta[kg-canary:100] beta-cookie[kg-canary:100] shadow[kg-stable:80 kg-canary:20 mirror:kg-canary@50%] primary[kg-stable:80 kg-canary:20]")
	d.waitStatus(ns+"/kg", 60*time.Second, "paused after the mirror", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhasePaused && s.StepIndex == 7
	})
	d.cli("promote", ns+"/kg")
	d.waitStatus(ns+"/kg", 60*time.Second, "promoted", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v2
	})
	w.waitRoutes(t, "kg", hrStable, vsStable)

	// Separately, an abort: the canary's weight and routes go.
	const v3 = "e2e/app:v3"
	spec.Version = v3
	repo.push("v3", map[string]string{"rollouts/kg.yaml": spec.yaml()})
	d.waitStatus(ns+"/kg", 60*time.Second, "v3 paused at 20 %", func(s httpapi.RolloutStatus) bool {
		return s.CanaryVersion == v3 && s.Phase == rollout.PhasePaused && s.Weights.Canary == 20
	})
	d.cli("promote", ns+"/kg")
	w.waitRoutes(t, "kg", user+"sluice-header-beta[kg-canary:1] -[kg-stable:80 kg-canary:20]",
		vsUser+"beta[kg-canary:100] primary[kg-stable:80 kg-canary:20]")
	d.cli("abort", ns+"/kg")
	d.waitStatus(ns+"/kg", 60*time.Second, "aborted", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseDegraded && s.StableVersion == v2
	})
	w.waitRoutes(t, "kg", hrStable, vsStable)

	// Stable users pinned too: a second rollout, kp, whose xDS plugin
	// block (where sessionAffinity lives) has pinStable. While its step is
	// in progress each router has a cookie rule for each side; promotion
	// takes both away.
	w.services(t, "kp", "kp-stable", "kp-canary")
	w.httpRoute(t, "kp", "kp-stable")
	w.virtualService(t, "kp", "kp-stable", "kp-canary")
	pinned := kubeRollout{Name: "kp", Namespace: ns, Version: v1, Replicas: 2,
		Canary: "stableService: kp-stable\ncanaryService: kp-canary\n",
		Steps:  "- setWeight: 20\n- pause: {}\n",
		TrafficRouting: `plugins:
  argoproj-labs/gatewayAPI: {httpRoute: kp}
  sluice.io/xds:
    host: kp.internal
    sessionAffinity: {cookieName: kp-session, pinStable: true}
istio:
  virtualService: {name: kp, routes: [primary]}
`}
	repo.push("kp v1", map[string]string{"rollouts/kp.yaml": pinned.yaml()})
	d.waitStatus(ns+"/kp", 60*time.Second, "kp stable v1", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v1
	})
	pinned.Version = v2
	repo.push("kp v2", map[string]string{"rollouts/kp.yaml": pinned.yaml()})
	d.waitStatus(ns+"/kp", 60*time.Second, "kp paused at 20 %", func(s httpapi.RolloutStatus) bool {
		return s.CanaryVersion == v2 && s.Phase == rollout.PhasePaused && s.Weights.Canary == 20
	})
	w.waitRoutes(t, "kp", user+"sluice-sticky[kp-canary:1] sluice-sticky-stable[kp-stable:1] -[kp-stable:80 kp-canary:20]",
		vsUser+"sluice-sticky-kp[kp-canary:100] sluice-sticky-stable-kp[kp-stable:100] primary[kp-stable:80 kp-canary:20]")
	d.cli("promote", ns+"/kp")
	d.waitStatus(ns+"/kp", 60*time.Second, "kp promoted", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v2
	})
	w.waitRoutes(t, "kp", user+"-[kp-stable:100]", vsUser+"primary[kp-stable:100 kp-canary:0]")

	// A gateway that rejects the route is a NACK: the step holds with the
	// condition's reason (the xds-nack path) and never reaches its pause.
	w.fake.Set(ns, "kg", gatewayapitest.Reject)
	const v4 = "e2e/app:v4"
	spec.Version = v4
	repo.push("v4", map[string]string{"rollouts/kg.yaml": spec.yaml()})
	st = d.waitStatus(ns+"/kg", 60*time.Second, "held on the rejected route", func(s httpapi.RolloutStatus) bool {
		return s.CanaryVersion == v4 && strings.Contains(s.Message, gatewayapitest.RejectReason)
	})
	if st.StepIndex != 0 || !strings.Contains(st.Message, "xDS NACK") {
		t.Errorf("a rejected route let the step go on: %+v", st)
	}
}
