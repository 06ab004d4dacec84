package api

import (
	"time"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/argoproj/argo-rollouts/utils/hash"
	corev1 "k8s.io/api/core/v1"
)

// Mode says where rollouts run, which decides what a strategy file must
// hold: in standalone mode the endpoints of each version come from git
// (plugins."sluice.io/xds".endpoints); in Kubernetes mode sluice runs the
// pods itself and the endpoints come from the cluster.
type Mode int

// Modes.
const (
	ModeStandalone Mode = iota
	ModeKubernetes
)

// Defaults of Workload, as Argo Rollouts defines them.
const (
	DefaultProgressDeadline     = 600 * time.Second
	DefaultScaleDownDelay       = 30 * time.Second
	DefaultAbortScaleDownDelay  = 30 * time.Second
	DefaultRevisionHistoryLimit = 10
	DefaultMinPodsPerReplicaSet = 1
)

// Workload is what Kubernetes mode needs to run a rollout's pods; it is
// nil in standalone mode, where pods are not sluice's business. The pod
// template and selector themselves stay in Rollout.Spec (Argo's types).
type Workload struct {
	// PodTemplateHash is Argo's hash of spec.template
	// (utils/hash.ComputePodTemplateHash): it names the version's
	// ReplicaSet "<rollout>-<hash>" and labels its pods.
	PodTemplateHash string `json:"podTemplateHash"`
	// DynamicStableScale shrinks stable as traffic leaves it, only after
	// the ACK of the weight that moved the traffic.
	DynamicStableScale bool `json:"dynamicStableScale,omitempty"`
	// MinPodsPerReplicaSet is the fewest pods a side that gets traffic runs.
	MinPodsPerReplicaSet int32 `json:"minPodsPerReplicaSet"`
	// ProgressDeadline bounds a wait for Ready pods; past it the rollout
	// aborts (ProgressDeadlineAbort) or pauses with the reason.
	ProgressDeadline      time.Duration `json:"progressDeadline"`
	ProgressDeadlineAbort bool          `json:"progressDeadlineAbort,omitempty"`
	// ScaleDownDelay is how long the old stable keeps its pods after the
	// ACK of a promotion; AbortScaleDownDelay is the same for the canary
	// after the ACK of an abort.
	ScaleDownDelay      time.Duration `json:"scaleDownDelay"`
	AbortScaleDownDelay time.Duration `json:"abortScaleDownDelay"`
	// RevisionHistoryLimit old ReplicaSets are kept at 0 replicas.
	RevisionHistoryLimit int32 `json:"revisionHistoryLimit"`
	// CanaryService and StableService are the Services whose selectors
	// sluice pins to each side's pod-template hash ("" when not named).
	CanaryService string `json:"canaryService,omitempty"`
	StableService string `json:"stableService,omitempty"`
	// Baseline is set when an analysis of the rollout (a step's or the
	// background one) uses a sluice.io/judge metric: each canary of the
	// rollout then runs beside a baseline, fresh pods of the stable
	// version, so that the judge compares like with like.
	Baseline bool `json:"baseline,omitempty"`
	// BaselineHash is the pod-template hash of this version's baseline
	// pods: Argo's hash of spec.template with BaselineLabel added. It
	// names the baseline's ReplicaSet "<rollout>-<hash>" and keeps its
	// pods out of the stable Service's selector.
	BaselineHash string `json:"baselineHash,omitempty"`
	// Ref is set for a rollout whose pod template lives in a Deployment
	// of the cluster (spec.workloadRef): until ResolveWorkloadRef fills
	// the template in, the rollout has no PodTemplateHash and must not run.
	Ref *WorkloadRef `json:"ref,omitempty"`
}

// BaselineLabel marks the pods of a baseline (value "true"): a baseline
// runs the stable version's template with this label added, so its pods
// have a pod-template hash of their own, as Argo's experiment pods do.
const BaselineLabel = "sluice.io/baseline"

// BaselineOfAnnotation, on a baseline's pod template, is the pod-template
// hash of the canary the baseline runs beside: sluice's scheduler places
// the baseline's pods in that canary's zones. It is not part of
// BaselineHash, so a baseline kept for a new canary keeps its hash.
const BaselineOfAnnotation = "sluice.io/baseline-of"

// BaselineTemplate is the pod template of t's baseline: a copy of t with
// BaselineLabel.
func BaselineTemplate(t *corev1.PodTemplateSpec) *corev1.PodTemplateSpec {
	b := t.DeepCopy()
	if b.Labels == nil {
		b.Labels = map[string]string{}
	}
	b.Labels[BaselineLabel] = "true"
	return b
}

// workload reads what Kubernetes mode needs from the Argo spec, with
// Argo's defaults, and checks what only Kubernetes mode requires.
func (c *checker) workload(ro *v1alpha1.Rollout, canary *v1alpha1.CanaryStrategy) *Workload {
	ref := c.workloadRef(ro)
	// A workloadRef rollout without a selector takes its Deployment's, as in Argo.
	if ref == nil && emptySelector(ro.Spec.Selector) {
		c.errorf("spec.selector", "required in Kubernetes mode: it selects the rollout's pods")
	}
	w := &Workload{
		Ref:                   ref,
		DynamicStableScale:    canary.DynamicStableScale,
		MinPodsPerReplicaSet:  derefOr(canary.MinPodsPerReplicaSet, DefaultMinPodsPerReplicaSet),
		ProgressDeadline:      seconds(ro.Spec.ProgressDeadlineSeconds, DefaultProgressDeadline),
		ProgressDeadlineAbort: ro.Spec.ProgressDeadlineAbort,
		ScaleDownDelay:        seconds(canary.ScaleDownDelaySeconds, DefaultScaleDownDelay),
		AbortScaleDownDelay:   seconds(canary.AbortScaleDownDelaySeconds, DefaultAbortScaleDownDelay),
		RevisionHistoryLimit:  derefOr(ro.Spec.RevisionHistoryLimit, DefaultRevisionHistoryLimit),
		CanaryService:         canary.CanaryService,
		StableService:         canary.StableService,
	}
	if ref == nil {
		w.hashTemplate(&ro.Spec.Template)
	}
	if w.MinPodsPerReplicaSet < 1 {
		c.errorf(canaryPath+".minPodsPerReplicaSet", "must be at least 1, got %d", w.MinPodsPerReplicaSet)
	}
	return w
}

// hashTemplate sets the pod-template hashes of the version and of its
// baseline. Argo hashes the template as written, before it adds its label.
func (w *Workload) hashTemplate(t *corev1.PodTemplateSpec) {
	w.PodTemplateHash = hash.ComputePodTemplateHash(t, nil)
	w.BaselineHash = hash.ComputePodTemplateHash(BaselineTemplate(t), nil)
}

func derefOr(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

func seconds(p *int32, def time.Duration) time.Duration {
	if p == nil {
		return def
	}
	return time.Duration(*p) * time.Second
}
