package istio

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/internal/testkit"
)

// TestApplyGolden drives the user's VirtualService and DestinationRule
// through every step type, in order, and compares both objects as the API
// server stores them after each step with testdata/patch-<step>.yaml
// (go test -update rewrites them).
func TestApplyGolden(t *testing.T) {
	steps := []struct {
		name string
		mod  func(*api.Traffic)
	}{
		{"set-weight", nil},
		{"header-route", func(t *api.Traffic) { t.HeaderRoutes = []api.HeaderRoute{testersRoute} }},
		{"cookie-route", func(t *api.Traffic) { t.HeaderRoutes = []api.HeaderRoute{testersRoute, cookieRoute} }},
		{"mirror", func(t *api.Traffic) {
			t.HeaderRoutes = []api.HeaderRoute{testersRoute, cookieRoute}
			t.MirrorRoutes = []api.MirrorRoute{shadowMirror}
		}},
		{"sticky", func(t *api.Traffic) {
			t.Weights = api.CanaryWeights(30)
			t.HeaderRoutes = []api.HeaderRoute{testersRoute, cookieRoute}
			t.MirrorRoutes = []api.MirrorRoute{shadowMirror}
			t.SessionAffinity = stickyCanary
		}},
		{"pin-stable", func(t *api.Traffic) {
			t.Weights = api.CanaryWeights(30)
			t.SessionAffinity = pinnedStable
		}},
		// At 100 no step is in progress: the stable pin goes, the
		// canary's stays.
		{"pin-stable-at-100", func(t *api.Traffic) {
			t.Weights = api.CanaryWeights(100)
			t.SessionAffinity = pinnedStable
		}},
		// Promotion: v2 is stable now, on both sides, and sluice's routes
		// are gone.
		{"promotion", func(t *api.Traffic) {
			t.Weights = api.CanaryWeights(0)
			t.StableVersion, t.StableWorkload = t.CanaryVersion, hashV2
			t.CanaryWorkload = hashV2
		}},
	}
	r := newRig(t)
	r.create(t, "virtualservice-subsets.yaml")
	r.create(t, "destinationrule.yaml")
	rt := r.router(t, RouterOptions{})
	ctx := context.Background()
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if _, err := rt.Apply(ctx, canaryTraffic(r.ns, subsetRouting(), 10, s.mod)); err != nil {
				t.Fatal(err)
			}
			got := r.goldenYAML(t, r.get(t, VirtualServices, "checkout"), r.get(t, DestinationRules, "checkout"))
			testkit.Golden(t, filepath.Join("testdata", "patch-"+s.name+".yaml"), got)
		})
	}

	t.Run("abort", func(t *testing.T) {
		r := newRig(t)
		r.create(t, "virtualservice-subsets.yaml")
		r.create(t, "destinationrule.yaml")
		rt := r.router(t, RouterOptions{})
		mid := canaryTraffic(r.ns, subsetRouting(), 30, func(t *api.Traffic) {
			t.HeaderRoutes = []api.HeaderRoute{testersRoute, cookieRoute}
			t.MirrorRoutes = []api.MirrorRoute{shadowMirror}
			t.SessionAffinity = stickyCanary
		})
		if _, err := rt.Apply(ctx, mid); err != nil {
			t.Fatal(err)
		}
		// An aborted canary's traffic: all on v1, the canary side on v1 too
		// (controller/rollout's State.Traffic).
		aborted := canaryTraffic(r.ns, subsetRouting(), 0, func(t *api.Traffic) { t.CanaryVersion, t.CanaryWorkload = t.StableVersion, hashV1 })
		if _, err := rt.Apply(ctx, aborted); err != nil {
			t.Fatal(err)
		}
		got := r.goldenYAML(t, r.get(t, VirtualServices, "checkout"), r.get(t, DestinationRules, "checkout"))
		testkit.Golden(t, filepath.Join("testdata", "patch-abort.yaml"), got)
	})

	t.Run("by-service-sticky", func(t *testing.T) {
		r := newRig(t)
		r.create(t, "virtualservice-services.yaml")
		rt := r.router(t, RouterOptions{})
		tr := canaryTraffic(r.ns, serviceRouting(), 20, func(t *api.Traffic) {
			t.HeaderRoutes = []api.HeaderRoute{testersRoute}
			t.SessionAffinity = stickyCanary
		})
		if _, err := rt.Apply(ctx, tr); err != nil {
			t.Fatal(err)
		}
		testkit.Golden(t, filepath.Join("testdata", "patch-by-service-sticky.yaml"), r.goldenYAML(t, r.get(t, VirtualServices, "checkout-edge")))
	})
}

// TestApplyRejects: configurations sluice cannot patch are refused with
// the object and route named, and the object is left as it was.
func TestApplyRejects(t *testing.T) {
	r := newRig(t)
	r.create(t, "virtualservice-subsets.yaml")
	r.create(t, "destinationrule.yaml")
	r.create(t, "virtualservice-services.yaml")
	rt := r.router(t, RouterOptions{})
	cases := []struct {
		name    string
		routing func() *api.ClusterRouting
		mod     func(*api.Traffic)
		want    string
	}{
		{"route not found", func() *api.ClusterRouting {
			rt := subsetRouting()
			rt.Istio.VirtualServices[0].Routes = []string{"nope"}
			return rt
		}, nil, `http route "nope" not found`},
		{"several routes, none named", func() *api.ClusterRouting {
			rt := subsetRouting()
			rt.Istio.VirtualServices[0].Routes = nil
			return rt
		}, nil, "no routes named and 3 http routes"},
		{"subset not found", func() *api.ClusterRouting {
			rt := subsetRouting()
			rt.Istio.DestinationRule.CanarySubsetName = "preview"
			return rt
		}, nil, `subset "preview" not found`},
		{"destination of neither side", func() *api.ClusterRouting {
			rt := serviceRouting()
			rt.CanaryService = "checkout-preview"
			return rt
		}, nil, "neither the stable (service checkout-stable) nor the canary (service checkout-preview) side"},
		{"step route named like a user route", subsetRouting, func(t *api.Traffic) {
			t.HeaderRoutes = []api.HeaderRoute{{Name: "fallback", Match: testersRoute.Match}}
		}, `http route "fallback" is the user's`},
		{"object missing", func() *api.ClusterRouting {
			rt := serviceRouting()
			rt.Istio.VirtualServices[0].Name = "gone"
			return rt
		}, nil, "not found"},
	}
	before := string(r.rawJSON(t, VirtualServices, "checkout"))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rt.Apply(context.Background(), canaryTraffic(r.ns, tc.routing(), 10, tc.mod))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Apply = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if after := string(r.rawJSON(t, VirtualServices, "checkout")); after != before {
		t.Errorf("a refused Apply changed the VirtualService:\nbefore %s\nafter  %s", before, after)
	}
}

// TestApplyWithoutIstio: a rollout naming no Istio object gives no token.
func TestApplyWithoutIstio(t *testing.T) {
	rt, err := New(RouterOptions{Client: nil})
	if err == nil {
		t.Fatal("New without a client succeeded")
	}
	rt = &Router{last: map[api.Key]api.Traffic{}}
	for _, routing := range []*api.ClusterRouting{nil, {StableService: "a", CanaryService: "b"}} {
		tok, err := rt.Apply(context.Background(), api.Traffic{Routing: routing, Weights: api.CanaryWeights(10)})
		if tok != "" || err != nil {
			t.Errorf("Apply(routing %+v) = %q, %v; want no token and no error", routing, tok, err)
		}
	}
}
