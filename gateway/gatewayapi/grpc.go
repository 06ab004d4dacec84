package gatewayapi

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/sluice-dev/sluice/api"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// errGRPCRoutes is returned for traffic a GRPCRoute cannot carry yet.
var errGRPCRoutes = errors.New("sluice sets weights and header routes on GRPCRoutes; mirror and sticky routes are HTTPRoute only")

// grpcRules is httpRules for a GRPCRoute: the weights of the managed
// rules and the header routes ahead of them. Mirror and sticky routes
// are refused rather than left out, so that a step never analyses
// traffic it did not set.
func grpcRules(rules []gwv1.GRPCRouteRule, t api.Traffic, headerRoutes bool) ([]gwv1.GRPCRouteRule, error) {
	if slices.ContainsFunc(t.MirrorRoutes, func(m api.MirrorRoute) bool { return len(m.Match) > 0 }) || sticky(t) != nil {
		return nil, errGRPCRoutes
	}
	stable, canary := t.Routing.StableService, t.Routing.CanaryService
	user := slices.DeleteFunc(slices.Clone(rules), func(r gwv1.GRPCRouteRule) bool { return isSluiceRule(r.Name) })
	first := -1
	var managed []gwv1.GRPCRouteRule
	out := make([]gwv1.GRPCRouteRule, 0, len(user)+len(t.HeaderRoutes))
	for _, r := range user {
		if !slices.ContainsFunc(r.BackendRefs, func(b gwv1.GRPCBackendRef) bool { return isService(b.BackendObjectReference, stable) }) {
			out = append(out, r)
			continue
		}
		if first < 0 {
			first = len(out)
		}
		r = *r.DeepCopy()
		r.BackendRefs = weightedGRPCRefs(r.BackendRefs, t, stable, canary)
		managed = append(managed, r)
		out = append(out, r)
	}
	if first < 0 {
		return nil, fmt.Errorf("no rule has a backendRef to the stable Service %q", stable)
	}
	if headerRoutes {
		ours, err := grpcHeaderRules(managed, t)
		if err != nil {
			return nil, err
		}
		out = slices.Insert(out, first, ours...)
	}
	if len(out) > maxRules {
		return nil, fmt.Errorf("the route would have %d rules, Gateway API allows %d", len(out), maxRules)
	}
	return out, nil
}

// grpcHeaderRules are the header routes as rules to the canary, each
// scoped to the managed rules' matches (a rule without matches matches
// every call). Header matches convert as for HTTPRoute (see headerMatches).
func grpcHeaderRules(managed []gwv1.GRPCRouteRule, t api.Traffic) ([]gwv1.GRPCRouteRule, error) {
	var base []gwv1.GRPCRouteMatch
	for _, r := range managed {
		if len(r.Matches) == 0 {
			base = append(base, gwv1.GRPCRouteMatch{})
		}
		for _, m := range r.Matches {
			base = append(base, *m.DeepCopy())
		}
	}
	canaryOnly := grpcCanaryBackend(managed[0], t)
	var out []gwv1.GRPCRouteRule
	for _, h := range t.HeaderRoutes {
		if len(h.Match) == 0 {
			continue
		}
		hm, err := headerMatches(h.Match)
		if err != nil {
			return nil, fmt.Errorf("header route %s: %w", h.Name, err)
		}
		matches := make([]gwv1.GRPCRouteMatch, len(base))
		for i, b := range base {
			b = *b.DeepCopy()
			for _, m := range hm {
				b.Headers = append(b.Headers, gwv1.GRPCHeaderMatch{Type: ptr.To(gwv1.GRPCHeaderMatchType(*m.Type)), Name: gwv1.GRPCHeaderName(m.Name), Value: m.Value})
			}
			matches[i] = b
		}
		out = append(out, gwv1.GRPCRouteRule{Name: ruleName(headerRulePrefix, h.Name), Matches: matches, BackendRefs: []gwv1.GRPCBackendRef{canaryOnly}})
	}
	return out, nil
}

// grpcCanaryBackend is the canary's backendRef as the only backend of a
// rule: the user's own canary ref, or the stable one renamed.
func grpcCanaryBackend(managed gwv1.GRPCRouteRule, t api.Traffic) gwv1.GRPCBackendRef {
	var c gwv1.GRPCBackendRef
	for _, r := range managed.BackendRefs {
		if isService(r.BackendObjectReference, t.Routing.StableService) {
			c = *r.DeepCopy()
			c.Name, c.Filters = gwv1.ObjectName(t.Routing.CanaryService), nil
		}
	}
	for _, r := range managed.BackendRefs {
		if isService(r.BackendObjectReference, t.Routing.CanaryService) {
			c = *r.DeepCopy()
		}
	}
	c.Weight = nil
	return c
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
	return writeRoute(ctx, r, "GRPCRoute", ns, ref.Name, t.Rollout, onlyDrifted, client.Get, client.Update,
		func(route *gwv1.GRPCRoute) (bool, error) {
			rules, err := grpcRules(route.Spec.Rules, t, ref.UseHeaderRoutes)
			if err != nil || equality.Semantic.DeepEqual(rules, route.Spec.Rules) {
				return false, err
			}
			route.Spec.Rules = rules
			return true, nil
		})
}
