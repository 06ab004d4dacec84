package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/sluice-dev/sluice/analysis"
	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/internal/kubetest"
)

// jobTemplate is an AnalysisTemplate with one Argo job metric. The Job's
// pod names its node: the test control plane runs no kube-scheduler (and
// sluice's binder takes only pods that ask for it). podLabels go on the
// Job's pods: `sluice.io/test-exit: fail` makes kwok fail them
// (hack/kube/run-controlplane.sh), otherwise kwok completes them.
func jobTemplate(ns, podLabels string) string {
	return fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata:
  name: smoke
  namespace: %s
spec:
  metrics:
  - name: smoke
    provider:
      job:
        metadata:
          labels: {team: e2e}
        spec:
          backoffLimit: 0
          template:
            metadata:
              labels: {%s}
            spec:
              nodeName: node-0
              containers:
              - name: smoke
                image: curlimages/curl:8.5.0
                args: ["http://{{args.rollout}}-canary.{{args.namespace}}/health"]
              restartPolicy: Never
`, ns, podLabels)
}

// jobsSeen records every Job the cluster holds in ns, as a watch reports
// it, with the last state seen.
type jobsSeen struct {
	mu   sync.Mutex
	jobs map[string]*batchv1.Job
}

func watchJobs(t *testing.T, c *kubetest.Cluster, ns string) *jobsSeen {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := c.Client.BatchV1().Jobs(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := &jobsSeen{jobs: map[string]*batchv1.Job{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if j, ok := ev.Object.(*batchv1.Job); ok && ev.Type != watch.Deleted {
				s.mu.Lock()
				s.jobs[j.Name] = j
				s.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { cancel(); w.Stop(); <-done })
	return s
}

func (s *jobsSeen) all() []*batchv1.Job {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*batchv1.Job
	for _, j := range s.jobs {
		out = append(out, j)
	}
	return out
}

func jobCondition(j *batchv1.Job) string {
	for _, c := range j.Status.Conditions {
		if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) {
			return string(c.Type)
		}
	}
	return ""
}

// checkJobRan asserts that exactly one Job ran for the rollout, made from
// the template as Argo makes it, and ended with condition.
func checkJobRan(t *testing.T, seen *jobsSeen, ns, name string, condition batchv1.JobConditionType) {
	t.Helper()
	jobs := seen.all()
	if len(jobs) != 1 {
		t.Fatalf("%d Jobs seen in %s; want 1", len(jobs), ns)
	}
	j := jobs[0]
	if j.Labels[analysis.LabelJobRollout] != name || j.Labels["team"] != "e2e" || j.Labels[analysis.LabelJobRun] == "" ||
		j.Annotations[analysis.AnnotationJobMetric] != "smoke" || !strings.HasSuffix(j.Name, ".smoke.1") {
		t.Errorf("Job %s: labels %v, annotations %v", j.Name, j.Labels, j.Annotations)
	}
	if got, want := j.Spec.Template.Spec.Containers[0].Args[0], "http://"+name+"-canary."+ns+"/health"; got != want {
		t.Errorf("Job's container args %q; want %q (template arguments substituted)", got, want)
	}
	if got := jobCondition(j); got != string(condition) {
		t.Errorf("Job %s last seen with condition %q; want %s", j.Name, got, condition)
	}
}

// waitJobsGone waits until the cluster holds no Job of the rollout and no
// pod of any Job: sluice deleted them, with background propagation.
func waitJobsGone(t *testing.T, c *kubetest.Cluster, ns, name string) {
	t.Helper()
	kubetest.Eventually(t, 60*time.Second, "the rollout's Jobs and their pods deleted", func() (bool, string) {
		ctx := ctxFor(t, 10*time.Second)
		jobs, err := c.Client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: analysis.LabelJobRollout + "=" + name})
		if err != nil {
			return false, err.Error()
		}
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: analysis.LabelJobRun})
		if err != nil {
			return false, err.Error()
		}
		return len(jobs.Items) == 0 && len(pods.Items) == 0, fmt.Sprintf("%d Jobs, %d pods", len(jobs.Items), len(pods.Items))
	})
}

// TestKubeJobMetric: an analysis step whose metric is an Argo job runs a
// real Job (the job controller makes its pod, kwok runs it): a Job that
// completes lets the canary promote; a Job whose pod fails aborts the
// rollout, traffic back on stable and stable's pods untouched. Either
// way the Job and its pods are gone afterwards, as the cluster shows.
func TestKubeJobMetric(t *testing.T) {
	c := kubetest.Shared(t)
	t.Run("complete promotes", func(t *testing.T) {
		ns := c.Namespace(t)
		startPodBackends(t, c, ns)
		seen := watchJobs(t, c, ns)
		spec := kubeRollout{Name: "kj", Namespace: ns, Host: "kj.e2e", Version: v1, Replicas: 2,
			Steps: "- setWeight: 50\n- analysis:\n    templates: [{templateName: smoke}]\n"}
		repo, d := kubeStart(t, c, spec, map[string]string{"analysis/smoke.yaml": jobTemplate(ns, "app: smoke")})
		spec.Version = v2
		repo.push("v2", map[string]string{"rollouts/kj.yaml": spec.yaml()})
		d.waitStatus(ns+"/kj", 90*time.Second, "v2 promoted after its Job completed", func(s httpapi.RolloutStatus) bool {
			return s.Phase == rollout.PhaseHealthy && s.StableVersion == v2
		})
		checkJobRan(t, seen, ns, "kj", batchv1.JobComplete)
		waitJobsGone(t, c, ns, "kj")
	})
	t.Run("failed aborts", func(t *testing.T) {
		ns := c.Namespace(t)
		startPodBackends(t, c, ns)
		seen := watchJobs(t, c, ns)
		spec := kubeRollout{Name: "kf", Namespace: ns, Host: "kf.e2e", Version: v1, Replicas: 2,
			Steps:  "- setWeight: 50\n- analysis:\n    templates: [{templateName: smoke}]\n- pause: {}\n",
			Canary: "abortScaleDownDelaySeconds: 1\n"}
		repo, d := kubeStart(t, c, spec, map[string]string{"analysis/smoke.yaml": jobTemplate(ns, `sluice.io/test-exit: fail`)})
		stable := replicaSetOf(t, c, ns, "kf", v1)
		spec.Version = v2
		repo.push("v2", map[string]string{"rollouts/kf.yaml": spec.yaml()})
		st := d.waitStatus(ns+"/kf", 90*time.Second, "aborted after its Job failed", func(s httpapi.RolloutStatus) bool {
			return s.Aborted && s.Phase == rollout.PhaseDegraded
		})
		if st.Weights.Canary != 0 || st.StableVersion != v1 {
			t.Errorf("after the abort: weights %+v, stable %s; want all traffic on v1", st.Weights, st.StableVersion)
		}
		if !strings.Contains(st.Message, "smoke") {
			t.Errorf("abort message %q does not name the metric", st.Message)
		}
		checkJobRan(t, seen, ns, "kf", batchv1.JobFailed)
		got := replicaSetOf(t, c, ns, "kf", v1)
		if got.Name != stable.Name || *got.Spec.Replicas != 2 || got.Status.ReadyReplicas != 2 {
			t.Errorf("stable after the abort: %s, spec %d, ready %d; want %s with 2 and 2", got.Name, *got.Spec.Replicas, got.Status.ReadyReplicas, stable.Name)
		}
		waitJobsGone(t, c, ns, "kf")
	})
}
