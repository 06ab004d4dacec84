package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/clusters"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/controller/runner"
	"github.com/sluice-dev/sluice/controller/workload"
	"github.com/sluice-dev/sluice/gateway"
	"github.com/sluice-dev/sluice/scheduler/global"
	"github.com/sluice-dev/sluice/scheduler/kube"
)

// The daemon's part of multi-cluster rollouts (Kubernetes mode): each
// cluster beyond home gets its own workload actuator and pod binder
// (remoteCluster); clusterWorkloads sends a part's actions ("ns/name@eu-1")
// to its cluster's actuator under the rollout's own key, so that its
// ReplicaSets and pods are named as in a single cluster; expandClusters
// replaces each multi-cluster rollout of a loaded set by its parts
// (scheduler/global); waves.go runs the wave program over the parts.

// remoteConnectRetry is how long a cluster that could not be reached at
// start waits before the next attempt.
const remoteConnectRetry = 5 * time.Second

// remoteSyncTimeout bounds one attempt to fill a remote cluster's caches:
// an unreachable cluster must not hold up the others.
const remoteSyncTimeout = 15 * time.Second

// remoteCluster is a cluster beyond home that multi-cluster rollouts run
// in. Its actuator exists once the cluster has been reached (ready); until
// then its parts' workload actions fail and are retried by the runner.
type remoteCluster struct {
	name   string
	labels map[string]string
	config *rest.Config

	ready  atomic.Pointer[workload.Manager]
	binder atomic.Pointer[kube.Binder]
	// routes write its parts' routes (clusterrouters.go); connected
	// before ready.
	routes awaitedRoutes
	// onConnect re-applies the commit in force: the parts held back
	// while the cluster was not connected are created then.
	onConnect func()
	mu        sync.Mutex
	lastErr   error
}

// homeCluster is the home cluster's name ("home" in standalone mode).
func (d *Daemon) homeCluster() string {
	if d.kube == nil {
		return clusters.HomeName
	}
	return d.kube.homeName
}

// loadClusters reads the clusters (--cluster, cluster Secrets): the home
// cluster's name and labels, and one remoteCluster per other cluster,
// connected later (connectRemotes); health probes every one.
func (k *kubeParts) loadClusters(o Options, home *rest.Config, client kubernetes.Interface) error {
	var specs []clusters.Spec
	for _, v := range o.Clusters {
		s, err := clusters.ParseFlag(v)
		if err != nil {
			return err
		}
		specs = append(specs, s)
	}
	lo := clusters.Options{Home: home, Flags: specs, Namespace: o.OwnNamespace(), Limit: o.KubeAPI.Apply}
	if o.ClusterSecrets {
		lo.Client = client
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	all, err := clusters.Load(ctx, lo)
	if err != nil {
		return fmt.Errorf("clusters: %w", err)
	}
	for _, c := range all {
		if c.Home {
			k.homeName, k.homeLabels = c.Name, c.Labels
			continue
		}
		k.remotes[c.Name] = &remoteCluster{name: c.Name, labels: c.Labels, config: c.Config, onConnect: k.signalRefChange}
	}
	if len(k.remotes) > 0 {
		k.health, err = clusters.NewHealth(all, clusters.HealthOptions{Interval: o.ClusterProbeInterval,
			OnChange: func(string, bool) { k.pokeWaves() }})
	}
	return err
}

// pokeWaves asks the wave loop to look again (a cluster went down or came
// back).
func (k *kubeParts) pokeWaves() {
	if k.waves != nil {
		k.waves.pokeAll()
	}
}

// runHealth probes the clusters until ctx ends (at once with no remote
// cluster).
func (k *kubeParts) runHealth(ctx context.Context) error {
	if k.health != nil {
		k.health.Run(ctx)
	}
	return nil
}

// clusterWorkloads sends a rollout's workload actions to the cluster its
// key names: a part's to its cluster's actuator under the rollout's own
// key (a home part's to home's), anything else to home's.
type clusterWorkloads struct {
	k *kubeParts
}

// route is the actuator and key for key's cluster.
func (c clusterWorkloads) route(key api.Key) (*workload.Manager, api.Key, error) {
	cluster := key.Cluster()
	if cluster == "" {
		return c.k.workloads, key, nil
	}
	if cluster == c.k.homeName {
		return c.k.workloads, key.Parent(), nil
	}
	r, ok := c.k.remotes[cluster]
	if !ok {
		return nil, key, fmt.Errorf("rollout %s: cluster %q is not one sluice runs rollouts in (--cluster)", key, cluster)
	}
	m := r.ready.Load()
	if m == nil {
		return nil, key, fmt.Errorf("rollout %s: %s", key, r.notConnected())
	}
	return m, key.Parent(), nil
}

func (c clusterWorkloads) Scale(ctx context.Context, a rollout.ScaleWorkloads) error {
	m, key, err := c.route(a.Rollout)
	if err != nil {
		return err
	}
	a.Rollout = key
	return m.Scale(ctx, a)
}

func (c clusterWorkloads) Resend(key api.Key) {
	if m, own, err := c.route(key); err == nil {
		m.Resend(own)
	}
}

// Status is the rollout's ReplicaSets in its cluster (none while the
// cluster has not been reached).
func (c clusterWorkloads) Status(key api.Key) []workload.ReplicaSetStatus {
	m, own, err := c.route(key)
	if err != nil {
		return nil
	}
	return m.Status(own)
}

// ResolveTraffic fills t's endpoints from the Ready pods of its cluster;
// a part's traffic also carries its cluster's region, for the EDS
// locality region/zone/cluster. A part whose cluster is not connected
// keeps t as it is: without stable endpoints the gateway refuses it and
// the part holds.
func (c clusterWorkloads) ResolveTraffic(t api.Traffic) api.Traffic {
	m, own, err := c.route(t.Rollout)
	if err != nil {
		return t
	}
	key := t.Rollout
	t.Rollout = own
	t = m.ResolveTraffic(t)
	t.Rollout = key
	if cluster := key.Cluster(); cluster != "" {
		t.Region = c.k.labelsOf(cluster)[global.RegionLabel]
	}
	return t
}

// labelsOf are a cluster's labels.
func (k *kubeParts) labelsOf(cluster string) map[string]string {
	if cluster == k.homeName {
		return k.homeLabels
	}
	if r, ok := k.remotes[cluster]; ok {
		return r.labels
	}
	return nil
}

// Recall reads back what the rollout's cluster holds of it.
func (c clusterWorkloads) Recall(ctx context.Context, key api.Key) (workload.Found, error) {
	m, own, err := c.route(key)
	if err != nil {
		return workload.Found{}, err
	}
	return m.Recall(ctx, own)
}

func (r *remoteCluster) notConnected() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lastErr == nil {
		return fmt.Sprintf("cluster %s: not connected yet", r.name)
	}
	return fmt.Sprintf("cluster %s: not connected: %v", r.name, r.lastErr)
}

// connect builds and starts the cluster's actuator (and binder), retrying
// until it succeeds or ctx ends; its parts hold meanwhile.
func (r *remoteCluster) connect(ctx context.Context, o Options, k *kubeParts, log *slog.Logger) {
	log = log.With("cluster", r.name)
	for {
		err := r.start(ctx, o, k, log)
		if err == nil || ctx.Err() != nil {
			return
		}
		r.mu.Lock()
		r.lastErr = err
		r.mu.Unlock()
		log.Warn("cluster not reached; its rollouts' parts hold; retrying", "retry_in", remoteConnectRetry, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(remoteConnectRetry):
		}
	}
}

// start connects the cluster's actuator, whose news about a rollout is
// news about its part in the cluster: Ready pods go to the part's
// program, endpoints to the part's traffic.
func (r *remoteCluster) start(ctx context.Context, o Options, k *kubeParts, log *slog.Logger) (err error) {
	client, err := kubernetes.NewForConfig(r.config)
	if err != nil {
		return err
	}
	metrics := newTrackedRegisterer(clusterMetrics(k.metrics, r.name))
	// What this attempt starts (informers, routers, binder) runs on its
	// own context, so that an attempt failing half-way stops what it
	// started instead of leaving it running beside the next attempt's.
	ctx, stop := context.WithCancel(ctx)
	defer func() {
		if err != nil {
			stop()
			metrics.unregisterAll() // the next attempt registers its own
		}
	}()
	pods := sharedPodInformers(o, client) // the binder's and the actuator's
	m, err := workload.New(workload.Options{Client: client, SchedulePods: o.SchedulePods, Namespaces: o.WatchNamespaces,
		Logger: log, SyncTimeout: remoteSyncTimeout, Registry: metrics.orNil(), Pods: pods,
		OnReady:     func(key api.Key, ev rollout.PodsReady) { k.podsReady(key.InCluster(r.name), ev) },
		OnEndpoints: func(key api.Key) { k.traffic.EndpointsChanged(key.InCluster(r.name)) }})
	if err != nil {
		return err
	}
	if err := m.Start(ctx); err != nil {
		return err
	}
	if err := r.startRouters(ctx, client, o.AckTimeout, log); err != nil {
		return err
	}
	if o.SchedulePods {
		b, err := kube.New(kube.Options{Client: client, Informers: pods, SchedulerName: workload.SchedulerName, Namespaces: o.WatchNamespaces, Logger: log,
			Metrics: metrics.orNil()})
		if err != nil {
			return err
		}
		r.binder.Store(b)
		go func() {
			if err := b.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				log.Error("pod binder stopped", "err", err)
			}
		}()
	}
	r.ready.Store(m)
	log.Info("cluster connected")
	if r.onConnect != nil {
		r.onConnect()
	}
	return nil
}

// trackedRegisterer remembers the collectors it registered, so that a
// failed attempt to connect a cluster can take them back: the next
// attempt registers its own, which would otherwise be refused as
// duplicates.
type trackedRegisterer struct {
	prometheus.Registerer
	registered []prometheus.Collector
}

func newTrackedRegisterer(reg prometheus.Registerer) *trackedRegisterer {
	if reg == nil {
		return nil
	}
	return &trackedRegisterer{Registerer: reg}
}

// orNil is t as a Registerer, nil when t is (no registry).
func (t *trackedRegisterer) orNil() prometheus.Registerer {
	if t == nil {
		return nil
	}
	return t
}

func (t *trackedRegisterer) Register(c prometheus.Collector) error {
	if err := t.Registerer.Register(c); err != nil {
		return err
	}
	t.registered = append(t.registered, c)
	return nil
}

func (t *trackedRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := t.Register(c); err != nil {
			panic(err)
		}
	}
}

func (t *trackedRegisterer) unregisterAll() {
	if t == nil {
		return
	}
	for _, c := range t.registered {
		t.Unregister(c)
	}
	t.registered = nil
}

// connectRemotes starts connecting every remote cluster in the
// background.
func (k *kubeParts) connectRemotes(ctx context.Context, o Options, log *slog.Logger) {
	for _, r := range k.remotes {
		go r.connect(ctx, o, k, log)
	}
}

// clusterFacts is what the global layer knows of every cluster for r: its
// labels, the Ready pods of r each runs, and why it cannot be reached
// (down, from unreachable).
func (k *kubeParts) clusterFacts(r *api.Rollout, down map[string]string) []global.Cluster {
	w := clusterWorkloads{k}
	out := []global.Cluster{{Name: k.homeName, Labels: k.homeLabels, StablePods: readyPods(w.Status(r.Key.InCluster(k.homeName))), Unreachable: down[k.homeName]}}
	for _, rc := range k.remotes {
		out = append(out, global.Cluster{Name: rc.name, Labels: rc.labels, StablePods: readyPods(w.Status(r.Key.InCluster(rc.name))), Unreachable: down[rc.name]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func readyPods(sets []workload.ReplicaSetStatus) int {
	n := 0
	for _, s := range sets {
		n += int(s.Ready)
	}
	return n
}

// expandClusters replaces each multi-cluster rollout of set by its parts;
// a version already seated keeps its plan (what the runner holds; a part
// it holds no seat for joins that plan), and a new plan puts the clusters
// that cannot be reached after the others.
func (d *Daemon) expandClusters(set *api.Set) *api.Set {
	if d.kube == nil || set == nil {
		return set
	}
	down := d.kube.unreachable() // once per set, not per rollout
	facts := func(r *api.Rollout) []global.Cluster {
		cs := d.kube.clusterFacts(r, down)
		if r.XDS != nil && d.gateway != nil {
			clients, _ := d.gateway.ClientsOf(r.XDS.Host, 0)
			withRequestShares(cs, clients)
		}
		return cs
	}
	return global.Expand(set, facts, d.seatOf)
}

// withRequestShares sets each cluster's share of the xDS clients of the
// rollout's host, by the cluster each client names (its node locality's
// sub_zone, gateway/views.go): the request share the global layer weighs,
// as far as sluice sees it (clients, not requests: it takes them as
// equally busy). With no client the share stays unknown.
func withRequestShares(cs []global.Cluster, clients []gateway.ClientAck) {
	if len(clients) == 0 {
		return
	}
	per := map[string]int{}
	for _, c := range clients {
		per[c.Locality[strings.LastIndex(c.Locality, "/")+1:]]++
	}
	for i := range cs {
		cs[i].RequestShare, cs[i].RequestShareKnown = float64(per[cs[i].Name])/float64(len(clients)), true
	}
}

// seatOf is the seat the part holds for version and hash: that of its
// canary waiting for its wave, or of its spec in force.
func (d *Daemon) seatOf(part api.Key, version, hash string) *api.WaveSeat {
	s, ok := d.runner.State(part)
	if !ok {
		return nil
	}
	r := s.Spec
	if s.WaveWait != nil {
		r = s.WaveWait.Rollout
	}
	if r == nil || r.Wave == nil || r.Version != version || (r.Workload != nil && r.Workload.PodTemplateHash != hash) {
		return nil
	}
	return r.Wave
}

// trackWaves hands the multi-cluster rollouts of an applied set to the
// wave loop.
func (d *Daemon) trackWaves(set *api.Set) {
	if d.kube == nil || set == nil || set.Refused {
		return
	}
	d.kube.waves.track(set)
}

// unreachable names the clusters that cannot be reached, with why: the
// probes' verdicts, and remote clusters not connected yet.
func (k *kubeParts) unreachable() map[string]string {
	out := map[string]string{}
	for name, r := range k.remotes {
		if r.ready.Load() == nil {
			out[name] = r.notConnected()
		}
	}
	if k.health == nil {
		return out
	}
	for _, name := range append(slices.Collect(maps.Keys(k.remotes)), k.homeName) {
		if reason := k.health.Reason(name); reason != "" {
			out[name] = reason
		}
	}
	return out
}

// holdUnconnected leaves out of a commit the events of parts whose cluster
// has not been connected yet: nothing can be known of what that cluster
// holds (a lost record could not be recovered), nor done there. The
// commit applies to every other rollout and part; once the cluster
// connects, the commit in force is applied again (remoteCluster.onConnect)
// and creates them. Meanwhile the wave program counts the cluster as
// unreachable.
func (d *Daemon) holdUnconnected(events []runner.KeyedEvent) []runner.KeyedEvent {
	if d.kube == nil || len(d.kube.remotes) == 0 {
		return events
	}
	kept := events[:0:0]
	for _, ke := range events {
		if r, ok := d.kube.remotes[ke.Key.Cluster()]; ok && r.ready.Load() == nil {
			if _, known := d.runner.State(ke.Key); !known {
				d.log.Warn("part held back until its cluster is connected", "rollout", ke.Key.String(), "reason", r.notConnected())
				continue
			}
		}
		kept = append(kept, ke)
	}
	return kept
}
