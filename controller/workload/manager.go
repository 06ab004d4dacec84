package workload

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
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
	// Namespaces limits the informers to these namespaces (none: all),
	// for a sluice whose permissions are namespaced (--watch-namespaces).
	Namespaces []string
	// SchedulePods gives the pods schedulerName "sluice", so that sluice's
	// graph scheduler binds them (--schedule-pods).
	SchedulePods bool
	// Logger defaults to a discarding one.
	Logger *slog.Logger
	// Registry receives the package's metrics (nil = not registered).
	Registry prometheus.Registerer
	// SyncTimeout bounds Start's wait for the informers' first list
	// (default DefaultSyncTimeout): a missing RBAC permission shows as a
	// failed start instead of a hang.
	SyncTimeout time.Duration
	// OnReady is called whenever the replicas or Ready count of one of a
	// rollout's versions changes, and once per version after the caches
	// sync. Ready counts only pods that are also in Endpoints, so traffic
	// pushed for them finds them. Called from one goroutine, one call at
	// a time: it must not block, and may call the Manager's read methods.
	OnReady func(key api.Key, ev rollout.PodsReady)
	// MaxScalesInFlight bounds the Scale calls that talk to the apiserver
	// at once (default DefaultMaxScalesInFlight); more wait for a slot.
	MaxScalesInFlight int
	// OnEndpoints is called when the endpoints (or their zones) of any
	// version of a rollout change. Same rules as OnReady.
	OnEndpoints func(key api.Key)
	// Pods, when set, is a factory over every namespace whose pod cache
	// the Manager reads instead of watching sluice's pods itself: the pod
	// binder's, which caches every pod of the cluster anyway, so that each
	// pod is decoded and held once. Its transform must keep what
	// KeepPodFields keeps. Start starts its pod informer on Start's
	// context unless it runs already; the Manager never shuts it down.
	Pods informers.SharedInformerFactory
}

// DefaultSyncTimeout is Options.SyncTimeout's default.
const DefaultSyncTimeout = 2 * time.Minute

// DefaultMaxScalesInFlight is Options.MaxScalesInFlight's default. A
// commit that changes 1,000 rollouts asks for 1,000 Scales at once:
// unbounded, their requests (and response buffers) filled the apiserver's
// queues ahead of the state store's saves and the binder's binds, which
// set the pace of the rollouts as much (docs/scale.md, "Side by side with
// Argo Rollouts' controller"). 64 is the binder's bound too, and the
// runner's workers per cluster (runner.DefaultScaleWorkers): it holds the
// Scales beyond it as queued jobs, so this bound only counts when several
// callers share the Manager (an Ahead Scale, two clusters' names for it).
const DefaultMaxScalesInFlight = 64

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
	// sharedPods is Options.Pods (nil: the pods are in factories).
	sharedPods informers.SharedInformerFactory
	// namespaces are Options.Namespaces as a set (nil: every namespace),
	// for what the shared pod cache holds beyond them.
	namespaces map[string]bool

	// caches holds the namespaced caches by namespace; the key "" holds
	// the caches of all namespaces when no namespace is named.
	caches    map[string]*nsCaches
	nodes     corelisters.NodeLister
	nodeStore cache.Store

	queue workqueue.TypedInterface[api.Key]
	// reported is the worker's memory of what it last told the callbacks;
	// only the worker touches it.
	reported map[api.Key]rolloutReport

	// forced holds the rollouts whose next report repeats every version
	// (Resend).
	forcedMu sync.Mutex
	forced   map[api.Key]bool

	// writes remembers sluice's own ReplicaSet writes (writes.go).
	writes *writeLog
	// relabels are the sets whose pods lack their labels, tried in the
	// background (relabel.go) on runCtx, the context Start was given.
	relabels relabels
	runCtx   context.Context
	// scaleSlots holds a token per Scale talking to the apiserver.
	scaleSlots chan struct{}

	pinsMu sync.RWMutex
	pins   map[api.Key]servicePins
	// pinnedBy maps "<namespace>/<service>" to the rollout that pinned it.
	pinnedBy map[string]api.Key
}

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
	if opts.MaxScalesInFlight <= 0 {
		opts.MaxScalesInFlight = DefaultMaxScalesInFlight
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
		forced:       map[api.Key]bool{},
		pinnedBy:     map[string]api.Key{},
		writes:       newWriteLog(),
		relabels:     relabels{tried: map[types.NamespacedName]string{}},
		scaleSlots:   make(chan struct{}, opts.MaxScalesInFlight),
	}
	if m.onReady == nil {
		m.onReady = func(api.Key, rollout.PodsReady) {}
	}
	if m.onEndpoints == nil {
		m.onEndpoints = func(api.Key) {}
	}
	if err := m.buildInformers(opts.Namespaces, opts.Pods); err != nil {
		return nil, err
	}
	if err := registerCacheGauges(opts.Registry, m); err != nil {
		return nil, err
	}
	return m, nil
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
	if m.sharedPods != nil {
		m.sharedPods.Start(runCtx.Done())
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
	m.runCtx = runCtx
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
