package kube

import (
	"errors"
	"reflect"
	"time"

	"github.com/sluice-dev/sluice/scheduler"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// This file keeps the graph in sync with the informers. Every handler
// holds b.mu while it changes the graph (lock order: b.mu, then the
// scheduler's own lock inside Update), so a scheduling cycle never sees a
// half-applied event.

// onNode adds or updates a node. Unchanged nodes (kwok and kubelets
// update status every few seconds) cost a comparison and nothing else.
func (b *Binder) onNode(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	sn := nodeFromCore(n)
	b.mu.Lock()
	defer b.mu.Unlock()
	old, known := b.nodes[n.Name]
	if known && reflect.DeepEqual(old, sn) {
		return
	}
	err := b.sched.Update(func(g *scheduler.Graph) error {
		if known {
			return g.UpdateNode(sn)
		}
		if err := g.AddNode(sn); err != nil {
			return err
		}
		// Pods the informer reported on this node before the node itself.
		for key := range b.byNode[n.Name] {
			bp := b.bound[key]
			if err := g.AddPod(&bp.pod, n.Name); err != nil && !errors.Is(err, scheduler.ErrPodExists) {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.log.Error("binder: node update", "node", n.Name, "err", err)
		return
	}
	b.nodes[n.Name] = sn
	b.retryUnschedulableLocked()
}

// onNodeDelete removes a node; the graph forgets the pods on it. Binds in
// flight to it notice before they call the apiserver (bind).
func (b *Binder) onNodeDelete(obj any) {
	n, ok := unwrapTombstone(obj).(*corev1.Node)
	if !ok {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, known := b.nodes[n.Name]; !known {
		return
	}
	delete(b.nodes, n.Name)
	if err := b.sched.Update(func(g *scheduler.Graph) error { return g.RemoveNode(n.Name) }); err != nil {
		b.log.Error("binder: node delete", "node", n.Name, "err", err)
	}
	// One zone fewer changes every group's emptiest domain (maxSkew).
	b.retryUnschedulableLocked()
}

// onPod routes a pod by its state: bound (counted on its node), finished
// (its resources freed), or Pending for this binder (queued).
func (b *Binder) onPod(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	switch {
	case p.Spec.NodeName != "" && !finished(p):
		b.podBound(p)
	case p.Spec.NodeName != "":
		b.podGone(podKey(p))
	case b.binds(p):
		b.podPending(p)
	}
}

func (b *Binder) onPodDelete(obj any) {
	if p, ok := unwrapTombstone(obj).(*corev1.Pod); ok {
		b.podGone(podKey(p))
	}
}

// finished pods hold no resources.
func finished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func unwrapTombstone(obj any) any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

// podBound counts a bound pod on its node. When it is the confirmation of
// a bind of ours, the graph already holds it there (assumed) and nothing
// changes; when someone else bound it (another scheduler, or the pod was
// bound under our feet), the graph moves it to where it really is.
func (b *Binder) podBound(p *corev1.Pod) {
	key, node := podKey(p), p.Spec.NodeName
	sp := podFromCore(p)
	b.mu.Lock()
	defer b.mu.Unlock()
	if bp, ok := b.bound[key]; ok && bp.node == node && bp.pod.Group == sp.Group {
		return // nothing the graph counts changed (a pod starting to terminate leaves its group)
	}
	_, wasAssumed := b.assumed[key]
	delete(b.assumed, key)
	changed := true
	err := b.sched.Update(func(g *scheduler.Graph) error {
		if cur, ok := g.PodNode(key); ok {
			if cur == node && wasAssumed {
				changed = false
				return nil
			}
			if err := g.RemovePod(key); err != nil {
				return err
			}
		}
		if _, ok := b.nodes[node]; !ok {
			return nil // counted when the node arrives (onNode)
		}
		return g.AddPod(&sp, node)
	})
	if err != nil {
		b.log.Error("binder: bound pod", "pod", key, "node", node, "err", err)
	}
	if old, ok := b.bound[key]; ok {
		delete(b.byNode[old.node], key)
	}
	b.bound[key] = boundPod{node: node, pod: sp}
	if b.byNode[node] == nil {
		b.byNode[node] = map[string]bool{}
	}
	b.byNode[node][key] = true
	b.dropPendingLocked(key)
	if changed {
		b.retryUnschedulableLocked()
	}
}

// podGone forgets a deleted or finished pod: its resources and spread
// counts leave the graph, a bind in flight is un-assumed, and it leaves
// the pending set (the queue drops it when it comes up: scheduleNext).
func (b *Binder) podGone(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	bp, wasBound := b.bound[key]
	_, wasAssumed := b.assumed[key]
	if wasBound || wasAssumed {
		err := b.sched.Update(func(g *scheduler.Graph) error { return g.RemovePod(key) })
		if err != nil && !errors.Is(err, scheduler.ErrPodNotFound) {
			b.log.Error("binder: pod gone", "pod", key, "err", err)
		}
	}
	delete(b.assumed, key)
	if wasBound {
		delete(b.bound, key)
		delete(b.byNode[bp.node], key)
		if len(b.byNode[bp.node]) == 0 {
			delete(b.byNode, bp.node)
		}
		b.retryUnschedulableLocked()
	}
	b.dropPendingLocked(key)
}

// podPending queues a Pending pod of ours the first time it is seen. A
// pod parked as unschedulable is queued again only when its scheduling
// inputs changed (not when our own status patch comes back).
func (b *Binder) podPending(p *corev1.Pod) {
	key := podKey(p)
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, inFlight := b.assumed[key]; inFlight {
		return
	}
	ps := b.pending[key]
	if ps == nil {
		now := time.Now()
		b.pending[key] = &pendingState{
			PendingPod: PendingPod{Namespace: p.Namespace, Name: p.Name, Labels: p.Labels, FirstSeen: now},
			spec:       podFromCore(p),
		}
		b.queue.Add(key)
		return
	}
	ps.Labels = p.Labels
	if spec := podFromCore(p); ps.parked && !reflect.DeepEqual(spec, ps.spec) {
		ps.spec = spec
		b.unparkLocked(ps)
		b.queue.Add(key)
	}
}

// dropPendingLocked forgets a pod that is bound or gone.
func (b *Binder) dropPendingLocked(key string) {
	ps, ok := b.pending[key]
	if !ok {
		return
	}
	if ps.parked {
		b.metrics.unschedulableNo.Dec()
	}
	delete(b.pending, key)
	b.queue.Forget(key)
}
