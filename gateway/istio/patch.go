package istio

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/gateway"
	netv1alpha3 "istio.io/api/networking/v1alpha3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// The user's VirtualService is patched as unstructured JSON, not through
// Istio's typed Go structs: those re-encode every field on the way back
// (durations come out normalised, "1500ms" as "1.500s" and "1m" as "60s"),
// so a typed read-modify-write would rewrite fields sluice does not manage
// and put the object out of sync with git. Only the routes sluice itself
// builds go through the typed structs (matches.go).

// routeState is what one rollout wants of the routes it manages in one
// VirtualService.
type routeState struct {
	rollout api.Key
	// weights add up to 100 over Stable and Canary.
	weights      api.Weights
	headerRoutes []api.HeaderRoute
	mirrorRoutes []api.MirrorRoute
	// sticky is set while the canary is sticky (session affinity and a
	// canary weight above 0).
	sticky *api.SessionAffinity
	// pinStable is set while stable users are pinned too
	// (api.Traffic.PinsStable: PinStable and a step in progress).
	pinStable *api.SessionAffinity
}

// atRest is the state after promotion, abort or release: all traffic to
// stable and none of sluice's routes.
func atRest(key api.Key) routeState {
	return routeState{rollout: key, weights: api.CanaryWeights(0)}
}

// stateOf derives the wanted state from a rollout's traffic.
func stateOf(t api.Traffic) (routeState, error) {
	w := t.Weights
	// A baseline runs the stable version, but under its own pod-template
	// hash, so neither subset selects its pods: its share goes to stable.
	w.Stable, w.Baseline = w.Stable+w.Baseline, 0
	if w.Stable < 0 || w.Canary < 0 || w.Stable+w.Canary != 100 {
		return routeState{}, fmt.Errorf("rollout %s: weights %d/%d do not add up to 100", t.Rollout, w.Stable, w.Canary)
	}
	s := routeState{rollout: t.Rollout, weights: w, headerRoutes: t.HeaderRoutes, mirrorRoutes: t.MirrorRoutes}
	if t.StickyCanary() {
		s.sticky = t.SessionAffinity
	}
	if t.PinsStable() {
		s.pinStable = t.SessionAffinity
	}
	return s, nil
}

// backends tells a managed route's stable and canary destinations apart:
// by subset with a DestinationRule, by Service host otherwise.
type backends struct {
	stableService, canaryService string
	stableSubset, canarySubset   string
}

func backendsOf(r *api.ClusterRouting) backends {
	b := backends{stableService: r.StableService, canaryService: r.CanaryService}
	if dr := r.Istio.DestinationRule; dr != nil {
		b.stableSubset, b.canarySubset = dr.StableSubsetName, dr.CanarySubsetName
	}
	return b
}

type side int

const (
	sideOther side = iota
	sideStable
	sideCanary
)

// sideOf classifies one destination. A host matches a Service by its short
// name or any longer form of it (name.ns, name.ns.svc.cluster.local), as
// Argo Rollouts matches it.
func (b backends) sideOf(dest map[string]any) side {
	host, _ := dest["host"].(string)
	subset, _ := dest["subset"].(string)
	if b.canarySubset != "" && subset != "" {
		switch subset {
		case b.canarySubset:
			return sideCanary
		case b.stableSubset:
			return sideStable
		}
		return sideOther
	}
	switch {
	case hostIs(host, b.canaryService):
		return sideCanary
	case hostIs(host, b.stableService):
		return sideStable
	}
	return sideOther
}

func hostIs(host, service string) bool {
	return service != "" && (host == service || strings.HasPrefix(host, service+"."))
}

// vsPatch is the outcome of patching one VirtualService for one rollout.
type vsPatch struct {
	// found and written are the managed fields' projections before and
	// after (see projectVS).
	found, written []string
	// entry is the rollout's new ledger entry.
	entry ledgerEntry
	// hosts and wants are what a proxyless client of istiod must
	// receive once istiod has taken the write (meshview.go).
	hosts []string
	wants []routeWant
}

// patchVirtualService rewrites, in obj, the managed http routes named by
// routeNames (the only http route when none is named) to want: the
// stable/canary weights, the sticky Set-Cookie on the canary destination
// (and the stable one on the stable destination while stable users are
// pinned), and sluice's own routes (header, sticky, sticky-stable, mirror)
// just ahead of the first
// managed route. prev names the routes sluice inserted at its last write;
// they are replaced. Every other field and route is left as it was.
func patchVirtualService(obj *unstructured.Unstructured, routeNames []string, b backends, prev ledgerEntry, want routeState) (vsPatch, error) {
	where := objectName(obj)
	http, _, err := unstructured.NestedSlice(obj.Object, "spec", "http")
	if err != nil {
		return vsPatch{}, fmt.Errorf("%s: spec.http: %w", where, err)
	}
	ours := setOf(prev.Routes)
	var user []any   // the user's routes, sluice's old ones taken out
	var userAt []int // user[i] is http[userAt[i]]
	for i, r := range http {
		if !ours[routeName(r)] {
			user, userAt = append(user, r), append(userAt, i)
		}
	}
	managed, err := findManaged(user, routeNames)
	if err != nil {
		return vsPatch{}, fmt.Errorf("%s: %w", where, err)
	}
	wasManaged := map[int]bool{}
	for _, m := range managed {
		wasManaged[userAt[m]] = true
	}
	found := projectVS(http, ours, wasManaged)

	var dests sideDests
	for _, i := range managed {
		d, err := setWeights(user[i].(map[string]any), b, want)
		if err != nil {
			return vsPatch{}, fmt.Errorf("%s: %w", where, err)
		}
		if dests.canary == nil {
			dests = d
		}
	}
	added, err := sluiceRoutes(want, dests, user[managed[0]].(map[string]any)["route"])
	if err != nil {
		return vsPatch{}, fmt.Errorf("%s: %w", where, err)
	}
	names, err := addedNames(added, user, want.rollout)
	if err != nil {
		return vsPatch{}, fmt.Errorf("%s: %w", where, err)
	}
	out := slices.Concat(user[:managed[0]], added, user[managed[0]:])
	if err := unstructured.SetNestedSlice(obj.Object, out, "spec", "http"); err != nil {
		return vsPatch{}, fmt.Errorf("%s: %w", where, err)
	}
	isManaged := map[int]bool{}
	for _, m := range managed {
		isManaged[m+len(added)] = true // all of them sit after the insertion point
	}
	written := projectVS(out, setOf(names), isManaged)
	wrote := make([]int, 0, len(added)+len(managed))
	for i := range out {
		if isManaged[i] || (i >= managed[0] && i < managed[0]+len(added)) {
			wrote = append(wrote, i)
		}
	}
	hosts, wants := meshWants(obj, out, wrote)
	return vsPatch{found: found, written: written, entry: ledgerEntry{Routes: names, Sum: checksum(written)}, hosts: hosts, wants: wants}, nil
}

// addedNames returns the names of sluice's routes, which must be set,
// distinct, and not the name of one of the user's routes.
func addedNames(added, user []any, key api.Key) ([]string, error) {
	var names []string
	for _, r := range added {
		n := routeName(r)
		switch {
		case n == "":
			return nil, fmt.Errorf("rollout %s: a header or mirror route has no name", key)
		case slices.Contains(names, n):
			return nil, fmt.Errorf("rollout %s: two of its routes are named %q", key, n)
		case slices.ContainsFunc(user, func(u any) bool { return routeName(u) == n }):
			return nil, fmt.Errorf("http route %q is the user's, not sluice's: give the step's route another name", n)
		}
		names = append(names, n)
	}
	return names, nil
}

func setOf(names []string) map[string]bool {
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	return set
}

func routeName(r any) string {
	m, _ := r.(map[string]any)
	n, _ := m["name"].(string)
	return n
}

// findManaged returns the indexes of the managed routes in http: those
// named, or the only route when none is named.
func findManaged(http []any, names []string) ([]int, error) {
	if len(names) == 0 {
		if len(http) != 1 {
			return nil, fmt.Errorf("no routes named and %d http routes (name the managed ones in virtualService.routes)", len(http))
		}
		return []int{0}, nil
	}
	var idx []int
	for _, n := range names {
		i := slices.IndexFunc(http, func(r any) bool { return routeName(r) == n })
		if i < 0 {
			return nil, fmt.Errorf("http route %q not found", n)
		}
		idx = append(idx, i)
	}
	slices.Sort(idx)
	return idx, nil
}

// sideDests are a managed route's stable and canary destinations, which
// sluice's own routes send to.
type sideDests struct {
	stable, canary map[string]any
}

// setWeights sets the weights of a managed route's destinations, the
// sticky Set-Cookie on the canary one and the stable pin's on the stable
// one, returning both destinations. Both sides must be listed: the canary
// keeps weight 0 at rest rather than being removed, as Argo's users
// already write it in git.
func setWeights(route map[string]any, b backends, want routeState) (sideDests, error) {
	name := routeName(route)
	routes, _ := route["route"].([]any)
	var out sideDests
	for i, d := range routes {
		rd, ok := d.(map[string]any)
		if !ok {
			return sideDests{}, fmt.Errorf("http route %q: route[%d] is not an object", name, i)
		}
		dest, _ := rd["destination"].(map[string]any)
		switch b.sideOf(dest) {
		case sideStable:
			rd["weight"] = int64(want.weights.Stable)
			if err := setStableCookie(rd, want.pinStable); err != nil {
				return sideDests{}, fmt.Errorf("http route %q: route[%d]: %w", name, i, err)
			}
			if out.stable == nil {
				out.stable = dest
			}
		case sideCanary:
			rd["weight"] = int64(want.weights.Canary)
			setStickyCookie(rd, want.sticky)
			out.canary = dest
		default:
			return sideDests{}, fmt.Errorf("http route %q: route[%d] destination %v is neither the stable (%s) nor the canary (%s) side", name, i, dest["host"], b.describe(sideStable), b.describe(sideCanary))
		}
	}
	if out.stable == nil || out.canary == nil {
		return sideDests{}, fmt.Errorf("http route %q: needs a destination for %s and one for %s", name, b.describe(sideStable), b.describe(sideCanary))
	}
	return out, nil
}

func (b backends) describe(s side) string {
	svc, subset := b.stableService, b.stableSubset
	if s == sideCanary {
		svc, subset = b.canaryService, b.canarySubset
	}
	if subset != "" {
		return "subset " + subset
	}
	return "service " + svc
}

// stickyCookieHeader is the response header sluice adds on the canary
// destination while the canary is sticky.
const stickyCookieHeader = "set-cookie"

// setStickyCookie adds (sa set) or removes (nil) the Set-Cookie on the
// canary destination, pruning only the maps that the removal
// leaves empty.
func setStickyCookie(rd map[string]any, sa *api.SessionAffinity) {
	if sa != nil {
		v := sa.CookieName + "=canary"
		if sa.MaxAge > 0 {
			v += fmt.Sprintf("; Max-Age=%d", sa.MaxAge)
		}
		_ = unstructured.SetNestedField(rd, v+"; Path=/; HttpOnly", "headers", "response", "add", stickyCookieHeader)
		return
	}
	if _, ok, _ := unstructured.NestedString(rd, "headers", "response", "add", stickyCookieHeader); !ok {
		return
	}
	removeCookieHeader(rd)
}

// removeCookieHeader removes the Set-Cookie sluice adds to a destination,
// pruning only the maps that the removal leaves empty.
func removeCookieHeader(rd map[string]any) {
	unstructured.RemoveNestedField(rd, "headers", "response", "add", stickyCookieHeader)
	for _, path := range [][]string{{"headers", "response", "add"}, {"headers", "response"}, {"headers"}} {
		if m, ok, _ := unstructured.NestedMap(rd, path...); ok && len(m) == 0 {
			unstructured.RemoveNestedField(rd, path...)
		}
	}
}

// setStableCookie adds (sa set) or removes (nil) the stable pin's
// Set-Cookie (gateway.StableCookie) on the stable destination. That
// destination is the user's, and Istio's headers.response.add is a map, so
// one set-cookie per destination: a Set-Cookie of the user's own there is
// never replaced (an error while stable users are to be pinned) nor removed.
// add, not set: the application's own Set-Cookie headers must pass.
func setStableCookie(rd map[string]any, sa *api.SessionAffinity) error {
	cur, has, _ := unstructured.NestedString(rd, "headers", "response", "add", stickyCookieHeader)
	if has && !gateway.IsStableCookie(cur) {
		if sa == nil {
			return nil
		}
		return fmt.Errorf("the stable destination already adds a set-cookie response header of its own (%q); Istio adds one per destination, so sluice cannot add its stable cookie (sessionAffinity.pinStable)", cur)
	}
	if sa != nil {
		_ = unstructured.SetNestedField(rd, gateway.StableCookie(sa), "headers", "response", "add", stickyCookieHeader)
		return nil
	}
	if has {
		removeCookieHeader(rd)
	}
	return nil
}

// stickyRouteName is the sticky-canary route's name; per rollout, as
// several rollouts may share one VirtualService.
func stickyRouteName(key api.Key) string { return "sluice-sticky-" + key.Name }

// stickyStableRouteName is the stable pin's route name, per rollout too.
func stickyStableRouteName(key api.Key) string { return "sluice-sticky-stable-" + key.Name }

// sluiceRoutes builds sluice's own routes in the xDS gateway's order:
// header routes in step order, the sticky route, the sticky-stable route,
// then mirror routes (each keeping the managed route's weighted split).
// The destinations are copied as they are, so the user's host spelling
// and port stay.
func sluiceRoutes(want routeState, dests sideDests, weighted any) ([]any, error) {
	canaryDest := dests.canary
	only := func(dest map[string]any) []any {
		return []any{map[string]any{"destination": runtime.DeepCopyJSONValue(dest), "weight": int64(100)}}
	}
	toCanary := func() []any { return only(canaryDest) }
	var out []any
	for _, hr := range want.headerRoutes {
		if len(hr.Match) == 0 {
			continue // an empty match removes the route
		}
		m, err := headerRouteMatch(hr)
		if err != nil {
			return nil, fmt.Errorf("rollout %s: header route %q: %w", want.rollout, hr.Name, err)
		}
		match, err := jsonValue(m)
		if err != nil {
			return nil, err
		}
		out = append(out, map[string]any{"name": hr.Name, "match": []any{match}, "route": toCanary()})
	}
	if want.sticky != nil {
		re, err := gateway.CookieRegex(api.StringMatch{Exact: want.sticky.CookieName + "=canary"})
		if err != nil {
			return nil, fmt.Errorf("rollout %s: session affinity: %w", want.rollout, err)
		}
		match, err := jsonValue(&netv1alpha3.HTTPMatchRequest{Headers: map[string]*netv1alpha3.StringMatch{"cookie": regex(re)}})
		if err != nil {
			return nil, err
		}
		out = append(out, map[string]any{"name": stickyRouteName(want.rollout), "match": []any{match}, "route": toCanary()})
	}
	if want.pinStable != nil {
		match, err := cookieMatch(want.pinStable.CookieName + "=stable")
		if err != nil {
			return nil, fmt.Errorf("rollout %s: stable pin: %w", want.rollout, err)
		}
		out = append(out, map[string]any{"name": stickyStableRouteName(want.rollout), "match": []any{match}, "route": only(dests.stable)})
	}
	for _, mr := range want.mirrorRoutes {
		if len(mr.Match) == 0 {
			continue
		}
		var matches []any
		for _, rm := range mr.Match {
			m, err := mirrorMatch(rm)
			if err != nil {
				return nil, fmt.Errorf("rollout %s: mirror route %q: %w", want.rollout, mr.Name, err)
			}
			v, err := jsonValue(m)
			if err != nil {
				return nil, err
			}
			matches = append(matches, v)
		}
		out = append(out, map[string]any{
			"name":             mr.Name,
			"match":            matches,
			"route":            runtime.DeepCopyJSONValue(weighted),
			"mirror":           runtime.DeepCopyJSONValue(canaryDest),
			"mirrorPercentage": map[string]any{"value": int64(mr.Percentage)},
		})
	}
	return out, nil
}

// cookieMatch is the match of requests carrying the cookie pair, with the
// cookie-pair RE2 of sluice's xDS.
func cookieMatch(pair string) (any, error) {
	re, err := gateway.CookieRegex(api.StringMatch{Exact: pair})
	if err != nil {
		return nil, err
	}
	return jsonValue(&netv1alpha3.HTTPMatchRequest{Headers: map[string]*netv1alpha3.StringMatch{"cookie": regex(re)}})
}

// jsonValue turns one of Istio's typed structs into the JSON value the
// unstructured object holds (integers as int64, as the API machinery
// decodes them).
func jsonValue(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// projectVS lists the managed fields of one VirtualService for one
// rollout, in order, one line each: sluice's routes whole, and the
// destinations (with weight and sticky cookie) of the managed routes.
// Its checksum is what drift detection compares.
func projectVS(http []any, ours map[string]bool, managed map[int]bool) []string {
	var lines []string
	for i, r := range http {
		m, _ := r.(map[string]any)
		switch {
		case ours[routeName(r)]:
			b, _ := json.Marshal(m)
			lines = append(lines, fmt.Sprintf("sluice route %s: %s", routeName(r), b))
		case managed[i]:
			dests, _ := m["route"].([]any)
			for _, d := range dests {
				rd, _ := d.(map[string]any)
				dest, _ := json.Marshal(rd["destination"])
				cookie, _, _ := unstructured.NestedString(rd, "headers", "response", "add", stickyCookieHeader)
				// No index: other rollouts' routes move this one around.
				lines = append(lines, fmt.Sprintf("route %q: %s weight %v cookie %q", routeName(r), dest, rd["weight"], cookie))
			}
		}
	}
	return lines
}
