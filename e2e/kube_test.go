package e2e

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/gateway/probe"
	"github.com/sluice-dev/sluice/internal/kubetest"
)

// replicaSetOf finds the rollout's ReplicaSet whose pods run image, or nil.
func replicaSetOf(t *testing.T, c *kubetest.Cluster, ns, name, image string) *appsv1.ReplicaSet {
	t.Helper()
	list, err := c.Client.AppsV1().ReplicaSets(ns).List(ctxFor(t, 10*time.Second), metav1.ListOptions{LabelSelector: selector(name, "")})
	if err != nil {
		t.Fatal(err)
	}
	for i, rs := range list.Items {
		if rs.Spec.Template.Spec.Containers[0].Image == image {
			return &list.Items[i]
		}
	}
	return nil
}

// waitReplicaSet waits until the ReplicaSet of image has want replicas,
// all of them Ready, and returns it.
func waitReplicaSet(t *testing.T, c *kubetest.Cluster, ns, name, image string, want int32, timeout time.Duration) *appsv1.ReplicaSet {
	t.Helper()
	var rs *appsv1.ReplicaSet
	kubetest.Eventually(t, timeout, fmt.Sprintf("ReplicaSet of %s at %d ready", image, want), func() (bool, string) {
		rs = replicaSetOf(t, c, ns, name, image)
		if rs == nil {
			return false, "no ReplicaSet"
		}
		s := rs.Status
		return *rs.Spec.Replicas == want && s.Replicas == want && s.ReadyReplicas == want,
			fmt.Sprintf("%s: spec %d, replicas %d, ready %d", rs.Name, *rs.Spec.Replicas, s.Replicas, s.ReadyReplicas)
	})
	return rs
}

// TestKubeCanary is a Kubernetes-mode canary through the binary against a
// real control plane: sluice creates v1's ReplicaSet and places its pods
// over the three zones; a push of v2 creates the canary's ReplicaSet at
// the size its weight needs, the real gRPC xDS clients reach the canary
// pods' backends in the declared share, and promotion moves all traffic
// to v2 before the old ReplicaSet goes to 0, without one failed call.
func TestKubeCanary(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	startPodBackends(t, c, ns)
	repo := newGitRepo(t)
	spec := kubeRollout{Name: "kc", Namespace: ns, Host: "kc.e2e", Version: v1, Replicas: 4,
		Steps: "- setWeight: 25\n- pause: {}\n", Canary: "scaleDownDelaySeconds: 3\n"}
	repo.push("v1", map[string]string{"rollouts/kc.yaml": spec.yaml()})
	d := startDaemon(t, repo, "--kubernetes", "--kubeconfig", c.Kubeconfig, "--watch-namespaces", ns)

	rs1 := waitReplicaSet(t, c, ns, "kc", v1, 4, 60*time.Second)
	pods := kubePods(t, c, ns, selector("kc", rs1.Labels["rollouts-pod-template-hash"]))
	for _, p := range pods {
		if p.Spec.SchedulerName != "sluice" || p.Spec.NodeName == "" {
			t.Errorf("pod %s: scheduler %q, node %q; want bound by sluice", p.Name, p.Spec.SchedulerName, p.Spec.NodeName)
		}
	}
	if z := zonesOf(t, c, pods); len(z) != 3 {
		t.Errorf("v1's 4 pods over zones %v; want all three zones used", z)
	}
	d.waitStatus(ns+"/kc", 60*time.Second, "stable v1", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v1
	})
	lg := startLoad(t, probe.LoadOptions{XDSServer: d.xdsAddr, Host: spec.Host, Clients: 2, Rate: 150})
	if o := observe(t, lg, 20); o.Class[probe.DefaultClass].Share(v1) != 1 {
		t.Fatalf("before the push: %v", o.Class[probe.DefaultClass])
	}

	spec.Version = v2
	commit := repo.push("v2", map[string]string{"rollouts/kc.yaml": spec.yaml()})
	rs2 := waitReplicaSet(t, c, ns, "kc", v2, 1, 60*time.Second)
	st := d.waitStatus(ns+"/kc", 60*time.Second, "canary at 25 %", func(s httpapi.RolloutStatus) bool {
		return s.Commit == commit && s.Phase == rollout.PhasePaused && s.Weights.Canary == 25
	})
	if st.CanaryVersion != v2 {
		t.Fatalf("canary: %+v", st)
	}
	if got := replicaSetOf(t, c, ns, "kc", v1); *got.Spec.Replicas != 4 {
		t.Errorf("stable scaled to %d during the canary; want 4 (no dynamicStableScale)", *got.Spec.Replicas)
	}
	o := observe(t, lg, 80)
	def := o.Class[probe.DefaultClass]
	if got := def.Share(v2); math.Abs(got-0.25) > 0.08 {
		t.Errorf("clients observed %.3f on the canary pods of %d calls; declared 0.25", got, def.Answered())
	}

	lg.ResetWindow()
	d.cli("promote", ns+"/kc")
	waitReplicaSet(t, c, ns, "kc", v2, 4, 60*time.Second)
	d.waitStatus(ns+"/kc", 60*time.Second, "promoted", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v2
	})
	promoted := time.Now()
	if got := replicaSetOf(t, c, ns, "kc", v1); *got.Spec.Replicas == 0 {
		t.Errorf("the old stable was scaled to 0 by the time the promotion was ACKed; want it kept for scaleDownDelaySeconds")
	}
	waitReplicaSet(t, c, ns, "kc", v1, 0, 30*time.Second)
	if held := time.Since(promoted); held < 2*time.Second {
		t.Errorf("old stable scaled down %v after the promotion settled; want ≥ scaleDownDelaySeconds (3s)", held)
	}
	if rs2.Name != "kc-"+rs2.Labels["rollouts-pod-template-hash"] {
		t.Errorf("canary ReplicaSet name %q, want kc-<pod-template-hash>", rs2.Name)
	}
	o = lg.Observe()
	failed := 0
	for _, cnt := range o.Class[probe.DefaultClass] {
		failed += cnt.Failed
	}
	failed += o.Class[probe.DefaultClass][""].OK
	if failed > 0 || o.Class[probe.DefaultClass].Share(v2) == 0 {
		t.Errorf("across the promotion: %d failed calls, split %v; want none failed", failed, o.Class[probe.DefaultClass])
	}
}

// kubeStart pushes v1 of spec, starts sluice in Kubernetes mode (with
// extra flags) and waits until v1 is Healthy on its pods.
func kubeStart(t *testing.T, c *kubetest.Cluster, spec kubeRollout, files map[string]string, flags ...string) (*gitRepo, *daemon) {
	t.Helper()
	repo := newGitRepo(t)
	files = maps.Clone(files)
	if files == nil {
		files = map[string]string{}
	}
	files["rollouts/"+spec.Name+".yaml"] = spec.yaml()
	repo.push("v1", files)
	d := startDaemon(t, repo, append([]string{"--kubernetes", "--kubeconfig", c.Kubeconfig, "--watch-namespaces", spec.Namespace}, flags...)...)
	d.waitStatus(spec.Namespace+"/"+spec.Name, 60*time.Second, "stable v1", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == spec.Version
	})
	return repo, d
}

// TestKubeProgressDeadline: a canary whose pods are bound but never become
// Ready (kwok holds pods labelled neverready) never gets traffic; past
// progressDeadlineSeconds the rollout aborts with the reason, and the
// canary goes to 0 after abortScaleDownDelaySeconds.
//
// "Never gets traffic" is read from the routes, not from the calls: a raw
// ADS client (routeWatch) sees every RouteConfiguration sent, and no
// default route may give the canary's cluster a weight. Calls cannot
// show it: kwok gives neverready pods no IP, so no client ever reaches
// v2, and the gateway fills a side without endpoints with stable's, so a
// canary share would still be answered by v1 without a failure. Shown by
// making State.Traffic route 50 % to the canary while a step waits for
// its pods: the route check fails ("routes version 2 sent 268ms after the
// push: <ns>/kd/canary at weight 50"), while the status check and the
// calls (all 1,174 answered by v1) pass. The calls are still checked:
// none may fail across the abort and the canary's scale-down.
func TestKubeProgressDeadline(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	startPodBackends(t, c, ns)
	spec := kubeRollout{Name: "kd", Namespace: ns, Host: "kd.e2e", Version: v1, Replicas: 2,
		Steps: "- setWeight: 50\n- pause: {}\n", Spec: "progressDeadlineSeconds: 4\nprogressDeadlineAbort: true\n",
		Canary: "abortScaleDownDelaySeconds: 1\n"}
	repo, d := kubeStart(t, c, spec, nil)
	routes := watchRoutes(t, d.xdsAddr, spec.Host)
	lg, calls := startLoggedLoad(t, probe.LoadOptions{XDSServer: d.xdsAddr, Host: spec.Host, Clients: 2, Rate: 100})
	observe(t, lg, 20)

	spec.Version, spec.PodLabels = v2, `neverready: "true"`
	pushed := time.Now()
	commit := repo.push("v2 whose pods never get Ready", map[string]string{"rollouts/kd.yaml": spec.yaml()})
	waiting := d.waitStatus(ns+"/kd", 30*time.Second, "wait for canary pods", func(s httpapi.RolloutStatus) bool {
		return s.Commit == commit && strings.Contains(s.Message, "waiting for canary pods: 0/1 ready")
	})
	if waiting.Weights.Canary != 0 {
		t.Fatalf("traffic moved before the canary pods were Ready: %+v", waiting.Weights)
	}
	st := d.waitStatus(ns+"/kd", 30*time.Second, "abort on the progress deadline", func(s httpapi.RolloutStatus) bool {
		return s.Aborted && s.Phase == rollout.PhaseDegraded
	})
	if !strings.Contains(st.Message, "progress deadline") {
		t.Errorf("abort message %q does not name the progress deadline", st.Message)
	}
	waitReplicaSet(t, c, ns, "kd", v2, 0, 30*time.Second)
	// Calls go on past the scale-down for longer than a call may take
	// (the load generator's 5 s timeout).
	time.Sleep(6 * time.Second)

	splits, err := routes.seen()
	if err != nil {
		t.Errorf("route watch: %v", err)
	}
	canaryCluster := ns + "/kd/canary"
	for _, sp := range splits {
		if w := sp.weights[canaryCluster]; w > 0 {
			t.Errorf("routes version %s sent %s after the push: %s at weight %d (split %v); its pods were never Ready",
				sp.version, sp.at.Sub(pushed).Round(time.Millisecond), canaryCluster, w, sp.weights)
		}
	}
	if first := splits[0].weights; first[ns+"/kd/stable"] != 100 || len(first) != 1 {
		t.Errorf("first routes seen: default split %v; want all on %s/kd/stable", first, ns)
	}
	after := calls.since(pushed)
	got := tally(after)
	t.Logf("%d route versions seen; %d calls from the push to the end: %v answered OK, %d failed, %d without a version",
		len(splits), len(after), got.answered, got.failed, got.noVersion)
	if got.failed > 0 || got.noVersion > 0 || len(got.answered) != 1 || got.answered[v1] == 0 {
		t.Errorf("calls from the push to the end: %v answered OK, %d failed, %d without a version; want every one answered by %s",
			got.answered, got.failed, got.noVersion, v1)
	}
}

// TestKubeAnalysisAbort: a failed analysis sends traffic back to stable;
// the canary keeps its pods until the clients ACKed that and
// abortScaleDownDelaySeconds passed, then goes to 0.
func TestKubeAnalysisAbort(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	startPodBackends(t, c, ns)
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"successRate": 0.5}`)
	}))
	t.Cleanup(failing.Close)
	spec := kubeRollout{Name: "ka", Namespace: ns, Host: "ka.e2e", Version: v1, Replicas: 2,
		Steps:  "- setWeight: 50\n- analysis:\n    templates: [{templateName: web-success}]\n- pause: {}\n",
		Canary: "abortScaleDownDelaySeconds: 3\n"}
	template := strings.Replace(webTemplate("web-success", failing.URL), "name: web-success", "name: web-success\n  namespace: "+ns, 1)
	repo, d := kubeStart(t, c, spec, map[string]string{"analysis/web.yaml": template})
	spec.Version = v2
	repo.push("v2", map[string]string{"rollouts/ka.yaml": spec.yaml()})
	d.waitStatus(ns+"/ka", 60*time.Second, "canary at 50 %", func(s httpapi.RolloutStatus) bool {
		return s.CanaryVersion == v2 && s.Weights.Canary == 50
	})
	st := d.waitStatus(ns+"/ka", 60*time.Second, "abort settled", func(s httpapi.RolloutStatus) bool {
		return s.Aborted && s.Phase == rollout.PhaseDegraded
	})
	settled := time.Now()
	if st.Weights.Canary != 0 {
		t.Fatalf("aborted with weights %+v", st.Weights)
	}
	if rs := replicaSetOf(t, c, ns, "ka", v2); rs == nil || *rs.Spec.Replicas == 0 {
		t.Errorf("the canary was scaled to 0 by the time the abort was ACKed; want its pods kept for abortScaleDownDelaySeconds")
	}
	waitReplicaSet(t, c, ns, "ka", v2, 0, 30*time.Second)
	if held := time.Since(settled); held < 2*time.Second {
		t.Errorf("canary scaled down %v after the abort settled; want ≥ abortScaleDownDelaySeconds (3s)", held)
	}
	if got := replicaSetOf(t, c, ns, "ka", v1); *got.Spec.Replicas != 2 || got.Status.ReadyReplicas != 2 {
		t.Errorf("stable after the abort: spec %d, ready %d; want 2 and 2", *got.Spec.Replicas, got.Status.ReadyReplicas)
	}
}

// TestKubeUnschedulable: a canary no node can hold stays Pending with the
// scheduler's reason (PodScheduled=False, a FailedScheduling event), and
// the rollout pauses at the progress deadline with the reason in its
// status; traffic never moves.
func TestKubeUnschedulable(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	startPodBackends(t, c, ns)
	spec := kubeRollout{Name: "ku", Namespace: ns, Host: "ku.e2e", Version: v1, Replicas: 2,
		Steps: "- setWeight: 50\n- pause: {}\n", Spec: "progressDeadlineSeconds: 3\n"}
	repo, d := kubeStart(t, c, spec, nil)
	spec.Version = v2
	doc := strings.Replace(spec.yaml(), "ports: [{containerPort: 8080}]", "ports: [{containerPort: 8080}]\n        resources: {requests: {cpu: \"100\"}}", 1)
	repo.push("v2 too big for any node", map[string]string{"rollouts/ku.yaml": doc})
	st := d.waitStatus(ns+"/ku", 60*time.Second, "paused at the progress deadline", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhasePaused && strings.Contains(s.Message, "progress deadline")
	})
	if st.Weights.Canary != 0 || st.Aborted {
		t.Fatalf("unschedulable canary: weights %+v, aborted %v", st.Weights, st.Aborted)
	}
	var canary *rollout.ReplicaSetStatus
	for i, rs := range st.ReplicaSets {
		if rs.Version == v2 {
			canary = &st.ReplicaSets[i]
		}
	}
	if canary == nil || canary.Pending != 1 || !strings.Contains(canary.Unschedulable, "Insufficient cpu") {
		t.Fatalf("status ReplicaSets %+v: want the canary with 1 pending pod and the scheduler's reason", st.ReplicaSets)
	}
	pods := kubePods(t, c, ns, selector("ku", canary.Hash))
	if len(pods) != 1 || pods[0].Spec.NodeName != "" {
		t.Fatalf("canary pods %d, node %q; want 1 unbound", len(pods), pods[0].Spec.NodeName)
	}
	cond := ""
	for _, pc := range pods[0].Status.Conditions {
		if pc.Type == corev1.PodScheduled {
			cond = string(pc.Status) + " " + pc.Reason + ": " + pc.Message
		}
	}
	if !strings.HasPrefix(cond, "False Unschedulable: 0/6 nodes are available") {
		t.Errorf("PodScheduled condition %q; want False Unschedulable with kube-scheduler's wording", cond)
	}
	events, err := c.Client.CoreV1().Events(ns).List(ctxFor(t, 10*time.Second), metav1.ListOptions{FieldSelector: "involvedObject.name=" + pods[0].Name})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range events.Items {
		found = found || (e.Reason == "FailedScheduling" && e.Type == corev1.EventTypeWarning)
	}
	if !found {
		t.Errorf("no FailedScheduling event for %s: %+v", pods[0].Name, events.Items)
	}
	if out := d.cli("get", "rollout", ns+"/ku"); !strings.Contains(out, "pending: 0/6 nodes are available") {
		t.Errorf("sluice get rollout does not say why the canary waits:\n%s", out)
	}
}

// TestKubeScaling: setCanaryScale sizes the canary apart from its weight;
// with dynamicStableScale stable shrinks as traffic leaves it.
func TestKubeScaling(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	startPodBackends(t, c, ns)
	spec := kubeRollout{Name: "ks", Namespace: ns, Host: "ks.e2e", Version: v1, Replicas: 4,
		Steps:  "- setCanaryScale: {replicas: 3}\n- setWeight: 25\n- pause: {}\n- setCanaryScale: {matchTrafficWeight: true}\n- setWeight: 50\n- pause: {}\n",
		Canary: "dynamicStableScale: true\n"}
	repo, d := kubeStart(t, c, spec, nil)
	spec.Version = v2
	repo.push("v2", map[string]string{"rollouts/ks.yaml": spec.yaml()})
	d.waitStatus(ns+"/ks", 60*time.Second, "first pause", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhasePaused && s.Weights.Canary == 25
	})
	waitReplicaSet(t, c, ns, "ks", v2, 3, 30*time.Second) // setCanaryScale replicas: 3, not ceil(4 × 25 %) = 1
	waitReplicaSet(t, c, ns, "ks", v1, 3, 30*time.Second) // dynamicStableScale: ceil(4 × 75 %)
	d.cli("promote", ns+"/ks")
	d.waitStatus(ns+"/ks", 60*time.Second, "second pause", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhasePaused && s.Weights.Canary == 50
	})
	waitReplicaSet(t, c, ns, "ks", v2, 2, 30*time.Second) // matchTrafficWeight: ceil(4 × 50 %)
	waitReplicaSet(t, c, ns, "ks", v1, 2, 30*time.Second)
}

// TestKubeKillAndDrain: sluice killed with SIGKILL mid-canary comes back to
// the same ReplicaSets and step; a node drained meanwhile (cordoned, its
// pods deleted) gets no pod back: the ReplicaSet controller's replacements
// are placed by sluice elsewhere.
func TestKubeKillAndDrain(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	startPodBackends(t, c, ns)
	state := filepath.Join(t.TempDir(), "state")
	spec := kubeRollout{Name: "kk", Namespace: ns, Host: "kk.e2e", Version: v1, Replicas: 3, Steps: "- setWeight: 34\n- pause: {}\n"}
	repo, d := kubeStart(t, c, spec, nil, "--state-dir", state)
	spec.Version = v2
	repo.push("v2", map[string]string{"rollouts/kk.yaml": spec.yaml()})
	before := d.waitStatus(ns+"/kk", 60*time.Second, "canary paused", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhasePaused && s.Weights.Canary == 34
	})
	rsBefore := kubeReplicaSetNames(t, c, ns, "kk")
	podsBefore := podNames(kubePods(t, c, ns, selector("kk", "")))

	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-d.exited
	d = startDaemon(t, repo, "--kubernetes", "--kubeconfig", c.Kubeconfig, "--watch-namespaces", ns, "--state-dir", state)
	after := d.waitStatus(ns+"/kk", 60*time.Second, "canary paused after the restart", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhasePaused
	})
	if after.StepIndex != before.StepIndex || after.Weights != before.Weights || after.CanaryVersion != v2 {
		t.Errorf("after SIGKILL and restart: step %d weights %+v canary %s; before: step %d weights %+v", after.StepIndex, after.Weights, after.CanaryVersion, before.StepIndex, before.Weights)
	}
	if got := kubeReplicaSetNames(t, c, ns, "kk"); !slices.Equal(got, rsBefore) {
		t.Errorf("ReplicaSets after the restart %v, before %v; want the same, no duplicates", got, rsBefore)
	}
	if got := podNames(kubePods(t, c, ns, selector("kk", ""))); !slices.Equal(got, podsBefore) {
		t.Errorf("pods after the restart %v, before %v; want the same pods", got, podsBefore)
	}

	// Drain the node of one stable pod.
	stable := replicaSetOf(t, c, ns, "kk", v1)
	victim := kubePods(t, c, ns, selector("kk", stable.Labels["rollouts-pod-template-hash"]))[0]
	node := victim.Spec.NodeName
	if _, err := c.Client.CoreV1().Nodes().Patch(ctxFor(t, 10*time.Second), node, types.StrategicMergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = c.Client.CoreV1().Nodes().Patch(context.Background(), node, types.StrategicMergePatchType, []byte(`{"spec":{"unschedulable":false}}`), metav1.PatchOptions{})
	})
	for _, p := range kubePods(t, c, ns, selector("kk", "")) {
		if p.Spec.NodeName == node {
			if err := c.Client.CoreV1().Pods(ns).Delete(ctxFor(t, 10*time.Second), p.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	kubetest.Eventually(t, 60*time.Second, "replacement pods placed off the drained node "+node, func() (bool, string) {
		pods := kubePods(t, c, ns, selector("kk", ""))
		ready := 0
		for _, p := range pods {
			if p.Spec.NodeName == node {
				return false, p.Name + " still on " + node
			}
			if p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				ready++
			}
		}
		return ready == len(podsBefore), fmt.Sprintf("%d of %d pods running off %s", ready, len(podsBefore), node)
	})
}

func kubeReplicaSetNames(t *testing.T, c *kubetest.Cluster, ns, name string) []string {
	t.Helper()
	list, err := c.Client.AppsV1().ReplicaSets(ns).List(ctxFor(t, 10*time.Second), metav1.ListOptions{LabelSelector: selector(name, "")})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, rs := range list.Items {
		names = append(names, rs.Name)
	}
	slices.Sort(names)
	return names
}

func podNames(pods []corev1.Pod) []string {
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	return names
}

// TestKubeSchedulePodsOff: with --schedule-pods=false the pods keep the
// default scheduler name and the real kube-scheduler places them; the
// rollout runs as with sluice's scheduler.
func TestKubeSchedulePodsOff(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	startPodBackends(t, c, ns)
	kubetest.StartKubeScheduler(t, c, 50)
	spec := kubeRollout{Name: "kx", Namespace: ns, Host: "kx.e2e", Version: v1, Replicas: 3, Steps: "- setWeight: 34\n- pause: {}\n"}
	_, _ = kubeStart(t, c, spec, nil, "--schedule-pods=false")
	for _, p := range kubePods(t, c, ns, selector("kx", "")) {
		if p.Spec.SchedulerName != corev1.DefaultSchedulerName || p.Spec.NodeName == "" {
			t.Errorf("pod %s: scheduler %q, node %q; want placed by kube-scheduler", p.Name, p.Spec.SchedulerName, p.Spec.NodeName)
		}
	}
}
