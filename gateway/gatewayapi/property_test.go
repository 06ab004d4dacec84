package gatewayapi

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/sluice-dev/sluice/api"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"
)

// TestUnmanagedRulesSurviveAnySequence is a property test with a seeded
// rand: after any sequence of steps (weights, header and cookie routes,
// mirrors, stickiness, pinned stable users), aborts and promotions, the
// user's unmanaged rules are byte-identical to the originals, the managed
// rule keeps its own matches, filters and fields, the stable backendRef
// keeps the user's own filters (a Set-Cookie among them), and a final 100%
// stable step gives the original rules back but for the stable weight.
func TestUnmanagedRulesSurviveAnySequence(t *testing.T) {
	original := withUserStableFilter(fixtureRules(t))
	rnd := rand.New(rand.NewPCG(14, 2026))
	for seq := range 500 {
		rules := original
		var steps []string
		for range 1 + rnd.IntN(8) {
			tr := randomTraffic(rnd)
			steps = append(steps, describe(tr))
			var err error
			if rules, err = httpRules(rules, tr, rnd.IntN(2) == 0); err != nil {
				t.Fatalf("sequence %d %v: %v", seq, steps, err)
			}
			checkUnmanaged(t, original, rules, seq, steps)
			checkStableFilters(t, original, rules, tr, seq, steps)
		}
		end := baseTraffic(0)
		rules, err := httpRules(rules, end, true)
		if err != nil {
			t.Fatal(err)
		}
		want := cloneRules(original)
		w := int32(100)
		want[1].BackendRefs[0].Weight = &w
		if js(t, rules) != js(t, want) {
			t.Fatalf("sequence %d %v then 100%% stable:\n got %s\nwant %s", seq, steps, js(t, rules), js(t, want))
		}
	}
}

func fixtureRules(t *testing.T) []gwv1.HTTPRouteRule {
	t.Helper()
	b, err := os.ReadFile("testdata/route.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var r gwv1.HTTPRoute
	if err := yaml.UnmarshalStrict(b, &r); err != nil {
		t.Fatal(err)
	}
	return r.Spec.Rules
}

func cloneRules(rs []gwv1.HTTPRouteRule) []gwv1.HTTPRouteRule {
	out := make([]gwv1.HTTPRouteRule, len(rs))
	for i := range rs {
		out[i] = *rs[i].DeepCopy()
	}
	return out
}

// checkUnmanaged compares the user's rules (found by name) and the
// managed rule's own fields with the originals.
func checkUnmanaged(t *testing.T, original, got []gwv1.HTTPRouteRule, seq int, steps []string) {
	t.Helper()
	var user []gwv1.HTTPRouteRule
	var managed *gwv1.HTTPRouteRule
	for i := range got {
		switch {
		case isSluiceRule(got[i].Name):
		case got[i].Name == nil:
			managed = &got[i]
		default:
			user = append(user, got[i])
		}
	}
	if want := []gwv1.HTTPRouteRule{original[0], original[2]}; js(t, user) != js(t, want) {
		t.Fatalf("sequence %d %v: user rules changed:\n got %s\nwant %s", seq, steps, js(t, user), js(t, want))
	}
	if managed == nil {
		t.Fatalf("sequence %d %v: managed rule gone", seq, steps)
	}
	m := *managed.DeepCopy()
	o := *original[1].DeepCopy()
	m.BackendRefs, o.BackendRefs = nil, nil
	if js(t, m) != js(t, o) {
		t.Fatalf("sequence %d %v: managed rule's own fields changed:\n got %s\nwant %s", seq, steps, js(t, m), js(t, o))
	}
}

// withUserStableFilter gives the managed rule's stable backendRef a
// Set-Cookie filter of the user's own, which sluice's stable cookie must
// neither replace nor take away.
func withUserStableFilter(rules []gwv1.HTTPRouteRule) []gwv1.HTTPRouteRule {
	rules = cloneRules(rules)
	rules[1].BackendRefs[0].Filters = []gwv1.HTTPRouteFilter{{
		Type:                   gwv1.HTTPRouteFilterResponseHeaderModifier,
		ResponseHeaderModifier: &gwv1.HTTPHeaderFilter{Add: []gwv1.HTTPHeader{{Name: "Set-Cookie", Value: "lang=en; Path=/"}}},
	}}
	return rules
}

// checkStableFilters checks the managed rule's stable backendRef: the
// user's filters, then sluice's stable cookie exactly while tr pins stable
// users, and a sluice-sticky-stable rule exactly then.
func checkStableFilters(t *testing.T, original, got []gwv1.HTTPRouteRule, tr api.Traffic, seq int, steps []string) {
	t.Helper()
	want := slices.Clone(original[1].BackendRefs[0].Filters)
	if tr.PinsStable() {
		want = append(want, gwv1.HTTPRouteFilter{
			Type:                   gwv1.HTTPRouteFilterResponseHeaderModifier,
			ResponseHeaderModifier: &gwv1.HTTPHeaderFilter{Add: []gwv1.HTTPHeader{{Name: "Set-Cookie", Value: tr.SessionAffinity.CookieName + "=stable; Path=/; HttpOnly"}}},
		})
	}
	pinRule := false
	for _, r := range got {
		switch {
		case r.Name != nil && *r.Name == "sluice-sticky-stable":
			pinRule = true
		case r.Name == nil:
			if g := r.BackendRefs[0].Filters; js(t, g) != js(t, want) {
				t.Fatalf("sequence %d %v: stable backendRef filters:\n got %s\nwant %s", seq, steps, js(t, g), js(t, want))
			}
		}
	}
	if pinRule != tr.PinsStable() {
		t.Fatalf("sequence %d %v: sluice-sticky-stable rule present = %v, want %v", seq, steps, pinRule, tr.PinsStable())
	}
}

func baseTraffic(w int32) api.Traffic {
	return api.Traffic{Weights: api.CanaryWeights(w), Routing: &api.ClusterRouting{StableService: "checkout-stable", CanaryService: "checkout-canary"}}
}

// randomTraffic is a step, an abort or a promotion (weight 0, no routes).
func randomTraffic(rnd *rand.Rand) api.Traffic {
	if rnd.IntN(4) == 0 {
		return baseTraffic(0)
	}
	t := baseTraffic(int32(rnd.IntN(101)))
	if rnd.IntN(2) == 0 {
		t.HeaderRoutes = append(t.HeaderRoutes, api.HeaderRoute{Name: "h1", Match: []api.HeaderMatch{{HeaderName: "X-Canary", HeaderValue: api.StringMatch{Prefix: "ye"}}}})
	}
	if rnd.IntN(2) == 0 {
		t.HeaderRoutes = append(t.HeaderRoutes, api.HeaderRoute{Name: "Beta_Cookie", Match: []api.HeaderMatch{{HeaderName: "Cookie", HeaderValue: api.StringMatch{Exact: "beta"}}}})
	}
	if rnd.IntN(2) == 0 {
		t.MirrorRoutes = append(t.MirrorRoutes, api.MirrorRoute{Name: "m", Percentage: int32(rnd.IntN(101)), Match: []api.RouteMatch{{Path: &api.StringMatch{Exact: "/api/x"}}}})
	}
	if rnd.IntN(3) == 0 {
		// Two cookie names: a renamed cookie must not leave the old
		// name's stable filter behind.
		t.SessionAffinity = &api.SessionAffinity{CookieName: []string{"sticky", "pin"}[rnd.IntN(2)], PinStable: rnd.IntN(2) == 0}
	}
	return t
}

func describe(t api.Traffic) string {
	b, _ := json.Marshal(struct {
		W      int32
		H, M   int
		Sticky bool
		Pin    string `json:",omitempty"`
	}{t.Weights.Canary, len(t.HeaderRoutes), len(t.MirrorRoutes), t.SessionAffinity != nil, pinOf(t)})
	return string(b)
}

func js(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// pinOf names the stable cookie a step sets ("" when it pins no one).
func pinOf(t api.Traffic) string {
	if !t.PinsStable() {
		return ""
	}
	return t.SessionAffinity.CookieName
}
