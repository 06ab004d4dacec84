package global

import (
	"math"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/sluice-dev/sluice/scheduler"
)

func TestClusterSelectorFilter(t *testing.T) {
	eu := Cluster{Name: "eu-1", Labels: map[string]string{RegionLabel: "eu", "tier": "prod"}}
	for _, tc := range []struct {
		selector string
		pass     bool
	}{
		{"region=eu", true},
		{"region in (eu,us),tier=prod", true},
		{"region=us", false},
		{"tier!=prod", false},
		{"!canary", true},
		{"", true},
	} {
		st := ClusterSelector{}.Filter(&Request{Selector: mustSelector(t, tc.selector)}, &eu)
		if (st == nil) != tc.pass {
			t.Errorf("%q on eu-1: %v, want pass %t", tc.selector, st, tc.pass)
		}
		if st != nil && (st.Plugin() != ClusterSelectorName || !st.IsRejected()) {
			t.Errorf("%q: rejection %v should be ClusterSelector's", tc.selector, st)
		}
	}
}

func TestReachableFilter(t *testing.T) {
	for _, tc := range []struct {
		unreachable string
		want        string
	}{
		{"", ""},
		{"cluster eu-2 unreachable since 12:03:04: connection refused", "Reachable: Unschedulable: cluster eu-2 unreachable since 12:03:04: connection refused"},
	} {
		st := Reachable{}.Filter(&Request{Selector: labels.Everything()}, &Cluster{Name: "eu-2", Unreachable: tc.unreachable})
		if tc.want == "" && st != nil || tc.want != "" && st.String() != tc.want {
			t.Errorf("unreachable %q: %v, want %q", tc.unreachable, st, tc.want)
		}
	}
}

// TestScorePlugins: each score plugin's order (a higher score plans a
// cluster earlier) and what it says of the first cluster.
func TestScorePlugins(t *testing.T) {
	req := &Request{Selector: labels.Everything()}
	a := Cluster{Name: "a", StablePods: 3, RequestShare: 0.1, RequestShareKnown: true}
	b := Cluster{Name: "b", StablePods: 9, RequestShare: 0.25, RequestShareKnown: true}
	down := Cluster{Name: "down", Unreachable: "cluster down unreachable since 12:03:04"}
	unknown := Cluster{Name: "unknown", StablePods: 3}
	zero := Cluster{Name: "zero", RequestShareKnown: true}
	all := []Cluster{a, b, down}
	for _, tc := range []struct {
		plugin         ScorePlugin
		earlier, later Cluster
		explainFirst   string
	}{
		{ReachableFirst{}, a, down, "down unreachable"},
		{FewestStablePods{}, a, b, "smallest: 3 of 12 stable pods"},
		{FewestStablePods{}, down, a, "smallest: 0 of 12 stable pods"},
		{LowestRequestShare{}, a, b, "10 % of requests"},
		{LowestRequestShare{}, zero, a, "0 % of requests"},
		{LowestRequestShare{}, a, unknown, "10 % of requests"},
		{LowestRequestShare{}, b, unknown, "25 % of requests"},
	} {
		se, sl := tc.plugin.Score(req, &tc.earlier), tc.plugin.Score(req, &tc.later)
		if se <= sl {
			t.Errorf("%s: %s scores %d, %s %d; want %s earlier", tc.plugin.Name(), tc.earlier.Name, se, tc.later.Name, sl, tc.earlier.Name)
		}
		if got := tc.plugin.Explain(req, &tc.earlier, all); got != tc.explainFirst {
			t.Errorf("%s explains %s: %q, want %q", tc.plugin.Name(), tc.earlier.Name, got, tc.explainFirst)
		}
	}
	// Equal facts tie, so that the next plugin decides.
	if s1, s2 := (FewestStablePods{}).Score(req, &a), (FewestStablePods{}).Score(req, &unknown); s1 != s2 {
		t.Errorf("equal stable pods score %d and %d", s1, s2)
	}
	if s := (LowestRequestShare{}).Score(req, &Cluster{RequestShare: 1, RequestShareKnown: true}); s == math.MinInt64 || s <= (LowestRequestShare{}).Score(req, &unknown) {
		t.Errorf("a known share of 100 %% (%d) must still come before an unknown one", s)
	}
	// Nothing to say: a share not known, every candidate reachable, an unreachable first.
	if e := (LowestRequestShare{}).Explain(req, &unknown, all); e != "" {
		t.Errorf("unknown share explained as %q", e)
	}
	if e := (ReachableFirst{}).Explain(req, &a, []Cluster{a, b}); e != "" {
		t.Errorf("all reachable explained as %q", e)
	}
	if e := (ReachableFirst{}).Explain(req, &down, []Cluster{down}); e != "" {
		t.Errorf("an unreachable first explained as %q", e)
	}
}

func TestPercent(t *testing.T) {
	for share, want := range map[float64]string{0: "0", 0.1: "10", 0.125: "12.5", 0.3333: "33.3", 1: "100", 0.0004: "0"} {
		if got := percent(share); got != want {
			t.Errorf("percent(%v) = %q, want %q", share, got, want)
		}
	}
}

func TestNewPlannerErrors(t *testing.T) {
	reg := NewInTreeRegistry()
	reg["Wrong"] = func(any) (scheduler.Plugin, error) { return ClusterSelector{}, nil }
	reg["Neither"] = func(any) (scheduler.Plugin, error) { return named("Neither"), nil }
	sel := scheduler.PluginConfig{Name: ClusterSelectorName}
	for _, tc := range []struct {
		cfg  []scheduler.PluginConfig
		want string
	}{
		{[]scheduler.PluginConfig{sel, sel}, "cluster plugin ClusterSelector enabled twice"},
		{[]scheduler.PluginConfig{sel, {Name: "NodeResourcesFit"}}, "cluster plugin NodeResourcesFit: not in registry"},
		{[]scheduler.PluginConfig{sel, {Name: FewestStablePodsName, Weight: 2}}, "cluster plugin FewestStablePods: weight 2: cluster score plugins rank in profile order"},
		{[]scheduler.PluginConfig{sel, {Name: ReachableName, Args: 1}}, "cluster plugin Reachable: takes no args, got int"},
		{[]scheduler.PluginConfig{sel, {Name: "Wrong"}}, "cluster plugin Wrong: factory built ClusterSelector"},
		{[]scheduler.PluginConfig{sel, {Name: "Neither"}}, "cluster plugin Neither: neither a filter nor a score plugin"},
		{[]scheduler.PluginConfig{{Name: FewestStablePodsName}}, "cluster plugin ClusterSelector must be enabled"},
	} {
		_, err := NewPlanner(reg, tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

type named string

func (n named) Name() string { return string(n) }
