package kube

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluice-dev/sluice/internal/kubetest"
	"github.com/sluice-dev/sluice/scheduler"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

func TestMain(m *testing.M) { kubetest.Main(m, 6) }

// startBinder runs a binder against the shared control plane until the
// test ends and waits until its graph holds every node.
func startBinder(t *testing.T, c *kubetest.Cluster, opts Options) *Binder {
	t.Helper()
	if opts.Client == nil {
		opts.Client = c.Client
	}
	if opts.InitialBackoff == 0 {
		opts.InitialBackoff = 100 * time.Millisecond
	}
	if opts.Metrics == nil {
		opts.Metrics = prometheus.NewRegistry()
	}
	if opts.Logger == nil && os.Getenv("SLUICE_TEST_LOG") != "" {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	b, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return runBinder(t, c.Client, b)
}

// runBinder runs b until the test ends, waiting until it synced.
func runBinder(t *testing.T, client kubernetes.Interface, b *Binder) *Binder {
	t.Helper()
	removeNotReadyTaints(t, client)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 30*time.Second, "binder graph holds every node", func() (bool, string) {
		n := b.numNodes()
		return n >= len(nodes.Items), fmt.Sprintf("%d of %d nodes", n, len(nodes.Items))
	})
	return b
}

// podTemplate is a pod of the given CPU request for scheduler sched.
func podTemplate(sched, cpu string, lbl map[string]string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: lbl},
		Spec: corev1.PodSpec{
			SchedulerName: sched,
			Containers: []corev1.Container{{
				Name: "app", Image: "app:v1",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
			}},
		},
	}
}

// rolloutLabels are the labels of one version of a sluice rollout.
func rolloutLabels(rollout, hash string) map[string]string {
	return map[string]string{LabelRollout: rollout, LabelHash: hash}
}

// createReplicaSet creates a ReplicaSet of n pods with the template.
func createReplicaSet(t testing.TB, client kubernetes.Interface, ns, name string, n int32, tmpl corev1.PodTemplateSpec) *appsv1.ReplicaSet {
	t.Helper()
	rs, err := client.AppsV1().ReplicaSets(ns).Create(context.Background(), &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: &n,
			Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels},
			Template: tmpl,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// runningPods lists the pods of selector in ns that are Running with an
// IP (kwok's doing once they are bound).
func runningPods(t testing.TB, client kubernetes.Interface, ns, selector string) (running []corev1.Pod, all int) {
	t.Helper()
	pods, err := client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
			running = append(running, p)
		}
	}
	return running, len(pods.Items)
}

// zoneCounts counts pods per zone of their node.
func zoneCounts(t testing.TB, client kubernetes.Interface, pods []corev1.Pod) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, p := range pods {
		n, err := client.CoreV1().Nodes().Get(context.Background(), p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out[n.Labels[scheduler.LabelZone]]++
	}
	return out
}

// createNode adds a kwok node (kwok makes it Ready and runs its pods)
// and deletes it when the test ends.
func createNode(t testing.TB, client kubernetes.Interface, name, zone, cpu string, extra map[string]string) {
	t.Helper()
	if err := newNode(context.Background(), client, name, zone, cpu, extra); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// newNode creates a node that kwok manages, like run-controlplane.sh's.
func newNode(ctx context.Context, client kubernetes.Interface, name, zone, cpu string, extra map[string]string) error {
	lbl := map[string]string{"type": "kwok", "kubernetes.io/hostname": name, scheduler.LabelZone: zone, scheduler.LabelRegion: "region-1"}
	for k, v := range extra {
		lbl[k] = v
	}
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse("32Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	created, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbl, Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0", "kwok.x-k8s.io/node": "fake"}},
		Status:     corev1.NodeStatus{Allocatable: res, Capacity: res},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create node %s: %w", name, err)
	}
	return removeNotReadyTaint(ctx, client, created)
}

// notReadyTaint is the taint the apiserver's TaintNodesByCondition
// admission puts on every new node. The control plane's node lifecycle
// controller takes it off once kwok reports the node Ready, but only on
// its next pass (--node-monitor-period, 5 s); the tests take it off at
// once, so that a node they add is usable when they expect it.
const notReadyTaint = "node.kubernetes.io/not-ready"

// removeNotReadyTaint takes notReadyTaint off node n.
func removeNotReadyTaint(ctx context.Context, client kubernetes.Interface, n *corev1.Node) error {
	for {
		kept := slices.DeleteFunc(slices.Clone(n.Spec.Taints), func(t corev1.Taint) bool { return t.Key == notReadyTaint })
		if len(kept) == len(n.Spec.Taints) {
			return nil
		}
		n = n.DeepCopy()
		n.Spec.Taints = kept
		_, err := client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		if !apierrors.IsConflict(err) {
			if err != nil {
				return fmt.Errorf("untaint node %s: %w", n.Name, err)
			}
			return nil
		}
		if n, err = client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("untaint node: %w", err)
		}
	}
}

// removeNotReadyTaints takes notReadyTaint off every node.
func removeNotReadyTaints(t testing.TB, client kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range nodes.Items {
		if err := removeNotReadyTaint(ctx, client, &nodes.Items[i]); err != nil {
			t.Fatal(err)
		}
	}
}

// nodesOf lists the node of each pod, for failure messages.
func nodesOf(pods []corev1.Pod) string {
	var s []string
	for _, p := range pods {
		s = append(s, p.Name+"@"+p.Spec.NodeName)
	}
	return strings.Join(s, " ")
}
