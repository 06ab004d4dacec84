package gatewayapi

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/sluice-dev/sluice/api"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// errGRPCRoutes is returned for traffic a GRPCRoute cannot carry yet.
var errGRPCRoutes = errors.New("sluice sets weights on GRPCRoutes; header, mirror and sticky routes are HTTPRoute only")

// grpcRules is httpRules for a GRPCRoute: the weights of the managed
// rules. Header, mirror and sticky routes are refused rather than left
// out, so that a step never analyses traffic it did not set.
func grpcRules(rules []gwv1.GRPCRouteRule, t api.Traffic, headerRoutes bool) ([]gwv1.GRPCRouteRule, error) {
	if headerRoutes && slices.ContainsFunc(t.HeaderRoutes, func(h api.HeaderRoute) bool { return len(h.Match) > 0 }) ||
		slices.ContainsFunc(t.MirrorRoutes, func(m api.MirrorRoute) bool { return len(m.Match) > 0 }) || sticky(t) != nil {
		return nil, errGRPCRoutes
	}
	stable, canary := t.Routing.StableService, t.Routing.CanaryService
	out := slices.DeleteFunc(slices.Clone(rules), func(r gwv1.GRPCRouteRule) bool { return isSluiceRule(r.Name) })
	found := false
	for i, r := range out {
		if !slices.ContainsFunc(r.BackendRefs, func(b gwv1.GRPCBackendRef) bool { return isService(b.BackendObjectReference, stable) }) {
			continue
		}
		found = true
		r = *r.DeepCopy()
		r.BackendRefs = weightedGRPCRefs(r.BackendRefs, t, stable, canary)
		out[i] = r
	}
	if !found {
		return nil, fmt.Errorf("no rule has a backendRef to the stable Service %q", stable)
	}
	return out, nil
}

func weightedGRPCRefs(refs []gwv1.GRPCBackendRef, t api.Traffic, stable, canary string) []gwv1.GRPCBackendRef {
	var canaryRef *gwv1.GRPCBackendRef
	for _, r := range refs {
		if isService(r.BackendObjectReference, canary) {
			canaryRef = r.DeepCopy()
		}
	}
	out := make([]gwv1.GRPCBackendRef, 0, len(refs)+1)
	for _, r := range refs {
		switch {
		case isService(r.BackendObjectReference, canary):
		case isService(r.BackendObjectReference, stable):
			r.Weight = ptr.To(t.Weights.Stable + t.Weights.Baseline)
			out = append(out, r)
			if t.Weights.Canary > 0 {
				c := canaryRef
				if c == nil {
					c = r.DeepCopy()
					c.Name, c.Filters = gwv1.ObjectName(canary), nil
				}
				c.Weight = ptr.To(t.Weights.Canary)
				out = append(out, *c)
			}
		default:
			out = append(out, r)
		}
	}
	return out
}

// writeGRPCRoute is writeHTTPRoute for a GRPCRoute.
func (r *Router) writeGRPCRoute(ctx context.Context, ns string, ref api.GatewayRouteRef, t api.Traffic, onlyDrifted bool) (written, error) {
	client := r.opts.Client.GatewayV1().GRPCRoutes(ns)
	var w written
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		route, err := client.Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		rules, err := grpcRules(route.Spec.Rules, t, ref.UseHeaderRoutes)
		if err != nil {
			return err
		}
		w = written{Kind: "GRPCRoute", Namespace: ns, Name: ref.Name, Generation: route.Generation}
		if equality.Semantic.DeepEqual(rules, route.Spec.Rules) {
			return nil
		}
		route.Spec.Rules = rules
		updated, err := client.Update(ctx, route, metav1.UpdateOptions{FieldManager: FieldManager})
		if err != nil {
			return err
		}
		w.Generation = updated.Generation
		if onlyDrifted {
			r.reapplied(ctx, t.Rollout, "GRPCRoute", updated.ObjectMeta)
		}
		return nil
	})
	return w, err
}
