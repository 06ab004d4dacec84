package gatewayapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/gateway"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
)

// Name is the router's name in logs, status and events.
const Name = "gatewayAPI"

// Options configure a Router.
type Options struct {
	// Client reads and writes routes (required).
	Client gwclient.Interface
	// Events records an Event on a route sluice re-applied after someone
	// else changed its managed rules; nil only logs it.
	Events kubernetes.Interface
	Logger *slog.Logger
	// PollInterval paces Verify's reads of route status and Run's checks
	// for routes changed by others (default 1s).
	PollInterval time.Duration
}

// Router writes traffic into HTTPRoutes and GRPCRoutes.
type Router struct {
	opts Options
	log  *slog.Logger

	// mu serialises writes, so that the drift check never writes a
	// rollout's older traffic over a newer Apply.
	mu      sync.Mutex
	applied map[api.Key]api.Traffic // the latest traffic written, per rollout
}

var _ gateway.ClusterRouter = (*Router)(nil)

// New validates opts and returns a Router.
func New(opts Options) (*Router, error) {
	if opts.Client == nil {
		return nil, errors.New("gatewayapi: no client")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = time.Second
	}
	return &Router{opts: opts, log: opts.Logger.With("router", Name), applied: map[api.Key]api.Traffic{}}, nil
}

// Name is "gatewayAPI".
func (r *Router) Name() string { return Name }

// written is one route write that Verify checks: the generation the
// apiserver gave it.
type written struct {
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	Generation int64  `json:"generation"`
}

// Apply writes t into every route t.Routing names; the token lists each
// route and the generation written.
func (r *Router) Apply(ctx context.Context, t api.Traffic) (string, error) {
	g := gatewayRouting(t)
	if g == nil {
		return "", nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.applied[t.Rollout] = t
	ws, err := r.write(ctx, t, false)
	if err != nil {
		return "", err
	}
	tok, err := json.Marshal(ws)
	if err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	return string(tok), nil
}

// Release writes a single 100% stable backend into each route r names
// and removes sluice's rules; the rollout is forgotten.
func (r *Router) Release(ctx context.Context, key api.Key, cr *api.ClusterRouting) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cr == nil || cr.GatewayAPI == nil {
		return nil
	}
	if t, ok := r.applied[key]; ok && covers(cr.GatewayAPI, gatewayRouting(t)) {
		delete(r.applied, key)
	}
	_, err := r.write(ctx, api.Traffic{Rollout: key, Weights: api.CanaryWeights(0), Routing: cr}, false)
	return err
}

// covers reports whether released names every route of applied, so that
// releasing the routes a rollout stopped naming keeps watching the others.
func covers(released, applied *api.GatewayAPIRouting) bool {
	if applied == nil {
		return true
	}
	if released.Namespace != applied.Namespace {
		return false
	}
	has := func(refs []api.GatewayRouteRef, name string) bool {
		return slices.ContainsFunc(refs, func(r api.GatewayRouteRef) bool { return r.Name == name })
	}
	for _, r := range applied.HTTPRoutes {
		if !has(released.HTTPRoutes, r.Name) {
			return false
		}
	}
	for _, r := range applied.GRPCRoutes {
		if !has(released.GRPCRoutes, r.Name) {
			return false
		}
	}
	return true
}

func gatewayRouting(t api.Traffic) *api.GatewayAPIRouting {
	if t.Routing == nil {
		return nil
	}
	return t.Routing.GatewayAPI
}

// write rewrites the managed rules of every route of t. With onlyDrifted,
// it writes only routes whose managed rules someone else changed, and
// says so in an event.
func (r *Router) write(ctx context.Context, t api.Traffic, onlyDrifted bool) ([]written, error) {
	g := t.Routing.GatewayAPI
	var out []written
	var errs []error
	for _, ref := range g.HTTPRoutes {
		w, err := r.writeHTTPRoute(ctx, g.Namespace, ref, t, onlyDrifted)
		if err != nil {
			errs = append(errs, fmt.Errorf("HTTPRoute %s/%s: %w", g.Namespace, ref.Name, err))
			continue
		}
		out = append(out, w)
	}
	for _, ref := range g.GRPCRoutes {
		w, err := r.writeGRPCRoute(ctx, g.Namespace, ref, t, onlyDrifted)
		if err != nil {
			errs = append(errs, fmt.Errorf("GRPCRoute %s/%s: %w", g.Namespace, ref.Name, err))
			continue
		}
		out = append(out, w)
	}
	return out, errors.Join(errs...)
}

// writeHTTPRoute reads the route, rewrites its managed rules and updates
// it with the resourceVersion read (see writeRoute).
func (r *Router) writeHTTPRoute(ctx context.Context, ns string, ref api.GatewayRouteRef, t api.Traffic, onlyDrifted bool) (written, error) {
	client := r.opts.Client.GatewayV1().HTTPRoutes(ns)
	return writeRoute(ctx, r, "HTTPRoute", ns, ref.Name, t.Rollout, onlyDrifted, client.Get, client.Update,
		func(route *gwv1.HTTPRoute) (bool, error) {
			rules, err := httpRules(route.Spec.Rules, t, ref.UseHeaderRoutes)
			if err != nil || equality.Semantic.DeepEqual(rules, route.Spec.Rules) {
				return false, err
			}
			route.Spec.Rules = rules
			return true, nil
		})
}

// writeRoute reads a route, lets rewrite change its managed rules in
// place (it says whether anything changed),
// and updates it with the resourceVersion read; a conflict (someone wrote
// between the read and the update) is read and rewritten again, never
// forced. HTTPRoute and GRPCRoute share it: their rules differ, the
// read-modify-write does not.
func writeRoute[R metav1.Object](ctx context.Context, r *Router, kind, ns, name string, rollout api.Key, onlyDrifted bool,
	get func(context.Context, string, metav1.GetOptions) (R, error),
	update func(context.Context, R, metav1.UpdateOptions) (R, error),
	rewrite func(R) (bool, error),
) (written, error) {
	var w written
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		route, err := get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		changed, err := rewrite(route)
		if err != nil {
			return err
		}
		w = written{Kind: kind, Namespace: ns, Name: name, Generation: route.GetGeneration()}
		if !changed {
			return nil
		}
		updated, err := update(ctx, route, metav1.UpdateOptions{FieldManager: FieldManager})
		if err != nil {
			return err
		}
		w.Generation = updated.GetGeneration()
		if onlyDrifted {
			r.reapplied(ctx, rollout, kind, updated)
		}
		return nil
	})
	return w, err
}

// FieldManager names sluice's writes in the route's managedFields.
const FieldManager = "sluice"

// Run re-applies, until ctx ends, the managed rules of routes someone
// else changed (a GitOps sync of the route's file, a kubectl edit), with
// an event on the route, so that a step never runs on traffic it did not
// set. Route changes are found by reading each route every PollInterval.
func (r *Router) Run(ctx context.Context) error {
	wait.UntilWithContext(ctx, r.resync, r.opts.PollInterval)
	return nil
}

// resync writes the latest traffic of every rollout again where it drifted.
func (r *Router) resync(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range r.applied {
		if _, err := r.write(ctx, t, true); err != nil && ctx.Err() == nil {
			r.log.Warn("re-apply routes", "rollout", t.Rollout.String(), "err", err)
		}
	}
}
