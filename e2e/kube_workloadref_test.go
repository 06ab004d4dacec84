package e2e

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/controller/workloadref"
	"github.com/sluice-dev/sluice/internal/kubetest"
)

// refDeploymentReplicas is the size of every test Deployment before
// sluice touches it; the rollouts run refRolloutReplicas pods.
const (
	refDeploymentReplicas = 3
	refRolloutReplicas    = 2
)

// refDeployment is a Deployment of image whose template the rollouts run
// (the test control plane runs no Deployment controller: the Deployment
// is the user's object, read and scaled, and its replicas are what this
// test checks).
func refDeployment(ns, name, image string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](refDeploymentReplicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image,
					Ports: []corev1.ContainerPort{{ContainerPort: kubePort}}}}},
			},
		},
	}
}

// refRollout is a Rollout that runs Deployment name's template.
func refRollout(ns, name, scaleDown string) string {
	return fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  replicas: %[4]d
  workloadRef: {apiVersion: apps/v1, kind: Deployment, name: %[1]s%[3]s}
  strategy:
    canary:
      scaleDownDelaySeconds: 1
      steps:
      - setWeight: 50
      - pause: {}
      trafficRouting:
        plugins:
          sluice.io/xds: {host: %[1]s.e2e}
`, name, ns, prefixOpt(", scaleDown: ", scaleDown), refRolloutReplicas)
}

// replicaHistory records every spec.replicas a Deployment had, read from
// a watch from outside sluice.
type replicaHistory struct {
	mu   sync.Mutex
	seen map[string][]int32 // Deployment name → its replicas, in order, repeats dropped
}

func watchReplicas(t *testing.T, c *kubetest.Cluster, ns string) *replicaHistory {
	t.Helper()
	h := &replicaHistory{seen: map[string][]int32{}}
	w, err := c.Client.AppsV1().Deployments(ns).Watch(ctxFor(t, 10*time.Minute), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	go func() {
		for ev := range w.ResultChan() {
			d, ok := ev.Object.(*appsv1.Deployment)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			h.mu.Lock()
			s := h.seen[d.Name]
			if len(s) == 0 || s[len(s)-1] != *d.Spec.Replicas {
				h.seen[d.Name] = append(s, *d.Spec.Replicas)
			}
			h.mu.Unlock()
		}
	}()
	return h
}

func (h *replicaHistory) of(name string) []int32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.seen[name])
}

func waitDeploymentReplicas(t *testing.T, c *kubetest.Cluster, ns, name string, want int32) *appsv1.Deployment {
	t.Helper()
	var d *appsv1.Deployment
	kubetest.Eventually(t, 60*time.Second, fmt.Sprintf("Deployment %s at %d replicas", name, want), func() (bool, string) {
		var err error
		if d, err = c.Client.AppsV1().Deployments(ns).Get(ctxFor(t, 10*time.Second), name, metav1.GetOptions{}); err != nil {
			return false, err.Error()
		}
		return *d.Spec.Replicas == want, fmt.Sprintf("replicas %d, annotations %v", *d.Spec.Replicas, d.Annotations)
	})
	return d
}

// TestKubeWorkloadRef: Rollouts in git that reference Deployments in the
// cluster (spec.workloadRef) run the Deployments' pod templates, and their
// scaleDown is carried out on the Deployments, as read from outside:
// never leaves the Deployment at its size, onsuccess scales it to 0 in one
// move once the rollout is Healthy, progressively steps it down as the
// rollout's pods come up. A rollout whose Deployment does not exist yet
// holds with the reason and starts when the Deployment is created; a new
// image in a Deployment starts a canary that runs its steps; scaleDown
// set to never, or the rollouts removed from git, give the Deployments
// back their replicas. sluice
// runs as a ServiceAccount with the ClusterRole docs/kubernetes.md gives.
func TestKubeWorkloadRef(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	startPodBackends(t, c, ns)
	history := watchReplicas(t, c, ns)
	deployments := c.Client.AppsV1().Deployments(ns)
	modes := map[string]string{"wr-never": "", "wr-success": "onsuccess", "wr-prog": "progressively"}
	for name := range modes {
		if _, err := deployments.Create(ctxFor(t, 10*time.Second), refDeployment(ns, name, v1), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{"rollouts/wr-late.yaml": refRollout(ns, "wr-late", "onsuccess")}
	for name, mode := range modes {
		files["rollouts/"+name+".yaml"] = refRollout(ns, name, mode)
	}
	repo := newGitRepo(t)
	repo.push("v1", files)
	// sluice runs with only the documented ClusterRole: its Deployment
	// rules are shown to suffice.
	kubeconfig := kubeconfigFor(t, c, ns, documentedClusterRole(t))
	d := startDaemon(t, repo, "--kubernetes", "--kubeconfig", kubeconfig, "--watch-namespaces", ns)

	for name := range modes {
		waitReplicaSet(t, c, ns, name, v1, refRolloutReplicas, 60*time.Second)
		d.waitStatus(ns+"/"+name, 60*time.Second, "stable v1", func(s httpapi.RolloutStatus) bool {
			return s.Phase == rollout.PhaseHealthy && s.StableVersion == v1
		})
	}
	waitDeploymentReplicas(t, c, ns, "wr-success", 0)
	prog := waitDeploymentReplicas(t, c, ns, "wr-prog", 0)
	if got := prog.Annotations[workloadref.ReplicasAnnotation]; got != fmt.Sprint(refDeploymentReplicas) {
		t.Errorf("wr-prog's %s = %q; want its original %d", workloadref.ReplicasAnnotation, got, refDeploymentReplicas)
	}
	t.Logf("replicas seen: never %v, onsuccess %v, progressively %v", history.of("wr-never"), history.of("wr-success"), history.of("wr-prog"))
	if got := history.of("wr-never"); !slices.Equal(got, []int32{refDeploymentReplicas}) {
		t.Errorf("scaleDown never: the Deployment's replicas went %v; want it left at %d", got, refDeploymentReplicas)
	}
	if got := history.of("wr-success"); !slices.Equal(got, []int32{refDeploymentReplicas, 0}) {
		t.Errorf("scaleDown onsuccess: replicas went %v; want %d then 0 once Healthy", got, refDeploymentReplicas)
	}
	// progressively passes through a count between 3 and 0: sluice sees
	// the new rollout (no Ready pod, so 2 − 0) before kwok can report its
	// pods Ready, since they exist only once sluice has scaled them up.
	if got := history.of("wr-prog"); len(got) < 3 || got[0] != refDeploymentReplicas || got[len(got)-1] != 0 ||
		!slices.IsSortedFunc(got, func(a, b int32) int { return int(b - a) }) {
		t.Errorf("scaleDown progressively: replicas went %v; want %d down to 0 through the rollout's progress", got, refDeploymentReplicas)
	}

	// A Deployment that does not exist holds its rollout with the reason.
	late := d.waitStatus(ns+"/wr-late", 30*time.Second, "the missing Deployment reported", func(s httpapi.RolloutStatus) bool {
		return len(s.Errors) > 0
	})
	if msg := late.Errors[0].Message; !strings.Contains(msg, "Deployment "+ns+"/wr-late not found in the cluster") {
		t.Errorf("wr-late's error %q; want the missing Deployment named", msg)
	}
	if names := kubeReplicaSetNames(t, c, ns, "wr-late"); len(names) != 0 {
		t.Errorf("wr-late runs ReplicaSets %v without its Deployment", names)
	}
	if _, err := deployments.Create(ctxFor(t, 10*time.Second), refDeployment(ns, "wr-late", v1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReplicaSet(t, c, ns, "wr-late", v1, refRolloutReplicas, 60*time.Second)
	d.waitStatus(ns+"/wr-late", 60*time.Second, "stable v1 once its Deployment exists", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v1 && len(s.Errors) == 0
	})

	// A new image in the Deployment is a new canary, as a commit would be.
	dep, err := deployments.Get(ctxFor(t, 10*time.Second), "wr-never", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dep.Spec.Template.Spec.Containers[0].Image = v2
	if _, err := deployments.Update(ctxFor(t, 10*time.Second), dep, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	canary := waitReplicaSet(t, c, ns, "wr-never", v2, 1, 60*time.Second)
	st := d.waitStatus(ns+"/wr-never", 60*time.Second, "canary v2 paused at 50 %", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhasePaused && s.CanaryVersion == v2 && s.Weights.Canary == 50
	})
	if st.StableVersion != v1 {
		t.Errorf("stable %q during the canary; want v1", st.StableVersion)
	}
	if want := "wr-never-" + canary.Labels["rollouts-pod-template-hash"]; canary.Name != want {
		t.Errorf("canary ReplicaSet %s; want %s", canary.Name, want)
	}
	d.cli("promote", ns+"/wr-never")
	waitReplicaSet(t, c, ns, "wr-never", v2, refRolloutReplicas, 60*time.Second)
	d.waitStatus(ns+"/wr-never", 60*time.Second, "promoted to v2", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v2
	})

	// scaleDown set to never: sluice stops scaling wr-prog and gives it
	// back its replicas; wr-success stays at 0.
	repo.push("wr-prog: scaleDown never", map[string]string{"rollouts/wr-prog.yaml": refRollout(ns, "wr-prog", "never")})
	if dep := waitDeploymentReplicas(t, c, ns, "wr-prog", refDeploymentReplicas); dep.Annotations[workloadref.ReplicasAnnotation] != "" {
		t.Errorf("wr-prog keeps %s after scaleDown never", workloadref.ReplicasAnnotation)
	}
	if dep, err := deployments.Get(ctxFor(t, 10*time.Second), "wr-success", metav1.GetOptions{}); err != nil || *dep.Spec.Replicas != 0 {
		t.Errorf("wr-success after another rollout's edit: %v, %v; want still 0", dep.Spec.Replicas, err)
	}

	// Out of git: the Deployments get their replicas back.
	repo.git("-C", repo.work, "rm", "-rq", "rollouts")
	repo.push("remove the rollouts", nil)
	for _, name := range []string{"wr-success", "wr-late"} {
		dep := waitDeploymentReplicas(t, c, ns, name, refDeploymentReplicas)
		if _, ok := dep.Annotations[workloadref.ReplicasAnnotation]; ok {
			t.Errorf("%s keeps %s after its replicas were restored", name, workloadref.ReplicasAnnotation)
		}
	}
	if got := history.of("wr-never"); !slices.Equal(got, []int32{refDeploymentReplicas}) {
		t.Errorf("scaleDown never: replicas went %v; want it never touched", got)
	}
}
