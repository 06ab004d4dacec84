package workload

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/cache"
)

// Object kinds, the object label of sluice_workload_apply_errors_total.
const (
	objectReplicaSet = "replicaset"
	objectService    = "service"
	objectPod        = "pod"
)

type metrics struct {
	applyErrors *prometheus.CounterVec
	plans       *prometheus.CounterVec
}

// Where Scale read the ReplicaSets it planned on, the source label of
// sluice_workload_scale_plans_total.
const (
	planFromCacheSource = "cache"
	// planFromCacheAndHashesSource: the rollout's sets from the cache, a
	// new version's from one list by hash (adoption).
	planFromCacheAndHashesSource = "cache+hashes"
	planFromAPISource            = "api"
)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		applyErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_workload_apply_errors_total",
			Help: "Failed writes to the cluster by the workload actuator (or the reads they need), by object: replicaset (apply, scale to 0, delete), pod (labels of an adopted ReplicaSet's pods) or service (selector pin).",
		}, []string{"object"}),
		plans: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_workload_scale_plans_total",
			Help: "Scales of the workload actuator by where they read the rollout's ReplicaSets: cache (the informer's; every wanted set already sluice's, none leaving), cache+hashes (the cache, and one list of the new sets' hashes to adopt) or api (two lists).",
		}, []string{"source"}),
	}
	for _, o := range []string{objectReplicaSet, objectPod, objectService} {
		m.applyErrors.WithLabelValues(o)
	}
	for _, s := range []string{planFromCacheSource, planFromCacheAndHashesSource, planFromAPISource} {
		m.plans.WithLabelValues(s)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.applyErrors, m.plans} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register workload metrics: %w", err)
		}
	}
	return m, nil
}

// Kinds of cached objects, the kind label of sluice_workload_cached_objects.
const (
	cachedReplicaSet    = "replicaset"
	cachedPod           = "pod"
	cachedEndpointSlice = "endpointslice"
	cachedNode          = "node"
)

// cacheCollector exports how many objects each of the Manager's informer
// caches holds, counted at scrape time: the ReplicaSets and Pods should be
// sluice's own only (label selected), whatever else runs in the cluster.
type cacheCollector struct {
	m    *Manager
	desc *prometheus.Desc
}

func registerCacheGauges(reg prometheus.Registerer, m *Manager) error {
	if reg == nil {
		return nil
	}
	c := cacheCollector{m: m, desc: prometheus.NewDesc("sluice_workload_cached_objects",
		"Objects in the workload actuator's informer caches, by kind: replicaset and pod (sluice's own only, by label), endpointslice, node.",
		[]string{"kind"}, nil)}
	if err := reg.Register(c); err != nil {
		return fmt.Errorf("register workload cache gauge: %w", err)
	}
	return nil
}

func (c cacheCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c cacheCollector) Collect(ch chan<- prometheus.Metric) {
	counts := []struct {
		kind string
		n    int
	}{
		{cachedReplicaSet, c.m.cachedCount(func(n *nsCaches) cache.Store { return n.rsIndex })},
		{cachedPod, c.m.cachedPods()},
		{cachedEndpointSlice, c.m.cachedCount(func(n *nsCaches) cache.Store { return n.sliceIndex })},
		{cachedNode, len(c.m.nodeStore.ListKeys())},
	}
	for _, k := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(k.n), k.kind)
	}
}

// cachedPods counts sluice's pods in the pod caches: a cache shared with
// the binder (Options.Pods) holds every pod of the cluster, of which the
// Manager indexes its own.
func (m *Manager) cachedPods() int {
	n := 0
	for _, index := range m.podIndexes() {
		for _, key := range index.ListIndexFuncValues(byRollout) {
			keys, _ := index.IndexKeys(byRollout, key)
			n += len(keys)
		}
	}
	return n
}

// cachedCount sums the size of one store over the watched namespaces.
func (m *Manager) cachedCount(store func(*nsCaches) cache.Store) int {
	n := 0
	for _, c := range m.caches {
		n += len(store(c).ListKeys())
	}
	return n
}
