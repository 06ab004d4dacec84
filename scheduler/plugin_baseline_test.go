package scheduler

import "testing"

// TestBaselineMatchFilter: a baseline pod goes only to the zones where its
// canary has pods; with no canary pod placed it is not restricted; other
// pods are never filtered.
func TestBaselineMatchFilter(t *testing.T) {
	nodes := []Node{node("a1", "a", "r1"), node("a2", "a", "r2"), node("b1", "b", "r1"), node("c1", "c", "r1")}
	canary := func(name string) Pod { return Pod{Name: name, Group: "web/canary", Service: "web", Role: RoleCanary} }
	baseline := Pod{Name: "web-baseline-0", Group: "web/baseline", Service: "web", Role: RoleBaseline, MatchGroup: "web/canary"}
	const other = "node(s) in a zone without the canary's pods"
	tests := []struct {
		name   string
		placed map[string]Pod
		pod    Pod
		want   map[string]string
	}{
		{"no canary placed: anywhere", nil, baseline,
			map[string]string{"a1": "", "a2": "", "b1": "", "c1": ""}},
		{"canary in a: zone a only, any node of it", map[string]Pod{"a2": canary("x")}, baseline,
			map[string]string{"a1": "", "a2": "", "b1": other, "c1": other}},
		{"canary in a and c", map[string]Pod{"a1": canary("x"), "c1": canary("y")}, baseline,
			map[string]string{"a1": "", "a2": "", "b1": other, "c1": ""}},
		{"another rollout's canary does not count", map[string]Pod{"a1": canary("x")},
			Pod{Name: "api-baseline-0", Group: "api/baseline", Role: RoleBaseline, MatchGroup: "api/canary"},
			map[string]string{"a1": "", "a2": "", "b1": "", "c1": ""}},
		{"not a baseline pod", map[string]Pod{"a1": canary("x")}, canary("p"),
			map[string]string{"a1": "", "a2": "", "b1": "", "c1": ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, NewBaselineMatch, nil, nodes, tc.placed)
			if got := h.filter(tc.pod); !mapsEqual(got, tc.want) {
				t.Fatalf("got %v\nwant %v", got, tc.want)
			}
		})
	}
}
