package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/internal/kubetest"
)

// routedMultiClusterRollout is a canary across the fleet in waves of one
// cluster each whose traffic moves by the cluster routers: the HTTPRoute
// and the VirtualService "mr", the user's objects in every cluster.
func routedMultiClusterRollout(ns, version string, pause int) string {
	return fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: mr
  namespace: %[1]s
  annotations:
    sluice.io/clusters: "region in (eu,us)"
    sluice.io/waves: "1,2,100%%"
    sluice.io/wave-soak: 1s
spec:
  replicas: 2
  selector: {matchLabels: {app: mr}}
  template:
    metadata: {labels: {app: mr}}
    spec:
      containers: [{name: app, image: %[2]q, ports: [{containerPort: 8080}]}]
  strategy:
    canary:
      stableService: mr-stable
      canaryService: mr-canary
      trafficRouting:
        plugins:
          argoproj-labs/gatewayAPI: {httpRoute: mr}
        istio:
          virtualService: {name: mr, routes: [primary]}
      steps:
      - setWeight: 50
      - pause: {duration: %[3]ds}
`, ns, version, pause)
}

// clusterWeights is the canary's weight in one cluster's objects, as its
// own apiserver holds them: in the HTTPRoute's managed rule and in the
// VirtualService's route "primary".
type clusterWeights struct{ route, vs int64 }

// canaryWeights reads the canary Service's weight in the cluster's
// HTTPRoute and VirtualService mr (0 when it has none); ok is false when
// the cluster could not be read.
func canaryWeights(w *routeWorld) (clusterWeights, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	route, err := w.gw.GatewayV1().HTTPRoutes(w.ns).Get(ctx, "mr", metav1.GetOptions{})
	if err != nil {
		return clusterWeights{}, false
	}
	var cw clusterWeights
	for _, rule := range route.Spec.Rules {
		for _, b := range rule.BackendRefs {
			if rule.Name == nil && b.Name == "mr-canary" {
				cw.route = int64(ptr.Deref(b.Weight, 1))
			}
		}
	}
	vs, err := w.dyn.Resource(virtualServices).Namespace(w.ns).Get(ctx, "mr", metav1.GetOptions{})
	if err != nil {
		return clusterWeights{}, false
	}
	routes, _, _ := unstructured.NestedSlice(vs.Object, "spec", "http")
	for _, r := range routes {
		route, _ := r.(map[string]any)
		if route["name"] != "primary" {
			continue
		}
		dests, _, _ := unstructured.NestedSlice(route, "route")
		for _, d := range dests {
			dm, _ := d.(map[string]any)
			if host, _, _ := unstructured.NestedString(dm, "destination", "host"); host == "mr-canary" {
				cw.vs, _, _ = unstructured.NestedInt64(dm, "weight")
			}
		}
	}
	return cw, true
}

// fleetRouteWatch records, from outside sluice, each cluster's canary weights
// every 100 ms: the order in which the clusters' HTTPRoutes first carry
// 50 % to the canary, what every cluster held at that moment, and every
// weight each VirtualService was seen with.
type fleetRouteWatch struct {
	*poller
	mu     sync.Mutex
	order  []string
	at     map[string]map[string]clusterWeights // cluster → what every cluster held when it first reached 50
	vsSeen map[string]map[int64]bool
}

func watchFleetRoutes(t *testing.T, worlds map[string]*routeWorld) *fleetRouteWatch {
	w := &fleetRouteWatch{at: map[string]map[string]clusterWeights{}, vsSeen: map[string]map[int64]bool{}}
	for name := range worlds {
		w.vsSeen[name] = map[int64]bool{}
	}
	w.poller = startPoller(t, func() {
		now := map[string]clusterWeights{}
		for name, rw := range worlds {
			if cw, ok := canaryWeights(rw); ok {
				now[name] = cw
			}
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		for name, cw := range now {
			w.vsSeen[name][cw.vs] = true
			if _, seen := w.at[name]; !seen && cw.route == 50 {
				w.at[name] = now
				w.order = append(w.order, name)
			}
		}
	})
	return w
}

// TestKubeMultiClusterRoutes runs a rollout across three real control
// planes whose traffic moves by the cluster routers: each part writes the
// HTTPRoute and the VirtualService of its own cluster (the user's objects,
// named alike in every cluster), verified by that cluster's gateway
// (gatewayapitest's fake controller, one per cluster, as in
// TestKubeClusterRoutes). Checked from outside, through each cluster's
// own client: v2's waves reach the routes in order eu-1, us-1, eu-2; when
// a cluster's HTTPRoute first sends 50 % to the canary, the clusters of
// later waves still send everything to stable and those of earlier waves
// hold at 100 % canary; every cluster's VirtualService carried 50 % too;
// at the end every cluster sends 100 % to its stable Service, which
// selects v2's pods. Then v3, with sluice killed and restarted while
// us-1's apiserver is down in wave 2: us-1's part's traffic is not
// refused (no xds-nack), and once us-1 is back the rollout finishes.
func TestKubeMultiClusterRoutes(t *testing.T) {
	start := time.Now()
	f := startFleet(t)
	worlds := map[string]*routeWorld{}
	for name, c := range f.clusters {
		w := newRouteWorld(t, c, f.ns)
		w.services(t, "mr", "mr-stable", "mr-canary")
		w.httpRoute(t, "mr", "mr-stable")
		w.virtualService(t, "mr", "mr-stable", "mr-canary")
		worlds[name] = w
	}
	order := []string{"eu-1", "us-1", "eu-2"}
	repo := newGitRepo(t)
	repo.push("v1", map[string]string{"rollouts/mr.yaml": routedMultiClusterRollout(f.ns, v1, 2)})
	flags := append([]string{"--state-dir", filepath.Join(t.TempDir(), "state"), "--cluster-probe-interval", "1s", "--ack-timeout", "1m"}, f.flags...)
	d := startDaemon(t, repo, flags...)
	const user, vsUser = "static[static-files:1] ", "static[static-files:-] "
	for _, c := range order {
		d.waitStatus(f.ns+"/mr@"+c, 60*time.Second, c+" stable v1", func(s httpapi.RolloutStatus) bool {
			return s.Phase == rollout.PhaseHealthy && s.StableVersion == v1
		})
		worlds[c].waitRoutes(t, "mr", user+"-[mr-stable:100]", vsUser+"primary[mr-stable:100 mr-canary:0]")
	}
	t.Logf("fleet, routes and v1 ready in %v", time.Since(start).Round(10*time.Millisecond))

	watch := watchFleetRoutes(t, worlds)
	pushed := time.Now()
	repo.push("v2", map[string]string{"rollouts/mr.yaml": routedMultiClusterRollout(f.ns, v2, 2)})
	for _, c := range order {
		d.waitStatus(f.ns+"/mr@"+c, 90*time.Second, c+" promoted to v2", func(s httpapi.RolloutStatus) bool {
			return s.Phase == rollout.PhaseHealthy && s.StableVersion == v2
		})
	}
	for _, c := range order {
		worlds[c].waitRoutes(t, "mr", user+"-[mr-stable:100]", vsUser+"primary[mr-stable:100 mr-canary:0]")
	}
	t.Logf("v2: every cluster's routes back at 100 %% stable %v after the push", time.Since(pushed).Round(10*time.Millisecond))
	watch.close()

	if got := strings.Join(watch.order, ","); got != strings.Join(order, ",") {
		t.Fatalf("the clusters' HTTPRoutes first sent 50 %% to the canary in order %q; want %q", got, strings.Join(order, ","))
	}
	for i, c := range order {
		at := watch.at[c]
		for j, other := range order {
			got, ok := at[other]
			switch {
			case !ok:
				t.Errorf("when %s reached 50 %%, %s could not be read", c, other)
			case j < i && got.route != 100:
				t.Errorf("when %s (wave %d) reached 50 %%, %s (wave %d) sent %d %% to the canary; want 100 (held at full until the last wave)", c, i+1, other, j+1, got.route)
			case j > i && (got.route != 0 || got.vs != 0):
				t.Errorf("when %s (wave %d) reached 50 %%, %s (wave %d) already sent %+v to the canary; want 0 before its wave", c, i+1, other, j+1, got)
			}
		}
		if !watch.vsSeen[c][50] {
			t.Errorf("%s's VirtualService never carried 50 %% to the canary (seen %v)", c, watch.vsSeen[c])
		}
	}
	for _, c := range order {
		rs := replicaSetOf(t, f.clusters[c], f.ns, "mr", v2)
		if rs == nil {
			t.Fatalf("%s has no ReplicaSet of v2", c)
		}
		kubetest.Eventually(t, 30*time.Second, c+"'s stable Service selecting v2's pods", func() (bool, string) {
			svc, err := f.clusters[c].Client.CoreV1().Services(f.ns).Get(ctxFor(t, 10*time.Second), "mr-stable", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return svc.Spec.Selector["rollouts-pod-template-hash"] == rs.Labels["rollouts-pod-template-hash"], fmt.Sprint(svc.Spec.Selector)
		})
	}

	// v3, restarted while us-1's apiserver is down during its wave: the
	// restored us-1 part's traffic waits for us-1 (no NACK), is written
	// there once it is back, and the rollout finishes.
	repo.push("v3", map[string]string{"rollouts/mr.yaml": routedMultiClusterRollout(f.ns, v3, 8)})
	kubetest.Eventually(t, 60*time.Second, "us-1's HTTPRoute at 50 % (wave 2)", func() (bool, string) {
		cw, _ := canaryWeights(worlds["us-1"])
		return cw.route == 50, fmt.Sprint(cw)
	})
	us1 := f.clusters["us-1"]
	if err := us1.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-d.exited
	d = startDaemon(t, repo, flags...)
	d.waitStatus(f.ns+"/mr@us-1", 30*time.Second, "us-1 held: unreachable", func(s httpapi.RolloutStatus) bool {
		return strings.Contains(s.Message, "cluster us-1 unreachable")
	})
	if err := us1.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	for _, c := range order {
		d.waitStatus(f.ns+"/mr@"+c, 90*time.Second, c+" promoted to v3", func(s httpapi.RolloutStatus) bool {
			return s.Phase == rollout.PhaseHealthy && s.StableVersion == v3
		})
		worlds[c].waitRoutes(t, "mr", user+"-[mr-stable:100]", vsUser+"primary[mr-stable:100 mr-canary:0]")
	}
	t.Logf("v3: every cluster at 100 %% stable %v after us-1's apiserver was back", time.Since(restarted).Round(10*time.Millisecond))
	for _, line := range strings.Split(d.log.String(), "\n") {
		if strings.Contains(line, `"rollout":"`+f.ns+`/mr@us-1"`) && (strings.Contains(line, `"event":"xds-nack"`) || strings.Contains(line, `"msg":"publish traffic"`)) {
			t.Errorf("the restarted sluice refused us-1's part's traffic while us-1 was not connected: %s", line)
		}
	}
	t.Logf("whole test %v", time.Since(start).Round(10*time.Millisecond))
}
