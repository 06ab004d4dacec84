package workload

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/internal/kubetest"
)

func TestMain(m *testing.M) { kubetest.Main(m, 6) }

// nodeZones are the kubetest nodes' zones: node-i is in zones[i%3].
var nodeZones = []string{"zone-a", "zone-b", "zone-c"}

func zoneOfNode(node string) string {
	var i int
	fmt.Sscanf(node, "node-%d", &i)
	return nodeZones[i%3]
}

// recorder keeps what the callbacks said.
type recorder struct {
	mu        sync.Mutex
	ready     map[string]rollout.PodsReady // latest per hash
	endpoints int                          // OnEndpoints calls
}

func (r *recorder) lastReady(hash string) rollout.PodsReady {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ready[hash]
}

func (r *recorder) endpointCalls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.endpoints
}

// env is one test's namespace and a started Manager watching only it.
type env struct {
	t   testing.TB
	c   *kubetest.Cluster
	ns  string
	m   *Manager
	rec *recorder
	reg prometheus.Registerer // the Manager's metrics (none when nil)
	// pods is the Manager's Options.Pods (nil: its own pod informers).
	pods informers.SharedInformerFactory
}

func newEnv(t testing.TB) *env {
	t.Helper()
	c := kubetest.Shared(t)
	e := &env{t: t, c: c, ns: c.Namespace(t), rec: &recorder{ready: map[string]rollout.PodsReady{}}}
	e.m = e.startManager()
	return e
}

func (e *env) startManager() *Manager {
	e.t.Helper()
	m, err := New(Options{
		Client:       e.c.Client,
		Namespaces:   []string{e.ns},
		SchedulePods: true,
		Registry:     e.reg,
		Pods:         e.pods,
		OnReady: func(key api.Key, ev rollout.PodsReady) {
			e.rec.mu.Lock()
			e.rec.ready[ev.Hash] = ev
			e.rec.mu.Unlock()
		},
		OnEndpoints: func(api.Key) {
			e.rec.mu.Lock()
			e.rec.endpoints++
			e.rec.mu.Unlock()
		},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.t.Cleanup(cancel)
	if err := m.Start(ctx); err != nil {
		e.t.Fatal(err)
	}
	return m
}

func (e *env) key(name string) api.Key { return api.Key{Namespace: e.ns, Name: name} }

func (e *env) scale(key api.Key, sets ...rollout.WorkloadSet) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.m.Scale(ctx, rollout.ScaleWorkloads{Rollout: key, Sets: sets}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) getRS(name string) *appsv1.ReplicaSet {
	e.t.Helper()
	rs, err := e.c.Client.AppsV1().ReplicaSets(e.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return rs
}

func (e *env) listRS(selector string) []appsv1.ReplicaSet {
	e.t.Helper()
	l, err := e.c.Client.AppsV1().ReplicaSets(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		e.t.Fatal(err)
	}
	return l.Items
}

// bindPods binds n not yet scheduled pods of hash to nodes firstNode,
// firstNode+1, ... (as sluice's scheduler would: there is no scheduler in
// the test cluster) and returns pod name → node.
func (e *env) bindPods(hash string, n, firstNode int) map[string]string {
	e.t.Helper()
	ctx := context.Background()
	var pending []corev1.Pod
	kubetest.Eventually(e.t, 30*time.Second, fmt.Sprintf("%d pods of %s created", n, hash), func() (bool, string) {
		l, err := e.c.Client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: LabelHash + "=" + hash})
		if err != nil {
			return false, err.Error()
		}
		pending = pending[:0]
		for _, p := range l.Items {
			if p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
				pending = append(pending, p)
			}
		}
		return len(pending) >= n, fmt.Sprintf("%d unbound", len(pending))
	})
	slices.SortFunc(pending, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	bound := map[string]string{}
	for i, p := range pending[:n] {
		node := fmt.Sprintf("node-%d", (firstNode+i)%6)
		err := e.c.Client.CoreV1().Pods(e.ns).Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, UID: p.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: node},
		}, metav1.CreateOptions{})
		if err != nil {
			e.t.Fatalf("bind %s to %s: %v", p.Name, node, err)
		}
		bound[p.Name] = node
	}
	return bound
}

// podAddrs maps each bound pod's "ip:port" to its node's zone, once kwok
// has given every one an IP.
func (e *env) podAddrs(bound map[string]string, port string) map[string]string {
	e.t.Helper()
	out := map[string]string{}
	kubetest.Eventually(e.t, 30*time.Second, "bound pods have IPs", func() (bool, string) {
		clear(out)
		for name, node := range bound {
			p, err := e.c.Client.CoreV1().Pods(e.ns).Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if p.Status.PodIP == "" {
				return false, name + " has no IP\n" + e.c.Log("kwok")
			}
			out[net.JoinHostPort(p.Status.PodIP, port)] = zoneOfNode(node)
		}
		return true, ""
	})
	return out
}

func (e *env) waitEndpoints(key api.Key, hash string, want map[string]string) {
	e.t.Helper()
	kubetest.Eventually(e.t, 30*time.Second, "endpoints of "+hash, func() (bool, string) {
		addrs, zones := e.m.Endpoints(key, hash)
		got := map[string]string{}
		for _, a := range addrs {
			got[a] = zones[a]
		}
		return maps.Equal(got, want), fmt.Sprintf("got %v, want %v", got, want)
	})
}

func (e *env) waitReady(hash string, want rollout.PodsReady) {
	e.t.Helper()
	kubetest.Eventually(e.t, 30*time.Second, "OnReady of "+hash, func() (bool, string) {
		got := e.rec.lastReady(hash)
		return got == want, fmt.Sprintf("got %+v, want %+v", got, want)
	})
}

func (e *env) patchPod(name, patch string) {
	e.t.Helper()
	_, err := e.c.Client.CoreV1().Pods(e.ns).Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		e.t.Fatalf("patch pod %s: %v", name, err)
	}
}

func set(role rollout.WorkloadRole, hash string, replicas int32, spec *api.Rollout) rollout.WorkloadSet {
	return rollout.WorkloadSet{Role: role, Version: spec.Version, Hash: hash, Replicas: replicas, Spec: spec}
}

func TestScaleRunsReadyPods(t *testing.T) {
	e := newEnv(t)
	key := e.key("co")
	spec := testRollout(e.ns, "co", "shop/co:v1", 3, 8080, nil)
	e.scale(key, set(rollout.RoleStable, "h1", 3, spec))

	rs := e.getRS("co-h1")
	wantLabels := map[string]string{LabelHash: "h1", LabelManagedBy: ManagedByValue, LabelRollout: "co"}
	if !maps.Equal(rs.Labels, wantLabels) {
		t.Errorf("labels = %v, want %v", rs.Labels, wantLabels)
	}
	if want := map[string]string{"app": "co", LabelHash: "h1"}; !maps.Equal(rs.Spec.Selector.MatchLabels, want) {
		t.Errorf("selector = %v, want %v", rs.Spec.Selector.MatchLabels, want)
	}
	if *rs.Spec.Replicas != 3 || rs.Spec.Template.Spec.SchedulerName != SchedulerName || rs.Annotations[AnnotationVersion] != "shop/co:v1" {
		t.Errorf("replicas %d, schedulerName %q, version %q", *rs.Spec.Replicas, rs.Spec.Template.Spec.SchedulerName, rs.Annotations[AnnotationVersion])
	}

	e.waitReady("h1", rollout.PodsReady{Hash: "h1", Replicas: 3, Ready: 0})
	bound := e.bindPods("h1", 3, 0)
	e.waitReady("h1", rollout.PodsReady{Hash: "h1", Replicas: 3, Ready: 3})
	if got := e.m.Readiness(key); !slices.Equal(got, []rollout.PodsReady{{Hash: "h1", Replicas: 3, Ready: 3}}) {
		t.Errorf("Readiness = %+v", got)
	}

	want := e.podAddrs(bound, "8080")
	for a := range want {
		if !strings.HasPrefix(a, "10.244.") {
			t.Errorf("endpoint %s not in kwok's pod CIDR", a)
		}
	}
	e.waitEndpoints(key, "h1", want)

	st := e.m.Status(key)
	if len(st) != 1 {
		t.Fatalf("Status = %+v", st)
	}
	wantStatus := ReplicaSetStatus{Name: "co-h1", Hash: "h1", Version: "shop/co:v1", Role: "stable", Revision: 1,
		Desired: 3, Replicas: 3, Ready: 3, Zones: map[string]int{"zone-a": 1, "zone-b": 1, "zone-c": 1}}
	if !reflect.DeepEqual(st[0], wantStatus) {
		t.Errorf("Status = %+v, want %+v", st[0], wantStatus)
	}
}

func TestScaleTwiceChangesNothing(t *testing.T) {
	e := newEnv(t)
	key := e.key("co")
	spec := testRollout(e.ns, "co", "shop/co:v1", 2, 8080, nil)
	sets := []rollout.WorkloadSet{set(rollout.RoleStable, "h1", 2, spec), set(rollout.RoleCanary, "h2", 1, spec)}
	e.scale(key, sets...)
	settled := func(name string, replicas int32) *appsv1.ReplicaSet {
		var rs *appsv1.ReplicaSet
		kubetest.Eventually(t, 30*time.Second, name+" status observed", func() (bool, string) {
			rs = e.getRS(name)
			return rs.Status.ObservedGeneration == rs.Generation && rs.Status.Replicas == replicas,
				fmt.Sprintf("%+v", rs.Status)
		})
		return rs
	}
	before := []*appsv1.ReplicaSet{settled("co-h1", 2), settled("co-h2", 1)}

	e.scale(key, sets...)          // as a runner re-executing its action
	e.m = e.startManager()         // as sluice after a restart
	e.scale(key, sets[1], sets[0]) // the order of the sets does not matter
	for _, b := range before {
		a := e.getRS(b.Name)
		if a.ResourceVersion != b.ResourceVersion || a.Generation != b.Generation {
			t.Errorf("%s changed: resourceVersion %s → %s, generation %d → %d\nannotations %v → %v",
				b.Name, b.ResourceVersion, a.ResourceVersion, b.Generation, a.Generation, b.Annotations, a.Annotations)
		}
	}
	if n := len(e.listRS(LabelRollout + "=co")); n != 2 {
		t.Errorf("%d ReplicaSets, want 2", n)
	}
}

func TestScaleKeepsHistory(t *testing.T) {
	e := newEnv(t)
	key := e.key("co")
	spec := func(v string) *api.Rollout {
		return testRollout(e.ns, "co", "shop/co:"+v, 1, 8080, &api.Workload{RevisionHistoryLimit: 2})
	}
	for _, v := range []string{"v1", "v2", "v3", "v4"} {
		e.scale(key, set(rollout.RoleStable, "h"+v, 1, spec(v)))
	}
	type rsState struct {
		Replicas int32
		Revision string
		Role     string
	}
	check := func(want map[string]rsState) {
		t.Helper()
		got := map[string]rsState{}
		for _, rs := range e.listRS(LabelRollout + "=co") {
			if rs.DeletionTimestamp == nil {
				got[rs.Name] = rsState{*rs.Spec.Replicas, rs.Annotations[AnnotationRevision], rs.Annotations[AnnotationRole]}
			}
		}
		if !maps.Equal(got, want) {
			t.Errorf("ReplicaSets = %+v\nwant %+v", got, want)
		}
	}
	check(map[string]rsState{
		"co-hv4": {1, "4", "stable"},
		"co-hv3": {0, "3", RoleInactive},
		"co-hv2": {0, "2", RoleInactive},
	})

	// Rolling back to v2 brings its ReplicaSet back as the newest revision.
	e.scale(key, set(rollout.RoleStable, "hv2", 1, spec("v2")))
	check(map[string]rsState{
		"co-hv2": {1, "5", "stable"},
		"co-hv4": {0, "4", RoleInactive},
		"co-hv3": {0, "3", RoleInactive},
	})
}

func TestScaleAdoptsExistingReplicaSet(t *testing.T) {
	e := newEnv(t)
	key := e.key("co")
	spec := testRollout(e.ns, "co", "shop/co:v1", 2, 8080, nil)
	labels := map[string]string{"app": "co", LabelHash: "h1"}
	one := int32(1)
	_, err := e.c.Client.AppsV1().ReplicaSets(e.ns).Create(context.Background(), &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "legacy", Labels: map[string]string{LabelHash: "h1", LabelRollout: "co"}},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       spec.Spec.Template.Spec,
			},
		},
	}, metav1.CreateOptions{FieldManager: "someone-else"})
	if err != nil {
		t.Fatal(err)
	}

	// Its pod runs before sluice adopts it.
	bound := e.bindPods("h1", 1, 0)
	want := e.podAddrs(bound, "8080")

	e.scale(key, set(rollout.RoleStable, "h1", 2, spec))
	all := e.listRS(LabelHash + "=h1")
	if len(all) != 1 || all[0].Name != "legacy" {
		names := []string{}
		for _, rs := range all {
			names = append(names, rs.Name)
		}
		t.Fatalf("ReplicaSets of hash h1: %v, want only legacy", names)
	}
	if rs := all[0]; *rs.Spec.Replicas != 2 || rs.Labels[LabelManagedBy] != ManagedByValue {
		t.Errorf("legacy: replicas %d, labels %v", *rs.Spec.Replicas, rs.Labels)
	}
	maps.Copy(want, e.podAddrs(e.bindPods("h1", 1, 1), "8080"))
	e.waitEndpoints(key, "h1", want) // the adopted pod too
	e.waitReady("h1", rollout.PodsReady{Hash: "h1", Replicas: 2, Ready: 2})
	kubetest.Eventually(t, 30*time.Second, "adopted ReplicaSet in Status", func() (bool, string) {
		st := e.m.Status(key)
		return len(st) == 1 && st[0].Name == "legacy" && st[0].Desired == 2 && st[0].Ready == 2, fmt.Sprintf("%+v", st)
	})
}

// TestOrphanPodAdoptedLaterIsLabelled: applying a set sluice creates lists
// no pods to label (createdBySluice), so a pod its controller adopts
// afterwards — an orphan matching the set's selector, as a ReplicaSet of
// the same hash deleted with its pods orphaned leaves (Argo's: without
// sluice's labels) — is labelled once the set's status counts it
// (relabel.go). Unlabelled it would count neither as Ready nor as an
// endpoint, and the controller, which counts it, would create no other
// pod: the rollout would wait forever.
func TestOrphanPodAdoptedLaterIsLabelled(t *testing.T) {
	t.Run("labelled", func(t *testing.T) { testOrphanPodLabelled(t, false) })
	// The first labelling fails (the apiserver's answer replaced by a
	// 503 on its way back: the real apiserver cannot be made to fail
	// one request); nothing about the set changes after it, so only
	// the retry labels the pod.
	t.Run("after a failed patch", func(t *testing.T) { testOrphanPodLabelled(t, true) })
}

func testOrphanPodLabelled(t *testing.T, failFirstPatch bool) {
	c := kubetest.Shared(t)
	e := &env{t: t, c: c, ns: c.Namespace(t), rec: &recorder{ready: map[string]rollout.PodsReady{}}}
	if !failFirstPatch {
		e.m = e.startManager()
	} else {
		var failed atomic.Bool
		cfg := rest.CopyConfig(e.c.Config)
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(r *http.Request) (*http.Response, error) {
				if r.Method == http.MethodPatch && strings.Contains(r.URL.Path, "/pods/") && failed.CompareAndSwap(false, true) {
					return &http.Response{StatusCode: http.StatusServiceUnavailable, Body: io.NopCloser(strings.NewReader("")), Header: http.Header{}, Request: r}, nil
				}
				return rt.RoundTrip(r)
			})
		})
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		e.c = &kubetest.Cluster{Client: client, Config: cfg}
		e.m = e.startManager()
		defer func() {
			if !failed.Load() {
				t.Error("no pod patch was failed: the retry was not exercised")
			}
		}()
	}
	key := e.key("co")
	spec := testRollout(e.ns, "co", "shop/co:v1", 1, 8080, nil)
	ctx := context.Background()
	orphan := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "orphan", Labels: map[string]string{"app": "co", LabelHash: "h1"}},
		Spec:       *spec.Spec.Template.Spec.DeepCopy(),
	}
	orphan.Spec.NodeName = "node-0" // kwok runs it
	if _, err := e.c.Client.CoreV1().Pods(e.ns).Create(ctx, orphan, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := e.podAddrs(map[string]string{"orphan": "node-0"}, "8080")

	e.scale(key, set(rollout.RoleStable, "h1", 1, spec))
	kubetest.Eventually(t, 30*time.Second, "the orphan adopted by co-h1 and labelled", func() (bool, string) {
		p, err := e.c.Client.CoreV1().Pods(e.ns).Get(ctx, "orphan", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		owner := metav1.GetControllerOf(p)
		return owner != nil && owner.Name == "co-h1" && p.Labels[LabelRollout] == "co", fmt.Sprintf("owner %v, labels %v", owner, p.Labels)
	})
	e.waitReady("h1", rollout.PodsReady{Hash: "h1", Replicas: 1, Ready: 1})
	e.waitEndpoints(key, "h1", want)
	pods, err := e.c.Client.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: LabelHash + "=h1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 {
		t.Errorf("%d pods of h1; want the orphan alone (the controller counts it)", len(pods.Items))
	}
}

func TestEndpointsFromService(t *testing.T) {
	e := newEnv(t)
	key := e.key("co")
	ctx := context.Background()
	_, err := e.c.Client.CoreV1().Services(e.ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "co-canary"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "co"},
			// A target port unlike the container's shows the endpoints come
			// from the EndpointSlice, not from the pods.
			Ports: []corev1.ServicePort{{Name: "grpc", Port: 80, TargetPort: intstr.FromInt32(9090)}},
		},
	}, metav1.CreateOptions{FieldManager: "user"})
	if err != nil {
		t.Fatal(err)
	}
	w := &api.Workload{RevisionHistoryLimit: 10, CanaryService: "co-canary"}
	v1 := testRollout(e.ns, "co", "shop/co:v1", 3, 8080, w)
	v2 := testRollout(e.ns, "co", "shop/co:v2", 3, 8080, w)
	e.scale(key, set(rollout.RoleStable, "h1", 1, v1), set(rollout.RoleCanary, "h2", 2, v2))

	svc, err := e.c.Client.CoreV1().Services(e.ns).Get(ctx, "co-canary", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"app": "co", LabelHash: "h2"}; !maps.Equal(svc.Spec.Selector, want) {
		t.Errorf("service selector = %v, want %v", svc.Spec.Selector, want)
	}

	canary := e.podAddrs(e.bindPods("h2", 2, 0), "9090")
	stable := e.podAddrs(e.bindPods("h1", 1, 2), "8080") // no stableService: from the pods
	e.waitEndpoints(key, "h2", canary)
	e.waitEndpoints(key, "h1", stable)
	e.waitReady("h2", rollout.PodsReady{Hash: "h2", Replicas: 2, Ready: 2})

	tr := e.m.ResolveTraffic(api.Traffic{Rollout: key, StableWorkload: "h1", CanaryWorkload: "h2"})
	wantZones := maps.Clone(canary)
	maps.Copy(wantZones, stable)
	if !slices.Equal(tr.StableEndpoints, slices.Sorted(maps.Keys(stable))) ||
		!slices.Equal(tr.CanaryEndpoints, slices.Sorted(maps.Keys(canary))) || !maps.Equal(tr.EndpointZones, wantZones) {
		t.Errorf("ResolveTraffic = stable %v, canary %v, zones %v\nwant %v, %v", tr.StableEndpoints, tr.CanaryEndpoints, tr.EndpointZones, stable, canary)
	}

	// Promotion: the canary's service follows the new stable.
	e.scale(key, set(rollout.RoleStable, "h2", 2, v2), set(rollout.RoleOld, "h1", 1, v1))
	svc, err = e.c.Client.CoreV1().Services(e.ns).Get(ctx, "co-canary", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.Selector[LabelHash] != "h2" || svc.Spec.Selector["app"] != "co" {
		t.Errorf("service selector after promotion = %v", svc.Spec.Selector)
	}
	e.waitEndpoints(key, "h2", canary)
}

func TestTerminatingEndpointLeaves(t *testing.T) {
	tests := []struct {
		name    string
		service bool
	}{
		{"from pods", false},
		{"from the service's EndpointSlices", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			key := e.key("co")
			ctx := context.Background()
			w := &api.Workload{RevisionHistoryLimit: 10}
			if tt.service {
				w.CanaryService = "co-canary"
				_, err := e.c.Client.CoreV1().Services(e.ns).Create(ctx, &corev1.Service{
					ObjectMeta: metav1.ObjectMeta{Name: "co-canary"},
					Spec: corev1.ServiceSpec{
						Selector: map[string]string{"app": "co"},
						Ports:    []corev1.ServicePort{{Port: 8080}},
					},
				}, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
			}
			spec := testRollout(e.ns, "co", "shop/co:v2", 3, 8080, w)
			e.scale(key, set(rollout.RoleCanary, "h2", 3, spec))
			bound := e.bindPods("h2", 3, 0)
			want := e.podAddrs(bound, "8080")
			e.waitEndpoints(key, "h2", want)
			e.waitReady("h2", rollout.PodsReady{Hash: "h2", Replicas: 3, Ready: 3})

			victim := slices.Sorted(maps.Keys(bound))[0]
			p, err := e.c.Client.CoreV1().Pods(e.ns).Get(ctx, victim, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// A finalizer holds the deleted pod Terminating: it must leave the
			// endpoints before it is gone.
			e.patchPod(victim, `{"metadata":{"finalizers":["sluice.io/test-hold"]}}`)
			t.Cleanup(func() { e.patchPod(victim, `{"metadata":{"finalizers":null}}`) })
			calls := e.rec.endpointCalls()
			if err := e.c.Client.CoreV1().Pods(e.ns).Delete(ctx, victim, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			delete(want, net.JoinHostPort(p.Status.PodIP, "8080"))
			e.waitEndpoints(key, "h2", want)
			if p, err := e.c.Client.CoreV1().Pods(e.ns).Get(ctx, victim, metav1.GetOptions{}); err != nil || p.DeletionTimestamp == nil {
				t.Errorf("the victim should still be terminating: %v", err)
			}
			kubetest.Eventually(t, 10*time.Second, "OnEndpoints after the delete", func() (bool, string) {
				return e.rec.endpointCalls() > calls, fmt.Sprintf("%d calls", e.rec.endpointCalls())
			})
			// Its replacement stays unbound, so Ready stays below 3.
			e.waitReady("h2", rollout.PodsReady{Hash: "h2", Replicas: 3, Ready: 2})
		})
	}
}

// TestReadyCountsOnlyServedPods: a pod Ready in the ReplicaSet's status but
// not yet in its Service's EndpointSlices gets no traffic, so it does not
// count as Ready: the weight waits for the endpoints.
func TestReadyCountsOnlyServedPods(t *testing.T) {
	e := newEnv(t)
	key := e.key("co")
	ctx := context.Background()
	// "tier: web" matches no pod: the slices stay empty until it goes.
	_, err := e.c.Client.CoreV1().Services(e.ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "co-canary"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "co", "tier": "web"},
			Ports:    []corev1.ServicePort{{Port: 8080}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := testRollout(e.ns, "co", "shop/co:v2", 2, 8080, &api.Workload{RevisionHistoryLimit: 10, CanaryService: "co-canary"})
	e.scale(key, set(rollout.RoleCanary, "h2", 2, spec))
	want := e.podAddrs(e.bindPods("h2", 2, 0), "8080")
	kubetest.Eventually(t, 30*time.Second, "ReplicaSet 2/2 Ready", func() (bool, string) {
		st := e.m.Status(key)
		return len(st) == 1 && st[0].Ready == 2, fmt.Sprintf("%+v", st)
	})
	if got := e.m.Readiness(key); !slices.Equal(got, []rollout.PodsReady{{Hash: "h2", Replicas: 2, Ready: 0}}) {
		t.Errorf("Readiness with no endpoints = %+v, want Ready 0", got)
	}
	if got := e.rec.lastReady("h2"); got.Ready != 0 {
		t.Errorf("OnReady said %+v before any endpoint", got)
	}

	_, err = e.c.Client.CoreV1().Services(e.ns).Patch(ctx, "co-canary", types.MergePatchType,
		[]byte(`{"spec":{"selector":{"tier":null}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.waitEndpoints(key, "h2", want)
	e.waitReady("h2", rollout.PodsReady{Hash: "h2", Replicas: 2, Ready: 2})
}

func TestScaleErrors(t *testing.T) {
	tests := []struct {
		name     string
		workload *api.Workload
		port     int32
		wantErr  string
		// metric is the object label whose apply error count goes to 1 ("" = none)
		metric string
		// applied: the ReplicaSet is applied before the error
		applied bool
	}{
		{"canary service missing", &api.Workload{RevisionHistoryLimit: 10, CanaryService: "nope"}, 8080,
			`service ` + "%s" + `/nope: services "nope" not found`, objectService, true},
		{"no port and no service", nil, 0, "the first container declares no port", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			key := e.key("co")
			spec := testRollout(e.ns, "co", "shop/co:v2", 1, tt.port, tt.workload)
			err := e.m.Scale(context.Background(), rollout.ScaleWorkloads{Rollout: key, Sets: []rollout.WorkloadSet{set(rollout.RoleCanary, "h2", 1, spec)}})
			want := strings.ReplaceAll(tt.wantErr, "%s", e.ns)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("Scale error = %v, want %q", err, want)
			}
			if tt.metric != "" {
				if got := testutil.ToFloat64(e.m.metrics.applyErrors.WithLabelValues(tt.metric)); got != 1 {
					t.Errorf("sluice_workload_apply_errors_total{object=%q} = %v, want 1", tt.metric, got)
				}
			}
			if n := len(e.listRS(LabelRollout + "=co")); (n == 1) != tt.applied {
				t.Errorf("%d ReplicaSets after the error, want applied=%v", n, tt.applied)
			}
		})
	}
}

// TestZoneChangeRepublishes: an endpoint's zone is its node's, so a node
// relabelled to another zone changes the rollout's endpoints.
func TestZoneChangeRepublishes(t *testing.T) {
	e := newEnv(t)
	key := e.key("co")
	ctx := context.Background()
	e.scale(key, set(rollout.RoleStable, "h1", 1, testRollout(e.ns, "co", "shop/co:v1", 1, 8080, nil)))
	want := e.podAddrs(e.bindPods("h1", 1, 5), "8080") // node-5, zone-c
	e.waitEndpoints(key, "h1", want)

	relabel := func(zone string) {
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, ZoneLabel, zone)
		if _, err := e.c.Client.CoreV1().Nodes().Patch(ctx, "node-5", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { relabel(zoneOfNode("node-5")) })
	calls := e.rec.endpointCalls()
	relabel("zone-x")
	for a := range want {
		want[a] = "zone-x"
	}
	e.waitEndpoints(key, "h1", want)
	kubetest.Eventually(t, 10*time.Second, "OnEndpoints after the zone change", func() (bool, string) {
		return e.rec.endpointCalls() > calls, fmt.Sprintf("%d calls", e.rec.endpointCalls())
	})
}

// TestStartFailsWithoutAccess: informers that cannot list (here a rejected
// token; in a cluster, missing RBAC) fail Start after SyncTimeout instead
// of hanging the daemon.
func TestStartFailsWithoutAccess(t *testing.T) {
	c := kubetest.Shared(t)
	cfg := rest.CopyConfig(c.Config)
	cfg.BearerToken = "not-a-token"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(Options{Client: client, SyncTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t0 := time.Now()
	err = m.Start(ctx)
	if err == nil || !strings.Contains(err.Error(), "did not sync") {
		t.Fatalf("Start = %v, want a sync error", err)
	}
	if d := time.Since(t0); d > 10*time.Second {
		t.Errorf("Start took %v with SyncTimeout 1s", d)
	}
}
