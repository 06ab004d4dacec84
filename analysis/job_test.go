package analysis

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/sluice-dev/sluice/api"
)

// These tests run the job provider against client-go's fake clientset,
// with the test playing the job controller (it writes the Job's
// conditions). The fake stands at the edge, the Kubernetes API: what is
// tested is what sluice asks of the API and how it reads the answer.
// e2e/kube_job_test.go runs the same provider against a real
// kube-apiserver and kube-controller-manager.

func newJobEngine(t *testing.T) (*Engine, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset()
	e, err := New(Options{Kubernetes: client, ErrorRetryInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	e.jobPoll = func(time.Duration) time.Duration { return 10 * time.Millisecond }
	return e, client
}

func jobMetric(name string) api.Metric {
	return api.Metric{
		Name: name, Count: api.IntOrArg{Value: 1}, ConsecutiveErrorLimit: api.IntOrArg{Value: 4},
		Provider: api.Provider{Kind: api.ProviderJob, Job: &api.JobProvider{
			Labels:      map[string]string{"team": "shop"},
			Annotations: map[string]string{"owner": "qa"},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "smoke"}},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "curl", Image: "curl", Args: []string{"http://{{args.canary}}/health", `{{args.quote}}`}}},
				},
			}},
		}},
	}
}

// finishJobs plays the job controller: every Job that has no outcome yet
// gets condition (with reason) once seen. It returns every Job it saw.
func finishJobs(t *testing.T, client *fake.Clientset, cond batchv1.JobConditionType, reason string) func() []batchv1.Job {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var (
		mu   sync.Mutex
		seen = map[string]batchv1.Job{}
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			list, err := client.BatchV1().Jobs("").List(ctx, metav1.ListOptions{})
			if err == nil {
				for _, j := range list.Items {
					mu.Lock()
					_, known := seen[j.Name]
					if !known {
						seen[j.Name] = j
					}
					mu.Unlock()
					if len(j.Status.Conditions) == 0 && cond != "" {
						j.Status.Conditions = []batchv1.JobCondition{{Type: cond, Status: corev1.ConditionTrue, Reason: reason, Message: "as the test says"}}
						_, _ = client.BatchV1().Jobs(j.Namespace).UpdateStatus(ctx, &j, metav1.UpdateOptions{})
					}
				}
			}
			sleep(ctx, 5*time.Millisecond)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return func() []batchv1.Job {
		mu.Lock()
		defer mu.Unlock()
		var out []batchv1.Job
		for _, j := range seen {
			out = append(out, j)
		}
		return out
	}
}

func jobSpec() RunSpec {
	return RunSpec{
		Name: "smoke-2", Rollout: api.Key{Namespace: "shop", Name: "checkout"},
		Builtins: map[string]string{"canary": "checkout-canary", "quote": `say "hi"`},
	}
}

func remainingJobs(t *testing.T, client *fake.Clientset) []batchv1.Job {
	t.Helper()
	list, err := client.BatchV1().Jobs("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// TestJobSucceeds: a Job whose Complete condition is set is a Successful
// measurement with no value; the Job is made as Argo makes it (template
// metadata and spec, arguments substituted, the run's labels) in the
// rollout's namespace, and is deleted, with its pods, when the run ends.
func TestJobSucceeds(t *testing.T) {
	e, client := newJobEngine(t)
	seen := finishJobs(t, client, batchv1.JobComplete, "")
	rec := startRun(t, e, jobSpec(), jobMetric("smoke"))
	s := rec.wait(t, 10*time.Second)
	if s.Phase != PhaseSuccessful {
		t.Fatalf("phase %s (%s), want Successful", s.Phase, s.Reason)
	}
	ms := metricStatus(t, s, "smoke")
	if len(ms.Measurements) != 1 || ms.Measurements[0].Value != "" || !strings.Contains(ms.Measurements[0].Message, "complete") {
		t.Errorf("measurements %+v, want one Successful with no value", ms.Measurements)
	}
	jobs := seen()
	if len(jobs) != 1 {
		t.Fatalf("jobs created: %d, want 1", len(jobs))
	}
	j := jobs[0]
	if j.Namespace != "shop" || !regexp.MustCompile(`^checkout-[0-9a-f]{8}\.smoke\.1$`).MatchString(j.Name) {
		t.Errorf("job %s/%s, want shop/checkout-<id>.smoke.1", j.Namespace, j.Name)
	}
	run := j.Labels[LabelJobRun]
	if j.Labels["team"] != "shop" || j.Labels[LabelJobRollout] != "checkout" || run == "" || j.Labels[LabelJobManagedBy] != "sluice" {
		t.Errorf("job labels %v", j.Labels)
	}
	if j.Annotations["owner"] != "qa" || j.Annotations[AnnotationJobRunName] != "smoke-2" || j.Annotations[AnnotationJobMetric] != "smoke" {
		t.Errorf("job annotations %v", j.Annotations)
	}
	pod := j.Spec.Template
	if pod.Labels["app"] != "smoke" || pod.Labels[LabelJobRun] != run || pod.Labels[LabelJobManagedBy] != "" {
		t.Errorf("pod labels %v: want the template's and the run's only", pod.Labels)
	}
	if got := pod.Spec.Containers[0].Args; got[0] != "http://checkout-canary/health" || got[1] != `say "hi"` {
		t.Errorf("args %q: arguments not substituted", got)
	}
	assertJobsDeleted(t, client)
}

func assertJobsDeleted(t *testing.T, client *fake.Clientset) {
	t.Helper()
	// The terminal report comes before the cleanup: wait for it.
	if left := remainingJobs(t, client); len(left) != 0 {
		deadline := time.Now().Add(5 * time.Second)
		for len(left) != 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
			left = remainingJobs(t, client)
		}
		if len(left) != 0 {
			t.Fatalf("jobs left after the run: %d", len(left))
		}
	}
	for _, a := range client.Actions() {
		if d, ok := a.(k8stesting.DeleteAction); ok && a.GetVerb() == "delete" && a.GetResource().Resource == "jobs" {
			if p := d.GetDeleteOptions().PropagationPolicy; p == nil || *p != metav1.DeletePropagationBackground {
				t.Errorf("job %s deleted without background propagation: its pods would stay", d.GetName())
			}
		}
	}
}

// TestJobFails: a Failed condition is a Failed measurement that says why,
// and fails the run (failureLimit 0).
func TestJobFails(t *testing.T) {
	e, client := newJobEngine(t)
	finishJobs(t, client, batchv1.JobFailed, "BackoffLimitExceeded")
	rec := startRun(t, e, jobSpec(), jobMetric("smoke"))
	s := rec.wait(t, 10*time.Second)
	if s.Phase != PhaseFailed {
		t.Fatalf("phase %s (%s), want Failed", s.Phase, s.Reason)
	}
	m := metricStatus(t, s, "smoke").Measurements[0]
	if m.Phase != PhaseFailed || !strings.Contains(m.Message, "failed: BackoffLimitExceeded: as the test says") {
		t.Errorf("measurement %+v", m)
	}
	assertJobsDeleted(t, client)
}

// TestJobStoppedWhileRunning: a run stopped while its Job runs deletes
// the Job.
func TestJobStoppedWhileRunning(t *testing.T) {
	e, client := newJobEngine(t)
	seen := finishJobs(t, client, "", "")
	spec := jobSpec()
	spec.Templates = []*api.AnalysisTemplate{{Key: api.Key{Namespace: "shop", Name: "t"}, Metrics: []api.Metric{jobMetric("smoke")}}}
	rec := newRecorder()
	stop := e.Start(context.Background(), spec, rec.report)
	for deadline := time.Now().Add(5 * time.Second); len(seen()) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("no job created")
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	if left := remainingJobs(t, client); len(left) != 0 {
		t.Errorf("running job not deleted when the run stopped: %s", left[0].Name)
	}
	for _, r := range rec.all() {
		if r.Phase.Completed() {
			t.Errorf("stopped run reported %s", r.Phase)
		}
	}
}

// TestJobStuckPod: a pod that cannot pull its image makes the measurement
// Inconclusive at once, as in Argo.
func TestJobStuckPod(t *testing.T) {
	e, client := newJobEngine(t)
	// The fake API server has no controllers: give created Jobs the
	// selector the API server would, and a pod stuck on its image.
	client.PrependReactor("create", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		j := a.(k8stesting.CreateAction).GetObject().(*batchv1.Job)
		j.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"job-name": j.Name}}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: j.Name + "-x", Namespace: j.Namespace, Labels: map[string]string{"job-name": j.Name}},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "curl",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "no such image"}}}}},
		}
		if err := client.Tracker().Add(pod); err != nil {
			t.Error(err)
		}
		return false, nil, nil
	})
	rec := startRun(t, e, jobSpec(), jobMetric("smoke"))
	s := rec.wait(t, 10*time.Second)
	m := metricStatus(t, s, "smoke").Measurements[0]
	if m.Phase != PhaseInconclusive || !strings.Contains(m.Message, "ImagePullBackOff") {
		t.Errorf("measurement %+v, want Inconclusive naming ImagePullBackOff", m)
	}
}

// TestJobWithoutKubernetes: standalone, a job metric that got this far
// (the loader refuses it) ends in Error saying what it needs.
func TestJobWithoutKubernetes(t *testing.T) {
	e, _ := newTestEngine(t)
	rec := startRun(t, e, jobSpec(), jobMetric("smoke"))
	s := rec.wait(t, 10*time.Second)
	if ms := metricStatus(t, s, "smoke"); ms.Phase != PhaseError || !strings.Contains(ms.Message, "--kubernetes") {
		t.Errorf("metric %+v, want Error naming --kubernetes", ms)
	}
}

// TestJobRetention keeps the Jobs of the metric's latest
// measurementRetention measurements while the run goes, as Argo does.
func TestJobRetention(t *testing.T) {
	e, client := newJobEngine(t)
	finishJobs(t, client, batchv1.JobComplete, "")
	m := jobMetric("smoke")
	m.Count, m.Interval = api.IntOrArg{Value: 3}, time.Millisecond
	spec := jobSpec()
	spec.MeasurementRetention = map[string]int{"smoke": 1}
	rec := startRun(t, e, spec, m)
	if s := rec.wait(t, 10*time.Second); s.Phase != PhaseSuccessful {
		t.Fatalf("phase %s (%s)", s.Phase, s.Reason)
	}
	// Each create is followed by the deletion of the Job before it.
	var order []string
	for _, a := range client.Actions() {
		if a.GetResource().Resource != "jobs" {
			continue
		}
		switch a.GetVerb() {
		case "create":
			order = append(order, "create "+suffix(a.(k8stesting.CreateAction).GetObject().(*batchv1.Job).Name))
		case "delete":
			order = append(order, "delete "+suffix(a.(k8stesting.DeleteAction).GetName()))
		}
	}
	want := "create .1,create .2,delete .1,create .3,delete .2"
	if got := strings.Join(order, ","); !strings.HasPrefix(got, want) {
		t.Errorf("job calls %s, want %s, then the cleanup", got, want)
	}
	assertJobsDeleted(t, client)
}

func suffix(name string) string { return name[strings.LastIndex(name, "."):] }

// TestJobName: names fit a label value (the job controller labels pods
// with them) and are DNS subdomains, however long or odd the metric name.
func TestJobName(t *testing.T) {
	dns := regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	id := newRunID(strings.Repeat("Very-Long_Rollout.Name", 5))
	for _, metric := range []string{"smoke", "Error_Rate", strings.Repeat("x", 100), "---", "a.b"} {
		name := jobName(id, metric, 12)
		if len(name) > maxJobName || !dns.MatchString(name) || !strings.HasSuffix(name, ".12") {
			t.Errorf("jobName(%q) = %q (%d chars)", metric, name, len(name))
		}
	}
	if a, b := newRunID("checkout"), newRunID("checkout"); a == b {
		t.Errorf("two runs share the id %s", a)
	}
}
