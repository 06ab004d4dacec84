package istio

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The mesh view: what a proxyless gRPC client of istiod must receive once
// istiod has taken a VirtualService write. Apply records it in the token
// (the hosts the VirtualService routes and, per http route sluice wrote or
// manages, the split over destinations); Verify compares it with the
// routes the observer (package observer) holds. Istio names an Envoy route
// after its http route (name.matchName for a named match) and tags it
// with the VirtualService it came from (filter metadata istio.config),
// and names a cluster outbound|port|subset|host, so a route's split reads
// back as subset|host → weight (and a mirror policy as subset|host →
// percent). Routes sluice removed are not checked: only what it wrote.
// Only weights above 0 are compared: istiod
// leaves destinations of weight 0 out, and sends a route with one
// destination left as a single cluster rather than a weighted one.

// clusterDomain is the DNS suffix Istio gives a Service's short name.
const clusterDomain = "svc.cluster.local"

// routeWant is one http route as a client must receive it.
type routeWant struct {
	// Name is the http route's name ("" for an unnamed one).
	Name string `json:"name"`
	// MatchNames are the names of its named matches: Istio names their
	// Envoy routes Name.MatchName.
	MatchNames []string `json:"matchNames,omitempty"`
	// Split is the weight of each destination above 0, by subset|host.
	Split map[string]uint32 `json:"split"`
	// Mirrors is the percentage of requests mirrored to each mirror
	// destination (above 0), by subset|host.
	Mirrors map[string]float64 `json:"mirrors,omitempty"`
}

// meshWants returns the hosts and the wanted routes of a VirtualService
// as sluice wrote it, over the http routes at the indexes given (the
// managed ones and sluice's own). No hosts when proxyless clients cannot
// see it (bound to gateways only): then there is nothing to observe.
func meshWants(obj *unstructured.Unstructured, http []any, at []int) ([]string, []routeWant) {
	ns := obj.GetNamespace()
	gateways, _, _ := unstructured.NestedStringSlice(obj.Object, "spec", "gateways")
	if len(gateways) > 0 && !slices.Contains(gateways, "mesh") {
		return nil, nil
	}
	specHosts, _, _ := unstructured.NestedStringSlice(obj.Object, "spec", "hosts")
	var hosts []string
	for _, h := range specHosts {
		if strings.Contains(h, "*") {
			continue // a wildcard names no listener to subscribe to
		}
		hosts = append(hosts, fqdn(h, ns))
	}
	if len(hosts) == 0 {
		return nil, nil
	}
	var wants []routeWant
	for _, i := range at {
		r, _ := http[i].(map[string]any)
		if w, ok := routeWantOf(r, ns); ok {
			wants = append(wants, w)
		}
	}
	return hosts, wants
}

// routeWantOf reads one http route. false when no match of it reaches a
// client outside any gateway without labels of its own (source labels,
// source namespace, or only gateways other than mesh).
func routeWantOf(r map[string]any, ns string) (routeWant, bool) {
	w := routeWant{Name: routeName(r), Split: map[string]uint32{}}
	matches, _ := r["match"].([]any)
	visible := len(matches) == 0
	for _, m := range matches {
		mm, _ := m.(map[string]any)
		if n, _ := mm["name"].(string); n != "" {
			w.MatchNames = append(w.MatchNames, n)
		}
		gws, _, _ := unstructured.NestedStringSlice(mm, "gateways")
		_, hasLabels := mm["sourceLabels"]
		_, hasNS := mm["sourceNamespace"]
		if !hasLabels && !hasNS && (len(gws) == 0 || slices.Contains(gws, "mesh")) {
			visible = true
		}
	}
	dests, _ := r["route"].([]any)
	for _, d := range dests {
		rd, _ := d.(map[string]any)
		host, _, _ := unstructured.NestedString(rd, "destination", "host")
		subset, _, _ := unstructured.NestedString(rd, "destination", "subset")
		weight := int64Of(rd["weight"])
		if len(dests) == 1 {
			weight = 100 // Istio ignores the weight of a lone destination
		}
		if weight > 0 {
			w.Split[subset+"|"+fqdn(host, ns)] += uint32(weight)
		}
	}
	w.Mirrors = mirrorsOf(r, ns)
	if len(w.Split) == 1 { // as splitOf reads a lone cluster
		for k := range w.Split {
			w.Split[k] = 100
		}
	}
	return w, visible && len(w.Split) > 0
}

// mirrorsOf reads an http route's mirror (with mirrorPercentage, 100 when
// absent, as Istio takes it) and its mirrors list.
func mirrorsOf(r map[string]any, ns string) map[string]float64 {
	out := map[string]float64{}
	add := func(dest map[string]any, pct any, has bool) {
		host, _ := dest["host"].(string)
		subset, _ := dest["subset"].(string)
		p := 100.0
		if has {
			p = float64Of(pct)
		}
		if host != "" && p > 0 {
			out[subset+"|"+fqdn(host, ns)] = p
		}
	}
	if m, ok := r["mirror"].(map[string]any); ok {
		pct, has, _ := unstructured.NestedFieldNoCopy(r, "mirrorPercentage", "value")
		add(m, pct, has)
	}
	mirrors, _ := r["mirrors"].([]any)
	for _, m := range mirrors {
		mm, _ := m.(map[string]any)
		dest, _ := mm["destination"].(map[string]any)
		pct, has, _ := unstructured.NestedFieldNoCopy(mm, "percentage", "value")
		add(dest, pct, has)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func float64Of(v any) float64 {
	switch n := v.(type) {
	case int64:
		return float64(n)
	case float64:
		return n
	}
	return 0
}

// int64Of reads a JSON number as the API machinery decodes it (int64), or
// as a plain JSON decoder does (float64).
func int64Of(v any) int64 {
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	}
	return 0
}

// fqdn expands a short Service name the way Istio does, relative to the
// VirtualService's namespace; a name with a dot is taken as it is.
func fqdn(host, ns string) string {
	if strings.Contains(host, ".") {
		return host
	}
	return host + "." + ns + "." + clusterDomain
}

// routesShow reports whether the routes a client received carry every
// wanted route of the VirtualService ns/name: at least one Envoy route per
// wanted route, and each of them with the wanted split. The answer's
// string says what differs, for the log.
func routesShow(got []*routev3.Route, ns, name string, wants []routeWant) (bool, string) {
	source := "/namespaces/" + ns + "/virtual-service/" + name
	for _, w := range wants {
		names := map[string]bool{w.Name: true}
		for _, m := range w.MatchNames {
			names[w.Name+"."+m] = true
		}
		seen := 0
		for _, r := range got {
			if !names[r.GetName()] || !strings.HasSuffix(configOf(r), source) {
				continue
			}
			seen++
			if split := splitOf(r); !maps.Equal(split, w.Split) {
				return false, fmt.Sprintf("route %q: %v, want %v", r.GetName(), split, w.Split)
			}
			if m := mirrorsOfRoute(r); !maps.EqualFunc(m, w.Mirrors, samePercent) {
				return false, fmt.Sprintf("route %q: mirrors %v, want %v", r.GetName(), m, w.Mirrors)
			}
		}
		if seen == 0 {
			return false, fmt.Sprintf("route %q not received yet", w.Name)
		}
	}
	return true, ""
}

// configOf is the Istio object an Envoy route came from
// (/apis/<group>/<version>/namespaces/<ns>/virtual-service/<name>).
func configOf(r *routev3.Route) string {
	return r.GetMetadata().GetFilterMetadata()["istio"].GetFields()["config"].GetStringValue()
}

// splitOf reads a route's clusters as subset|host → weight.
func splitOf(r *routev3.Route) map[string]uint32 {
	a := r.GetRoute()
	if c := a.GetCluster(); c != "" {
		return map[string]uint32{clusterKey(c): 100}
	}
	out := map[string]uint32{}
	for _, c := range a.GetWeightedClusters().GetClusters() {
		if w := c.GetWeight().GetValue(); w > 0 {
			out[clusterKey(c.GetName())] += w
		}
	}
	if len(out) == 1 { // one cluster left carries all the traffic, whatever its weight
		for k := range out {
			out[k] = 100
		}
	}
	return out
}

// mirrorsOfRoute reads a route's mirror policies as subset|host → percent.
func mirrorsOfRoute(r *routev3.Route) map[string]float64 {
	var out map[string]float64
	for _, m := range r.GetRoute().GetRequestMirrorPolicies() {
		f := m.GetRuntimeFraction().GetDefaultValue()
		scale := map[typev3.FractionalPercent_DenominatorType]float64{
			typev3.FractionalPercent_HUNDRED:      100,
			typev3.FractionalPercent_TEN_THOUSAND: 10000,
			typev3.FractionalPercent_MILLION:      1000000,
		}[f.GetDenominator()]
		p := 100.0 // no runtime fraction: every request
		if m.GetRuntimeFraction() != nil && scale > 0 {
			p = float64(f.GetNumerator()) * 100 / scale
		}
		if out == nil {
			out = map[string]float64{}
		}
		out[clusterKey(m.GetCluster())] = p
	}
	return out
}

// samePercent compares percentages as Istio rounds them (to a
// ten-thousandth of a percent).
func samePercent(a, b float64) bool { return math.Abs(a-b) < 0.0001 }

// clusterKey turns Istio's outbound|port|subset|host into subset|host.
func clusterKey(name string) string {
	parts := strings.Split(name, "|")
	if len(parts) != 4 {
		return name
	}
	return parts[2] + "|" + parts[3]
}
