package gateway

import (
	"errors"
	"maps"
	"regexp"
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/sluice-dev/sluice/api"
	"google.golang.org/protobuf/proto"
)

var checkout = api.Key{Namespace: "default", Name: "checkout"}

// traffic is a canary in flight; mod adjusts it per case.
func traffic(mod func(*api.Traffic)) api.Traffic {
	t := api.Traffic{
		Rollout:         checkout,
		Host:            "checkout.internal",
		StableVersion:   "shop/checkout:v1",
		CanaryVersion:   "shop/checkout:v2",
		StableEndpoints: []string{"127.0.0.1:9001"},
		CanaryEndpoints: []string{"127.0.0.1:9002", "127.0.0.1:9003"},
		Weights:         api.CanaryWeights(10),
	}
	if mod != nil {
		mod(&t)
	}
	return t
}

// TestTranslateGolden renders each step type's resources as protojson.
func TestTranslateGolden(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*api.Traffic)
	}{
		{"stable-only", func(t *api.Traffic) {
			t.CanaryVersion, t.CanaryEndpoints, t.Weights = t.StableVersion, nil, api.CanaryWeights(0)
		}},
		{"set-weight-10", nil},
		{"set-weight-50", func(t *api.Traffic) { t.Weights = api.CanaryWeights(50) }},
		{"full-canary", func(t *api.Traffic) { t.Weights = api.CanaryWeights(100) }},
		{"aborted-canary-weight-0", func(t *api.Traffic) { t.Weights = api.CanaryWeights(0) }},
		{"header-route", func(t *api.Traffic) {
			t.HeaderRoutes = []api.HeaderRoute{
				{Name: "testers", Match: []api.HeaderMatch{{HeaderName: "X-Canary", HeaderValue: api.StringMatch{Exact: "always"}}}},
				{Name: "removed"},
				{Name: "beta", Match: []api.HeaderMatch{
					{HeaderName: "x-user", HeaderValue: api.StringMatch{Prefix: "beta-"}},
					{HeaderName: "x-region", HeaderValue: api.StringMatch{Regex: "eu-.*"}},
				}},
			}
		}},
		{"cookie-route", func(t *api.Traffic) {
			t.HeaderRoutes = []api.HeaderRoute{
				{Name: "cookie", Match: []api.HeaderMatch{{HeaderName: "cookie", HeaderValue: api.StringMatch{Exact: "sluice-canary=canary"}}}},
				{Name: "cookie-prefix", Match: []api.HeaderMatch{{HeaderName: "Cookie", HeaderValue: api.StringMatch{Prefix: "group=beta"}}}},
			}
		}},
		{"sticky", func(t *api.Traffic) {
			t.SessionAffinity = &api.SessionAffinity{CookieName: "sluice-canary", MaxAge: 3600}
		}},
		{"sticky-weight-0", func(t *api.Traffic) {
			t.Weights = api.CanaryWeights(0)
			t.SessionAffinity = &api.SessionAffinity{CookieName: "sluice-canary", MaxAge: 3600}
		}},
		{"sticky-pin-stable", func(t *api.Traffic) {
			t.SessionAffinity = &api.SessionAffinity{CookieName: "sluice-canary", MaxAge: 3600, PinStable: true}
		}},
		{"sticky-pin-stable-baseline", func(t *api.Traffic) {
			t.Weights = api.CanaryWeights(10).WithBaseline()
			t.BaselineVersion, t.BaselineWorkload, t.BaselineEndpoints = t.StableVersion, "7c9b5d", []string{"127.0.0.1:9004"}
			t.SessionAffinity = &api.SessionAffinity{CookieName: "sluice-canary", PinStable: true}
		}},
		{"sticky-pin-stable-full-canary", func(t *api.Traffic) {
			// No step in progress: only the canary rule is left.
			t.Weights = api.CanaryWeights(100)
			t.SessionAffinity = &api.SessionAffinity{CookieName: "sluice-canary", MaxAge: 3600, PinStable: true}
		}},
		{"zones", func(t *api.Traffic) {
			t.StableEndpoints = []string{"10.244.0.3:8080", "10.244.0.1:8080", "10.244.0.2:8080"}
			t.CanaryEndpoints = []string{"10.244.0.9:8080"}
			t.StableWorkload, t.CanaryWorkload = "5d7f9c", "6b8c4d"
			t.EndpointZones = map[string]string{"10.244.0.1:8080": "zone-b", "10.244.0.2:8080": "zone-a", "10.244.0.3:8080": "zone-b", "10.244.0.9:8080": "zone-c"}
		}},
		{"baseline", func(t *api.Traffic) {
			t.Weights = api.CanaryWeights(10).WithBaseline()
			t.BaselineVersion, t.BaselineWorkload, t.BaselineEndpoints = t.StableVersion, "7c9b5d", []string{"127.0.0.1:9004"}
		}},
		{"baseline-weight-0", func(t *api.Traffic) {
			// A rollout with a baseline and no canary in flight: the
			// baseline cluster carries stable's endpoints and stays
			// referenced.
			t.CanaryVersion, t.CanaryEndpoints, t.Weights = t.StableVersion, nil, api.CanaryWeights(0).WithBaseline()
			t.BaselineVersion, t.BaselineWorkload = t.StableVersion, "5d7f9c"
		}},
		{"baseline-stable-0", func(t *api.Traffic) {
			t.Weights = api.CanaryWeights(60).WithBaseline()
			t.BaselineVersion, t.BaselineWorkload, t.BaselineEndpoints = t.StableVersion, "7c9b5d", []string{"127.0.0.1:9004"}
		}},
		{"mirror", func(t *api.Traffic) {
			t.Weights = api.CanaryWeights(0)
			t.MirrorRoutes = []api.MirrorRoute{{Name: "shadow", Percentage: 35, Match: []api.RouteMatch{
				{Method: &api.StringMatch{Exact: "POST"}, Path: &api.StringMatch{Prefix: "/checkout.Checkout/"}},
				{Headers: map[string]api.StringMatch{"x-mirror": {Exact: "yes"}, "x-b": {Regex: "[0-9]+"}}},
			}}}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Translate(traffic(tc.mod))
			if err != nil {
				t.Fatalf("Translate: %v", err)
			}
			if err := Validate(res); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			el, er := EnvoyResources(10000, []*routev3.VirtualHost{res.VirtualHost})
			if err := ValidateEnvoy(el, er.VirtualHosts); err != nil {
				t.Fatalf("ValidateEnvoy: %v", err)
			}
			if err := er.ValidateAll(); err != nil {
				t.Fatalf("sluice-http route: %v", err)
			}
			scoped := EnvoyListener(10000, EnvoyRoutesScoped)
			if err := ValidateEnvoy(scoped, nil); err != nil {
				t.Fatalf("ValidateEnvoy (scoped): %v", err)
			}
			goldenJSON(t, "translate/"+tc.name+".json", stableJSON(t, []namedMsg{
				{name: "listener", msg: res.Listener},
				{name: "route", msg: res.Route},
				{name: "clusters", list: msgs(res.Clusters)},
				{name: "endpoints", list: msgs(res.Endpoints)},
				{name: "scope", msg: res.Scope},
				{name: "envoyListener", msg: scoped},
				{name: "combinedEnvoyListener", msg: el},
				{name: "combinedEnvoyRoute", msg: er},
			}))
		})
	}
}

func msgs[M proto.Message](in []M) []proto.Message {
	out := make([]proto.Message, len(in))
	for i, m := range in {
		out[i] = m
	}
	return out
}

// TestCookieRegex checks the compiled cookie matchers with full-match
// semantics, as Envoy and gRPC apply them.
func TestCookieRegex(t *testing.T) {
	cases := []struct {
		name  string
		match api.StringMatch
		hits  []string
		miss  []string
	}{
		{"exact pair", api.StringMatch{Exact: "sluice-canary=canary"},
			[]string{"sluice-canary=canary", "a=b; sluice-canary=canary", "sluice-canary=canary; a=b", "a=b;sluice-canary=canary;c=d", "a=b,sluice-canary=canary"},
			[]string{"xsluice-canary=canary", "sluice-canary=canaryx", "a=sluice-canary=canary", "sluice-canary=stable", "", "a=b; xsluice-canary=canary"}},
		{"name only", api.StringMatch{Exact: "beta"},
			[]string{"beta=1", "a=b; beta=", "beta=x; c=d"},
			[]string{"betax=1", "xbeta=1", "a=beta"}},
		{"prefix", api.StringMatch{Prefix: "group=be"},
			[]string{"group=beta", "a=1; group=be"},
			[]string{"xgroup=beta", "group=alpha", "a=group=beta"}},
		{"regex", api.StringMatch{Regex: "u=[0-9]+"},
			[]string{"u=42", "a=b; u=7"},
			[]string{"u=x", "xu=1", "u=1x"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src, err := cookieRegex(tc.match)
			if err != nil {
				t.Fatal(err)
			}
			re := regexp.MustCompile("^(?:" + src + ")$")
			for _, h := range tc.hits {
				if !re.MatchString(h) {
					t.Errorf("%q should match %q", src, h)
				}
			}
			for _, m := range tc.miss {
				if re.MatchString(m) {
					t.Errorf("%q should not match %q", src, m)
				}
			}
		})
	}
}

// TestTranslateRejects checks that bad input is refused with an error that
// names the rollout and the rule.
func TestTranslateRejects(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*api.Traffic)
		want string
	}{
		{"no host", func(t *api.Traffic) { t.Host = "" }, "host is empty"},
		{"reserved host", func(t *api.Traffic) { t.Host = EnvoyName }, "reserved"},
		{"host with a port", func(t *api.Traffic) { t.Host = "checkout.internal:8080" }, "plain domain"}, // the route scope key ends at ':'
		{"zero total weight", func(t *api.Traffic) { t.Weights = api.Weights{} }, "total weight is 0"},
		{"negative weight", func(t *api.Traffic) { t.Weights = api.Weights{Stable: 110, Canary: -10} }, "negative weight"},
		{"no stable endpoints", func(t *api.Traffic) { t.StableEndpoints = nil }, "no stable endpoints"},
		{"bad endpoint", func(t *api.Traffic) { t.CanaryEndpoints = []string{"127.0.0.1"} }, "endpoint"},
		{"duplicate endpoint", func(t *api.Traffic) { t.CanaryEndpoints = []string{"127.0.0.1:1", "127.0.0.1:1"} }, "duplicate"},
		{"not RE2 header regex", func(t *api.Traffic) {
			t.HeaderRoutes = []api.HeaderRoute{{Name: "bad", Match: []api.HeaderMatch{{HeaderName: "x", HeaderValue: api.StringMatch{Regex: "(?=lookahead)"}}}}}
		}, "RE2"},
		{"not RE2 cookie regex", func(t *api.Traffic) {
			t.HeaderRoutes = []api.HeaderRoute{{Name: "bad", Match: []api.HeaderMatch{{HeaderName: "cookie", HeaderValue: api.StringMatch{Regex: `a\1`}}}}}
		}, "RE2"},
		{"two string matchers", func(t *api.Traffic) {
			t.HeaderRoutes = []api.HeaderRoute{{Name: "bad", Match: []api.HeaderMatch{{HeaderName: "x", HeaderValue: api.StringMatch{Exact: "a", Prefix: "b"}}}}}
		}, "exactly one"},
		{"mirror over 100", func(t *api.Traffic) {
			t.MirrorRoutes = []api.MirrorRoute{{Name: "m", Percentage: 101, Match: []api.RouteMatch{{}}}}
		}, "percentage"},
		{"bad cookie name", func(t *api.Traffic) { t.SessionAffinity = &api.SessionAffinity{CookieName: "a=b"} }, "cookie name"},
		{"baseline weight without a baseline", func(t *api.Traffic) { t.Weights = api.CanaryWeights(10).WithBaseline() }, "without a baseline"},
		{"negative baseline weight", func(t *api.Traffic) {
			t.BaselineWorkload, t.Weights = "7c9b5d", api.Weights{Stable: 100, Canary: 10, Baseline: -10}
		}, "negative weight"},
		{"bad baseline endpoint", func(t *api.Traffic) { t.BaselineEndpoints = []string{"127.0.0.1"} }, "endpoint"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Translate(traffic(tc.mod))
			if err == nil {
				err = Validate(res)
			}
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error does not wrap ErrInvalid: %v", err)
			}
			if !strings.Contains(err.Error(), "rollout default/checkout") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q should name the rollout and %q", err, tc.want)
			}
		})
	}
}

// TestPinCookies checks, per canary weight, the session-affinity routes and
// the Set-Cookie each weighted entry adds (what Envoy sends back; gRPC
// clients ignore response headers, so TestGRPCClients cannot see them).
func TestPinCookies(t *testing.T) {
	cases := []struct {
		name    string
		weights api.Weights
		routes  []string
		cookies map[Side]string // weighted entry → Set-Cookie
	}{
		{"canary 0", api.CanaryWeights(0), []string{"default", "keep-warm/canary"}, map[Side]string{Stable: ""}},
		{"canary 10", api.CanaryWeights(10), []string{"sticky", "sticky-stable", "default"},
			map[Side]string{Stable: "sluice-canary=stable; Max-Age=60; Path=/; HttpOnly", Canary: "sluice-canary=canary; Max-Age=60; Path=/; HttpOnly"}},
		{"canary 100", api.CanaryWeights(100), []string{"sticky", "default", "keep-warm/stable"},
			map[Side]string{Canary: "sluice-canary=canary; Max-Age=60; Path=/; HttpOnly"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			routes, err := buildRoutes(traffic(func(tr *api.Traffic) {
				tr.Weights = tc.weights
				tr.SessionAffinity = &api.SessionAffinity{CookieName: "sluice-canary", MaxAge: 60, PinStable: true}
			}))
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			var weighted *routev3.RouteAction
			for _, r := range routes {
				names = append(names, r.Name)
				if r.Name == "default" {
					weighted = r.GetRoute()
				}
			}
			if strings.Join(names, " ") != strings.Join(tc.routes, " ") {
				t.Errorf("routes = %v, want %v", names, tc.routes)
			}
			got := map[Side]string{}
			for _, c := range weighted.GetWeightedClusters().GetClusters() {
				side := Side(c.Name[strings.LastIndex(c.Name, "/")+1:])
				got[side] = ""
				for _, h := range c.ResponseHeadersToAdd {
					if h.Header.Key == "set-cookie" {
						got[side] = h.Header.Value
					}
				}
			}
			if !maps.Equal(got, tc.cookies) {
				t.Errorf("Set-Cookie by weighted entry = %q, want %q", got, tc.cookies)
			}
		})
	}
}
