package e2e

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gwinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions"

	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/internal/kubetest"
)

// gammaWorld is a namespace whose Gateway API implementation is a real
// istiod (kubetest.SharedIstiod): it writes the route status sluice
// verifies and serves the routes as xDS to proxyless gRPC clients, which
// call the real backends on the pods' IPs (startPodBackends).
type gammaWorld struct {
	c   *kubetest.Cluster
	ist *kubetest.Istiod
	ns  string
	gw  gwclient.Interface
}

func newGammaWorld(t *testing.T) *gammaWorld {
	t.Helper()
	c := kubetest.Shared(t)
	ist := kubetest.SharedIstiod(t, c)
	gw, err := gwclient.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	ns := c.Namespace(t)
	startPodBackends(t, c, ns)
	w := &gammaWorld{c: c, ist: ist, ns: ns, gw: gw}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("istiod's log:\n%s", ist.TailLog(6000))
		}
	})
	// istiod answers /ready before its Gateway API controller runs; it
	// runs once it has accepted the GatewayClass istio it creates.
	kubetest.Eventually(t, 2*time.Minute, "GatewayClass istio Accepted", func() (bool, string) {
		gc, err := gw.GatewayV1().GatewayClasses().Get(ctxFor(t, 10*time.Second), "istio", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return meta.IsStatusConditionTrue(gc.Status.Conditions, string(gwv1.GatewayClassConditionStatusAccepted)), fmt.Sprint(gc.Status.Conditions)
	})
	return w
}

// service creates a Service of the app's pods on kubePort. The port is
// named grpc so that istiod serves it as gRPC (HTTP/2), not as TCP.
func (w *gammaWorld) service(t *testing.T, name string, selector map[string]string) {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns},
		Spec: corev1.ServiceSpec{Selector: selector, Ports: []corev1.ServicePort{{
			Name: "grpc", Port: kubePort, TargetPort: intstr.FromInt32(kubePort),
		}}},
	}
	if _, err := w.c.Client.CoreV1().Services(w.ns).Create(t.Context(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// gateway creates a Gateway of istiod's GatewayClass "istio" and what
// istiod needs to call it Programmed: the Service <name>-istio selecting
// the gateway's pods and one (kwok) pod. No Envoy runs behind it, so no
// call goes through it: a route's status for this parent is all a test
// can check.
func (w *gammaWorld) gateway(t *testing.T, name string) {
	t.Helper()
	ctx := t.Context()
	g := &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns},
		Spec: gwv1.GatewaySpec{GatewayClassName: "istio", Listeners: []gwv1.Listener{{
			Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType,
		}}},
	}
	if _, err := w.gw.GatewayV1().Gateways(w.ns).Create(ctx, g, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	label := map[string]string{"gateway.networking.k8s.io/gateway-name": name}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-istio", Namespace: w.ns},
		Spec:       corev1.ServiceSpec{Selector: label, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}
	if _, err := w.c.Client.CoreV1().Services(w.ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nodes, err := w.c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("nodes: %v (%d)", err, len(nodes.Items))
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-istio", Namespace: w.ns, Labels: label},
		Spec: corev1.PodSpec{NodeName: nodes.Items[0].Name, Containers: []corev1.Container{{
			Name: "istio-proxy", Image: "istio/proxyv2", Ports: []corev1.ContainerPort{{ContainerPort: 80}},
		}}},
	}
	if _, err := w.c.Client.CoreV1().Pods(w.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// gatewayCondition is a condition of the Gateway as istiod wrote it.
func (w *gammaWorld) gatewayCondition(t *testing.T, name, typ string) *metav1.Condition {
	t.Helper()
	g, err := w.gw.GatewayV1().Gateways(w.ns).Get(ctxFor(t, 10*time.Second), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range g.Status.Conditions {
		if c.Type == typ {
			return &c
		}
	}
	return nil
}

// serviceParent is a GAMMA parentRef: the Service whose callers the route
// steers, on its port.
func serviceParent(name string) gwv1.ParentReference {
	return gwv1.ParentReference{Group: ptr.To(gwv1.Group("")), Kind: ptr.To(gwv1.Kind("Service")),
		Name: gwv1.ObjectName(name), Port: ptr.To(gwv1.PortNumber(kubePort))}
}

// grpcRoute creates the user's GRPCRoute: one rule to the stable Service,
// which sluice manages, under parents.
func (w *gammaWorld) grpcRoute(t *testing.T, name, stable string, parents ...gwv1.ParentReference) {
	t.Helper()
	route := &gwv1.GRPCRoute{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns},
		Spec: gwv1.GRPCRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: parents},
			Rules: []gwv1.GRPCRouteRule{{BackendRefs: []gwv1.GRPCBackendRef{{BackendRef: gwv1.BackendRef{
				BackendObjectReference: gwv1.BackendObjectReference{Name: gwv1.ObjectName(stable), Port: ptr.To(gwv1.PortNumber(kubePort))},
			}}}}},
		},
	}
	if _, err := w.gw.GatewayV1().GRPCRoutes(w.ns).Create(t.Context(), route, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitServed waits for istiod's first status of the route, one entry per
// parent: the route is served before sluice writes it, as a route a
// rollout starts on is. A write right after the creation can race
// istiod's first status write, which istiod drops on a conflict without
// retrying (pilot/pkg/status/manager.go), leaving the route without
// status until it changes again.
func (w *gammaWorld) waitServed(t *testing.T, name string, parents int) {
	t.Helper()
	kubetest.Eventually(t, 60*time.Second, "istiod's status of GRPCRoute "+name, func() (bool, string) {
		r, err := w.gw.GatewayV1().GRPCRoutes(w.ns).Get(ctxFor(t, 10*time.Second), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(r.Status.Parents) == parents, fmt.Sprint(r.Status.Parents)
	})
}

// routeStatusClock measures, from a watch on one route, how long istiod
// takes from a write (a new metadata.generation) to the status of every
// parent saying Accepted and ResolvedRefs True at that generation. Both
// instants are when the watch delivered the event, so the apiserver's
// and the informer's delays cancel out.
type routeStatusClock struct {
	mu          sync.Mutex
	written     map[int64]time.Time
	taken       map[int64]time.Duration
	controllers map[string]string // parent → controllerName
	untimed     int64             // the generation the watch started on
}

func watchRouteStatus(t *testing.T, w *gammaWorld, name string) *routeStatusClock {
	t.Helper()
	rc := &routeStatusClock{written: map[int64]time.Time{}, taken: map[int64]time.Duration{}, controllers: map[string]string{}}
	f := gwinformers.NewSharedInformerFactoryWithOptions(w.gw, 0, gwinformers.WithNamespace(w.ns))
	inf := f.Gateway().V1().GRPCRoutes().Informer()
	see := func(obj any) {
		if r, ok := obj.(*gwv1.GRPCRoute); ok && r.Name == name {
			rc.see(r, time.Now())
		}
	}
	// The generation the watch starts on was written before it: only
	// the later ones, sluice's writes, are timed.
	first := func(obj any) {
		if r, ok := obj.(*gwv1.GRPCRoute); ok && r.Name == name {
			rc.mu.Lock()
			rc.untimed = r.Generation
			rc.mu.Unlock()
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: first, UpdateFunc: func(_, o any) { see(o) }}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.Start(ctx.Done())
	t.Cleanup(func() { cancel(); f.Shutdown() })
	return rc
}

func (rc *routeStatusClock) see(r *gwv1.GRPCRoute, at time.Time) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	gen := r.Generation
	if gen <= rc.untimed {
		return
	}
	if _, ok := rc.written[gen]; !ok {
		rc.written[gen] = at
	}
	for _, st := range r.Status.Parents {
		rc.controllers[parentKey(st.ParentRef)] = string(st.ControllerName)
	}
	if _, ok := rc.taken[gen]; ok || !allTaken(r.Spec.ParentRefs, r.Status.Parents, gen) {
		return
	}
	rc.taken[gen] = at.Sub(rc.written[gen])
}

// allTaken reports whether each parent has a status entry with Accepted
// and ResolvedRefs True at gen or later.
func allTaken(refs []gwv1.ParentReference, status []gwv1.RouteParentStatus, gen int64) bool {
	for _, ref := range refs {
		i := slices.IndexFunc(status, func(s gwv1.RouteParentStatus) bool { return parentKey(s.ParentRef) == parentKey(ref) })
		if i < 0 {
			return false
		}
		for _, typ := range []string{string(gwv1.RouteConditionAccepted), string(gwv1.RouteConditionResolvedRefs)} {
			c := routeCondition(status[i].Conditions, typ)
			if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration < gen {
				return false
			}
		}
	}
	return true
}

func routeCondition(cs []metav1.Condition, typ string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == typ {
			return &cs[i]
		}
	}
	return nil
}

// parentKey names a parentRef in a test's words: kind/name.
func parentKey(p gwv1.ParentReference) string {
	return string(ptr.Deref(p.Kind, "Gateway")) + "/" + string(p.Name)
}

// latencies are the write → taken durations seen so far, by generation.
func (rc *routeStatusClock) latencies() map[int64]time.Duration {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := make(map[int64]time.Duration, len(rc.taken))
	for g, d := range rc.taken {
		out[g] = d
	}
	return out
}

func (rc *routeStatusClock) controllerOf(parent string) string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.controllers[parent]
}

// meshCalls makes n calls with metadata md (name, value pairs), spread
// over the clients, and counts the versions that answered ("" for a
// failed call); the error says how many failed.
func meshCalls(clients *meshClients, n int, md ...string) (map[string]int, error) {
	got := clients.calls(n, md)
	if failed := got[""]; failed > 0 {
		return got, fmt.Errorf("%d of %d calls failed", failed, n)
	}
	return got, nil
}

// shareWithinNoise reports whether k of n calls on canary is within four
// standard deviations of share p; at p 0 or 1 it must be exact.
func shareWithinNoise(k, n int, p float64) bool {
	if p == 0 || p == 1 {
		return float64(k) == p*float64(n)
	}
	sd := math.Sqrt(p * (1 - p) / float64(n))
	return math.Abs(float64(k)/float64(n)-p) <= 4*sd
}

// observedSplit waits until the clients' calls follow share p of canary
// (istiod pushes a route to clients after it writes the status sluice
// verifies, 0–200 ms in the recipe's measurements), then makes n fresh
// calls, which must all succeed and put canary's share within binomial
// noise of p. It returns the split of those n calls and how long the
// clients took to follow.
func observedSplit(t *testing.T, clients *meshClients, stable, canary string, p float64, n int) (map[string]int, time.Duration) {
	t.Helper()
	start := time.Now()
	kubetest.Eventually(t, 30*time.Second, fmt.Sprintf("clients at %.0f %% %s", 100*p, canary), func() (bool, string) {
		got, err := meshCalls(clients, 200)
		return err == nil && got[stable]+got[canary] == 200 && shareWithinNoise(got[canary], 200, p), fmt.Sprint(got, err)
	})
	settled := time.Since(start)
	got, err := meshCalls(clients, n)
	if err != nil || got[stable]+got[canary] != n {
		t.Fatalf("at %.0f %% %s: %v of %d calls; first error %v", 100*p, canary, got, n, err)
	}
	if !shareWithinNoise(got[canary], n, p) {
		t.Errorf("at %.0f %% %s the clients observed %.3f over %d calls (%v)", 100*p, canary, float64(got[canary])/float64(n), n, got)
	}
	t.Logf("declared %.0f %% %s: observed %.3f over %d calls %v (clients followed within %v)",
		100*p, canary, float64(got[canary])/float64(n), n, got, settled.Round(time.Millisecond))
	return got, settled
}

// TestKubeGatewayAPIIstiod runs the Gateway API router against a real
// implementation, istiod. sluice canaries a rollout whose GRPCRoute has
// two parents: the Service gm (a GAMMA, mesh route: its callers are
// steered) and the Gateway gm-edge of class istio. What sluice verifies
// is the status istiod writes for both parents (Accepted and ResolvedRefs
// True at the written generation); what proxyless gRPC clients of istiod
// observe calling gm is checked against every step: 20 %, a header
// route (calls with x-canary: yes all on the canary, the others still
// 20 %), 50 %, promotion (all on v2) and, on the next version, an abort
// (all on the stable v2), each over 1,000 calls. No Envoy runs behind the Gateway,
// so for that parent only the status is checked.
//
// A GRPCRoute rather than an HTTPRoute because the backends are gRPC:
// istiod gives a GRPCRoute's rules to proxyless gRPC clients, as it does
// an HTTPRoute's (both were seen reaching proxyless clients).
//
// Last, a missing backend: a second rollout's route names a canary
// Service that does not exist where the route resolves it; istiod reports
// the write ResolvedRefs False BackendNotFound, and the step holds with
// that reason.
func TestKubeGatewayAPIIstiod(t *testing.T) {
	w := newGammaWorld(t)
	ns := w.ns
	w.service(t, "gm", map[string]string{"app": "gm"})
	w.service(t, "gm-stable", map[string]string{"app": "gm"})
	w.service(t, "gm-canary", map[string]string{"app": "gm"})
	w.gateway(t, "gm-edge")
	w.grpcRoute(t, "gm", "gm-stable", serviceParent("gm"), gwv1.ParentReference{Name: "gm-edge"})
	w.waitServed(t, "gm", 2)
	clock := watchRouteStatus(t, w, "gm")

	repo := newGitRepo(t)
	spec := kubeRollout{Name: "gm", Namespace: ns, Version: v1, Replicas: 2,
		Canary: "stableService: gm-stable\ncanaryService: gm-canary\n",
		Steps: `- setWeight: 20
- pause: {}
- setHeaderRoute: {name: beta, match: [{headerName: x-canary, headerValue: {exact: "yes"}}]}
- pause: {}
- setWeight: 50
- pause: {}
`,
		TrafficRouting: `managedRoutes: [{name: beta}]
plugins:
  argoproj-labs/gatewayAPI: {grpcRoute: gm}
`}
	repo.push("v1", map[string]string{"rollouts/gm.yaml": spec.yaml()})
	d := startDaemon(t, repo, "--kubernetes", "--kubeconfig", w.c.Kubeconfig, "--ack-timeout", "2m")
	d.waitStatus(ns+"/gm", 90*time.Second, "stable v1", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v1
	})
	kubetest.Eventually(t, 30*time.Second, "Gateway gm-edge Programmed", func() (bool, string) {
		c := w.gatewayCondition(t, "gm-edge", string(gwv1.GatewayConditionProgrammed))
		return c != nil && c.Status == metav1.ConditionTrue, fmt.Sprint(c)
	})
	clients := newMeshClients(t, w.ist.XDSAddr, ns, fmt.Sprintf("gm.%s.svc.cluster.local:%d", ns, kubePort), 2)
	const n = 1000
	observedSplit(t, clients, v1, v2, 0, n)

	spec.Version = v2
	commit := repo.push("v2", map[string]string{"rollouts/gm.yaml": spec.yaml()})
	d.waitStatus(ns+"/gm", 90*time.Second, "paused at 20 %", func(s httpapi.RolloutStatus) bool {
		return s.Commit == commit && s.Phase == rollout.PhasePaused && s.Weights.Canary == 20
	})
	observedSplit(t, clients, v1, v2, 0.2, n)
	d.cli("promote", ns+"/gm")
	d.waitStatus(ns+"/gm", 60*time.Second, "paused after the header route", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhasePaused && s.StepIndex == 3
	})
	// Calls with the header all reach the canary; the others keep 20 %.
	kubetest.Eventually(t, 30*time.Second, "x-canary calls all on v2", func() (bool, string) {
		got, err := meshCalls(clients, 200, "x-canary", "yes")
		return err == nil && got[v2] == 200, fmt.Sprint(got, err)
	})
	if got, err := meshCalls(clients, n, "x-canary", "yes"); err != nil || got[v2] != n {
		t.Errorf("header route: %v of %d calls with x-canary: yes; want all on %s (first error %v)", got, n, v2, err)
	}
	observedSplit(t, clients, v1, v2, 0.2, n)
	d.cli("promote", ns+"/gm")
	d.waitStatus(ns+"/gm", 60*time.Second, "paused at 50 %", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhasePaused && s.Weights.Canary == 50
	})
	observedSplit(t, clients, v1, v2, 0.5, n)
	d.cli("promote", ns+"/gm")
	d.waitStatus(ns+"/gm", 60*time.Second, "promoted", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v2
	})
	observedSplit(t, clients, v1, v2, 1, n)

	const v3 = "e2e/app:v3"
	spec.Version = v3
	repo.push("v3", map[string]string{"rollouts/gm.yaml": spec.yaml()})
	d.waitStatus(ns+"/gm", 90*time.Second, "v3 paused at 20 %", func(s httpapi.RolloutStatus) bool {
		return s.CanaryVersion == v3 && s.Phase == rollout.PhasePaused && s.Weights.Canary == 20
	})
	observedSplit(t, clients, v2, v3, 0.2, n)
	d.cli("abort", ns+"/gm")
	d.waitStatus(ns+"/gm", 60*time.Second, "aborted", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseDegraded && s.StableVersion == v2
	})
	observedSplit(t, clients, v2, v3, 0, n)

	// Who wrote the status sluice verified, and how fast.
	for _, parent := range []string{"Service/gm", "Gateway/gm-edge"} {
		if c := clock.controllerOf(parent); !strings.HasPrefix(c, "istio.io/") {
			t.Errorf("parent %s: status written by %q; want istiod's controller", parent, c)
		} else {
			t.Logf("parent %s: controllerName %s", parent, c)
		}
	}
	lat := clock.latencies()
	if len(lat) < 4 {
		t.Errorf("istiod took %d generations of the route; want one per write (≥ 4): %v", len(lat), lat)
	}
	t.Logf("write → Accepted+ResolvedRefs at the generation, per generation: %v", lat)

	// A missing backend: rollout gx's route lives in namespace ns2 (the
	// plugin's namespace), where its backendRefs resolve, and ns2 has the
	// stable Service but no gx-canary. The first step's write names
	// gx-canary, istiod answers ResolvedRefs False BackendNotFound, and the
	// step holds (a NACK) with that reason. (A canary Service missing from
	// the rollout's own namespace stops sluice before any route is
	// written: it cannot pin the Service's selector.)
	ns2 := w.c.Namespace(t)
	w2 := &gammaWorld{c: w.c, ist: w.ist, ns: ns2, gw: w.gw}
	w.service(t, "gx-stable", map[string]string{"app": "gx"})
	w.service(t, "gx-canary", map[string]string{"app": "gx"})
	w2.service(t, "gx", map[string]string{"app": "gx"})
	w2.service(t, "gx-stable", map[string]string{"app": "gx"})
	w2.grpcRoute(t, "gx", "gx-stable", serviceParent("gx"))
	w2.waitServed(t, "gx", 1)
	missing := kubeRollout{Name: "gx", Namespace: ns, Version: v1, Replicas: 2,
		Canary: "stableService: gx-stable\ncanaryService: gx-canary\n",
		Steps:  "- setWeight: 20\n- pause: {}\n",
		TrafficRouting: `plugins:
  argoproj-labs/gatewayAPI: {grpcRoute: gx, namespace: ` + ns2 + `}
`}
	repo.push("gx v1", map[string]string{"rollouts/gx.yaml": missing.yaml()})
	d.waitStatus(ns+"/gx", 90*time.Second, "gx stable v1", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v1
	})
	missing.Version = v2
	repo.push("gx v2", map[string]string{"rollouts/gx.yaml": missing.yaml()})
	st := d.waitStatus(ns+"/gx", 90*time.Second, "held on BackendNotFound", func(s httpapi.RolloutStatus) bool {
		return s.CanaryVersion == v2 && strings.Contains(s.Message, string(gwv1.RouteReasonBackendNotFound))
	})
	t.Logf("held: %q", st.Message)
	held := time.Now()
	for time.Since(held) < 5*time.Second {
		// A held step shows as Paused at the step with the hold's reason;
		// going on would move StepIndex or drop the reason.
		if s, ok := d.status(ns + "/gx"); ok && (s.StepIndex != 0 || !strings.Contains(s.Message, string(gwv1.RouteReasonBackendNotFound))) {
			t.Fatalf("the step went on past a route istiod did not resolve: %+v", s)
		}
		time.Sleep(100 * time.Millisecond) // sampling a state that must not change, not synchronising
	}
}
