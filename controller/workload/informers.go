package workload

import (
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/sluice-dev/sluice/api"
)

// Index names of the informer caches.
const (
	byRollout = "rollout" // ReplicaSets and Pods: "<namespace>/<rollout>"
	byService = "service" // EndpointSlices: "<namespace>/<service>"
)

// nsCaches are the caches of one namespace (or of all of them).
type nsCaches struct {
	rsIndex    cache.Indexer
	pods       corelisters.PodLister
	podIndex   cache.Indexer
	sliceIndex cache.Indexer
}

// cachesFor returns the caches that hold namespace's objects; nil for a
// namespace sluice does not watch.
func (m *Manager) cachesFor(namespace string) *nsCaches {
	if c, ok := m.caches[""]; ok {
		return c
	}
	return m.caches[namespace]
}

// buildInformers wires ReplicaSets and Pods (sluice's only), EndpointSlices
// and Nodes; each change enqueues the rollout it concerns. With
// namespaces, the namespaced informers run once per namespace: client-go's
// factories take one namespace or all, and a sluice with namespaced
// permissions may not list across all of them. With shared, the pods are
// read from its cache of every pod (Options.Pods) instead.
func (m *Manager) buildInformers(namespaces []string, shared informers.SharedInformerFactory) error {
	strip := informers.WithTransform(stripManagedFields)
	cluster := informers.NewSharedInformerFactoryWithOptions(m.client, 0, strip)
	m.factories = []informers.SharedInformerFactory{cluster}
	nodes := cluster.Core().V1().Nodes()
	m.nodes = nodes.Lister()
	m.nodeStore = nodes.Informer().GetStore()
	if err := m.addHandler(nodes.Informer(), cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, obj any) { m.enqueueZoneChange(old, obj) },
	}); err != nil {
		return err
	}
	if len(namespaces) > 0 {
		m.namespaces = make(map[string]bool, len(namespaces))
		for _, ns := range namespaces {
			m.namespaces[ns] = true
		}
	} else {
		namespaces = []string{metav1.NamespaceAll}
	}
	var sharedPods *podCaches
	if shared != nil {
		var err error
		if sharedPods, err = m.shareInformer(shared.Core().V1().Pods()); err != nil {
			return err
		}
		m.sharedPods = shared
	}
	m.caches = make(map[string]*nsCaches, len(namespaces))
	for _, ns := range namespaces {
		c, err := m.buildNamespaceInformers(ns, strip, sharedPods)
		if err != nil {
			return err
		}
		m.caches[ns] = c
	}
	return nil
}

// podCaches are the reads of one pod informer.
type podCaches struct {
	lister corelisters.PodLister
	index  cache.Indexer
}

// shareInformer indexes a pod informer that caches every pod (the
// binder's) by rollout, sluice's pods of the watched namespaces alone, and
// enqueues their rollouts on a change.
func (m *Manager) shareInformer(pods coreinformers.PodInformer) (*podCaches, error) {
	inf := pods.Informer()
	if err := inf.AddIndexers(cache.Indexers{byRollout: m.ourPodIndex}); err != nil {
		return nil, fmt.Errorf("index shared pods: %w", err)
	}
	enqueue := func(obj any) {
		if o, err := metaOf(obj); err == nil && m.ours(o) {
			m.enqueueLabelled(obj)
		}
	}
	if err := m.addHandler(inf, cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}); err != nil {
		return nil, err
	}
	return &podCaches{lister: pods.Lister(), index: inf.GetIndexer()}, nil
}

// ours says whether o is sluice's (its managed-by label) in a namespace
// this Manager watches: what a cache of every pod holds beyond that is the
// binder's alone.
func (m *Manager) ours(o metav1.Object) bool {
	return o.GetLabels()[LabelManagedBy] == ManagedByValue && (m.namespaces == nil || m.namespaces[o.GetNamespace()])
}

// ourPodIndex is rolloutIndex for sluice's pods of the watched namespaces.
func (m *Manager) ourPodIndex(obj any) ([]string, error) {
	o, err := metaOf(obj)
	if err != nil || !m.ours(o) {
		return nil, err
	}
	return rolloutIndex(obj)
}

// buildNamespaceInformers wires the informers of one namespace ("" = all);
// its pods are read from pods, a cache shared by every namespace, or with
// pods nil from an informer of the namespace's own.
func (m *Manager) buildNamespaceInformers(namespace string, strip informers.SharedInformerOption, pods *podCaches) (*nsCaches, error) {
	managed := informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = LabelManagedBy + "=" + ManagedByValue
	})
	ours := informers.NewSharedInformerFactoryWithOptions(m.client, 0, informers.WithNamespace(namespace), managed, strip)
	all := informers.NewSharedInformerFactoryWithOptions(m.client, 0, informers.WithNamespace(namespace), strip)
	m.factories = append(m.factories, ours, all)

	rs := ours.Apps().V1().ReplicaSets()
	endpointSlices := all.Discovery().V1().EndpointSlices()
	if err := rs.Informer().AddIndexers(cache.Indexers{byRollout: rolloutIndex}); err != nil {
		return nil, fmt.Errorf("index replicasets: %w", err)
	}
	if err := endpointSlices.Informer().AddIndexers(cache.Indexers{byService: serviceIndex}); err != nil {
		return nil, fmt.Errorf("index endpointslices: %w", err)
	}
	if _, err := rs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { m.seenReplicaSet(obj, false) },
		UpdateFunc: func(_, obj any) { m.seenReplicaSet(obj, false) },
		DeleteFunc: func(obj any) { m.seenReplicaSet(obj, true) },
	}); err != nil {
		return nil, fmt.Errorf("informer handler: %w", err)
	}
	byLabels := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { m.enqueueLabelled(obj) },
		UpdateFunc: func(_, obj any) { m.enqueueLabelled(obj) },
		DeleteFunc: func(obj any) { m.enqueueLabelled(obj) },
	}
	bySlice := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { m.enqueueSlice(obj) },
		UpdateFunc: func(_, obj any) { m.enqueueSlice(obj) },
		DeleteFunc: func(obj any) { m.enqueueSlice(obj) },
	}
	regs := []registration{{rs.Informer(), byLabels}, {endpointSlices.Informer(), bySlice}}
	if pods == nil {
		own := ours.Core().V1().Pods()
		if err := own.Informer().AddIndexers(cache.Indexers{byRollout: rolloutIndex}); err != nil {
			return nil, fmt.Errorf("index pods: %w", err)
		}
		regs = append(regs, registration{own.Informer(), byLabels})
		pods = &podCaches{lister: own.Lister(), index: own.Informer().GetIndexer()}
	}
	for _, reg := range regs {
		if err := m.addHandler(reg.inf, reg.h); err != nil {
			return nil, err
		}
	}
	return &nsCaches{
		rsIndex: rs.Informer().GetIndexer(), pods: pods.lister,
		podIndex: pods.index, sliceIndex: endpointSlices.Informer().GetIndexer(),
	}, nil
}

// registration is an informer and the handler to register on it.
type registration struct {
	inf cache.SharedIndexInformer
	h   cache.ResourceEventHandler
}

// addHandler registers h on inf and waits for inf's sync at Start.
func (m *Manager) addHandler(inf cache.SharedIndexInformer, h cache.ResourceEventHandler) error {
	if _, err := inf.AddEventHandler(h); err != nil {
		return fmt.Errorf("informer handler: %w", err)
	}
	m.synced = append(m.synced, inf.HasSynced)
	return nil
}

// rolloutIndex keys sluice's objects by "<namespace>/<rollout>".
func rolloutIndex(obj any) ([]string, error) {
	o, err := metaOf(obj)
	if err != nil {
		return nil, err
	}
	name := o.GetLabels()[LabelRollout]
	if name == "" {
		return nil, nil
	}
	return []string{api.Key{Namespace: o.GetNamespace(), Name: name}.String()}, nil
}

// serviceIndex keys EndpointSlices by "<namespace>/<service>".
func serviceIndex(obj any) ([]string, error) {
	o, err := metaOf(obj)
	if err != nil {
		return nil, err
	}
	svc := o.GetLabels()[discoveryv1.LabelServiceName]
	if svc == "" {
		return nil, nil
	}
	return []string{o.GetNamespace() + "/" + svc}, nil
}

func metaOf(obj any) (metav1.Object, error) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	o, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("workload: unexpected object %T", obj)
	}
	return o, nil
}

// stripManagedFields keeps the caches small: Scale reads managed fields
// from the API, never from a cache. Of a pod it keeps only what the
// endpoints, readiness and status read (labels, node, the containers'
// ports, phase, IP, whether it is Ready): annotations, volumes, env,
// container statuses and the other conditions were more than half of each
// cached pod (docs/scale.md#kubernetes-mode).
// Pods are written from API reads, never from the cache. Of a ReplicaSet
// it drops the pod template's spec (slimReplicaSet), of a node all but
// its metadata (zoneOf reads its labels).
func stripManagedFields(obj any) (any, error) {
	if o, ok := obj.(metav1.Object); ok {
		o.SetManagedFields(nil)
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		slimPod(o)
	case *appsv1.ReplicaSet:
		slimReplicaSet(o)
	case *corev1.Node:
		o.Spec, o.Status = corev1.NodeSpec{}, corev1.NodeStatus{}
	}
	return obj, nil
}

func slimPod(p *corev1.Pod) {
	full := *p
	*p = corev1.Pod{TypeMeta: full.TypeMeta, ObjectMeta: full.ObjectMeta}
	p.Annotations = nil
	KeepPodFields(p, &full)
}

// KeepPodFields copies into dst what the Manager reads of a pod beyond its
// metadata (labels, owner, deletion): its node and scheduler name, each
// container's name, image and ports, and of its status the phase, the IP
// and whether it is Ready. A cache of pods shared with another reader
// (Options.Pods) keeps these with the other reader's fields; src is left
// as it is and dst shares its slices.
func KeepPodFields(dst, src *corev1.Pod) {
	dst.Spec.NodeName, dst.Spec.SchedulerName = src.Spec.NodeName, src.Spec.SchedulerName
	if len(dst.Spec.Containers) != len(src.Spec.Containers) {
		dst.Spec.Containers = make([]corev1.Container, len(src.Spec.Containers))
	}
	for i, c := range src.Spec.Containers {
		kept := &dst.Spec.Containers[i]
		kept.Name, kept.Image, kept.Ports = c.Name, c.Image, c.Ports
	}
	dst.Status.Phase, dst.Status.PodIP = src.Status.Phase, src.Status.PodIP
	dst.Status.Conditions = readyCondition(src.Status.Conditions)
}

// readyCondition keeps of a pod's conditions the type and status of
// Ready, all that servesTraffic reads: a kubelet writes four or five,
// each with times, reason and message (about 0.5 KB a pod).
func readyCondition(conds []corev1.PodCondition) []corev1.PodCondition {
	for _, c := range conds {
		if c.Type == corev1.PodReady {
			return []corev1.PodCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	return nil
}

// slimReplicaSet keeps of a cached ReplicaSet what the cache's readers
// use: its metadata, replicas and status (plans, readiness, status) and
// the template's annotations (a baseline's canary hash). The template's
// pod spec, about half of each cached ReplicaSet (docs/scale.md, "Side by
// side with Argo Rollouts' controller"), is read only from the API:
// Recall lists the sets, and a Scale that must read a template (adopting,
// retiring) plans from the API too.
func slimReplicaSet(rs *appsv1.ReplicaSet) {
	rs.Spec.Template = corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: rs.Spec.Template.Annotations}}
}

func (m *Manager) enqueueLabelled(obj any) {
	o, err := metaOf(obj)
	if err != nil {
		return
	}
	if name := o.GetLabels()[LabelRollout]; name != "" {
		m.queue.Add(api.Key{Namespace: o.GetNamespace(), Name: name})
	}
}

// enqueueSlice enqueues the rollout whose pinned Service the slice serves.
func (m *Manager) enqueueSlice(obj any) {
	o, err := metaOf(obj)
	if err != nil {
		return
	}
	svc := o.GetLabels()[discoveryv1.LabelServiceName]
	if svc == "" {
		return
	}
	if key, ok := m.rolloutOfService(o.GetNamespace(), svc); ok {
		m.queue.Add(key)
	}
}

// enqueueZoneChange re-reports every rollout with pods on a node whose
// zone label changed (rare: zones are set when a node joins).
func (m *Manager) enqueueZoneChange(oldObj, obj any) {
	oldNode, ok1 := oldObj.(*corev1.Node)
	node, ok2 := obj.(*corev1.Node)
	if !ok1 || !ok2 || oldNode.Labels[ZoneLabel] == node.Labels[ZoneLabel] {
		return
	}
	for _, index := range m.podIndexes() {
		for _, p := range index.List() {
			pod, ok := p.(*corev1.Pod)
			if ok && pod.Spec.NodeName == node.Name && m.ours(pod) {
				m.enqueueLabelled(pod)
			}
		}
	}
}

// podIndexes are the pod caches, each once: the namespaces' own, or the
// one every namespace shares (Options.Pods).
func (m *Manager) podIndexes() []cache.Indexer {
	var out []cache.Indexer
	for _, c := range m.caches {
		if !slices.Contains(out, c.podIndex) {
			out = append(out, c.podIndex)
		}
	}
	return out
}

// seenReplicaSet tells the write log what the ReplicaSet informer
// delivered.
func (m *Manager) seenReplicaSet(obj any, gone bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if rs, ok := obj.(*appsv1.ReplicaSet); ok {
		m.writes.seen(rs, gone)
		if gone {
			m.relabels.forget(rs)
		}
	}
}

// replicaSetsOf lists the rollout's ReplicaSets from the cache.
func (m *Manager) replicaSetsOf(key api.Key) []*appsv1.ReplicaSet {
	c := m.cachesFor(key.Namespace)
	if c == nil {
		return nil
	}
	objs, _ := c.rsIndex.ByIndex(byRollout, key.String())
	out := make([]*appsv1.ReplicaSet, 0, len(objs))
	for _, o := range objs {
		if rs, ok := o.(*appsv1.ReplicaSet); ok {
			out = append(out, rs)
		}
	}
	return out
}

// podsOf lists the rollout's pods of one hash from the cache.
func (m *Manager) podsOf(key api.Key, hash string) []*corev1.Pod {
	c := m.cachesFor(key.Namespace)
	if c == nil {
		return nil
	}
	objs, _ := c.podIndex.ByIndex(byRollout, key.String())
	var out []*corev1.Pod
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok && p.Labels[LabelHash] == hash {
			out = append(out, p)
		}
	}
	return out
}

// zoneOf is the zone label of a node ("" when unknown).
func (m *Manager) zoneOf(nodeName string) string {
	if nodeName == "" {
		return ""
	}
	n, err := m.nodes.Get(nodeName)
	if err != nil {
		return ""
	}
	return n.Labels[ZoneLabel]
}
