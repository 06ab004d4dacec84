package kube

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sluice-dev/sluice/internal/kubetest"
	"github.com/sluice-dev/sluice/scheduler"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The shared control plane's nodes: node-i is in zone-{a,b,c}[i%3].
const (
	zoneANode, zoneASibling = "node-0", "node-3"
	zoneBNode               = "node-1"
)

func TestBindsReplicaSetSpreadOverZones(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	b := startBinder(t, c, Options{})
	lbl := rolloutLabels("web", "h1")
	// Two pods of the version already run in zone-a (placed by hand). Scores
	// alone would put some of the ReplicaSet's four there too; the maxSkew
	// filter sends them to zones b and c. The ReplicaSet's selector leaves the
	// hand-placed pods out: had it adopted them, a controller-manager that
	// synced it before its pod cache had them would create six, then delete
	// two of the eight by its own ranking, which knows nothing of zones.
	tmpl := podTemplate(DefaultSchedulerName, "100m", lbl)
	for i, node := range []string{zoneANode, zoneASibling} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("early-%d", i), Namespace: ns, Labels: lbl}, Spec: tmpl.Spec}
		pod.Spec.NodeName = node
		if _, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rsLabels := map[string]string{"test-set": "web-h1"}
	maps.Copy(rsLabels, lbl)
	createReplicaSet(t, c.Client, ns, "web-h1", 4, podTemplate(DefaultSchedulerName, "100m", rsLabels))

	var pods []corev1.Pod
	kubetest.Eventually(t, 30*time.Second, "6 pods Running with IPs", func() (bool, string) {
		var all int
		pods, all = runningPods(t, c.Client, ns, "rollouts-pod-template-hash=h1")
		return len(pods) == 6, fmt.Sprintf("%d running of %d: %s", len(pods), all, nodesOf(pods))
	})
	zones := zoneCounts(t, c.Client, pods)
	for _, z := range []string{"zone-a", "zone-b", "zone-c"} {
		if zones[z] != 2 {
			t.Errorf("zone %s has %d pods, want 2 (maxSkew 1 over 3 zones): %v", z, zones[z], zones)
		}
	}
	if got := testutil.ToFloat64(b.metrics.bound); got != 4 {
		t.Errorf("sluice_binder_pods_bound_total = %v, want 4 (2 of 6 were placed by hand)", got)
	}
}

func TestCordonedAndTaintedNodesGetNoPods(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	patchNode(t, c, zoneANode, `{"spec":{"unschedulable":true}}`, `{"spec":{"unschedulable":null}}`)
	patchNode(t, c, zoneBNode, `{"spec":{"taints":[{"key":"dedicated","value":"db","effect":"NoSchedule"}]}}`, `{"spec":{"taints":null}}`)
	startBinder(t, c, Options{})
	createReplicaSet(t, c.Client, ns, "api-h2", 6, podTemplate(DefaultSchedulerName, "100m", rolloutLabels("api", "h2")))

	var pods []corev1.Pod
	kubetest.Eventually(t, 30*time.Second, "6 pods Running", func() (bool, string) {
		var all int
		pods, all = runningPods(t, c.Client, ns, "rollouts-pod-template-hash=h2")
		return len(pods) == 6, fmt.Sprintf("%d running of %d: %s", len(pods), all, nodesOf(pods))
	})
	for _, p := range pods {
		if p.Spec.NodeName == zoneANode || p.Spec.NodeName == zoneBNode {
			t.Errorf("pod %s placed on %s, which is cordoned or tainted: %s", p.Name, p.Spec.NodeName, nodesOf(pods))
		}
	}
}

// patchNode applies a merge patch to a node and the undo patch when the
// test ends.
func patchNode(t *testing.T, c *kubetest.Cluster, node, patch, undo string) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.Client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := c.Client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(undo), metav1.PatchOptions{}); err != nil {
			t.Errorf("undo patch of %s: %v", node, err)
		}
	})
}

func TestUnschedulablePodReportedThenBoundWhenANodeFits(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	var mu sync.Mutex
	var told []PendingPod
	b := startBinder(t, c, Options{OnUnschedulable: func(p PendingPod) { mu.Lock(); told = append(told, p); mu.Unlock() }})
	ctx := context.Background()
	tmpl := podTemplate(DefaultSchedulerName, "16", map[string]string{"app": "big"})
	pod, err := c.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: ns, Labels: tmpl.Labels}, Spec: tmpl.Spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	const want = "nodes are available: 6 Insufficient cpu."
	kubetest.Eventually(t, 30*time.Second, "PodScheduled=False, reason Unschedulable, with the diagnosis", func() (bool, string) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled {
				ok := cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable && strings.HasPrefix(cond.Message, "0/6 ") && strings.HasSuffix(cond.Message, want)
				return ok, fmt.Sprintf("%+v", cond)
			}
		}
		return false, fmt.Sprintf("no PodScheduled condition; node %q", p.Spec.NodeName)
	})
	kubetest.Eventually(t, 30*time.Second, "a Warning FailedScheduling event from sluice", func() (bool, string) {
		evs, err := c.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range evs.Items {
			if e.Regarding.Name == pod.Name && e.Reason == "FailedScheduling" && e.Type == corev1.EventTypeWarning && e.ReportingController == FieldManager && strings.HasSuffix(e.Note, want) {
				return true, ""
			}
			seen = append(seen, e.Reason+": "+e.Note)
		}
		return false, strings.Join(seen, "; ")
	})
	why, ok := b.Why(ns, pod.Name)
	if !ok || !strings.HasSuffix(why.Message, want) {
		t.Errorf("Why = %+v, %v; want the diagnosis", why, ok)
	}
	mu.Lock()
	if len(told) != 1 || !strings.HasSuffix(told[0].Message, want) {
		t.Errorf("OnUnschedulable calls = %+v, want one with the diagnosis", told)
	}
	mu.Unlock()

	// A node big enough arrives: the pod is retried and bound there.
	createNode(t, c.Client, "big-node", "zone-a", "32", nil)
	kubetest.Eventually(t, 30*time.Second, "the pod bound to big-node and Running", func() (bool, string) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Spec.NodeName == "big-node" && p.Status.Phase == corev1.PodRunning, fmt.Sprintf("node %q phase %s", p.Spec.NodeName, p.Status.Phase)
	})
	if _, ok := b.Why(ns, pod.Name); ok {
		t.Error("Why still reports the bound pod as pending")
	}
}

func TestDrainedNodesPodsReplacedElsewhere(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	startBinder(t, c, Options{})
	ctx := context.Background()
	createReplicaSet(t, c.Client, ns, "cart-h3", 6, podTemplate(DefaultSchedulerName, "100m", rolloutLabels("cart", "h3")))
	sel := "rollouts-pod-template-hash=h3"
	var pods []corev1.Pod
	kubetest.Eventually(t, 30*time.Second, "6 pods Running", func() (bool, string) {
		var all int
		pods, all = runningPods(t, c.Client, ns, sel)
		return len(pods) == 6, fmt.Sprintf("%d running of %d", len(pods), all)
	})

	// Drain node-0: cordon it, delete its pods.
	patchNode(t, c, zoneANode, `{"spec":{"unschedulable":true}}`, `{"spec":{"unschedulable":null}}`)
	drained := 0
	for _, p := range pods {
		if p.Spec.NodeName == zoneANode {
			drained++
			if err := c.Client.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if drained == 0 {
		t.Fatalf("no pod on %s to drain: %s", zoneANode, nodesOf(pods))
	}
	kubetest.Eventually(t, 30*time.Second, "6 pods Running again, none on the drained node, 2 per zone", func() (bool, string) {
		pods, all := runningPods(t, c.Client, ns, sel)
		if len(pods) != 6 || all != 6 {
			return false, fmt.Sprintf("%d running of %d: %s", len(pods), all, nodesOf(pods))
		}
		for _, p := range pods {
			if p.Spec.NodeName == zoneANode {
				return false, "a pod on the drained node: " + nodesOf(pods)
			}
		}
		z := zoneCounts(t, c.Client, pods)
		return z["zone-a"] == 2 && z["zone-b"] == 2 && z["zone-c"] == 2, fmt.Sprintf("zones %v: %s", z, nodesOf(pods))
	})
}

// bindUnderFeet binds the pod itself, before the binder does.
func TestBindConflictWhenPodBoundUnderTheBindersFeet(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	b, err := New(Options{Client: c.Client, InitialBackoff: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var (
		once          sync.Once
		mu            sync.Mutex // guards chosen and other, set by the bind goroutine
		chosen, other string
	)
	b.beforeBind = func(ctx context.Context, pod *corev1.Pod, node string) {
		once.Do(func() {
			mu.Lock()
			chosen, other = node, zoneASibling
			if node == zoneASibling {
				other = zoneANode
			}
			target := other
			mu.Unlock()
			err := c.Client.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
				ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name},
				Target:     corev1.ObjectReference{Kind: "Node", Name: target},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Errorf("bind under the binder's feet: %v", err)
			}
		})
	}
	runBinder(t, c.Client, b)
	tmpl := podTemplate(DefaultSchedulerName, "100m", nil)
	ctx := context.Background()
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns}, Spec: tmpl.Spec}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 30*time.Second, "the conflict counted and the graph holding the pod where it really is", func() (bool, string) {
		conflicts := testutil.ToFloat64(b.metrics.bindErrors.WithLabelValues(bindErrConflict))
		var node string
		_ = b.sched.Update(func(g *scheduler.Graph) error { node, _ = g.PodNode(ns + "/p"); return nil })
		mu.Lock()
		defer mu.Unlock()
		return conflicts == 1 && node == other && node != "", fmt.Sprintf("conflicts %v, graph has the pod on %q (binder chose %q, bound to %q)", conflicts, node, chosen, other)
	})
	p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if p.Spec.NodeName != other {
		t.Errorf("pod on %q, want %q (bound under the binder's feet)", p.Spec.NodeName, other)
	}
	if _, pending := b.Why(ns, "p"); pending {
		t.Error("the pod bound by someone else is still pending in the binder")
	}
}

func TestNodeDeletedBeforeTheBindIsRetriedElsewhere(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	pool := map[string]string{"pool": "extra"}
	createNode(t, c.Client, "extra-0", "zone-a", "8", pool)
	createNode(t, c.Client, "extra-1", "zone-b", "8", pool)
	b, err := New(Options{Client: c.Client, InitialBackoff: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var (
		once    sync.Once
		deleted = make(chan string, 1) // the node deleted under the bind
	)
	b.beforeBind = func(ctx context.Context, pod *corev1.Pod, node string) {
		once.Do(func() {
			deleted <- node
			if err := c.Client.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}); err != nil {
				t.Errorf("delete node mid-cycle: %v", err)
			}
			// Hold the bind until the node delete reached the graph.
			for deadline := time.Now().Add(10 * time.Second); b.nodeKnown(node) && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	runBinder(t, c.Client, b)
	tmpl := podTemplate(DefaultSchedulerName, "100m", nil)
	tmpl.Spec.NodeSelector = pool
	ctx := context.Background()
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns}, Spec: tmpl.Spec}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var gone string
	select {
	case gone = <-deleted:
	case <-time.After(30 * time.Second):
		t.Fatal("the binder never tried to bind the pod")
	}
	kubetest.Eventually(t, 30*time.Second, "the pod bound to the remaining extra node", func() (bool, string) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "p", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Spec.NodeName != "" && p.Spec.NodeName != gone, fmt.Sprintf("on %q, deleted %q", p.Spec.NodeName, gone)
	})
	if got := testutil.ToFloat64(b.metrics.bindErrors.WithLabelValues(bindErrNodeGone)); got != 1 {
		t.Errorf("node_gone bind errors = %v, want 1", got)
	}
}

func TestDeletedPendingPodLeavesTheBinder(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	b := startBinder(t, c, Options{})
	ctx := context.Background()
	tmpl := podTemplate(DefaultSchedulerName, "100", nil) // no node has 100 CPUs
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "huge", Namespace: ns}, Spec: tmpl.Spec}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 30*time.Second, "the pod parked as unschedulable", func() (bool, string) {
		why, ok := b.Why(ns, "huge")
		parked := testutil.ToFloat64(b.metrics.unschedulableNo)
		return ok && why.Message != "" && parked == 1, fmt.Sprintf("why %+v (%v), parked %v", why, ok, parked)
	})
	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, "huge", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 30*time.Second, "the deleted pod gone from the binder", func() (bool, string) {
		_, ok := b.Why(ns, "huge")
		parked := testutil.ToFloat64(b.metrics.unschedulableNo)
		return !ok && parked == 0 && len(b.Pending(ns, nil)) == 0, fmt.Sprintf("pending %v, parked %v", ok, parked)
	})
}

// A terminating pod keeps its node's resources but not its place in the
// spread: the replacements of two pods terminating in zone-a go to every
// zone, as kube-scheduler's PodTopologySpread places them.
func TestTerminatingPodsLeaveTheSpread(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	startBinder(t, c, Options{})
	ctx := context.Background()
	lbl := rolloutLabels("pay", "h5")
	const hold = "sluice.test/hold" // keeps the deleted pods terminating
	tmpl := podTemplate(DefaultSchedulerName, "100m", lbl)
	for i, node := range []string{zoneANode, zoneASibling} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("old-%d", i), Namespace: ns, Labels: lbl, Finalizers: []string{hold}}, Spec: tmpl.Spec}
		pod.Spec.NodeName = node
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_, _ = c.Client.CoreV1().Pods(ns).Patch(context.Background(), pod.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		})
		if err := c.Client.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	createReplicaSet(t, c.Client, ns, "pay-h5", 3, tmpl)

	kubetest.Eventually(t, 30*time.Second, "3 live pods, one per zone", func() (bool, string) {
		pods, all := runningPods(t, c.Client, ns, "rollouts-pod-template-hash=h5")
		if len(pods) != 3 {
			return false, fmt.Sprintf("%d running of %d", len(pods), all)
		}
		z := zoneCounts(t, c.Client, pods)
		return z["zone-a"] == 1 && z["zone-b"] == 1 && z["zone-c"] == 1, fmt.Sprintf("zones %v (the terminating pods in zone-a counted in the spread?): %s", z, nodesOf(pods))
	})
}

// Two sluices scoped to different namespaces of one cluster each bind only
// their own namespaces' pods: before Options.Namespaces they raced for every
// pod of scheduler name sluice (the TestKubeBaseline flake of CI: tests'
// daemons binding each other's pods).
func TestBinderBindsOnlyItsNamespaces(t *testing.T) {
	c := kubetest.Shared(t)
	mine, theirs := c.Namespace(t), c.Namespace(t)
	ctx := context.Background()
	a := startBinder(t, c, Options{Namespaces: []string{mine}})
	tmpl := podTemplate(DefaultSchedulerName, "100m", nil)
	for _, ns := range []string{theirs, mine} { // theirs first: queued before mine
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns}, Spec: tmpl.Spec}
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	nodeOf := func(ns string) string {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "p", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p.Spec.NodeName
	}
	kubetest.Eventually(t, 30*time.Second, "the pod of its own namespace bound", func() (bool, string) {
		n := nodeOf(mine)
		return n != "", "node " + n
	})
	if n := nodeOf(theirs); n != "" {
		t.Fatalf("the binder of %s bound a pod of %s to %s", mine, theirs, n)
	}
	b := startBinder(t, c, Options{Namespaces: []string{theirs}})
	kubetest.Eventually(t, 30*time.Second, "the other namespace's pod bound by its own binder", func() (bool, string) {
		n := nodeOf(theirs)
		return n != "", "node " + n
	})
	// The API shows the bind before the binder's goroutine, back from
	// the call, counts it: wait for the counts, then check they stay.
	counts := func() (bool, string) {
		ga, gb := testutil.ToFloat64(a.metrics.bound), testutil.ToFloat64(b.metrics.bound)
		return ga == 1 && gb == 1, fmt.Sprintf("pods bound: %v by the binder of %s, %v by the binder of %s; want 1 each", ga, mine, gb, theirs)
	}
	kubetest.Eventually(t, 10*time.Second, "each binder counted its one bind", counts)
	time.Sleep(200 * time.Millisecond)
	if ok, msg := counts(); !ok {
		t.Error(msg)
	}
}
