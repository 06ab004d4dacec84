package gateway

import (
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/sluice-dev/sluice/api"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Resources are the xDS resources of one rollout. Envoy reaches Route
// through Scope (EnvoyRoutesScoped), or through the virtual host, which is
// also part of the combined sluice-http route configuration
// (EnvoyRoutesCombined, see EnvoyResources).
type Resources struct {
	Rollout     api.Key
	Host        string
	Listener    *listenerv3.Listener                // named Host; api_listener for gRPC
	Route       *routev3.RouteConfiguration         // named Host; one virtual host
	VirtualHost *routev3.VirtualHost                // the same virtual host
	Scope       *routev3.ScopedRouteConfiguration   // named Host; selects Route for Envoy by :authority
	Clusters    []*clusterv3.Cluster                // stable, canary[, baseline]
	Endpoints   []*endpointv3.ClusterLoadAssignment // stable, canary[, baseline]
}

// Translate builds the resources of one rollout's traffic. It checks the
// input (host, endpoints, weights, matches) but not the result: call
// Validate before publishing.
func Translate(t api.Traffic) (*Resources, error) {
	if err := checkTraffic(t); err != nil {
		return nil, &ValidationError{Rollout: t.Rollout, Rule: "traffic", Err: err}
	}
	res := &Resources{Rollout: t.Rollout, Host: t.Host}
	for _, s := range sides(t) {
		name := ClusterName(t.Rollout, s.side)
		cla, err := loadAssignment(name, s.eps, t.EndpointZones, placeOf(t))
		if err != nil {
			return nil, &ValidationError{Rollout: t.Rollout, Resource: name, Rule: "endpoints", Err: err}
		}
		res.Clusters = append(res.Clusters, edsCluster(name))
		res.Endpoints = append(res.Endpoints, cla)
	}
	routes, err := buildRoutes(t)
	if err != nil {
		return nil, &ValidationError{Rollout: t.Rollout, Resource: t.Host, Rule: "routes", Err: err}
	}
	res.VirtualHost = &routev3.VirtualHost{
		Name:    t.Rollout.String(),
		Domains: []string{t.Host, t.Host + ":*"},
		Routes:  routes,
	}
	res.Route = &routev3.RouteConfiguration{Name: t.Host, VirtualHosts: []*routev3.VirtualHost{res.VirtualHost}}
	res.Listener = apiListener(t.Host)
	res.Scope = routeScope(t.Host)
	return res, nil
}

// side is one cluster of a rollout with its endpoints and weight.
type side struct {
	side   Side
	eps    []string
	weight int32
}

// sides are the clusters of t: stable and canary, and the baseline when t
// has one. A side without endpoints of its own (no canary or baseline in
// flight) carries the stable endpoints, so it exists and answers like
// stable.
func sides(t api.Traffic) []side {
	orStable := func(eps []string) []string {
		if len(eps) == 0 {
			return t.StableEndpoints
		}
		return eps
	}
	out := []side{{Stable, t.StableEndpoints, t.Weights.Stable}, {Canary, orStable(t.CanaryEndpoints), t.Weights.Canary}}
	if hasBaseline(t) {
		out = append(out, side{Baseline, orStable(t.BaselineEndpoints), t.Weights.Baseline})
	}
	return out
}

// hasBaseline reports whether t's rollout has a baseline cluster: for as
// long as the rollout has a baseline, so gRPC clients never drop it.
func hasBaseline(t api.Traffic) bool {
	return t.BaselineWorkload != "" || len(t.BaselineEndpoints) > 0
}

// checkTraffic rejects input the translation cannot represent.
func checkTraffic(t api.Traffic) error {
	switch {
	case t.Rollout.Namespace == "" || t.Rollout.Name == "":
		return fmt.Errorf("rollout key %q is incomplete", t.Rollout)
	case t.Host == "":
		return fmt.Errorf("host is empty")
	case t.Host == EnvoyName:
		return fmt.Errorf("host %q is reserved", EnvoyName)
	case strings.ContainsAny(t.Host, " /*:"): // ':' would end the scope key early (routeScope)
		return fmt.Errorf("host %q must be a plain domain", t.Host)
	case len(t.StableEndpoints) == 0:
		return fmt.Errorf("no stable endpoints")
	case t.Weights.Stable < 0 || t.Weights.Canary < 0 || t.Weights.Baseline < 0:
		return fmt.Errorf("negative weight %d/%d/%d", t.Weights.Stable, t.Weights.Canary, t.Weights.Baseline)
	case t.Weights.Stable+t.Weights.Canary+t.Weights.Baseline <= 0:
		return fmt.Errorf("total weight is 0")
	case t.Weights.Baseline > 0 && !hasBaseline(t):
		return fmt.Errorf("baseline weight %d without a baseline", t.Weights.Baseline)
	}
	if sa := t.SessionAffinity; sa != nil && (sa.CookieName == "" || strings.ContainsAny(sa.CookieName, "=;, \t")) {
		return fmt.Errorf("session affinity cookie name %q is not a cookie name", sa.CookieName)
	}
	return nil
}

// buildRoutes orders a virtual host's routes: header routes (step order),
// the sticky-canary route, the sticky-stable route, mirror routes, the
// weighted default route, then the keep-warm routes (unreachable, they
// only keep a weightless cluster referenced).
func buildRoutes(t api.Traffic) ([]*routev3.Route, error) {
	canary := ClusterName(t.Rollout, Canary)
	var routes []*routev3.Route
	for _, hr := range t.HeaderRoutes {
		if len(hr.Match) == 0 {
			continue // an empty match removes the route
		}
		rm := &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}
		for _, m := range hr.Match {
			h, err := headerMatcher(m)
			if err != nil {
				return nil, fmt.Errorf("header route %q: %w", hr.Name, err)
			}
			rm.Headers = append(rm.Headers, h)
		}
		routes = append(routes, &routev3.Route{Name: "header/" + hr.Name, Match: rm, Action: toCluster(canary)})
	}
	pins, err := pinRoutes(t)
	if err != nil {
		return nil, err
	}
	routes = append(routes, pins...)
	for _, mr := range t.MirrorRoutes {
		if mr.Percentage < 0 || mr.Percentage > 100 {
			return nil, fmt.Errorf("mirror route %q: percentage %d is not 0..100", mr.Name, mr.Percentage)
		}
		for i, m := range mr.Match {
			rm, err := mirrorMatch(m)
			if err != nil {
				return nil, fmt.Errorf("mirror route %q match %d: %w", mr.Name, i, err)
			}
			action := weightedAction(t)
			action.RequestMirrorPolicies = []*routev3.RouteAction_RequestMirrorPolicy{{
				Cluster: canary,
				RuntimeFraction: &corev3.RuntimeFractionalPercent{DefaultValue: &typev3.FractionalPercent{
					Numerator: uint32(mr.Percentage), Denominator: typev3.FractionalPercent_HUNDRED,
				}},
			}}
			routes = append(routes, &routev3.Route{
				Name:   fmt.Sprintf("mirror/%s/%d", mr.Name, i),
				Match:  rm,
				Action: &routev3.Route_Route{Route: action},
			})
		}
	}
	routes = append(routes, &routev3.Route{
		Name:   "default",
		Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
		Action: &routev3.Route_Route{Route: weightedAction(t)},
	})
	// gRPC skips weight-0 clusters and drops any cluster no route references;
	// reconnecting to it later costs seconds at scale. These routes sit after
	// the catch-all default, so they never match, but they keep the cluster.
	for _, s := range sides(t) {
		if s.weight > 0 {
			continue
		}
		name := ClusterName(t.Rollout, s.side)
		routes = append(routes, &routev3.Route{
			Name: "keep-warm/" + string(s.side),
			Match: &routev3.RouteMatch{
				PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"},
				// exact_match, not string_match: see valueHeaderMatcher.
				Headers: []*routev3.HeaderMatcher{{Name: keepWarmHeader, HeaderMatchSpecifier: &routev3.HeaderMatcher_ExactMatch{ExactMatch: name}}},
			},
			Action: toCluster(name),
		})
	}
	return routes, nil
}

// pinRoutes are the session-affinity routes: requests carrying
// <cookie>=canary go to the canary while it has weight, and, with
// PinStable and a step in progress, requests carrying <cookie>=stable go
// to stable (see api.Traffic.PinsStable).
func pinRoutes(t api.Traffic) ([]*routev3.Route, error) {
	var routes []*routev3.Route
	for _, pin := range []struct {
		name, value string
		live        bool
		cluster     string
	}{
		{"sticky", "canary", t.StickyCanary(), ClusterName(t.Rollout, Canary)},
		{"sticky-stable", "stable", t.PinsStable(), ClusterName(t.Rollout, Stable)},
	} {
		if !pin.live {
			continue
		}
		h, err := headerMatcher(api.HeaderMatch{HeaderName: "cookie", HeaderValue: api.StringMatch{Exact: t.SessionAffinity.CookieName + "=" + pin.value}})
		if err != nil {
			return nil, fmt.Errorf("session affinity: %w", err)
		}
		routes = append(routes, &routev3.Route{
			Name:   pin.name,
			Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}, Headers: []*routev3.HeaderMatcher{h}},
			Action: toCluster(pin.cluster),
		})
	}
	return routes, nil
}

// weightedAction is the default split between the clusters with weight > 0.
// With session affinity, the entry that answers sets the cookie pinning the
// client to its side: the canary entry while the canary is sticky, the
// stable and baseline entries (both run the stable version) while stable is
// pinned. Envoy only: gRPC ignores response header mutations.
func weightedAction(t api.Traffic) *routev3.RouteAction {
	wc := &routev3.WeightedCluster{}
	for _, s := range sides(t) {
		if s.weight <= 0 {
			continue
		}
		c := &routev3.WeightedCluster_ClusterWeight{Name: ClusterName(t.Rollout, s.side), Weight: wrapperspb.UInt32(uint32(s.weight))}
		if cookie := pinCookieFor(t, s.side); cookie != "" {
			c.ResponseHeadersToAdd = []*corev3.HeaderValueOption{{
				Header:       &corev3.HeaderValue{Key: "set-cookie", Value: cookie},
				AppendAction: corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD,
			}}
		}
		wc.Clusters = append(wc.Clusters, c)
	}
	return &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_WeightedClusters{WeightedClusters: wc}}
}

// pinCookieFor is the Set-Cookie the weighted entry of side adds, or "".
func pinCookieFor(t api.Traffic, side Side) string {
	switch {
	case side == Canary && t.StickyCanary():
		return StickyCookie(t.SessionAffinity)
	case side != Canary && t.PinsStable():
		return StableCookie(t.SessionAffinity)
	}
	return ""
}

// StickyCookie is the Set-Cookie value that pins a user to the canary;
// the cluster routers set the same cookie.
func StickyCookie(sa *api.SessionAffinity) string { return pinCookie(sa, "canary") }

// StableCookie is the Set-Cookie value that pins a user to stable
// (SessionAffinity.PinStable); the cluster routers set the same cookie.
func StableCookie(sa *api.SessionAffinity) string { return pinCookie(sa, "stable") }

// stableCookieValue is StableCookie's shape for any cookie name and max age.
var stableCookieValue = regexp.MustCompile(`^[^=;\s]+=stable(; Max-Age=[0-9]+)?; Path=/; HttpOnly$`)

// IsStableCookie reports whether v has the shape of a StableCookie value,
// whatever its cookie name and max age: the cluster routers use it to find
// the stable cookie an earlier write added, even after the user renamed
// the cookie, and to tell it from the user's own Set-Cookie.
func IsStableCookie(v string) bool { return stableCookieValue.MatchString(v) }

// pinCookie is the Set-Cookie value <name>=<value> with sa's max age.
func pinCookie(sa *api.SessionAffinity, value string) string {
	v := sa.CookieName + "=" + value
	if sa.MaxAge > 0 {
		v += "; Max-Age=" + strconv.FormatInt(sa.MaxAge, 10)
	}
	return v + "; Path=/; HttpOnly"
}

func toCluster(name string) *routev3.Route_Route {
	return &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: name}}}
}

// defaultLocality is the zone of endpoints whose zone is unknown (all of
// them in standalone mode): gRPC rejects a locality without an ID.
const defaultLocality = "sluice"

// place is where a rollout's endpoints run beyond their zones: for a
// part of a rollout across clusters, its cluster's region and name (EDS
// locality region/zone/cluster); empty otherwise.
type place struct{ region, cluster string }

func placeOf(t api.Traffic) place { return place{region: t.Region, cluster: t.Rollout.Cluster()} }

// loadAssignment groups one side's endpoints by zone into localities
// (sorted, so the same input gives the same resource). Each locality's
// weight is its endpoint count, so that a client spreading load over
// localities by weight (gRPC's xds_wrr_locality) still gives every
// endpoint the same share; gRPC ignores localities without a weight.
func loadAssignment(cluster string, addrs []string, zones map[string]string, at place) (*endpointv3.ClusterLoadAssignment, error) {
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: cluster}
	byZone := map[string][]*endpointv3.LbEndpoint{}
	seen := map[string]bool{}
	for _, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			return nil, fmt.Errorf("endpoint %q: %w", a, err)
		}
		p, err := strconv.ParseUint(port, 10, 16)
		if err != nil || p == 0 {
			return nil, fmt.Errorf("endpoint %q: bad port", a)
		}
		if host == "" || seen[a] {
			return nil, fmt.Errorf("endpoint %q: empty or duplicate", a)
		}
		seen[a] = true
		zone := zones[a]
		if zone == "" {
			zone = defaultLocality
		}
		byZone[zone] = append(byZone[zone], &endpointv3.LbEndpoint{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: socketAddress(host, uint32(p))}},
		})
	}
	for _, zone := range sortedKeys(byZone) {
		eps := byZone[zone]
		cla.Endpoints = append(cla.Endpoints, &endpointv3.LocalityLbEndpoints{
			Locality:            &corev3.Locality{Region: at.region, Zone: zone, SubZone: at.cluster},
			LoadBalancingWeight: wrapperspb.UInt32(uint32(len(eps))),
			LbEndpoints:         eps,
		})
	}
	return cla, nil
}

func socketAddress(host string, port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
	}}}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
