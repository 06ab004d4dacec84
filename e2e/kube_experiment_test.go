package e2e

import (
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/internal/kubetest"
)

// experimentSteps: 20 % to the canary, then an experiment of 10s with a
// ReplicaSet of the stable version ("baseline") and one of the canary
// ("canary"), and one web analysis given the canary template's pod hash;
// then the promotion.
const experimentSteps = `- setWeight: 20
- experiment:
    duration: 10s
    templates:
    - {name: baseline, specRef: stable}
    - {name: canary, specRef: canary}
    analyses:
    - name: web
      templateName: exp-web
      args: [{name: exp-hash, value: "{{templates.canary.podTemplateHash}}"}]
`

// experimentTemplate is a web metric at url that passes the experiment's
// pod-template hash argument along as the query parameter hash. Its first
// measurement comes 3s after the experiment's pods are Ready, so that a
// test sees them Running before a failing one ends the experiment.
func experimentTemplate(ns, url string) string {
	return fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata:
  name: exp-web
  namespace: %s
spec:
  args: [{name: exp-hash}]
  metrics:
  - name: success-rate
    initialDelay: 3s
    interval: 1s
    count: 3
    failureLimit: 0
    successCondition: result >= 0.95
    provider:
      web:
        url: "%s/?hash={{args.exp-hash}}"
        jsonPath: "{$.successRate}"
        timeoutSeconds: 2
`, ns, url)
}

// metricServer answers successRate rate and records the hash parameters
// it was asked with.
type metricServer struct {
	*httptest.Server
	mu     sync.Mutex
	hashes map[string]bool
}

func startMetricServer(t *testing.T, rate float64) *metricServer {
	m := &metricServer{hashes: map[string]bool{}}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		m.hashes[r.URL.Query().Get("hash")] = true
		m.mu.Unlock()
		fmt.Fprintf(w, `{"successRate": %g}`, rate)
	}))
	t.Cleanup(m.Close)
	return m
}

// asked is the hash parameters asked for so far.
func (m *metricServer) asked() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.hashes))
}

// experimentReplicaSets are the rollout's ReplicaSets that run an
// experiment template, by template name.
func experimentReplicaSets(t *testing.T, c *kubetest.Cluster, ns, name string) map[string]*appsv1.ReplicaSet {
	t.Helper()
	list, err := c.Client.AppsV1().ReplicaSets(ns).List(ctxFor(t, 10*time.Second), metav1.ListOptions{LabelSelector: selector(name, "")})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*appsv1.ReplicaSet{}
	for i, rs := range list.Items {
		if tmpl := rs.Spec.Template.Labels[api.ExperimentLabel]; tmpl != "" && rs.DeletionTimestamp == nil {
			out[tmpl] = &list.Items[i]
		}
	}
	return out
}

// roleReplicaSet is the rollout's ReplicaSet of a role (sluice.io/role),
// or nil.
func roleReplicaSet(t *testing.T, c *kubetest.Cluster, ns, name, role string) *appsv1.ReplicaSet {
	t.Helper()
	list, err := c.Client.AppsV1().ReplicaSets(ns).List(ctxFor(t, 10*time.Second), metav1.ListOptions{LabelSelector: selector(name, "")})
	if err != nil {
		t.Fatal(err)
	}
	for i, rs := range list.Items {
		if rs.Annotations["sluice.io/role"] == role {
			return &list.Items[i]
		}
	}
	return nil
}

// runningPods counts the Running pods of the rollout with hash.
func runningPods(t *testing.T, c *kubetest.Cluster, ns, name, hash string) int {
	n := 0
	for _, p := range kubePods(t, c, ns, selector(name, hash)) {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

// waitExperimentRunning waits until both templates' ReplicaSets run their
// pod Ready and Running, and returns them.
func waitExperimentRunning(t *testing.T, c *kubetest.Cluster, ns, name string) map[string]*appsv1.ReplicaSet {
	t.Helper()
	var sets map[string]*appsv1.ReplicaSet
	kubetest.Eventually(t, 30*time.Second, "experiment ReplicaSets Ready with Running pods", func() (bool, string) {
		sets = experimentReplicaSets(t, c, ns, name)
		var state []string
		ok := len(sets) == 2
		for tmpl, rs := range sets {
			hash := rs.Labels["rollouts-pod-template-hash"]
			running := runningPods(t, c, ns, name, hash)
			state = append(state, fmt.Sprintf("%s: %s ready %d, running %d", tmpl, rs.Name, rs.Status.ReadyReplicas, running))
			ok = ok && rs.Status.ReadyReplicas == 1 && running == 1
		}
		return ok, strings.Join(state, "; ")
	})
	return sets
}

// waitExperimentGone waits until the rollout has no experiment ReplicaSet
// and no experiment pod left.
func waitExperimentGone(t *testing.T, c *kubetest.Cluster, ns, name string, hashes []string) {
	t.Helper()
	kubetest.Eventually(t, 30*time.Second, "experiment ReplicaSets and pods removed", func() (bool, string) {
		sets := experimentReplicaSets(t, c, ns, name)
		pods := 0
		for _, h := range hashes {
			pods += runningPods(t, c, ns, name, h)
		}
		return len(sets) == 0 && pods == 0, fmt.Sprintf("%d ReplicaSets, %d running pods", len(sets), pods)
	})
}

// TestKubeExperiment: an experiment step through the binary against a real
// control plane. After setWeight 20 the experiment starts a ReplicaSet of
// the stable version and one of the canary, each named after its template
// with a pod-template hash of its own, one Running pod each; the analysis
// is asked with the canary template's hash; the step lasts its 10s
// duration, then the experiment's ReplicaSets and pods are removed and the
// canary is promoted.
func TestKubeExperiment(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	startPodBackends(t, c, ns)
	metrics := startMetricServer(t, 1)
	spec := kubeRollout{Name: "ke", Namespace: ns, Host: "ke.e2e", Version: v1, Replicas: 5, Steps: experimentSteps}
	repo, d := kubeStart(t, c, spec, map[string]string{"analysis/exp.yaml": experimentTemplate(ns, metrics.URL)})

	spec.Version = v2
	commit := repo.push("v2", map[string]string{"rollouts/ke.yaml": spec.yaml()})
	d.waitStatus(ns+"/ke", 60*time.Second, "experiment step", func(s httpapi.RolloutStatus) bool {
		return s.Commit == commit && s.StepIndex == 1 && s.Weights.Canary == 20
	})
	sets := waitExperimentRunning(t, c, ns, "ke")
	available := time.Now()
	if x := d.waitStatus(ns+"/ke", 10*time.Second, "experiment in status", func(s httpapi.RolloutStatus) bool {
		return s.Experiment != nil && s.Experiment.Available
	}).Experiment; len(x.Templates) != 2 || x.Templates[0].ReplicaSet != sets["baseline"].Name || x.Templates[1].ReplicaSet != sets["canary"].Name ||
		len(x.Analyses) != 1 || x.Analyses[0].Analysis != "web" {
		t.Errorf("status experiment %+v; want templates baseline (%s) and canary (%s), analysis web", x, sets["baseline"].Name, sets["canary"].Name)
	}
	stable, canary := roleReplicaSet(t, c, ns, "ke", "stable"), roleReplicaSet(t, c, ns, "ke", "canary")
	var hashes []string
	for tmpl, image := range map[string]string{"baseline": v1, "canary": v2} {
		rs := sets[tmpl]
		hash := rs.Labels["rollouts-pod-template-hash"]
		hashes = append(hashes, hash)
		if want := "ke-" + tmpl + "-" + hash; rs.Name != want || rs.Spec.Template.Spec.Containers[0].Image != image ||
			rs.Annotations["sluice.io/role"] != "experiment" {
			t.Errorf("experiment ReplicaSet %s: image %s, role %q; want %s running %s, role experiment",
				rs.Name, rs.Spec.Template.Spec.Containers[0].Image, rs.Annotations["sluice.io/role"], want, image)
		}
		for _, other := range []*appsv1.ReplicaSet{stable, canary} {
			if other != nil && other.Labels["rollouts-pod-template-hash"] == hash {
				t.Errorf("template %s shares the pod-template hash %s with %s", tmpl, hash, other.Name)
			}
		}
	}
	canaryHash := sets["canary"].Labels["rollouts-pod-template-hash"]

	st := d.waitStatus(ns+"/ke", 60*time.Second, "promoted", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v2
	})
	if st.Aborted {
		t.Fatalf("aborted: %s", st.Message)
	}
	waitExperimentGone(t, c, ns, "ke", hashes)
	t.Logf("experiment ReplicaSets %s and %s ran %v from Ready to removed; metric asked for %v",
		sets["baseline"].Name, sets["canary"].Name, time.Since(available).Round(100*time.Millisecond), metrics.asked())
	if held := time.Since(available); held < 9*time.Second {
		t.Errorf("experiment ended %v after its pods were Ready; want its 10s duration", held)
	}
	if asked := metrics.asked(); !slices.Equal(asked, []string{canaryHash}) {
		t.Errorf("the analysis asked for hashes %v; want only the canary template's, %s", asked, canaryHash)
	}
}

// TestKubeExperimentAbort: a failing experiment analysis aborts the
// rollout: all traffic back to stable, and the experiment's ReplicaSets and
// pods removed.
func TestKubeExperimentAbort(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	startPodBackends(t, c, ns)
	metrics := startMetricServer(t, 0.5)
	spec := kubeRollout{Name: "kf", Namespace: ns, Host: "kf.e2e", Version: v1, Replicas: 5, Steps: experimentSteps,
		Canary: "abortScaleDownDelaySeconds: 1\n"}
	repo, d := kubeStart(t, c, spec, map[string]string{"analysis/exp.yaml": experimentTemplate(ns, metrics.URL)})

	spec.Version = v2
	commit := repo.push("v2", map[string]string{"rollouts/kf.yaml": spec.yaml()})
	sets := waitExperimentRunning(t, c, ns, "kf")
	st := d.waitStatus(ns+"/kf", 60*time.Second, "aborted", func(s httpapi.RolloutStatus) bool {
		return s.Commit == commit && s.Aborted && s.Phase == rollout.PhaseDegraded
	})
	if st.Weights.Canary != 0 || st.StableVersion != v1 || !strings.Contains(st.Message, "failed") {
		t.Errorf("after the failed analysis: weights %+v, stable %s, message %q; want all on v1, the failure named", st.Weights, st.StableVersion, st.Message)
	}
	var hashes []string
	for _, rs := range sets {
		hashes = append(hashes, rs.Labels["rollouts-pod-template-hash"])
	}
	waitExperimentGone(t, c, ns, "kf", hashes)
	if rs := roleReplicaSet(t, c, ns, "kf", "stable"); rs == nil || *rs.Spec.Replicas != 5 || rs.Spec.Template.Spec.Containers[0].Image != v1 {
		t.Errorf("stable after the abort: %v; want v1 at 5 replicas", rs)
	}
}
