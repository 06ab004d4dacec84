package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/scheduler"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
)

// PendingPod is a pod of this binder's scheduler name that is not bound
// yet, and why.
type PendingPod struct {
	Namespace string            `json:"namespace"`
	Name      string            `json:"name"`
	Labels    map[string]string `json:"labels,omitempty"`
	// Message is why the last scheduling attempt found no node, in
	// kube-scheduler's words ("0/6 nodes are available: 6 Insufficient
	// cpu."); empty until an attempt failed.
	Message string `json:"message,omitempty"`
	// Since is when Message was first given.
	Since time.Time `json:"since,omitzero"`
	// FirstSeen is when the binder first saw the pod.
	FirstSeen time.Time `json:"firstSeen"`
	// Attempts counts scheduling cycles run for the pod.
	Attempts int `json:"attempts"`
}

// pendingState is the binder's record of a pending pod.
type pendingState struct {
	PendingPod
	spec     scheduler.Pod // scheduling inputs last seen
	parked   bool          // unschedulable, waiting for a cluster change
	parkedAt time.Time
}

// Why says why the pod is pending: ok is false when the binder has no
// such pending pod (bound, gone, or not of its scheduler name).
func (b *Binder) Why(namespace, name string) (PendingPod, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ps, ok := b.pending[namespace+"/"+name]
	if !ok {
		return PendingPod{}, false
	}
	return ps.PendingPod, true
}

// Pending lists the pending pods of namespace whose labels match sel (nil
// matches all), sorted by name. The rollout controller asks it with
// rollouts-pod-template-hash=<canary hash> to say why a canary waits.
func (b *Binder) Pending(namespace string, sel labels.Selector) []PendingPod {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []PendingPod
	for _, ps := range b.pending {
		if ps.Namespace == namespace && (sel == nil || sel.Matches(labels.Set(ps.Labels))) {
			out = append(out, ps.PendingPod)
		}
	}
	slices.SortFunc(out, func(a, b PendingPod) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Explain runs the scheduler's full explanation for pod now (every
// filter on every node, the topN best scores); it changes nothing.
func (b *Binder) Explain(ctx context.Context, pod *corev1.Pod, topN int) (*scheduler.Explanation, error) {
	spec := podFromCore(pod)
	spec.Name += "#explain" // never clashes with a tracked pod
	ex, err := b.sched.Explain(ctx, &spec, topN)
	if err != nil {
		return nil, fmt.Errorf("binder: %w", err)
	}
	ex.Pod = podKey(pod)
	return ex, nil
}

// parkLocked marks the pod unschedulable with msg until a cluster change
// (retryUnschedulableLocked) or a change of its own spec (podPending). It
// reports whether msg is new, i.e. whether to patch the pod and emit an
// event.
func (b *Binder) parkLocked(ps *pendingState, msg string) bool {
	if !ps.parked {
		ps.parked = true
		b.metrics.unschedulableNo.Inc()
	}
	ps.parkedAt = time.Now()
	if ps.Message == msg {
		return false
	}
	ps.Message, ps.Since = msg, ps.parkedAt
	return true
}

func (b *Binder) unparkLocked(ps *pendingState) {
	if ps.parked {
		ps.parked = false
		b.metrics.unschedulableNo.Dec()
	}
}

// retryUnschedulableLocked queues every parked pod again, after its
// back-off, because the cluster changed (kube-scheduler's
// MoveAllToActiveOrBackoffQueue). A cluster that changes constantly costs
// at most one attempt per pod per back-off period, never a hot loop.
func (b *Binder) retryUnschedulableLocked() {
	for key, ps := range b.pending {
		if ps.parked {
			b.unparkLocked(ps)
			b.queue.AddRateLimited(key)
		}
	}
}

// flushUnschedulableEvery retries pods parked longer than
// UnschedulableTimeout, in case a change was missed, until ctx ends.
func (b *Binder) flushUnschedulableEvery(ctx context.Context) {
	t := time.NewTicker(min(b.opts.UnschedulableTimeout, 30*time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			b.mu.Lock()
			for key, ps := range b.pending {
				if ps.parked && now.Sub(ps.parkedAt) >= b.opts.UnschedulableTimeout {
					b.unparkLocked(ps)
					b.queue.AddRateLimited(key)
				}
			}
			b.mu.Unlock()
		}
	}
}

// reportUnschedulable tells the cluster why pod waits, as kube-scheduler
// does: PodScheduled=False with reason Unschedulable (server-side apply of
// pods/status, field manager sluice) and a Warning FailedScheduling event.
func (b *Binder) reportUnschedulable(ctx context.Context, pod *corev1.Pod, pp PendingPod) {
	cond := corev1ac.PodCondition().
		WithType(corev1.PodScheduled).
		WithStatus(corev1.ConditionFalse).
		WithReason(corev1.PodReasonUnschedulable).
		WithMessage(pp.Message).
		WithLastTransitionTime(metav1.NewTime(pp.Since))
	apply := corev1ac.Pod(pod.Name, pod.Namespace).WithStatus(corev1ac.PodStatus().WithConditions(cond))
	if _, err := b.client.CoreV1().Pods(pod.Namespace).ApplyStatus(ctx, apply, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
		b.log.WarnContext(ctx, "binder: set PodScheduled=False", "pod", podKey(pod), "err", err)
	}
	b.recorder.Eventf(pod, nil, corev1.EventTypeWarning, "FailedScheduling", "Scheduling", "%s", pp.Message)
	b.log.InfoContext(ctx, "pod unschedulable", "pod", podKey(pod), "reason", pp.Message)
	if b.opts.OnUnschedulable != nil {
		b.opts.OnUnschedulable(pp)
	}
}
