package workloadref

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/sluice-dev/sluice/api"
)

// Options configure a Resolver.
type Options struct {
	// Client talks to the cluster. Required.
	Client kubernetes.Interface
	// Namespaces limits the Deployment informers to these namespaces
	// (none: all), as --watch-namespaces does for the workload informers.
	Namespaces []string
	// Logger defaults to a discarding one.
	Logger *slog.Logger
	// SyncTimeout bounds Start's wait for the first list (default 2 min).
	SyncTimeout time.Duration
	// OnTemplateChange is called when a Deployment that the last resolved
	// set references appears, disappears, or changes its pod template or
	// selector. It is called from an informer goroutine and must not block.
	OnTemplateChange func()
}

// Resolver answers from a Deployment informer. Safe for concurrent use.
type Resolver struct {
	client      kubernetes.Interface
	log         *slog.Logger
	syncTimeout time.Duration
	onChange    func()

	factories []informers.SharedInformerFactory
	synced    []cache.InformerSynced
	// listers by namespace; "" holds all namespaces.
	listers map[string]appslisters.DeploymentLister

	mu sync.Mutex
	// wanted are the Deployments ("namespace/name") the last resolved set
	// references: only their changes matter.
	wanted map[string]bool
}

// New builds the Resolver and its informers; nothing runs until Start.
func New(opts Options) (*Resolver, error) {
	if opts.Client == nil {
		return nil, fmt.Errorf("workloadref: Options.Client is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.SyncTimeout <= 0 {
		opts.SyncTimeout = 2 * time.Minute
	}
	if opts.OnTemplateChange == nil {
		opts.OnTemplateChange = func() {}
	}
	r := &Resolver{client: opts.Client, log: opts.Logger, syncTimeout: opts.SyncTimeout, onChange: opts.OnTemplateChange,
		listers: map[string]appslisters.DeploymentLister{}, wanted: map[string]bool{}}
	namespaces := opts.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	// The caches keep what resolving and scaling read: no managed fields.
	strip := informers.WithTransform(func(obj any) (any, error) {
		if o, ok := obj.(metav1.Object); ok {
			o.SetManagedFields(nil)
		}
		return obj, nil
	})
	for _, ns := range namespaces {
		f := informers.NewSharedInformerFactoryWithOptions(opts.Client, 0, informers.WithNamespace(ns), strip)
		deps := f.Apps().V1().Deployments()
		if _, err := deps.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { r.changed(obj) },
			UpdateFunc: func(old, obj any) { r.updated(old, obj) },
			DeleteFunc: func(obj any) { r.changed(obj) },
		}); err != nil {
			return nil, fmt.Errorf("workloadref: informer handler: %w", err)
		}
		r.factories = append(r.factories, f)
		r.synced = append(r.synced, deps.Informer().HasSynced)
		r.listers[ns] = deps.Lister()
	}
	return r, nil
}

// Start runs the informers until ctx ends and returns once their caches
// are filled. Call it once.
func (r *Resolver) Start(ctx context.Context) error {
	for _, f := range r.factories {
		f.Start(ctx.Done())
	}
	syncCtx, cancel := context.WithTimeout(ctx, r.syncTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), r.synced...) {
		return fmt.Errorf("workloadref: deployment informer did not sync; missing RBAC permission (apps/deployments list, watch)?: %w", context.Cause(syncCtx))
	}
	go func() {
		<-ctx.Done()
		for _, f := range r.factories {
			f.Shutdown()
		}
	}()
	return nil
}

// Resolve returns set with every workloadRef rollout resolved to its
// Deployment (api.Set.ResolveWorkloadRefs), and remembers which
// Deployments set references, so that their changes are reported.
func (r *Resolver) Resolve(set *api.Set) *api.Set {
	wanted := map[string]bool{}
	for _, ref := range set.WorkloadRefs() {
		wanted[ref] = true
	}
	r.mu.Lock()
	r.wanted = wanted
	r.mu.Unlock()
	if len(wanted) == 0 {
		return set
	}
	return set.ResolveWorkloadRefs(r.lookup)
}

// lookup is the api.DeploymentLookup of the informer's cache.
func (r *Resolver) lookup(namespace, name string) (*corev1.PodTemplateSpec, *metav1.LabelSelector, error) {
	d, err := r.Deployment(namespace, name)
	if err != nil {
		return nil, nil, err
	}
	return &d.Spec.Template, d.Spec.Selector, nil
}

// Deployment reads namespace/name from the cache; the error says why
// there is none. The object is the cache's: do not change it.
func (r *Resolver) Deployment(namespace, name string) (*appsv1.Deployment, error) {
	l, ok := r.listers[metav1.NamespaceAll]
	if !ok {
		if l, ok = r.listers[namespace]; !ok {
			return nil, fmt.Errorf("Deployment %s/%s is in a namespace this sluice does not watch", namespace, name)
		}
	}
	d, err := l.Deployments(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("Deployment %s/%s not found in the cluster", namespace, name)
	}
	if err != nil {
		return nil, fmt.Errorf("Deployment %s/%s: %w", namespace, name, err)
	}
	return d, nil
}

// updated reports a Deployment whose pod template or selector changed;
// its status and replicas change far more often and do not matter here.
func (r *Resolver) updated(old, obj any) {
	o, ok1 := old.(*appsv1.Deployment)
	n, ok2 := obj.(*appsv1.Deployment)
	if ok1 && ok2 && reflect.DeepEqual(o.Spec.Template, n.Spec.Template) && reflect.DeepEqual(o.Spec.Selector, n.Spec.Selector) {
		return
	}
	r.changed(obj)
}

func (r *Resolver) changed(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	o, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	key := o.GetNamespace() + "/" + o.GetName()
	r.mu.Lock()
	wanted := r.wanted[key]
	r.mu.Unlock()
	if wanted {
		r.log.Info("referenced Deployment changed: re-evaluating the strategy in force", "deployment", key)
		r.onChange()
	}
}
