package kube

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/sluice-dev/sluice/scheduler"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
)

// scheduleNext takes one pod off the queue and runs a scheduling cycle for
// it: the scheduler picks a node and assumes the placement in the graph
// (so the next cycle already sees it), then the bind runs on its own
// goroutine. It returns false once the queue is shut down.
func (b *Binder) scheduleNext(ctx context.Context) bool {
	key, quit := b.queue.Get()
	if quit {
		return false
	}
	defer b.queue.Done(key)
	pod, ok := b.schedulable(key)
	if !ok {
		b.queue.Forget(key)
		return true
	}
	b.mu.Lock()
	if _, inFlight := b.assumed[key]; inFlight {
		b.mu.Unlock()
		return true
	}
	ps := b.pending[key]
	if ps == nil { // the informer event is still on its way
		ps = &pendingState{PendingPod: PendingPod{Namespace: pod.Namespace, Name: pod.Name, Labels: pod.Labels, FirstSeen: time.Now()}}
		b.pending[key] = ps
	}
	ps.spec = podFromCore(pod)
	if b.deferBaselineLocked(ps) {
		// Place the canary first: the baseline mirrors its zones.
		b.mu.Unlock()
		b.queue.AddAfter(key, baselineDefer)
		return true
	}
	ps.Attempts++
	spec := ps.spec
	res := b.sched.ScheduleOne(ctx, &spec)
	switch {
	case res.Status == nil:
		b.assumed[key] = res.Node
		firstSeen := ps.FirstSeen
		b.mu.Unlock()
		b.startBind(ctx, pod, res.Node, firstSeen)
	case res.Status.IsRejected():
		msg := res.Status.Reason()
		if res.Diagnosis != nil {
			msg = res.Diagnosis.String()
		}
		changed := b.parkLocked(ps, msg)
		snap := ps.PendingPod
		b.mu.Unlock()
		b.metrics.unschedulable.Inc()
		if changed {
			b.async(func() { b.reportUnschedulable(ctx, pod, snap) })
		}
	default:
		b.mu.Unlock()
		b.log.Error("binder: scheduling cycle", "pod", key, "err", res.Status.AsError())
		b.queue.AddRateLimited(key)
	}
	return true
}

// A baseline pod waits baselineDefer at a time, while its canary has pods
// to place, or for at most baselineWait for its canary's first pod (the
// two ReplicaSets are created together, and either's pods may come
// first).
const (
	baselineDefer = 200 * time.Millisecond
	baselineWait  = 10 * time.Second
)

// deferBaselineLocked reports whether ps is a baseline pod that should
// wait for its canary: the canary's pods go first (those not parked as
// unschedulable), so that the baseline's see where the canary runs
// (scheduler.BaselineMatch keeps them in the canary's zones).
func (b *Binder) deferBaselineLocked(ps *pendingState) bool {
	group := ps.spec.MatchGroup
	if ps.spec.Role != scheduler.RoleBaseline || group == "" {
		return false
	}
	for key, other := range b.pending {
		if _, inFlight := b.assumed[key]; !inFlight && !other.parked && other.spec.Group == group {
			return true
		}
	}
	if time.Since(ps.FirstSeen) >= baselineWait {
		return false
	}
	placed := 0
	if err := b.sched.Update(func(g *scheduler.Graph) error { placed = g.GroupSize(group); return nil }); err != nil {
		return false
	}
	return placed == 0 // no canary pod yet
}

// schedulable returns the pod behind key when it is still a Pending pod of
// ours.
func (b *Binder) schedulable(key string) (*corev1.Pod, bool) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil, false
	}
	pod, err := b.podLister.Pods(ns).Get(name)
	if err != nil {
		return nil, false // deleted: podGone cleaned up
	}
	ok := pod.Spec.NodeName == "" && b.binds(pod) && !finished(pod)
	return pod, ok
}

// async runs fn on a bind slot, counted in b.wg.
func (b *Binder) async(fn func()) {
	b.bindSlots <- struct{}{}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		defer func() { <-b.bindSlots }()
		fn()
	}()
}

// startBind binds on a goroutine; at most BindWorkers binds are in
// flight, and the scheduling loop waits for a slot (back-pressure: assumed
// placements never run far ahead of the apiserver).
func (b *Binder) startBind(ctx context.Context, pod *corev1.Pod, node string, firstSeen time.Time) {
	select {
	case b.bindSlots <- struct{}{}:
	case <-ctx.Done():
		b.unassume(podKey(pod), node)
		return
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		defer func() { <-b.bindSlots }()
		b.bind(ctx, pod, node, firstSeen)
	}()
}

// bind creates the pod's Binding. On failure the placement is un-assumed
// and, unless the pod is gone, the pod is retried with back-off.
func (b *Binder) bind(ctx context.Context, pod *corev1.Pod, node string, firstSeen time.Time) {
	key := podKey(pod)
	if b.beforeBind != nil {
		b.beforeBind(ctx, pod, node)
	}
	if !b.nodeKnown(node) {
		b.bindFailed(ctx, key, node, bindErrNodeGone, errors.New("node left the cluster before the bind"), true)
		return
	}
	start := time.Now()
	err := b.postBinding(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	})
	b.metrics.bindLatency.Observe(time.Since(start).Seconds())
	switch {
	case err == nil:
		b.metrics.bound.Inc()
		b.metrics.e2e.Observe(time.Since(firstSeen).Seconds())
		b.queue.Forget(key)
		b.scheduled.bound(pod, node)
		if b.log.Enabled(ctx, slog.LevelDebug) {
			b.log.DebugContext(ctx, "bound", "pod", key, "node", node)
		}
	case apierrors.IsNotFound(err):
		b.bindFailed(ctx, key, node, bindErrNotFound, err, false)
	case apierrors.IsConflict(err):
		// Bound meanwhile (or replaced by a pod of the same name): the
		// queue drops it if the informer shows it bound by then.
		b.bindFailed(ctx, key, node, bindErrConflict, err, true)
	default:
		b.bindFailed(ctx, key, node, bindErrOther, err, ctx.Err() == nil)
	}
}

// postBinding creates the pods/binding subresource in protobuf. client-go's
// Pods().Bind sends JSON (its generated calls prefer protobuf, this
// hand-written one does not), which costs the apiserver a JSON decode of
// the Binding and a JSON encode of the reply on every bind. A client
// configured with a content type of its own keeps it.
func (b *Binder) postBinding(ctx context.Context, binding *corev1.Binding) error {
	return b.client.CoreV1().RESTClient().Post().
		UseProtobufAsDefault(). // before Body: Body encodes at once
		Namespace(binding.Namespace).Resource("pods").Name(binding.Name).SubResource("binding").
		VersionedParams(&metav1.CreateOptions{FieldManager: FieldManager}, scheme.ParameterCodec).
		Body(binding).
		Do(ctx).Error()
}

// nodeKnown says whether the graph still has the node.
func (b *Binder) nodeKnown(node string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.nodes[node]
	return ok
}

// bindFailed counts a failed bind, takes the assumed placement back out of
// the graph and, when retry is set, requeues the pod with back-off.
func (b *Binder) bindFailed(ctx context.Context, key, node, reason string, err error, retry bool) {
	b.metrics.bindErrors.WithLabelValues(reason).Inc()
	b.log.WarnContext(ctx, "bind failed", "pod", key, "node", node, "reason", reason, "retry", retry, "err", err)
	b.unassume(key, node)
	if retry {
		b.queue.AddRateLimited(key)
	}
}

// unassume removes an assumed placement of key on node from the graph,
// unless the informer has meanwhile shown where the pod really is.
func (b *Binder) unassume(key, node string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.assumed[key] != node {
		return
	}
	delete(b.assumed, key)
	err := b.sched.Update(func(g *scheduler.Graph) error { return g.RemovePod(key) })
	if err != nil && !errors.Is(err, scheduler.ErrPodNotFound) {
		b.log.Error("binder: unassume", "pod", key, "err", err)
	}
}
