package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/internal/kubetest"
)

// multiClusterBlueGreen is a blue-green rollout kbg across the fleet in
// waves of one cluster each: Services kbg (active) and kbg-preview in
// every cluster, one preview pod, a pre-promotion gate that asks about
// {{args.cluster}}, and a promotion after 2s.
func multiClusterBlueGreen(ns, version, gateURL string) string {
	return fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: kbg
  namespace: %[1]s
  annotations:
    sluice.io/clusters: "region in (eu,us)"
    sluice.io/waves: "1,2,100%%"
    sluice.io/wave-soak: 1s
    sluice.io/on-wave-failure: rollback-all
spec:
  replicas: 2
  selector: {matchLabels: {app: kbg}}
  template:
    metadata: {labels: {app: kbg}}
    spec:
      containers: [{name: app, image: %[2]q, ports: [{containerPort: %[3]d}]}]
  strategy:
    blueGreen:
      activeService: kbg
      previewService: kbg-preview
      previewReplicaCount: 1
      autoPromotionSeconds: 2
      scaleDownDelaySeconds: 2
      abortScaleDownDelaySeconds: 2
      prePromotionAnalysis: {templates: [{templateName: cluster-gate}]}
---
`, ns, version, kubePort) + clusterGateTemplate(ns, gateURL)
}

// switchWatch records, from outside sluice, in which order the clusters
// first run a preview pod of a version (a ReplicaSet of it scaled up) and
// first switch their active Service kbg to it, and what the other
// clusters held at each moment.
type switchWatch struct {
	f       *fleet
	version string
	mu      sync.Mutex
	preview []string // clusters in the order their preview started
	active  []string // clusters in the order kbg switched to the version
	// atSwitch is, for each switch, what every cluster held then.
	atSwitch map[string]map[string]bgHeld
	stop     chan struct{}
	done     chan struct{}
}

// bgHeld is what one cluster holds of kbg: whether the watched version has
// a ReplicaSet scaled up, the replicas and hash of every ReplicaSet by
// image, and the hashes the active and preview Services select.
type bgHeld struct {
	up              bool
	replicas        map[string]int32
	replicasHash    map[string]string
	active, preview string
}

func (f *fleet) watchSwitch(t *testing.T, version string) *switchWatch {
	w := &switchWatch{f: f, version: version, atSwitch: map[string]map[string]bgHeld{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			w.look()
			select {
			case <-w.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(w.close)
	return w
}

// look reads every cluster once and records what started or switched.
func (w *switchWatch) look() {
	now := map[string]bgHeld{}
	for name, c := range w.f.clusters {
		now[name] = heldIn(c, w.f.ns, w.version)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for name, h := range now {
		if h.up && !contains(w.preview, name) {
			w.preview = append(w.preview, name)
		}
		if h.active != "" && h.active == h.hashOf(w.version) && !contains(w.active, name) {
			w.active = append(w.active, name)
			w.atSwitch[name] = now
		}
	}
}

// hashOf is the pod-template hash of version's ReplicaSet ("" if none).
func (h bgHeld) hashOf(version string) string { return h.replicasHash[version] }

// heldIn reads kbg's ReplicaSets and active Service in one cluster; a
// cluster that cannot be asked holds nothing as far as the watch knows.
func heldIn(c *kubetest.Cluster, ns, version string) bgHeld {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h := bgHeld{replicas: map[string]int32{}, replicasHash: map[string]string{}}
	list, err := c.Client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: selector("kbg", "")})
	if err != nil {
		return h
	}
	for _, rs := range list.Items {
		img := rs.Spec.Template.Spec.Containers[0].Image
		h.replicas[img] = *rs.Spec.Replicas
		h.replicasHash[img] = rs.Labels["rollouts-pod-template-hash"]
		if img == version && *rs.Spec.Replicas > 0 {
			h.up = true
		}
	}
	if svc, err := c.Client.CoreV1().Services(ns).Get(ctx, "kbg", metav1.GetOptions{}); err == nil {
		h.active = svc.Spec.Selector["rollouts-pod-template-hash"]
	}
	if svc, err := c.Client.CoreV1().Services(ns).Get(ctx, "kbg-preview", metav1.GetOptions{}); err == nil {
		h.preview = svc.Spec.Selector["rollouts-pod-template-hash"]
	}
	return h
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (w *switchWatch) close() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// orders stops the watch and returns the preview and switch orders.
func (w *switchWatch) orders() (preview, active string) {
	w.close()
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.preview, ","), strings.Join(w.active, ",")
}

// TestKubeMultiClusterBlueGreen runs a blue-green rollout across three
// real control planes in waves, checked from outside (each cluster's
// ReplicaSets and its Services' selectors and EndpointSlices, read through
// that cluster's own client):
//   - v2: the clusters preview and switch in wave order eu-1, us-1, eu-2;
//     a later wave's cluster has no v2 ReplicaSet scaled up before its
//     wave opens; when us-1 switches, eu-1 is switched with v1 still at
//     full size (rollback-all keeps the blue side) and eu-2 is still on
//     v1; at the end every cluster serves v2 only;
//   - v3 with a pre-promotion gate that fails only in us-1: eu-1, which
//     had switched to v3, switches back to v2, v3 goes to 0 there, and
//     eu-2 never runs a v3 pod.
func TestKubeMultiClusterBlueGreen(t *testing.T) {
	f := startFleet(t)
	for _, c := range f.clusters {
		for _, svc := range []string{"kbg", "kbg-preview"} {
			createService(t, c, f.ns, svc, map[string]string{"app": "kbg"})
		}
	}
	var failIn atomic.Value
	failIn.Store("")
	gate := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"ok": %t}`, strings.TrimPrefix(r.URL.Path, "/") != failIn.Load().(string))
	}))
	t.Cleanup(gate.Close)
	const v3 = "e2e/app:v3"
	repo := newGitRepo(t)
	push := func(version string) {
		repo.push(version, map[string]string{"rollouts/kbg.yaml": multiClusterBlueGreen(f.ns, version, gate.URL)})
	}
	push(v1)
	d := startDaemon(t, repo, f.flags...)
	clusters := []string{"eu-1", "us-1", "eu-2"}
	hashes := map[string]string{} // a version's pod-template hash (the same in every cluster)
	for _, c := range clusters {
		// 120 s: under CI load one cluster's second pod took over 60 s
		// to be Ready (3 control planes on 2 cores; not traced further).
		d.waitStatus(f.ns+"/kbg@"+c, 120*time.Second, "stable v1", func(s httpapi.RolloutStatus) bool {
			return s.Phase == rollout.PhaseHealthy && s.StableVersion == v1
		})
		hashes[v1] = replicaSetOf(t, f.clusters[c], f.ns, "kbg", v1).Labels["rollouts-pod-template-hash"]
		waitServes(t, f.clusters[c], f.ns, "kbg", hashes[v1])
		waitServes(t, f.clusters[c], f.ns, "kbg-preview", hashes[v1])
	}

	// v2: preview, switch and hold in wave order.
	watch := f.watchSwitch(t, v2)
	pushed := time.Now()
	push(v2)
	kubetest.Eventually(t, 90*time.Second, "us-1 switches to v2", func() (bool, string) {
		watch.mu.Lock()
		defer watch.mu.Unlock()
		return contains(watch.active, "us-1"), strings.Join(watch.active, ",")
	})
	watch.mu.Lock()
	at := watch.atSwitch["us-1"]
	watch.mu.Unlock()
	if eu1 := at["eu-1"]; eu1.active != eu1.hashOf(v2) || eu1.replicas[v1] != 2 || eu1.replicas[v2] != 2 {
		t.Errorf("eu-1 when us-1 switched: active %s, replicas %v; want switched to v2 with v1 kept at 2 (rollback-all)", eu1.active, eu1.replicas)
	}
	if eu2 := at["eu-2"]; eu2.up || eu2.active != hashes[v1] || eu2.preview != hashes[v1] {
		t.Errorf("eu-2 when us-1 switched: v2 scaled up %v, active %s, preview %s; want no v2 pod and both Services on v1 (%s)", eu2.up, eu2.active, eu2.preview, hashes[v1])
	}
	for _, c := range clusters {
		d.waitStatus(f.ns+"/kbg@"+c, 90*time.Second, "v2 promoted", func(s httpapi.RolloutStatus) bool {
			return s.Phase == rollout.PhaseHealthy && s.StableVersion == v2
		})
	}
	preview, active := watch.orders()
	if preview != "eu-1,us-1,eu-2" || active != "eu-1,us-1,eu-2" {
		t.Errorf("previews started in order %s, switches in order %s; want eu-1,us-1,eu-2 for both", preview, active)
	}
	hashes[v2] = replicaSetOf(t, f.clusters["eu-1"], f.ns, "kbg", v2).Labels["rollouts-pod-template-hash"]
	for _, c := range clusters {
		waitServes(t, f.clusters[c], f.ns, "kbg", hashes[v2])
		waitReplicaSet(t, f.clusters[c], f.ns, "kbg", v1, 0, 30*time.Second)
	}
	t.Logf("v2: every cluster switched and v1 gone %v after the push", time.Since(pushed).Round(10*time.Millisecond))

	// v3: the pre-promotion gate fails in us-1; eu-1 switches back.
	failIn.Store("us-1")
	watch = f.watchSwitch(t, v3)
	push(v3)
	d.waitStatus(f.ns+"/kbg@us-1", 90*time.Second, "v3 aborted in us-1", func(s httpapi.RolloutStatus) bool {
		return s.Aborted && s.CanaryVersion == v3
	})
	d.waitStatus(f.ns+"/kbg@eu-1", 30*time.Second, "eu-1 back on v2", func(s httpapi.RolloutStatus) bool {
		return s.Aborted && s.StableVersion == v2 && strings.Contains(s.Message, "wave 2 failed in us-1")
	})
	waitServes(t, f.clusters["eu-1"], f.ns, "kbg", hashes[v2])
	waitReplicaSet(t, f.clusters["eu-1"], f.ns, "kbg", v3, 0, 30*time.Second)
	d.waitStatus(f.ns+"/kbg@eu-2", 30*time.Second, "eu-2 never started", func(s httpapi.RolloutStatus) bool {
		return strings.Contains(s.Message, "never started: wave 2 failed in us-1")
	})
	preview, active = watch.orders()
	if active != "eu-1" {
		t.Errorf("v3 switched in %q; want eu-1 only (us-1 failed before its switch)", active)
	}
	if strings.Contains(preview, "eu-2") {
		t.Errorf("eu-2 ran a v3 preview (previews: %s)", preview)
	}
	for _, c := range []string{"us-1", "eu-2"} {
		waitServes(t, f.clusters[c], f.ns, "kbg", hashes[v2])
	}
}
