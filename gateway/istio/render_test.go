package istio

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/internal/testkit"
	netv1 "istio.io/client-go/pkg/apis/networking/v1"
	"sigs.k8s.io/yaml"
)

func traffic(mod func(*api.Traffic)) api.Traffic {
	t := api.Traffic{
		Rollout:         api.Key{Namespace: "shop", Name: "checkout"},
		Host:            "checkout.shop.svc.cluster.local",
		StableVersion:   "shop/checkout:v1",
		CanaryVersion:   "shop/checkout:v2",
		StableEndpoints: []string{"10.0.0.1:8080"},
		CanaryEndpoints: []string{"10.0.0.2:8080"},
		Weights:         api.CanaryWeights(10),
	}
	if mod != nil {
		mod(&t)
	}
	return t
}

func TestRenderGolden(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*api.Traffic)
	}{
		{"stable-only", func(t *api.Traffic) { t.CanaryVersion, t.Weights = "", api.CanaryWeights(0) }},
		{"set-weight-10", nil},
		{"header-and-cookie-routes", func(t *api.Traffic) {
			t.HeaderRoutes = []api.HeaderRoute{
				{Name: "testers", Match: []api.HeaderMatch{{HeaderName: "X-Canary", HeaderValue: api.StringMatch{Exact: "always"}}}},
				{Name: "cookie", Match: []api.HeaderMatch{{HeaderName: "cookie", HeaderValue: api.StringMatch{Exact: "sluice-canary=canary"}}}},
			}
		}},
		{"sticky", func(t *api.Traffic) {
			t.SessionAffinity = &api.SessionAffinity{CookieName: "sluice-canary", MaxAge: 3600}
		}},
		{"baseline-in-stable-subset", func(t *api.Traffic) {
			t.Weights = api.CanaryWeights(10).WithBaseline()
			t.BaselineVersion, t.BaselineWorkload = t.StableVersion, "7c9b5d"
		}},
		{"mirror", func(t *api.Traffic) {
			t.Weights = api.CanaryWeights(0)
			t.MirrorRoutes = []api.MirrorRoute{{Name: "shadow", Percentage: 35, Match: []api.RouteMatch{
				{Method: &api.StringMatch{Exact: "POST"}, Path: &api.StringMatch{Prefix: "/api/"}},
			}}}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Render(traffic(tc.mod), Options{})
			if err != nil {
				t.Fatal(err)
			}
			// The output must read back as Istio objects.
			docs := strings.Split(string(got), "---\n")
			if len(docs) != 2 {
				t.Fatalf("want 2 documents, got %d", len(docs))
			}
			var vs netv1.VirtualService
			if err := yaml.Unmarshal([]byte(docs[0]), &vs); err != nil || len(vs.Spec.Http) == 0 {
				t.Fatalf("VirtualService does not read back: %v", err)
			}
			var dr netv1.DestinationRule
			if err := yaml.Unmarshal([]byte(docs[1]), &dr); err != nil || len(dr.Spec.Subsets) != 2 {
				t.Fatalf("DestinationRule does not read back: %v", err)
			}
			testkit.Golden(t, filepath.Join("testdata", tc.name+".yaml"), got)
		})
	}
}

func TestRenderRejects(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*api.Traffic)
	}{
		{"no host", func(t *api.Traffic) { t.Host = "" }},
		{"weights not 100", func(t *api.Traffic) { t.Weights = api.Weights{Stable: 10, Canary: 10} }},
		{"two matchers", func(t *api.Traffic) {
			t.HeaderRoutes = []api.HeaderRoute{{Name: "x", Match: []api.HeaderMatch{{HeaderName: "x", HeaderValue: api.StringMatch{Exact: "a", Regex: "b"}}}}}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Render(traffic(tc.mod), Options{}); err == nil || !strings.Contains(err.Error(), "shop/checkout") {
				t.Fatalf("Render = %v, want an error naming the rollout", err)
			}
		})
	}
}
