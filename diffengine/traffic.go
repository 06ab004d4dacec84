package diffengine

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/sluice-dev/sluice/api"
)

// DiffTraffic says in plain words what changes on the wire between two
// traffic states of one rollout, one line per difference, each starting
// with the host (or the rollout when no host is set):
//
//	checkout.internal: canary 10% → 50%
//	checkout.internal: + header route testers: x-canary=always → canary
//	checkout.internal: - header route testers
//	checkout.internal: canary endpoints + 127.0.0.1:9003 - 127.0.0.1:9002
//	checkout.internal: routes + HTTPRoute shop/edge - HTTPRoute shop/checkout
//
// Endpoint lists are compared as sets. No lines means no change.
func DiffTraffic(old, new api.Traffic) []string {
	name := new.Host
	if name == "" {
		name = new.Rollout.String()
	}
	var out []string
	say := func(format string, args ...any) {
		out = append(out, name+": "+fmt.Sprintf(format, args...))
	}
	if old.Host != new.Host {
		say("host %s → %s", orNone(old.Host), orNone(new.Host))
	}
	if d := setDiff(routerObjects(old.Routing), routerObjects(new.Routing)); d != "" {
		say("routes %s", d)
	}
	if old.Weights.Canary != new.Weights.Canary {
		say("canary %d%% → %d%%", old.Weights.Canary, new.Weights.Canary)
	}
	if old.Weights.Stable != new.Weights.Stable {
		// The canary line already says it when both splits add up to 100.
		implied := old.Weights.Canary != new.Weights.Canary &&
			old.Weights.Stable+old.Weights.Canary == 100 && new.Weights.Stable+new.Weights.Canary == 100
		if !implied {
			say("stable %d%% → %d%%", old.Weights.Stable, new.Weights.Stable)
		}
	}
	if old.StableVersion != new.StableVersion {
		say("stable version %s → %s", orNone(old.StableVersion), orNone(new.StableVersion))
	}
	if old.CanaryVersion != new.CanaryVersion {
		say("canary version %s → %s", orNone(old.CanaryVersion), orNone(new.CanaryVersion))
	}
	if d := setDiff(old.StableEndpoints, new.StableEndpoints); d != "" {
		say("stable endpoints %s", d)
	}
	if d := setDiff(old.CanaryEndpoints, new.CanaryEndpoints); d != "" {
		say("canary endpoints %s", d)
	}
	for _, l := range headerRouteLines(old.HeaderRoutes, new.HeaderRoutes) {
		say("%s", l)
	}
	for _, l := range mirrorRouteLines(old.MirrorRoutes, new.MirrorRoutes) {
		say("%s", l)
	}
	if !reflect.DeepEqual(old.SessionAffinity, new.SessionAffinity) {
		switch {
		case new.SessionAffinity == nil:
			say("- sticky canary (cookie %s)", old.SessionAffinity.CookieName)
		case old.SessionAffinity == nil:
			say("+ sticky canary: %s", affinityText(new.SessionAffinity))
		default:
			say("~ sticky canary: %s → %s", affinityText(old.SessionAffinity), affinityText(new.SessionAffinity))
		}
	}
	return out
}

// routerObjects names the cluster objects a traffic is written into
// ("HTTPRoute shop/checkout", "VirtualService shop/checkout", …).
func routerObjects(r *api.ClusterRouting) []string {
	if r == nil {
		return nil
	}
	var out []string
	if g := r.GatewayAPI; g != nil {
		for _, h := range g.HTTPRoutes {
			out = append(out, "HTTPRoute "+g.Namespace+"/"+h.Name)
		}
		for _, h := range g.GRPCRoutes {
			out = append(out, "GRPCRoute "+g.Namespace+"/"+h.Name)
		}
	}
	if i := r.Istio; i != nil {
		for _, vs := range i.VirtualServices {
			out = append(out, "VirtualService "+vs.Namespace+"/"+vs.Name)
		}
		if dr := i.DestinationRule; dr != nil {
			out = append(out, "DestinationRule "+dr.Namespace+"/"+dr.Name)
		}
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func affinityText(a *api.SessionAffinity) string {
	s := "cookie " + a.CookieName
	if a.MaxAge > 0 {
		s += fmt.Sprintf(", max age %ds", a.MaxAge)
	}
	if a.PinStable {
		s += ", stable users pinned too"
	}
	return s
}

// setDiff writes "+ a + b - c" for two address lists taken as sets.
func setDiff(old, new []string) string {
	in := func(l []string) map[string]bool {
		m := make(map[string]bool, len(l))
		for _, s := range l {
			m[s] = true
		}
		return m
	}
	om, nm := in(old), in(new)
	var parts []string
	for _, s := range slices.Sorted(maps.Keys(nm)) {
		if !om[s] {
			parts = append(parts, "+ "+s)
		}
	}
	for _, s := range slices.Sorted(maps.Keys(om)) {
		if !nm[s] {
			parts = append(parts, "- "+s)
		}
	}
	return strings.Join(parts, " ")
}

func headerRouteLines(old, new []api.HeaderRoute) []string {
	before := make(map[string]api.HeaderRoute, len(old))
	for _, r := range old {
		before[r.Name] = r
	}
	var out []string
	seen := map[string]bool{}
	for _, r := range new {
		seen[r.Name] = true
		o, ok := before[r.Name]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("+ header route %s: %s → canary", r.Name, matchesText(r.Match)))
		case !reflect.DeepEqual(o.Match, r.Match):
			out = append(out, fmt.Sprintf("~ header route %s: %s → %s", r.Name, matchesText(o.Match), matchesText(r.Match)))
		}
	}
	for _, r := range old {
		if !seen[r.Name] {
			out = append(out, "- header route "+r.Name)
		}
	}
	if len(out) == 0 && !slices.EqualFunc(old, new, func(a, b api.HeaderRoute) bool { return a.Name == b.Name }) {
		out = append(out, "header route order "+routeNames(old)+" → "+routeNames(new))
	}
	return out
}

func routeNames(rs []api.HeaderRoute) string {
	names := make([]string, len(rs))
	for i, r := range rs {
		names[i] = r.Name
	}
	return strings.Join(names, ", ")
}

func matchesText(ms []api.HeaderMatch) string {
	if len(ms) == 0 {
		return "(no match)"
	}
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = m.HeaderName + stringMatchText(m.HeaderValue)
	}
	return strings.Join(parts, " & ")
}

func stringMatchText(s api.StringMatch) string {
	switch {
	case s.Prefix != "":
		return "^=" + s.Prefix
	case s.Regex != "":
		return "~=" + s.Regex
	}
	return "=" + s.Exact
}

func mirrorRouteLines(old, new []api.MirrorRoute) []string {
	before := make(map[string]api.MirrorRoute, len(old))
	for _, r := range old {
		before[r.Name] = r
	}
	var out []string
	seen := map[string]bool{}
	for _, r := range new {
		seen[r.Name] = true
		o, ok := before[r.Name]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("+ mirror route %s: %s → canary", r.Name, mirrorText(r)))
		case !reflect.DeepEqual(o, r):
			out = append(out, fmt.Sprintf("~ mirror route %s: %s → %s", r.Name, mirrorText(o), mirrorText(r)))
		}
	}
	for _, r := range old {
		if !seen[r.Name] {
			out = append(out, "- mirror route "+r.Name)
		}
	}
	return out
}

func mirrorText(r api.MirrorRoute) string {
	var parts []string
	for _, m := range r.Match {
		var p []string
		if m.Method != nil {
			p = append(p, "method"+stringMatchText(*m.Method))
		}
		if m.Path != nil {
			p = append(p, "path"+stringMatchText(*m.Path))
		}
		for _, h := range slices.Sorted(maps.Keys(m.Headers)) {
			p = append(p, h+stringMatchText(m.Headers[h]))
		}
		parts = append(parts, strings.Join(p, " & "))
	}
	match := strings.Join(parts, " | ")
	if match == "" {
		match = "all requests"
	}
	return fmt.Sprintf("%d%% of %s", r.Percentage, match)
}
