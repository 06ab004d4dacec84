package gatewayapi

import (
	"fmt"
	"regexp"
	"slices"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/gateway"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Gateway API limits (HTTPRouteSpec and HTTPRouteRule validation).
const (
	maxRules   = 16
	maxMatches = 64
)

// httpRules returns rules with t's traffic written into the managed rules
// and sluice's rules replaced by those t asks for; the user's other rules
// come out unchanged and in their order. headerRoutes is the route's
// useHeaderRoutes.
func httpRules(rules []gwv1.HTTPRouteRule, t api.Traffic, headerRoutes bool) ([]gwv1.HTTPRouteRule, error) {
	stable, canary := t.Routing.StableService, t.Routing.CanaryService
	user := slices.DeleteFunc(slices.Clone(rules), func(r gwv1.HTTPRouteRule) bool { return isSluiceRule(r.Name) })
	first := -1
	var managed []gwv1.HTTPRouteRule
	out := make([]gwv1.HTTPRouteRule, 0, len(user)+len(t.HeaderRoutes)+len(t.MirrorRoutes)+1)
	for _, r := range user {
		if !namesService(r.BackendRefs, stable) {
			out = append(out, r)
			continue
		}
		if first < 0 {
			first = len(out)
		}
		r = *r.DeepCopy()
		r.BackendRefs = weightedRefs(r.BackendRefs, t, stable, canary)
		managed = append(managed, r)
		out = append(out, r)
	}
	if first < 0 {
		return nil, fmt.Errorf("no rule has a backendRef to the stable Service %q", stable)
	}
	ours, err := sluiceHTTPRules(managed, t, headerRoutes)
	if err != nil {
		return nil, err
	}
	out = slices.Insert(out, first, ours...)
	if len(out) > maxRules {
		return nil, fmt.Errorf("the route would have %d rules, Gateway API allows %d", len(out), maxRules)
	}
	return out, nil
}

// namesService reports whether refs name the core Service svc.
func namesService(refs []gwv1.HTTPBackendRef, svc string) bool {
	return slices.ContainsFunc(refs, func(r gwv1.HTTPBackendRef) bool { return isService(r.BackendObjectReference, svc) })
}

func isService(r gwv1.BackendObjectReference, svc string) bool {
	return string(r.Name) == svc && (r.Group == nil || *r.Group == "") && (r.Kind == nil || *r.Kind == "Service") && r.Namespace == nil
}

// weightedRefs gives the stable ref the stable weight (and the baseline's,
// which these routers cannot tell apart: the stable Service selects the
// stable pods only, see Traffic.Weights) and puts the canary ref right
// after it while the canary has weight; other refs stay as they were.
func weightedRefs(refs []gwv1.HTTPBackendRef, t api.Traffic, stable, canary string) []gwv1.HTTPBackendRef {
	canaryRef := canaryTemplate(refs, stable, canary)
	out := make([]gwv1.HTTPBackendRef, 0, len(refs)+1)
	for _, r := range refs {
		switch {
		case isService(r.BackendObjectReference, canary):
			continue
		case isService(r.BackendObjectReference, stable):
			r = stableRef(r, t)
			r.Weight = ptr.To(t.Weights.Stable + t.Weights.Baseline)
			out = append(out, r)
			if t.Weights.Canary > 0 {
				c := canaryRef
				c.Weight = ptr.To(t.Weights.Canary)
				if sa := sticky(t); sa != nil {
					c.Filters = append(slices.Clone(c.Filters), setCookieFilter(sa))
				}
				out = append(out, c)
			}
		default:
			out = append(out, r)
		}
	}
	return out
}

// canaryTemplate is the canary's backendRef: the user's own when the rule
// has one, else the stable ref with the canary Service's name.
func canaryTemplate(refs []gwv1.HTTPBackendRef, stable, canary string) gwv1.HTTPBackendRef {
	for _, r := range refs {
		if isService(r.BackendObjectReference, canary) {
			r := *r.DeepCopy()
			r.Filters = slices.DeleteFunc(r.Filters, isSetCookieFilter)
			return r
		}
	}
	for _, r := range refs {
		if isService(r.BackendObjectReference, stable) {
			c := *r.DeepCopy()
			c.Name = gwv1.ObjectName(canary)
			c.Filters = nil
			return c
		}
	}
	return gwv1.HTTPBackendRef{}
}

func sticky(t api.Traffic) *api.SessionAffinity {
	if !t.StickyCanary() {
		return nil
	}
	return t.SessionAffinity
}

// stableRef is the user's stable backendRef with sluice's stable cookie
// filter: added while stable users are pinned, taken out otherwise. The
// user's own filters stay as they were.
func stableRef(r gwv1.HTTPBackendRef, t api.Traffic) gwv1.HTTPBackendRef {
	r = *r.DeepCopy()
	r.Filters = slices.DeleteFunc(r.Filters, isStableCookieFilter)
	if t.PinsStable() {
		r.Filters = append(r.Filters, stableCookieFilter(t.SessionAffinity))
	}
	if len(r.Filters) == 0 {
		r.Filters = nil // as the user wrote it: no filters field
	}
	return r
}

// stableCookieFilter pins a client that reached stable to it, with the
// cookie sluice's xDS sets (gateway.StableCookie).
func stableCookieFilter(sa *api.SessionAffinity) gwv1.HTTPRouteFilter {
	return gwv1.HTTPRouteFilter{
		Type:                   gwv1.HTTPRouteFilterResponseHeaderModifier,
		ResponseHeaderModifier: &gwv1.HTTPHeaderFilter{Add: []gwv1.HTTPHeader{{Name: "Set-Cookie", Value: gateway.StableCookie(sa)}}},
	}
}

// isStableCookieFilter reports whether f is sluice's stable cookie filter:
// a ResponseHeaderModifier that only adds one Set-Cookie of
// gateway.StableCookie's shape. The stable backendRef is the user's, so
// unlike the canary's, its other Set-Cookie filters are theirs to keep.
func isStableCookieFilter(f gwv1.HTTPRouteFilter) bool {
	m := f.ResponseHeaderModifier
	return f.Type == gwv1.HTTPRouteFilterResponseHeaderModifier && m != nil &&
		len(m.Set) == 0 && len(m.Remove) == 0 && len(m.Add) == 1 &&
		m.Add[0].Name == "Set-Cookie" && gateway.IsStableCookie(m.Add[0].Value)
}

// setCookieFilter pins a client that reached the canary to it, with the
// cookie sluice's xDS sets (gateway.StickyCookie). Add, not Set: the
// application's own Set-Cookie headers must pass.
func setCookieFilter(sa *api.SessionAffinity) gwv1.HTTPRouteFilter {
	return gwv1.HTTPRouteFilter{
		Type:                   gwv1.HTTPRouteFilterResponseHeaderModifier,
		ResponseHeaderModifier: &gwv1.HTTPHeaderFilter{Add: []gwv1.HTTPHeader{{Name: "Set-Cookie", Value: gateway.StickyCookie(sa)}}},
	}
}

func isSetCookieFilter(f gwv1.HTTPRouteFilter) bool {
	if f.Type != gwv1.HTTPRouteFilterResponseHeaderModifier || f.ResponseHeaderModifier == nil {
		return false
	}
	return slices.ContainsFunc(f.ResponseHeaderModifier.Add, func(h gwv1.HTTPHeader) bool { return h.Name == "Set-Cookie" })
}

// sluiceHTTPRules are the rules sluice inserts before the managed rules,
// in the order sluice's xDS routes them: header routes in step order, the
// sticky-canary route, the sticky-stable route, mirror routes. Each is
// scoped to the managed rules' matches, so it never catches requests the
// managed rules do not.
func sluiceHTTPRules(managed []gwv1.HTTPRouteRule, t api.Traffic, headerRoutes bool) ([]gwv1.HTTPRouteRule, error) {
	base := managedMatches(managed)
	canaryOnly := []gwv1.HTTPBackendRef{canaryBackend(managed[0], t)}
	var out []gwv1.HTTPRouteRule
	if headerRoutes {
		for _, h := range t.HeaderRoutes {
			if len(h.Match) == 0 {
				continue
			}
			hm, err := headerMatches(h.Match)
			if err != nil {
				return nil, fmt.Errorf("header route %s: %w", h.Name, err)
			}
			out = append(out, gwv1.HTTPRouteRule{Name: ruleName(headerRulePrefix, h.Name), Matches: withHeaders(base, hm), BackendRefs: canaryOnly})
		}
	}
	if sa := sticky(t); sa != nil {
		hm, err := headerMatches([]api.HeaderMatch{{HeaderName: "cookie", HeaderValue: api.StringMatch{Exact: sa.CookieName + "=canary"}}})
		if err != nil {
			return nil, fmt.Errorf("sticky canary: %w", err)
		}
		out = append(out, gwv1.HTTPRouteRule{Name: ruleName(stickyRuleName, ""), Matches: withHeaders(base, hm), BackendRefs: canaryOnly})
	}
	if t.PinsStable() {
		hm, err := headerMatches([]api.HeaderMatch{{HeaderName: "cookie", HeaderValue: api.StringMatch{Exact: t.SessionAffinity.CookieName + "=stable"}}})
		if err != nil {
			return nil, fmt.Errorf("stable pin: %w", err)
		}
		stableOnly := []gwv1.HTTPBackendRef{stableBackend(managed[0], t)}
		out = append(out, gwv1.HTTPRouteRule{Name: ruleName(stickyStableRuleName, ""), Matches: withHeaders(base, hm), BackendRefs: stableOnly})
	}
	for _, m := range t.MirrorRoutes {
		if len(m.Match) == 0 {
			continue
		}
		r, err := mirrorRule(managed[0], base, m, t)
		if err != nil {
			return nil, fmt.Errorf("mirror route %s: %w", m.Name, err)
		}
		out = append(out, r)
	}
	for _, r := range out {
		if len(r.Matches) > maxMatches {
			return nil, fmt.Errorf("rule %s would have %d matches, Gateway API allows %d", *r.Name, len(r.Matches), maxMatches)
		}
	}
	return out, nil
}

// canaryBackend is the canary's backendRef at weight 1, as the only
// backend of a rule (with the sticky cookie when the canary is sticky).
func canaryBackend(managed gwv1.HTTPRouteRule, t api.Traffic) gwv1.HTTPBackendRef {
	c := canaryTemplate(managed.BackendRefs, t.Routing.StableService, t.Routing.CanaryService)
	c.Weight = nil
	if sa := sticky(t); sa != nil {
		c.Filters = append(slices.Clone(c.Filters), setCookieFilter(sa))
	}
	return c
}

// stableBackend is the stable's backendRef (as weightedRefs writes it,
// with the stable cookie) at weight 1, as the only backend of a rule.
func stableBackend(managed gwv1.HTTPRouteRule, t api.Traffic) gwv1.HTTPBackendRef {
	for _, r := range managed.BackendRefs {
		if isService(r.BackendObjectReference, t.Routing.StableService) {
			r = stableRef(r, t)
			r.Weight = nil
			return r
		}
	}
	return gwv1.HTTPBackendRef{} // unreachable: the managed rule names stable
}

// managedMatches are the managed rules' matches; a rule with none
// matches every request (Gateway API defaults it to the prefix "/").
func managedMatches(managed []gwv1.HTTPRouteRule) []gwv1.HTTPRouteMatch {
	var out []gwv1.HTTPRouteMatch
	for _, r := range managed {
		if len(r.Matches) == 0 {
			out = append(out, gwv1.HTTPRouteMatch{Path: &gwv1.HTTPPathMatch{Type: ptr.To(gwv1.PathMatchPathPrefix), Value: ptr.To("/")}})
		}
		for _, m := range r.Matches {
			out = append(out, *m.DeepCopy())
		}
	}
	return out
}

// withHeaders is base with hm added to each match's headers.
func withHeaders(base []gwv1.HTTPRouteMatch, hm []gwv1.HTTPHeaderMatch) []gwv1.HTTPRouteMatch {
	out := make([]gwv1.HTTPRouteMatch, len(base))
	for i, m := range base {
		m = *m.DeepCopy()
		m.Headers = append(m.Headers, hm...)
		out[i] = m
	}
	return out
}

// headerMatches converts header matches. Gateway API has exact and
// regular-expression header matches only: a prefix becomes an anchored
// RE2, and a cookie match the cookie-pair RE2 of sluice's xDS.
func headerMatches(ms []api.HeaderMatch) ([]gwv1.HTTPHeaderMatch, error) {
	out := make([]gwv1.HTTPHeaderMatch, 0, len(ms))
	for _, m := range ms {
		name := m.HeaderName
		if m.IsCookie() {
			re, err := gateway.CookieRegex(m.HeaderValue)
			if err != nil {
				return nil, err
			}
			out = append(out, gwv1.HTTPHeaderMatch{Type: ptr.To(gwv1.HeaderMatchRegularExpression), Name: "Cookie", Value: re})
			continue
		}
		typ, v := stringMatch(m.HeaderValue)
		out = append(out, gwv1.HTTPHeaderMatch{Type: ptr.To(gwv1.HeaderMatchType(typ)), Name: gwv1.HTTPHeaderName(name), Value: v})
	}
	return out, nil
}

// stringMatch is "Exact" or "RegularExpression" and the value; a prefix is
// the anchored RE2 ^prefix.* because Gateway API has no prefix match for
// headers, and its PathPrefix matches whole path segments only.
func stringMatch(m api.StringMatch) (string, string) {
	switch {
	case m.Exact != "":
		return "Exact", m.Exact
	case m.Prefix != "":
		return "RegularExpression", "^" + regexp.QuoteMeta(m.Prefix) + ".*"
	default:
		return "RegularExpression", m.Regex
	}
}

// mirrorRule copies m's share of matching requests to the canary while
// serving them as the managed rule does (its filters and weighted refs).
// A mirror match's path or method replaces the managed match's; its
// headers add to it.
func mirrorRule(managed gwv1.HTTPRouteRule, base []gwv1.HTTPRouteMatch, m api.MirrorRoute, t api.Traffic) (gwv1.HTTPRouteRule, error) {
	var matches []gwv1.HTTPRouteMatch
	for _, b := range base {
		for _, rm := range m.Match {
			x := *b.DeepCopy()
			if rm.Path != nil {
				typ, v := stringMatch(*rm.Path)
				pt := gwv1.PathMatchType(typ)
				x.Path = &gwv1.HTTPPathMatch{Type: &pt, Value: &v}
			}
			if rm.Method != nil {
				if rm.Method.Exact == "" {
					return gwv1.HTTPRouteRule{}, fmt.Errorf("Gateway API matches a method exactly only")
				}
				x.Method = ptr.To(gwv1.HTTPMethod(rm.Method.Exact))
			}
			for _, name := range sortedKeys(rm.Headers) {
				hm, err := headerMatches([]api.HeaderMatch{{HeaderName: name, HeaderValue: rm.Headers[name]}})
				if err != nil {
					return gwv1.HTTPRouteRule{}, err
				}
				x.Headers = append(x.Headers, hm...)
			}
			// A mirror path or method replaces the base's, so two base
			// matches can give the same match.
			if !slices.ContainsFunc(matches, func(m gwv1.HTTPRouteMatch) bool { return equality.Semantic.DeepEqual(m, x) }) {
				matches = append(matches, x)
			}
		}
	}
	canary := canaryTemplate(managed.BackendRefs, t.Routing.StableService, t.Routing.CanaryService)
	r := *managed.DeepCopy()
	r.Name = ruleName(mirrorRulePrefix, m.Name)
	r.Matches = matches
	r.Filters = append(r.Filters, gwv1.HTTPRouteFilter{
		Type:          gwv1.HTTPRouteFilterRequestMirror,
		RequestMirror: &gwv1.HTTPRequestMirrorFilter{BackendRef: canary.BackendObjectReference, Percent: ptr.To(m.Percentage)},
	})
	return r, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
