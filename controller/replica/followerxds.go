package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/ackboard"
	"github.com/sluice-dev/sluice/controller/daemon"
	"github.com/sluice-dev/sluice/controller/runner"
	"github.com/sluice-dev/sluice/controller/store/kubestore"
	"github.com/sluice-dev/sluice/controller/store/kubestore/v1alpha1"
	"github.com/sluice-dev/sluice/controller/workload"
	"github.com/sluice-dev/sluice/gateway"
)

// followerXDS serves xDS while this replica follows (--leader-elect with
// --state-store kubernetes): it watches the SluiceRollout objects the
// leader writes, turns each record into the traffic its state asks for
// (rollout.State.Traffic, the same call the runner makes), fills the
// endpoints from the cluster as the leader does, and publishes it on its
// own gateway. The leader writes a record before it publishes the traffic
// the record implies, so a follower learns a new weight at about the time
// the leader's clients do. It only reads the cluster.
type followerXDS struct {
	cancel context.CancelFunc
	served chan struct{}
	addr   net.Addr
	lis    *handoverListener

	once     sync.Once
	released net.Listener // the socket, once handed over
	err      error
}

// followerSyncTimeout bounds a follower's wait for the rollout records
// before it serves xDS.
const followerSyncTimeout = 30 * time.Second

// startFollowerXDS binds the xDS address and serves the records' traffic
// once they are read. It shows every record's state on view too (the
// follower's read API) and registers the gateway's metrics on reg (the
// follower's /metrics).
func startFollowerXDS(ctx context.Context, o daemon.Options, cfg *rest.Config, identity string, log *slog.Logger,
	reg *prometheus.Registry, view *followerAPI) (_ *followerXDS, err error) {
	log = log.With("role", "follower")
	// Bind the xDS address before reading the cluster, which takes a
	// while: a client that dials a follower still syncing waits in the
	// listen backlog for its first routes. Refused instead, a gRPC client
	// takes it as a Listener resource error: its channel gets an erroring
	// config selector and its wait-for-ready calls are queued without a
	// cluster; when the routes arrive, the xds_cluster_manager picker
	// fails every queued call with `unknown cluster selected for RPC: ""`
	// (grpc-go 1.85 internal/xds/resolver, balancer/clustermanager). That
	// was issue 13's "follower clients fail around a promotion".
	bound, err := net.Listen("tcp", o.XDSAddr)
	if err != nil {
		return nil, fmt.Errorf("xds listener: %w", err)
	}
	defer func() {
		if err != nil {
			_ = bound.Close()
		}
	}()
	// Served through a handoverListener, so that stopping to lead keeps
	// the socket for the daemon (handover).
	lis, err := newHandoverListener(bound)
	if err != nil {
		return nil, err
	}
	gw, err := gateway.New(gateway.Options{Logger: log, Registry: reg, EnvoyPort: o.EnvoyPort, TLS: o.XDSTLS,
		Limits: o.XDSLimits, AllowedNodes: o.XDSAllowedNodes})
	if err != nil {
		return nil, fmt.Errorf("follower gateway: %w", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	var traffic *daemon.ClusterTraffic
	workloads, err := workload.New(workload.Options{Client: client, Namespaces: o.WatchNamespaces, Logger: log,
		OnEndpoints: func(key api.Key) { traffic.EndpointsChanged(key) }})
	if err != nil {
		return nil, fmt.Errorf("follower workloads: %w", err)
	}
	acks, err := ackboard.NewWriter(ackboard.WriterOptions{Client: client, Namespace: o.OwnNamespace(), Identity: identity, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("follower acks: %w", err)
	}
	view.useClusters(workloads)
	view.useClients(gw)
	ctx, cancel := context.WithCancel(ctx)
	reporter := &ackReporter{gw: gw, out: acks, log: log, ctx: ctx, waiting: map[string]context.CancelFunc{}}
	traffic = daemon.NewClusterTraffic(reporter, workloads, log)
	if err := workloads.Start(ctx); err != nil {
		cancel()
		return nil, fmt.Errorf("follower workloads: %w", err)
	}
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, metav1.NamespaceAll, func(lo *metav1.ListOptions) {
		lo.LabelSelector = kubestore.InstanceSelector(o.OwnNamespace())
	})
	inf := factory.ForResource(v1alpha1.GroupVersionResource).Informer()
	publish := func(obj any) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		record, err := recordOf(u)
		if err != nil || record == nil {
			return
		}
		st, status, err := runner.RecordStatus(record)
		if err != nil {
			log.Warn("follower: undecodable record", "rollout", u.GetNamespace()+"/"+u.GetName(), "err", err)
			return
		}
		view.observe(st, recordTimes{status.CreatedAt, status.PhaseSince})
		if t := st.Traffic(); t.Host != "" {
			if err := traffic.PublishServed(t); err != nil {
				log.Warn("follower: publish traffic", "rollout", st.Key.String(), "err", err)
			}
		}
	}
	records, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    publish,
		UpdateFunc: func(_, obj any) { publish(obj) },
		DeleteFunc: func(obj any) { view.forget(deletedKey(obj)) },
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("follower: watch %s: %w", v1alpha1.Resource, err)
	}
	// Serve once every stored rollout is published: a client that
	// connected to an empty follower would find no listener for its host
	// and fail its calls until the routes arrive. The wait is bounded, so
	// that a replica that cannot read the records (no CRD, no permission)
	// still campaigns for the lease; it serves what it has and says so.
	factory.Start(ctx.Done())
	syncCtx, synced := context.WithTimeout(ctx, followerSyncTimeout)
	if !cache.WaitForCacheSync(syncCtx.Done(), records.HasSynced) {
		log.Warn("follower: serving xDS before the rollout records were read", "resource", v1alpha1.Resource, "waited", followerSyncTimeout)
	}
	synced()
	f := &followerXDS{cancel: cancel, served: make(chan struct{}), addr: lis.Addr(), lis: lis}
	view.serving(records.HasSynced)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = acks.Run(ctx) }()
	go func() {
		defer close(f.served)
		defer wg.Wait()
		if err := gw.Serve(ctx, lis); err != nil {
			log.Warn("follower xds", "err", err)
		}
	}()
	return f, nil
}

// recordOf is the record in a SluiceRollout's status (nil when none).
func recordOf(u *unstructured.Unstructured) ([]byte, error) {
	var obj v1alpha1.SluiceRollout
	if err := defaultConverter.FromUnstructured(u.Object, &obj); err != nil {
		return nil, err
	}
	return obj.Status.Record, nil
}

// deletedKey is the rollout of a deleted SluiceRollout (the object or
// the informer's tombstone), as kubestore names it.
func deletedKey(obj any) api.Key {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return api.Key{}
	}
	return kubestore.KeyOf(u.GetNamespace(), u.GetName(), u.GetLabels())
}

// stop ends serving and closes the xDS socket, unless it was handed over;
// calling it again is harmless.
func (f *followerXDS) stop() {
	f.once.Do(func() {
		f.stopServing()
		if err := f.lis.closeSocket(); err != nil && !errors.Is(err, net.ErrClosed) {
			f.err = err
		}
	})
}

// handover ends serving and returns the still-open xDS socket for the
// leader's daemon: a client that dials this replica meanwhile waits in
// the socket's backlog instead of being refused. Only the first of
// handover and stop has an effect; handover after stop is an error.
func (f *followerXDS) handover() (net.Listener, error) {
	handed := false
	f.once.Do(func() {
		handed = true
		f.stopServing()
		f.released, f.err = f.lis.release()
	})
	if !handed && f.released == nil {
		return nil, errors.New("follower xds: stopped, not handed over")
	}
	return f.released, f.err
}

// stopServing ends the follower's gateway and waits until it no longer
// accepts: from then on the socket is nobody's until it is handed over or
// closed.
func (f *followerXDS) stopServing() {
	f.cancel()
	<-f.served
}

var defaultConverter = runtime.DefaultUnstructuredConverter
