package istio

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/gateway"
	"github.com/sluice-dev/sluice/gateway/istio/observer"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// FieldManager is the field manager of sluice's writes.
const FieldManager = "sluice"

// The Istio resources the router writes (networking.istio.io/v1, the
// storage version since Istio 1.22).
var (
	VirtualServices  = schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "virtualservices"}
	DestinationRules = schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "destinationrules"}
)

// RouterOptions configures a Router.
type RouterOptions struct {
	// Client reaches the cluster's API server (required).
	Client dynamic.Interface
	// Logger gets one line per write and per drift (default: discard).
	Logger *slog.Logger
	// OnDrift is called, synchronously, for each object Apply or Run
	// found changed by someone else since sluice's last write (and
	// re-applied). Optional.
	OnDrift func(Drift)
	// Events records a Warning Event (gateway.ReasonReapplied) on each
	// object re-applied after someone else's edit; nil only logs it.
	Events kubernetes.Interface
	// PollInterval is how often Verify re-reads the objects (default
	// 250ms).
	PollInterval time.Duration
	// DriftInterval is how often Run re-reads every object a rollout
	// last wrote, to undo someone else's edits (default 1s).
	DriftInterval time.Duration
	// IstiodXDS is istiod's plaintext xDS address (host:port, e.g.
	// istiod.istio-system.svc:15010). When set, Run subscribes to istiod
	// as a proxyless gRPC client (package observer) and Verify waits until
	// the routes it receives carry the weights Apply wrote; when empty,
	// Verify relies on istiod's status, which Istio writes only with
	// status reporting on.
	IstiodXDS string
	// ObserverName is the observer's node name at istiod (default
	// sluice-<random>); one per sluice.
	ObserverName string
}

// Router writes a rollout's traffic into the user's own VirtualServices
// and DestinationRule (trafficRouting.istio), verifies it as far as Istio
// lets it, and restores them at the end. Its lifecycle:
//
//  1. New.
//  2. Apply on every traffic change; Verify with the token Apply returned.
//  3. Run in the background, which undoes someone else's edits between
//     steps (Resync does it once for one rollout; Apply finds them too).
//  4. Release when the rollout is promoted, aborted or deleted.
//
// Istio's CRDs declare no list type for spec.http or spec.subsets, so the
// lists are atomic: a server-side apply could only own a whole list and
// would take the user's routes from whoever applies them from git. The
// router therefore does a read-modify-write Update (field manager
// "sluice", guarded by resourceVersion) that changes only the managed
// fields; a conflict is read again and re-applied, never overwritten.
type Router struct {
	client        dynamic.Interface
	events        kubernetes.Interface
	log           *slog.Logger
	onDrift       func(Drift)
	poll          time.Duration
	driftInterval time.Duration
	// observer, when set, is what istiod sends a proxyless client.
	observer *observer.Observer

	// writes serialises Apply, Resync and Release, so that Run never
	// writes a rollout's older traffic over a newer Apply.
	writes sync.Mutex
	mu     sync.Mutex
	// last is each rollout's traffic at its last Apply, for Resync.
	last map[api.Key]api.Traffic
}

// New returns a Router.
func New(opts RouterOptions) (*Router, error) {
	if opts.Client == nil {
		return nil, errors.New("istio router: no Kubernetes client")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = 250 * time.Millisecond
	}
	if opts.DriftInterval <= 0 {
		opts.DriftInterval = time.Second
	}
	r := &Router{client: opts.Client, events: opts.Events, log: opts.Logger, onDrift: opts.OnDrift,
		poll: opts.PollInterval, driftInterval: opts.DriftInterval, last: map[api.Key]api.Traffic{}}
	if opts.IstiodXDS != "" {
		o, err := observer.New(observer.Options{Addr: opts.IstiodXDS, Name: opts.ObserverName, Logger: opts.Logger})
		if err != nil {
			return nil, err
		}
		r.observer = o
	}
	return r, nil
}

// Name is the router's name in logs, status and events.
func (r *Router) Name() string { return "istio" }

// Apply writes t's weights, header and cookie routes, mirror routes and
// sticky route into the objects t.Routing.Istio names: the DestinationRule
// first, so that the subsets select the right pods before any traffic is
// sent to them, then each VirtualService. It returns the token Verify
// takes ("" and nil when t names no Istio object). Drifts found on the way
// go to RouterOptions.OnDrift.
func (r *Router) Apply(ctx context.Context, t api.Traffic) (string, error) {
	r.writes.Lock()
	defer r.writes.Unlock()
	tok, drifts, err := r.apply(ctx, t)
	r.report(drifts)
	return tok, err
}

func (r *Router) report(drifts []Drift) {
	for _, d := range drifts {
		if r.onDrift != nil {
			r.onDrift(d)
		}
	}
}

// Run re-applies, every DriftInterval until ctx ends, the last traffic of
// every rollout applied and not released, so that someone else's edit of
// the managed fields (a GitOps sync, a kubectl edit) is undone between
// steps, with an Event and OnDrift, rather than at the next step. Objects
// nobody changed are read and not written. With RouterOptions.IstiodXDS it
// also keeps the observer's stream to istiod.
func (r *Router) Run(ctx context.Context) error {
	done := make(chan error, 1)
	if r.observer != nil {
		go func() { done <- r.observer.Run(ctx) }()
	} else {
		done <- nil
	}
	wait.UntilWithContext(ctx, r.resyncAll, r.driftInterval)
	return <-done
}

func (r *Router) resyncAll(ctx context.Context) {
	r.mu.Lock()
	keys := make([]api.Key, 0, len(r.last))
	for k := range r.last {
		keys = append(keys, k)
	}
	r.mu.Unlock()
	for _, k := range keys {
		drifts, _, err := r.Resync(ctx, k)
		r.report(drifts)
		if err != nil && ctx.Err() == nil {
			r.log.Warn("istio: re-apply", "rollout", k.String(), "err", err)
		}
	}
}

// Resync applies the rollout's last traffic again and returns what it
// found changed by someone else (not passed to RouterOptions.OnDrift), with a
// token for Verify. A rollout not applied since New is left alone.
func (r *Router) Resync(ctx context.Context, key api.Key) ([]Drift, string, error) {
	r.writes.Lock()
	defer r.writes.Unlock()
	r.mu.Lock()
	t, ok := r.last[key]
	r.mu.Unlock()
	if !ok {
		return nil, "", nil
	}
	tok, drifts, err := r.apply(ctx, t)
	return drifts, tok, err
}

func (r *Router) apply(ctx context.Context, t api.Traffic) (string, []Drift, error) {
	if t.Routing == nil || t.Routing.Istio == nil {
		return "", nil, nil
	}
	want, err := stateOf(t)
	if err != nil {
		return "", nil, err
	}
	r.mu.Lock()
	r.last[t.Rollout] = t
	r.mu.Unlock()
	var tok token
	var drifts []Drift
	record := func(o tokenObject, d *Drift) {
		tok = append(tok, o)
		if d != nil {
			r.log.Warn("istio: managed fields changed by someone else; re-applied", "rollout", t.Rollout, "object", d.Object, "found", d.Found)
			drifts = append(drifts, *d)
		}
	}
	if dr := t.Routing.Istio.DestinationRule; dr != nil {
		o, d, err := r.update(ctx, DestinationRules, namespaceOr(dr.Namespace, t.Rollout), dr.Name, t.Rollout,
			func(obj *unstructured.Unstructured, _ ledgerEntry) (*ledgerEntry, []string, error) {
				p, err := patchDestinationRule(obj, dr, t.StableWorkload, t.CanaryWorkload)
				return &ledgerEntry{Sum: checksum(p.written)}, p.found, err
			})
		if err != nil {
			return "", drifts, err
		}
		record(o, d)
	}
	b := backendsOf(t.Routing)
	for _, vs := range groupVirtualServices(t.Routing.Istio.VirtualServices, t.Rollout) {
		var mesh vsPatch
		o, d, err := r.update(ctx, VirtualServices, vs.Namespace, vs.Name, t.Rollout,
			func(obj *unstructured.Unstructured, prev ledgerEntry) (*ledgerEntry, []string, error) {
				p, err := patchVirtualService(obj, vs.Routes, b, prev, want)
				mesh = p
				return &p.entry, p.found, err
			})
		if err != nil {
			return "", drifts, err
		}
		o.Hosts, o.Routes = mesh.hosts, mesh.wants
		record(o, d)
	}
	return tok.String(), drifts, nil
}

// Release restores the managed routes to all traffic on the stable side
// (the canary destination stays listed with weight 0, as in git), removes
// sluice's header, sticky and mirror routes and its ledger entry, and
// points the canary subset at the stable subset's pods. Objects already
// deleted are skipped.
func (r *Router) Release(ctx context.Context, key api.Key, rt *api.ClusterRouting) error {
	r.writes.Lock()
	defer r.writes.Unlock()
	r.mu.Lock()
	delete(r.last, key)
	r.mu.Unlock()
	if rt == nil || rt.Istio == nil {
		return nil
	}
	var errs []error
	b := backendsOf(rt)
	for _, vs := range groupVirtualServices(rt.Istio.VirtualServices, key) {
		_, _, err := r.update(ctx, VirtualServices, vs.Namespace, vs.Name, key,
			func(obj *unstructured.Unstructured, prev ledgerEntry) (*ledgerEntry, []string, error) {
				p, err := patchVirtualService(obj, vs.Routes, b, prev, atRest(key))
				return nil, p.found, err
			})
		errs = append(errs, ignoreNotFound(err))
	}
	if dr := rt.Istio.DestinationRule; dr != nil {
		_, _, err := r.update(ctx, DestinationRules, namespaceOr(dr.Namespace, key), dr.Name, key,
			func(obj *unstructured.Unstructured, _ ledgerEntry) (*ledgerEntry, []string, error) {
				stable := stableHashOf(obj, dr)
				p, err := patchDestinationRule(obj, dr, stable, stable)
				return nil, p.found, err
			})
		errs = append(errs, ignoreNotFound(err))
	}
	return errors.Join(errs...)
}

// mutation patches obj for one rollout, given the rollout's ledger entry
// at sluice's last write. It returns the new entry (nil: forget the
// rollout) and the managed fields as found, for drift detection.
type mutation func(obj *unstructured.Unstructured, prev ledgerEntry) (next *ledgerEntry, found []string, err error)

// update reads one object, mutates it and writes it back with its
// resourceVersion, again from the read on a conflict. Nothing is written
// when nothing changed (the generation stays, so Verify has nothing new to
// wait for).
func (r *Router) update(ctx context.Context, res schema.GroupVersionResource, ns, name string, key api.Key, mutate mutation) (tokenObject, *Drift, error) {
	client := r.client.Resource(res).Namespace(ns)
	var written tokenObject
	var drift *Drift
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj, err := client.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get %s %s/%s: %w", res.Resource, ns, name, err)
		}
		led, err := readLedger(obj)
		if err != nil {
			return err
		}
		prev, had := led[key.String()]
		before := obj.DeepCopy()
		next, found, err := mutate(obj, prev)
		if err != nil {
			return err
		}
		drift = detectDrift(key, objectName(obj), prev, had, found)
		if next == nil {
			delete(led, key.String())
		} else {
			led[key.String()] = *next
		}
		if err := writeLedger(obj, led); err != nil {
			return err
		}
		written = tokenObject{Resource: res.Resource, Namespace: ns, Name: name, Generation: obj.GetGeneration()}
		if equality.Semantic.DeepEqual(before.Object, obj.Object) {
			return nil
		}
		out, err := client.Update(ctx, obj, metav1.UpdateOptions{FieldManager: FieldManager})
		if err != nil {
			return fmt.Errorf("update %s %s/%s: %w", res.Resource, ns, name, err)
		}
		written.Generation = out.GetGeneration()
		r.log.Info("istio: wrote", "rollout", key, "object", objectName(out), "generation", out.GetGeneration())
		if drift != nil && next != nil {
			r.reapplied(ctx, out, *drift) // not on Release: that is no re-apply
		}
		return nil
	})
	return written, drift, err
}

// groupVirtualServices merges the entries naming the same VirtualService
// (each is read and written once per Apply), defaulting the namespace to
// the rollout's.
func groupVirtualServices(in []api.IstioVirtualService, key api.Key) []api.IstioVirtualService {
	var out []api.IstioVirtualService
	at := map[[2]string]int{}
	for _, vs := range in {
		vs.Namespace = namespaceOr(vs.Namespace, key)
		k := [2]string{vs.Namespace, vs.Name}
		if i, ok := at[k]; ok {
			out[i].Routes = append(out[i].Routes, vs.Routes...)
			continue
		}
		at[k] = len(out)
		vs.Routes = append([]string(nil), vs.Routes...)
		out = append(out, vs)
	}
	return out
}

func namespaceOr(ns string, key api.Key) string {
	if ns == "" {
		return key.Namespace
	}
	return ns
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

var _ gateway.ClusterRouter = (*Router)(nil)
