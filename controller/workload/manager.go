package workload

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// Options configure a Manager.
type Options struct {
	// Client talks to the cluster. Required.
	Client kubernetes.Interface
	// Namespace limits the informers to one namespace ("" = all).
	Namespace string
	// SchedulePods gives the pods schedulerName "sluice", so that sluice's
	// graph scheduler binds them (--schedule-pods).
	SchedulePods bool
	// Logger defaults to a discarding one.
	Logger *slog.Logger
	// Registry receives the package's metrics (nil = not registered).
	Registry *prometheus.Registry
	// SyncTimeout bounds Start's wait for the informers' first list
	// (default DefaultSyncTimeout): a missing RBAC permission shows as a
	// failed start instead of a hang.
	SyncTimeout time.Duration
	// OnReady is called whenever the replicas or Ready count of one of a
	// rollout's versions changes, and once per version after the caches
	// sync. Ready counts only pods that are also in Endpoints, so traffic
	// pushed for them finds them. Called from one goroutine, one call at
	// a time: it must not block.
	OnReady func(key api.Key, ev rollout.PodsReady)
	// OnEndpoints is called when the endpoints (or their zones) of any
	// version of a rollout change. Same rules as OnReady.
	OnEndpoints func(key api.Key)
}

// DefaultSyncTimeout is Options.SyncTimeout's default.
const DefaultSyncTimeout = 2 * time.Minute

// Manager is the workload actuator. Its methods are safe for concurrent
// use; the read methods answer from the informers' caches.
type Manager struct {
	client       kubernetes.Interface
	schedulePods bool
	syncTimeout  time.Duration
	log          *slog.Logger
	metrics      *metrics
	onReady      func(api.Key, rollout.PodsReady)
	onEndpoints  func(api.Key)

	factories []informers.SharedInformerFactory
	synced    []cache.InformerSynced

	rsIndex    cache.Indexer
	pods       corelisters.PodLister
	podIndex   cache.Indexer
	nodes      corelisters.NodeLister
	sliceIndex cache.Indexer

	queue workqueue.TypedInterface[api.Key]
	// reported is the worker's memory of what it last told the callbacks;
	// only the worker touches it.
	reported map[api.Key]rolloutReport

	pinsMu sync.RWMutex
	pins   map[api.Key]servicePins
	// pinnedBy maps "<namespace>/<service>" to the rollout that pinned it.
	pinnedBy map[string]api.Key
}

// Index names of the informer caches.
const (
	byRollout = "rollout" // ReplicaSets and Pods: "<namespace>/<rollout>"
	byService = "service" // EndpointSlices: "<namespace>/<service>"
)

// New builds the Manager and its informers; nothing runs until Start.
func New(opts Options) (*Manager, error) {
	if opts.Client == nil {
		return nil, errors.New("workload: Options.Client is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.SyncTimeout <= 0 {
		opts.SyncTimeout = DefaultSyncTimeout
	}
	met, err := newMetrics(opts.Registry)
	if err != nil {
		return nil, err
	}
	m := &Manager{
		client:       opts.Client,
		schedulePods: opts.SchedulePods,
		syncTimeout:  opts.SyncTimeout,
		log:          opts.Logger,
		metrics:      met,
		onReady:      opts.OnReady,
		onEndpoints:  opts.OnEndpoints,
		queue:        workqueue.NewTyped[api.Key](),
		reported:     map[api.Key]rolloutReport{},
		pins:         map[api.Key]servicePins{},
		pinnedBy:     map[string]api.Key{},
	}
	if m.onReady == nil {
		m.onReady = func(api.Key, rollout.PodsReady) {}
	}
	if m.onEndpoints == nil {
		m.onEndpoints = func(api.Key) {}
	}
	if err := m.buildInformers(opts.Namespace); err != nil {
		return nil, err
	}
	return m, nil
}

// buildInformers wires ReplicaSets and Pods (sluice's only), EndpointSlices
// and Nodes; each change enqueues the rollout it concerns.
func (m *Manager) buildInformers(namespace string) error {
	strip := informers.WithTransform(stripManagedFields)
	managed := informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = LabelManagedBy + "=" + ManagedByValue
	})
	ours := informers.NewSharedInformerFactoryWithOptions(m.client, 0, informers.WithNamespace(namespace), managed, strip)
	all := informers.NewSharedInformerFactoryWithOptions(m.client, 0, informers.WithNamespace(namespace), strip)
	cluster := informers.NewSharedInformerFactoryWithOptions(m.client, 0, strip)
	m.factories = []informers.SharedInformerFactory{ours, all, cluster}

	rs := ours.Apps().V1().ReplicaSets()
	pods := ours.Core().V1().Pods()
	slices := all.Discovery().V1().EndpointSlices()
	nodes := cluster.Core().V1().Nodes()
	if err := rs.Informer().AddIndexers(cache.Indexers{byRollout: rolloutIndex}); err != nil {
		return fmt.Errorf("index replicasets: %w", err)
	}
	if err := pods.Informer().AddIndexers(cache.Indexers{byRollout: rolloutIndex}); err != nil {
		return fmt.Errorf("index pods: %w", err)
	}
	if err := slices.Informer().AddIndexers(cache.Indexers{byService: serviceIndex}); err != nil {
		return fmt.Errorf("index endpointslices: %w", err)
	}
	m.rsIndex = rs.Informer().GetIndexer()
	m.pods, m.podIndex = pods.Lister(), pods.Informer().GetIndexer()
	m.sliceIndex = slices.Informer().GetIndexer()
	m.nodes = nodes.Lister()

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
	byNode := cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, obj any) { m.enqueueZoneChange(old, obj) },
	}
	for _, reg := range []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{{rs.Informer(), byLabels}, {pods.Informer(), byLabels}, {slices.Informer(), bySlice}, {nodes.Informer(), byNode}} {
		if _, err := reg.inf.AddEventHandler(reg.h); err != nil {
			return fmt.Errorf("informer handler: %w", err)
		}
		m.synced = append(m.synced, reg.inf.HasSynced)
	}
	return nil
}

// Start runs the informers and the worker until ctx ends, and returns once
// the caches are filled (or could not be within Options.SyncTimeout).
// Call it once.
func (m *Manager) Start(ctx context.Context) error {
	// The informers run on their own context so that a failed start can
	// stop them (Shutdown waits for them to end).
	runCtx, stopInformers := context.WithCancel(ctx)
	for _, f := range m.factories {
		f.Start(runCtx.Done())
	}
	syncCtx, cancel := context.WithTimeout(ctx, m.syncTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), m.synced...) {
		stopInformers()
		m.stop()
		return fmt.Errorf("workload: informer caches (replicasets, pods, endpointslices, nodes) did not sync; missing RBAC permissions?: %w", context.Cause(syncCtx))
	}
	go func() {
		<-runCtx.Done()
		stopInformers()
		m.stop()
	}()
	go m.work()
	return nil
}

// stop ends the worker and waits for the informers, whose context must
// be done.
func (m *Manager) stop() {
	m.queue.ShutDown()
	for _, f := range m.factories {
		f.Shutdown()
	}
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
// from the API, never from a cache.
func stripManagedFields(obj any) (any, error) {
	if o, ok := obj.(metav1.Object); ok {
		o.SetManagedFields(nil)
	}
	return obj, nil
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
	for _, p := range m.podIndex.List() {
		pod, ok := p.(*corev1.Pod)
		if ok && pod.Spec.NodeName == node.Name {
			m.enqueueLabelled(pod)
		}
	}
}

// replicaSetsOf lists the rollout's ReplicaSets from the cache.
func (m *Manager) replicaSetsOf(key api.Key) []*appsv1.ReplicaSet {
	objs, _ := m.rsIndex.ByIndex(byRollout, key.String())
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
	objs, _ := m.podIndex.ByIndex(byRollout, key.String())
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
