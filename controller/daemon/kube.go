package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/clusters"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/controller/runner"
	"github.com/sluice-dev/sluice/controller/workload"
	"github.com/sluice-dev/sluice/controller/workloadref"
	"github.com/sluice-dev/sluice/scheduler/kube"
)

// kubeParts are what Kubernetes mode adds to the daemon: the workload
// actuator, the pod binder and the traffic that takes its endpoints from
// the cluster.
type kubeParts struct {
	// client is the daemon's Kubernetes client; the analysis engine runs
	// job metrics' Jobs with it.
	client    kubernetes.Interface
	workloads *workload.Manager
	binder    *kube.Binder // nil with --schedule-pods=false
	traffic   *ClusterTraffic
	// routed is the runner's traffic: traffic (xDS) and the cluster
	// routers together; routers are the home cluster's (a remote
	// cluster's are its remoteCluster's, clusterrouters.go).
	routed  *routedTraffic
	routers *clusterRouters
	// runner receives PodsReady for the rollouts it knows. Reports from
	// before it has loaded them are dropped: every restored rollout scales
	// when the runner starts, and so asks for a fresh report of every set.
	runner atomic.Pointer[runner.Runner]
	// refs resolves workloadRef rollouts and scales their Deployments;
	// refChanged (capacity 1) asks followGit to apply the commit in force
	// again: a referenced Deployment changed, or a cluster connected.
	refs       *workloadref.Resolver
	refChanged chan struct{}
	refScaler  *refScaler
	// homeName and homeLabels are the home cluster's (clusters.go);
	// remotes the other clusters multi-cluster rollouts run in, by name;
	// waves runs their wave programs (waves.go).
	homeName   string
	homeLabels map[string]string
	remotes    map[string]*remoteCluster
	health     *clusters.Health // nil without remote clusters
	waves      *waveLoop
	// metrics receives every cluster's workload and binder metrics, each
	// cluster's under its cluster label (clusterMetrics).
	metrics *prometheus.Registry
}

// clusterMetrics registers a cluster's collectors on reg with the label
// cluster: every cluster's actuator and binder export the same metrics,
// told apart by it. nil when reg is nil.
func clusterMetrics(reg *prometheus.Registry, cluster string) prometheus.Registerer {
	if reg == nil {
		return nil
	}
	return prometheus.WrapRegistererWith(prometheus.Labels{"cluster": cluster}, reg)
}

// KubeConfig is the home cluster's connection, found by the usual loading
// rules: --kubeconfig, then $KUBECONFIG, then ~/.kube/config, then the
// in-cluster service account. Every client built from it gets the client
// rate limits of --kube-api-qps and --kube-api-burst (client-go's default,
// 5 QPS, would pace a 20-pod canary's binds over seconds).
func (o Options) KubeConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.Kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	o.KubeAPI.Apply(cfg)
	return cfg, nil
}

// newKubeParts connects to the cluster and builds the Kubernetes-mode
// parts; next is the gateway side of the traffic.
func newKubeParts(o Options, next runner.Traffic, reg *prometheus.Registry, log *slog.Logger) (*kubeParts, error) {
	cfg, err := o.KubeConfig()
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	k := &kubeParts{refChanged: make(chan struct{}, 1), client: client, homeName: clusters.HomeName, remotes: map[string]*remoteCluster{}, metrics: reg}
	if err := k.loadClusters(o, cfg, client); err != nil {
		return nil, err
	}
	pods := sharedPodInformers(o, client) // the binder's and the actuator's
	if k.workloads, err = workload.New(workload.Options{
		Client: client, SchedulePods: o.SchedulePods, Namespaces: o.WatchNamespaces, Logger: log, Registry: clusterMetrics(reg, k.homeName),
		OnReady:     k.podsReady,
		OnEndpoints: k.homeEndpointsChanged,
		Pods:        pods,
	}); err != nil {
		return nil, fmt.Errorf("workloads: %w", err)
	}
	k.traffic = NewClusterTraffic(next, clusterWorkloads{k}, log)
	if k.refs, err = workloadref.New(workloadref.Options{Client: client, Namespaces: o.WatchNamespaces, Logger: log,
		OnTemplateChange: k.signalRefChange}); err != nil {
		return nil, err
	}
	k.refScaler = newRefScaler(k.refs, k.workloads, k.runner.Load, log)
	if k.routers, err = newClusterRouters(cfg, client, o.IstioXDSAddr, log); err != nil {
		return nil, err
	}
	k.routed = &routedTraffic{xds: k.traffic, routers: k.partRouters(), applyTimeout: o.AckTimeout, log: log}
	if o.SchedulePods {
		if k.binder, err = kube.New(kube.Options{Client: client, Informers: pods, SchedulerName: workload.SchedulerName, Namespaces: o.WatchNamespaces, Metrics: clusterMetrics(reg, k.homeName), Logger: log}); err != nil {
			return nil, fmt.Errorf("pod binder: %w", err)
		}
	}
	return k, nil
}

// podsReady passes a readiness report to the rollout it belongs to; a
// ReplicaSet of a rollout sluice does not know (left from a deleted file)
// makes no new one.
func (k *kubeParts) podsReady(key api.Key, ev rollout.PodsReady) {
	r := k.runner.Load()
	if r == nil {
		return
	}
	if key.Cluster() == "" {
		// The home cluster's actuator knows rollouts by their own key; a
		// multi-cluster rollout's home part is "name@home".
		if part := key.InCluster(k.homeName); k.known(r, part) {
			r.Submit(part, ev)
			return
		}
	}
	if k.known(r, key) {
		r.Submit(key, ev)
		k.refScaler.observe(key)
	}
}

// homeEndpointsChanged republishes the traffic of a rollout whose
// endpoints changed in the home cluster, whose actuator knows a
// multi-cluster rollout's home part ("name@home") by the rollout's key.
func (k *kubeParts) homeEndpointsChanged(key api.Key) {
	k.traffic.EndpointsChanged(key)
	k.traffic.EndpointsChanged(key.InCluster(k.homeName))
}

func (k *kubeParts) known(r *runner.Runner, key api.Key) bool {
	_, ok := r.Status(key)
	return ok
}

// runRouters re-applies, in every router of the home cluster, routes
// someone else changed until ctx ends (a remote cluster's run from when
// it connects).
func (k *kubeParts) runRouters(ctx context.Context) error {
	return k.routers.run(ctx)
}

// runBinder places pods until ctx ends (at once with --schedule-pods=false).
func (k *kubeParts) runBinder(ctx context.Context) error {
	if k.binder == nil {
		return nil
	}
	return k.binder.Run(ctx)
}

// replicaSets is the rollout's ReplicaSets for its status, with the pods
// the binder has not placed and why.
func (k *kubeParts) replicaSets(key api.Key) []rollout.ReplicaSetStatus {
	sets := clusterWorkloads{k}.Status(key)
	binder := k.binder
	if r, ok := k.remotes[key.Cluster()]; ok {
		binder = r.binder.Load()
	}
	if binder == nil {
		return sets
	}
	for i, s := range sets {
		pending := binder.Pending(key.Namespace, labels.SelectorFromSet(labels.Set{workload.LabelRollout: key.Parent().Name, workload.LabelHash: s.Hash}))
		sets[i].Pending = len(pending)
		for _, p := range pending {
			if p.Message != "" {
				sets[i].Unschedulable = p.Message
				break
			}
		}
	}
	return sets
}
