package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/internal/kubetest"
)

// kubeBlueGreenYAML is a blue-green rollout in Kubernetes mode: Services
// kbg (active) and kbg-preview, xDS hosts kbg.e2e and preview.kbg.e2e, one
// preview pod, web gates before and after the switch; and the gate.
func kubeBlueGreenYAML(ns, version, gateURL string) string {
	return blueGreenRollout{Name: "kbg", Namespace: ns, Version: version, Active: "kbg", Preview: "kbg-preview",
		Annotations: "sluice.io/xds: |\n  host: kbg.e2e\n  previewHost: preview.kbg.e2e\n",
		Extra:       "previewReplicaCount: 1\nscaleDownDelaySeconds: 3\nabortScaleDownDelaySeconds: 3\n" + gatedAnalyses,
	}.yaml() + "---\n" + gateTemplate(ns, gateURL)
}

// TestKubeBlueGreen: a blue-green rollout against a real control plane.
// What is checked is what the cluster and the clients hold: the preview
// ReplicaSet's size, each Service's selector and the EndpointSlices the
// EndpointSlice controller derives from it (what kube-proxy routes by),
// and real gRPC xDS clients of the active and the preview host. A passing
// pre- and post-promotion analysis promotes; a failing post-promotion
// analysis switches the active Service back; a failing pre-promotion
// analysis never switches it.
func TestKubeBlueGreen(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	startPodBackends(t, c, ns)
	for _, svc := range []string{"kbg", "kbg-preview"} {
		createService(t, c, ns, svc, map[string]string{"app": "kbg"})
	}
	var preOK, postOK atomic.Bool
	preOK.Store(true)
	postOK.Store(true)
	gate := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok := r.URL.Path == "/pre" && preOK.Load() || r.URL.Path == "/post" && postOK.Load()
		fmt.Fprintf(w, `{"ok": %t}`, ok)
	}))
	t.Cleanup(gate.Close)
	const v3, v4 = "e2e/app:v3", "e2e/app:v4"
	push := func(repo *gitRepo, v string) string {
		return repo.push(v, map[string]string{"rollouts/kbg.yaml": kubeBlueGreenYAML(ns, v, gate.URL)})
	}
	repo := newGitRepo(t)
	push(repo, v1)
	d := startDaemon(t, repo, "--kubernetes", "--kubeconfig", c.Kubeconfig, "--watch-namespaces", ns)
	key := ns + "/kbg"
	d.waitStatus(key, 60*time.Second, "stable v1", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v1
	})
	h1 := replicaSetOf(t, c, ns, "kbg", v1).Labels["rollouts-pod-template-hash"]
	waitServes(t, c, ns, "kbg", h1)
	waitServes(t, c, ns, "kbg-preview", h1)

	// v2: one preview pod, the preview Service and host on it; the active
	// Service and host stay on v1 while the rollout waits for promotion.
	commit := push(repo, v2)
	d.waitStatus(key, 90*time.Second, "paused for promotion", func(s httpapi.RolloutStatus) bool {
		return s.Commit == commit && s.Phase == rollout.PhasePaused
	})
	rs2 := replicaSetOf(t, c, ns, "kbg", v2)
	if *rs2.Spec.Replicas != 1 {
		t.Errorf("preview ReplicaSet at %d replicas; want previewReplicaCount 1", *rs2.Spec.Replicas)
	}
	h2 := rs2.Labels["rollouts-pod-template-hash"]
	waitServes(t, c, ns, "kbg-preview", h2)
	waitServes(t, c, ns, "kbg", h1)
	requireOnly(t, d, "preview.kbg.e2e", v2)
	requireOnly(t, d, "kbg.e2e", v1)

	// Promotion: v2 at full size first, then the active Service switches.
	d.cli("promote", key)
	d.waitStatus(key, 90*time.Second, "v2 promoted", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v2
	})
	promoted := time.Now()
	waitServes(t, c, ns, "kbg", h2)
	requireOnly(t, d, "kbg.e2e", v2)
	if rs := replicaSetOf(t, c, ns, "kbg", v2); *rs.Spec.Replicas != 2 {
		t.Errorf("v2 at %d replicas after promotion; want 2", *rs.Spec.Replicas)
	}
	waitReplicaSet(t, c, ns, "kbg", v1, 0, 30*time.Second)
	if held := time.Since(promoted); held < 2*time.Second {
		t.Errorf("old version scaled down %v after the promotion; want ≥ scaleDownDelaySeconds (3s)", held)
	}

	// v3: the post-promotion analysis fails after the switch; the active
	// Service goes back to v2, which kept running, and v3 goes to 0.
	postOK.Store(false)
	commit = push(repo, v3)
	d.waitStatus(key, 90*time.Second, "v3 paused for promotion", func(s httpapi.RolloutStatus) bool {
		return s.Commit == commit && s.Phase == rollout.PhasePaused
	})
	d.cli("promote", key)
	d.waitStatus(key, 90*time.Second, "aborted by the post-promotion analysis", func(s httpapi.RolloutStatus) bool {
		return s.Aborted && s.Phase == rollout.PhaseDegraded && s.StableVersion == v2
	})
	waitServes(t, c, ns, "kbg", h2)
	requireOnly(t, d, "kbg.e2e", v2)
	waitReplicaSet(t, c, ns, "kbg", v3, 0, 30*time.Second)

	// v4: the pre-promotion analysis fails; nothing ever switched.
	postOK.Store(true)
	preOK.Store(false)
	commit = push(repo, v4)
	st := d.waitStatus(key, 90*time.Second, "aborted by the pre-promotion analysis", func(s httpapi.RolloutStatus) bool {
		return s.Commit == commit && s.Aborted && s.Phase == rollout.PhaseDegraded
	})
	if st.StableVersion != v2 || st.Weights.Canary != 0 {
		t.Errorf("after the pre-promotion failure: stable %s, weights %+v; want v2 at 100 %%", st.StableVersion, st.Weights)
	}
	waitServes(t, c, ns, "kbg", h2)
	requireOnly(t, d, "kbg.e2e", v2)
}

// createService creates a ClusterIP Service on kubePort.
func createService(t *testing.T, c *kubetest.Cluster, ns, name string, sel map[string]string) {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.ServiceSpec{Selector: sel, Ports: []corev1.ServicePort{{Port: kubePort}}},
	}
	if _, err := c.Client.CoreV1().Services(ns).Create(ctxFor(t, 10*time.Second), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitServes waits until the Service selects hash and its EndpointSlices
// hold Ready endpoints of that hash's pods only.
func waitServes(t *testing.T, c *kubetest.Cluster, ns, svc, hash string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, why := servesOnly(t, c, ns, svc, hash)
		if got {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("service %s does not serve only %s after 30s: %s", svc, hash, why)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func servesOnly(t *testing.T, c *kubetest.Cluster, ns, svc, hash string) (bool, string) {
	ctx := ctxFor(t, 10*time.Second)
	s, err := c.Client.CoreV1().Services(ns).Get(ctx, svc, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Spec.Selector["rollouts-pod-template-hash"]; got != hash {
		return false, "selector hash " + got
	}
	ips := map[string]bool{}
	for _, p := range kubePods(t, c, ns, selector("kbg", hash)) {
		ips[p.Status.PodIP] = true
	}
	slices, err := c.Client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, sl := range slices.Items {
		for _, ep := range sl.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			for _, a := range ep.Addresses {
				if !ips[a] {
					return false, "endpoint " + a + " is not a pod of " + hash
				}
				n++
			}
		}
	}
	return n > 0, fmt.Sprintf("%d ready endpoints", n)
}
