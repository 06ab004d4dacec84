package analysis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/sluice-dev/sluice/api"
)

// Labels and annotations of the Jobs a job metric creates. The labels find
// a run's Jobs (and every Job sluice made); the pods of a Job carry only
// LabelJobRun, so sluice's workload informers, which follow pods labelled
// managed-by sluice, never take them for a rollout's pods.
const (
	LabelJobRun          = "sluice.io/analysis-run"
	LabelJobRollout      = "sluice.io/rollout"
	LabelJobManagedBy    = "app.kubernetes.io/managed-by"
	AnnotationJobRunName = "sluice.io/analysis-run-name"
	AnnotationJobMetric  = "sluice.io/metric"
)

// jobCleanupTimeout bounds the deletes at the end of a run: they run
// after the run's context is cancelled.
const jobCleanupTimeout = 10 * time.Second

// jobProvider is Argo's job metric: each measurement creates a Job in the
// rollout's namespace and waits for its Complete (Successful) or Failed
// (Failed) condition, polling as Argo's Resume does. It keeps the Jobs of
// the latest Retention measurements while the run goes, as Argo's garbage
// collection does, and deletes all of them, running ones included, when
// the run ends: sluice has no AnalysisRun object to own them.
type jobProvider struct {
	client    kubernetes.Interface
	log       *slog.Logger
	namespace string
	rollout   string
	runID     string // unique per run start; the Jobs' LabelJobRun
	runName   string
	cfg       api.JobProvider
	retention int
	poll      func(elapsed time.Duration) time.Duration

	// measure runs on the metric's goroutine and cleanup after it has
	// ended (run.run waits for it), so these need no lock.
	n       int      // measurements started
	created []string // Jobs not yet deleted, oldest first
}

func (e *Engine) newJob(r *run, m *Metric) (provider, error) {
	if e.kube == nil {
		return nil, errors.New("the job provider runs a Kubernetes Job: sluice runs it only with --kubernetes")
	}
	if r.spec.Rollout.Namespace == "" {
		return nil, errors.New("the job provider needs the rollout's namespace")
	}
	return &jobProvider{
		client: e.kube, log: r.log.With("metric", m.Name),
		namespace: r.spec.Rollout.Namespace, rollout: r.spec.Rollout.Parent().Name,
		runID: r.id, runName: r.spec.Name,
		cfg: *m.Provider.Job, retention: max(m.Retention, 1), poll: e.jobPoll,
	}, nil
}

// jobPollDelay is Argo's Resume delay, sqrt(2 × elapsed seconds): short
// Jobs are seen finishing quickly, long ones are not read every second.
// It is at least 500 ms and at most 15 s.
func jobPollDelay(elapsed time.Duration) time.Duration {
	d := time.Duration(math.Sqrt(2*elapsed.Seconds()) * float64(time.Second))
	return min(max(d, 500*time.Millisecond), 15*time.Second)
}

func (p *jobProvider) measure(ctx context.Context, m *Metric) (Result, error) {
	p.n++
	job := p.job(m.Name, p.n)
	created, err := p.create(ctx, job)
	if err != nil {
		return Result{}, err
	}
	p.collect(ctx)
	return p.wait(ctx, created)
}

// job builds the Job of measurement n: the template's metadata and spec
// with sluice's labels and annotations added.
func (p *jobProvider) job(metric string, n int) *batchv1.Job {
	spec := *p.cfg.Spec.DeepCopy()
	spec.Template.Labels = withEntries(spec.Template.Labels, map[string]string{LabelJobRun: p.runID})
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:      jobName(p.runID, metric, n),
			Namespace: p.namespace,
			Labels: withEntries(p.cfg.Labels, map[string]string{
				LabelJobRun: p.runID, LabelJobRollout: p.rollout, LabelJobManagedBy: "sluice",
			}),
			Annotations: withEntries(p.cfg.Annotations, map[string]string{
				AnnotationJobRunName: p.runName, AnnotationJobMetric: metric,
			}),
		},
		Spec: spec,
	}
}

func withEntries(base, add map[string]string) map[string]string {
	out := make(map[string]string, len(base)+len(add))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range add {
		out[k] = v
	}
	return out
}

// create creates the Job. A Job of the same name from this run (a retried
// create whose answer was lost) is taken over, as Argo does; one from
// elsewhere is an error.
func (p *jobProvider) create(ctx context.Context, job *batchv1.Job) (*batchv1.Job, error) {
	jobs := p.client.BatchV1().Jobs(job.Namespace)
	created, err := jobs.Create(ctx, job, metav1.CreateOptions{FieldManager: "sluice"})
	if apierrors.IsAlreadyExists(err) {
		existing, getErr := jobs.Get(ctx, job.Name, metav1.GetOptions{})
		if getErr == nil && existing.Labels[LabelJobRun] == p.runID {
			created, err = existing, nil
		}
	}
	if err != nil {
		// Logged as well as recorded: a refusal (RBAC, quota, admission)
		// is the operator's to fix.
		p.log.Warn("analysis job not created", "job", job.Namespace+"/"+job.Name, "err", err)
		return nil, fmt.Errorf("create job %s/%s: %w", job.Namespace, job.Name, err)
	}
	p.created = append(p.created, created.Name)
	p.log.Info("analysis job created", "job", job.Namespace+"/"+job.Name)
	return created, nil
}

// wait polls the Job until it has finished or ctx ends.
func (p *jobProvider) wait(ctx context.Context, job *batchv1.Job) (Result, error) {
	started := time.Now()
	name := job.Namespace + "/" + job.Name
	for {
		if res, done := jobOutcome(name, job); done {
			return res, nil
		}
		if res, stuck, err := p.stuckPods(ctx, job); err != nil || stuck {
			return res, err
		}
		if !sleep(ctx, p.poll(time.Since(started))) {
			return Result{}, ctx.Err()
		}
		var err error
		if job, err = p.client.BatchV1().Jobs(job.Namespace).Get(ctx, job.Name, metav1.GetOptions{}); err != nil {
			return Result{}, fmt.Errorf("read job %s: %w", name, err)
		}
	}
}

// jobOutcome reads the Job's conditions as Argo does: Complete is a
// Successful measurement, Failed a Failed one. Like Argo it records no
// value; the message names the Job and, on failure, why it failed.
func jobOutcome(name string, job *batchv1.Job) (Result, bool) {
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return Result{Phase: PhaseSuccessful, Message: "job " + name + " complete"}, true
		case batchv1.JobFailed:
			msg := "job " + name + " failed"
			if why := strings.TrimSpace(c.Reason + ": " + c.Message); why != ":" {
				msg += ": " + strings.TrimSuffix(why, ":")
			}
			return Result{Phase: PhaseFailed, Message: msg}, true
		}
	}
	return Result{}, false
}

// terminalWaiting are the container waiting reasons after which a Job
// makes no progress on its own (Argo's list): the measurement is
// Inconclusive at once, so the rollout pauses for a person rather than
// waiting for the Job's deadline.
var terminalWaiting = map[string]bool{"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true}

func (p *jobProvider) stuckPods(ctx context.Context, job *batchv1.Job) (Result, bool, error) {
	if job.Spec.Selector == nil {
		return Result{}, false, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(job.Spec.Selector)
	if err != nil {
		return Result{}, false, fmt.Errorf("job %s/%s selector: %w", job.Namespace, job.Name, err)
	}
	pods, err := p.client.CoreV1().Pods(job.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return Result{}, false, fmt.Errorf("list pods of job %s/%s: %w", job.Namespace, job.Name, err)
	}
	for _, pod := range pods.Items {
		for _, cs := range append(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses...) {
			if w := cs.State.Waiting; w != nil && terminalWaiting[w.Reason] {
				return Result{Phase: PhaseInconclusive, Message: fmt.Sprintf("job %s/%s: pod %s, container %s: %s: %s",
					job.Namespace, job.Name, pod.Name, cs.Name, w.Reason, w.Message)}, true, nil
			}
		}
	}
	return Result{}, false, nil
}

// collect deletes the oldest Jobs beyond the metric's retention, keeping
// the one being measured.
func (p *jobProvider) collect(ctx context.Context) {
	if extra := len(p.created) - p.retention; extra > 0 {
		p.delete(ctx, slices.Clone(p.created[:extra]))
	}
}

// cleanup deletes every Job of the run that is left, finished or not.
func (p *jobProvider) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), jobCleanupTimeout)
	defer cancel()
	p.delete(ctx, slices.Clone(p.created))
}

// delete deletes Jobs with background propagation, so their pods go too;
// a Job that is gone already counts as deleted. A failed delete is logged
// and the Job kept in the list, for the next collect or the cleanup.
func (p *jobProvider) delete(ctx context.Context, names []string) {
	background := metav1.DeletePropagationBackground
	for _, name := range names {
		err := p.client.BatchV1().Jobs(p.namespace).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &background})
		if err != nil && !apierrors.IsNotFound(err) {
			p.log.Warn("analysis job not deleted", "job", p.namespace+"/"+name, "err", err)
			continue
		}
		if i := slices.Index(p.created, name); i >= 0 {
			p.created = slices.Delete(p.created, i, i+1)
		}
	}
}

// maxJobName keeps a Job's name a valid label value: the job controller
// puts it in its pods' job-name label.
const maxJobName = 63

var notDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// jobName is Argo's "<run>.<metric>.<n>" with sluice's run id: the metric
// part is made DNS-safe and cut so the whole fits in 63 characters.
func jobName(runID, metric string, n int) string {
	suffix := "." + strconv.Itoa(n)
	m := strings.Trim(notDNS.ReplaceAllString(strings.ToLower(metric), "-"), "-")
	if room := maxJobName - len(runID) - 1 - len(suffix); len(m) > room {
		m = strings.TrimRight(m[:room], "-")
	}
	if m == "" {
		m = "metric"
	}
	return runID + "." + m + suffix
}

// newRunID names one start of a run: the rollout's name (DNS-safe, cut to
// 40 characters) and 8 random hex digits, so a run started again after a
// restart never meets the Jobs of an earlier start.
func newRunID(rollout string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b) // crypto/rand.Read does not fail
	r := strings.Trim(notDNS.ReplaceAllString(strings.ToLower(rollout), "-"), "-")
	if len(r) > 40 {
		r = strings.TrimRight(r[:40], "-")
	}
	if r == "" {
		return hex.EncodeToString(b)
	}
	return r + "-" + hex.EncodeToString(b)
}

// expandJob substitutes template arguments in every string of the Job, as
// Argo does on the metric's JSON: values are JSON-escaped, so an argument
// cannot break out of the string it is in.
func expandJob(j *api.JobProvider, a args) (*api.JobProvider, error) {
	raw, err := json.Marshal(j)
	if err != nil {
		return nil, err
	}
	quoted := make(args, len(a))
	for k, v := range a {
		q, _ := json.Marshal(v) // a string always marshals
		quoted[k] = string(q[1 : len(q)-1])
	}
	s, err := quoted.expand(string(raw))
	if err != nil {
		return nil, err
	}
	var out api.JobProvider
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		return nil, fmt.Errorf("job after argument substitution: %w", err)
	}
	return &out, nil
}
