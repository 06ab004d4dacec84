package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluice-dev/sluice/scheduler"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
)

// DefaultSchedulerName is the spec.schedulerName of the pods sluice binds.
const DefaultSchedulerName = "sluice"

// FieldManager and the events' reportingController.
const FieldManager = "sluice"

// Options configures a Binder.
type Options struct {
	// Client talks to the apiserver (required). Its rest.Config QPS/Burst
	// bound the bind rate: each pod costs a bind and, up to a rate
	// (scheduledEvents), an event.
	Client kubernetes.Interface
	// Informers is a factory to share with the caller (optional; by
	// default the binder makes its own, without resync, whose cache keeps
	// only what the binder reads of each pod: SlimObject). Its transform
	// must keep at least what SlimObject keeps. Run starts it and, when it
	// is the caller's, leaves shutting it down to the caller.
	Informers informers.SharedInformerFactory
	// SchedulerName selects the pods to bind (default "sluice").
	SchedulerName string
	// Namespaces, when not empty, are the only namespaces whose pods the
	// binder binds (sluice's --watch-namespaces): two sluices scoped to
	// different namespaces of one cluster must not bind each other's pods
	// (they raced for the same pods, and a pod bound by the other one's
	// graph was counted twice). Pods everywhere still count on their
	// nodes.
	Namespaces []string
	// MaxSkew is the FailureDomain filter's maxSkew over zones (default 1),
	// as in `sluice schedule`. Ignored when Plugins is set.
	MaxSkew int32
	// Plugins is the scheduler profile (default scheduler.DefaultPlugins()
	// with FailureDomain over topology.kubernetes.io/zone and MaxSkew).
	Plugins []scheduler.PluginConfig
	// Seed seeds the scheduler's tie-breaking.
	Seed uint64
	// BindWorkers bounds the pods/binding calls in flight (default 64:
	// on the 1,000-node benchmark 16 capped the rate at 16 / bind latency).
	BindWorkers int
	// InitialBackoff and MaxBackoff bound the retry delay of a pod after
	// a failed bind or a retried unschedulable attempt; it doubles per
	// failure (defaults 1s and 10s, kube-scheduler's).
	InitialBackoff, MaxBackoff time.Duration
	// UnschedulableTimeout retries unschedulable pods even when nothing
	// changed (default 5m, kube-scheduler's podMaxInUnschedulablePodsDuration).
	UnschedulableTimeout time.Duration
	// OnUnschedulable, when set, is called (outside the binder's locks)
	// each time a pod's unschedulable message changes, so the rollout
	// controller can put it into the rollout status.
	OnUnschedulable func(PendingPod)
	// Metrics is where the binder's and the scheduler's metrics are
	// registered (none when nil).
	Metrics prometheus.Registerer
	// Logger logs binds at debug level and failures (default discard).
	Logger *slog.Logger
}

// Binder keeps a scheduler graph in sync with the cluster and binds the
// Pending pods of its scheduler name. Build it with New, then Run it.
type Binder struct {
	opts       Options
	log        *slog.Logger
	client     kubernetes.Interface
	sched      *scheduler.Scheduler
	metrics    *metrics
	factory    informers.SharedInformerFactory
	ownFactory bool // Run shuts the factory down when it ends
	podLister  corelisters.PodLister
	queue      workqueue.TypedRateLimitingInterface[string]
	events     events.EventBroadcaster
	recorder   events.EventRecorder
	scheduled  *scheduledEvents
	handlers   []cache.ResourceEventHandlerRegistration
	bindSlots  chan struct{}
	wg         sync.WaitGroup

	// beforeBind, when set (tests only), runs between the cycle and the
	// pods/binding call, to provoke conflicts.
	beforeBind func(ctx context.Context, pod *corev1.Pod, node string)

	ours map[string]bool // Options.Namespaces as a set; nil: every namespace

	mu        sync.Mutex                // guards the maps below and every graph change
	nodes     map[string]scheduler.Node // last node seen per name
	bound     map[string]boundPod       // bound pods (informer), by key
	byNode    map[string]map[string]bool
	assumed   map[string]string        // pod key → node, bind in flight
	pending   map[string]*pendingState // pods of ours not yet bound
	lastFlush time.Time
}

// boundPod is a pod the informer reports on a node.
type boundPod struct {
	node string
	pod  scheduler.Pod
}

// New builds a binder: a scheduler with the default profile, informers on
// Nodes and Pods, the queue and the event recorder. Nothing runs before
// Run.
func New(opts Options) (*Binder, error) {
	if opts.Client == nil {
		return nil, errors.New("binder: Client is required")
	}
	if opts.SchedulerName == "" {
		opts.SchedulerName = DefaultSchedulerName
	}
	if opts.MaxSkew == 0 {
		opts.MaxSkew = 1
	}
	if opts.MaxSkew < 0 {
		return nil, fmt.Errorf("binder: maxSkew %d must be positive", opts.MaxSkew)
	}
	if opts.Plugins == nil {
		opts.Plugins = defaultPlugins(opts.MaxSkew)
	}
	if opts.BindWorkers <= 0 {
		opts.BindWorkers = 64
	}
	if opts.InitialBackoff <= 0 {
		opts.InitialBackoff = time.Second
	}
	if opts.MaxBackoff < opts.InitialBackoff {
		opts.MaxBackoff = max(10*time.Second, opts.InitialBackoff)
	}
	if opts.UnschedulableTimeout <= 0 {
		opts.UnschedulableTimeout = 5 * time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	ownFactory := opts.Informers == nil
	if ownFactory {
		opts.Informers = informers.NewSharedInformerFactoryWithOptions(opts.Client, 0, informers.WithTransform(SlimObject))
	}
	sched, err := scheduler.New(scheduler.Options{
		Graph:   scheduler.GraphOptions{TopologyKeys: []string{scheduler.LabelRegion, scheduler.LabelZone}},
		Plugins: opts.Plugins,
		Seed:    opts.Seed,
		Metrics: opts.Metrics,
		Logger:  opts.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("binder: %w", err)
	}
	m, err := newMetrics(opts.Metrics)
	if err != nil {
		sched.Close()
		return nil, fmt.Errorf("binder: %w", err)
	}
	b := &Binder{
		opts:       opts,
		log:        opts.Logger,
		client:     opts.Client,
		sched:      sched,
		metrics:    m,
		factory:    opts.Informers,
		ownFactory: ownFactory,
		podLister:  opts.Informers.Core().V1().Pods().Lister(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](opts.InitialBackoff, opts.MaxBackoff),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "sluice-binder"}),
		events:    events.NewBroadcaster(&events.EventSinkImpl{Interface: opts.Client.EventsV1()}),
		bindSlots: make(chan struct{}, opts.BindWorkers),
		nodes:     map[string]scheduler.Node{},
		bound:     map[string]boundPod{},
		byNode:    map[string]map[string]bool{},
		assumed:   map[string]string{},
		pending:   map[string]*pendingState{},
	}
	if len(opts.Namespaces) > 0 {
		b.ours = map[string]bool{}
		for _, ns := range opts.Namespaces {
			b.ours[ns] = true
		}
	}
	b.recorder = b.events.NewRecorder(scheme.Scheme, FieldManager)
	b.scheduled = newScheduledEvents(b.recorder)
	return b, nil
}

// binds reports whether p is a pod this binder places: its scheduler
// name, not being deleted, and in one of its namespaces.
func (b *Binder) binds(p *corev1.Pod) bool {
	return p.Spec.SchedulerName == b.opts.SchedulerName && p.DeletionTimestamp == nil && (b.ours == nil || b.ours[p.Namespace])
}

// defaultPlugins is the profile `sluice schedule` uses: every built-in
// plugin, FailureDomain over zones with maxSkew.
func defaultPlugins(maxSkew int32) []scheduler.PluginConfig {
	plugins := scheduler.DefaultPlugins()
	for i := range plugins {
		if plugins[i].Name == scheduler.FailureDomainName {
			plugins[i].Args = &scheduler.FailureDomainArgs{TopologyKey: scheduler.LabelZone, MaxSkew: maxSkew}
		}
	}
	return plugins
}

// Run syncs the graph with the cluster, then schedules and binds pods
// until ctx ends; it returns nil then, after in-flight binds finished.
// Run may be called once.
func (b *Binder) Run(ctx context.Context) error {
	defer b.sched.Close()
	nodeInf := b.factory.Core().V1().Nodes().Informer()
	podInf := b.factory.Core().V1().Pods().Informer()
	nh, err := nodeInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { b.onNode(obj) },
		UpdateFunc: func(_, obj any) { b.onNode(obj) },
		DeleteFunc: b.onNodeDelete,
	})
	if err != nil {
		return fmt.Errorf("binder: node handler: %w", err)
	}
	ph, err := podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { b.onPod(obj) },
		UpdateFunc: func(_, obj any) { b.onPod(obj) },
		DeleteFunc: b.onPodDelete,
	})
	if err != nil {
		return fmt.Errorf("binder: pod handler: %w", err)
	}
	defer func() {
		_ = nodeInf.RemoveEventHandler(nh)
		_ = podInf.RemoveEventHandler(ph)
	}()
	b.events.StartRecordingToSink(ctx.Done())
	defer b.events.Shutdown()
	b.factory.Start(ctx.Done())
	if b.ownFactory {
		defer b.factory.Shutdown() // after ctx ended: waits for the informers
	}
	if !cache.WaitForCacheSync(ctx.Done(), nh.HasSynced, ph.HasSynced) {
		return nil // ctx ended first
	}
	b.log.InfoContext(ctx, "binder synced", "scheduler", b.opts.SchedulerName, "nodes", b.numNodes())
	go func() {
		<-ctx.Done()
		b.queue.ShutDown()
	}()
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		b.flushUnschedulableEvery(ctx)
	}()
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		b.scheduled.summarizeEvery(ctx)
	}()
	for b.scheduleNext(ctx) {
	}
	b.wg.Wait()
	return nil
}

// numNodes is how many nodes the graph holds.
func (b *Binder) numNodes() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.nodes)
}
