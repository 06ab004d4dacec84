package gateway

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/sluice-dev/sluice/api"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestValidateRejects breaks translated resources the ways Envoy or gRPC
// would reject them and checks Validate catches each before any push.
func TestValidateRejects(t *testing.T) {
	hcmOf := func(r *Resources) *hcmv3.HttpConnectionManager {
		h := &hcmv3.HttpConnectionManager{}
		if err := r.Listener.GetApiListener().GetApiListener().UnmarshalTo(h); err != nil {
			t.Fatal(err)
		}
		return h
	}
	setHCM := func(r *Resources, h *hcmv3.HttpConnectionManager) { r.Listener.ApiListener.ApiListener = mustAny(h) }
	defaultRoute := func(r *Resources) *routev3.Route {
		rs := r.Route.VirtualHosts[0].Routes
		for _, x := range rs {
			if x.Name == "default" {
				return x
			}
		}
		t.Fatal("no default route")
		return nil
	}
	cases := []struct {
		name   string
		break_ func(r *Resources)
		rule   string
	}{
		{"router filter not last", func(r *Resources) {
			h := hcmOf(r)
			h.HttpFilters = append(h.HttpFilters, &hcmv3.HttpFilter{Name: "envoy.filters.http.fault", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(wrapperspb.String("x"))}})
			setHCM(r, h)
		}, "router filter must be last"},
		{"no http filters", func(r *Resources) { h := hcmOf(r); h.HttpFilters = nil; setHCM(r, h) }, "http filters"},
		{"hcm fails ValidateAll", func(r *Resources) { h := hcmOf(r); h.StatPrefix = ""; setHCM(r, h) }, "ValidateAll"},
		{"api_listener not an hcm", func(r *Resources) { r.Listener.ApiListener.ApiListener = mustAny(wrapperspb.String("x")) }, "api_listener"},
		{"rds not over ads", func(r *Resources) {
			h := hcmOf(r)
			h.GetRds().ConfigSource.ConfigSourceSpecifier = &corev3.ConfigSource_PathConfigSource{PathConfigSource: &corev3.PathConfigSource{Path: "/etc/routes.yaml"}}
			setHCM(r, h)
		}, "ADS"},
		{"total weight 0", func(r *Resources) {
			for _, c := range defaultRoute(r).GetRoute().GetWeightedClusters().Clusters {
				c.Weight = wrapperspb.UInt32(0)
			}
		}, "total weight"},
		{"regex not RE2", func(r *Resources) {
			defaultRoute(r).Match.PathSpecifier = &routev3.RouteMatch_SafeRegex{SafeRegex: safeRegex(`(\w)\1`)}
		}, "RE2"},
		{"string_match header matcher", func(r *Resources) {
			defaultRoute(r).Match.Headers = []*routev3.HeaderMatcher{{Name: "x-canary", HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{
				StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: "always"}},
			}}}
		}, "string_match is unknown to older gRPC clients"},
		{"cluster not EDS", func(r *Resources) {
			r.Clusters[1].ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}
		}, "want EDS"},
		{"eds not over ads", func(r *Resources) {
			r.Clusters[0].EdsClusterConfig.EdsConfig = &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_PathConfigSource{PathConfigSource: &corev3.PathConfigSource{Path: "/etc/eds.yaml"}}}
		}, "EDS config source"},
		{"unknown cluster", func(r *Resources) {
			defaultRoute(r).GetRoute().GetWeightedClusters().Clusters[0].Name = "default/other/stable"
		}, "unknown cluster"},
		{"cluster fails ValidateAll", func(r *Resources) { r.Clusters[0].Name = "" }, "ValidateAll"},
		{"locality without weight", func(r *Resources) { r.Endpoints[0].Endpoints[0].LoadBalancingWeight = nil }, "locality weight"},
		{"empty any", func(r *Resources) { r.Listener.ApiListener.ApiListener = &anypb.Any{} }, "api_listener"},
		{"scope selects another route", func(r *Resources) { r.Scope.RouteConfigurationName = "cart.internal" }, "route scope"},
		{"scope keyed on another host", func(r *Resources) {
			r.Scope.Key.Fragments[0].Type = &routev3.ScopedRouteConfiguration_Key_Fragment_StringKey{StringKey: "checkout.internal:80"}
		}, "route scope"},
		{"scope fails ValidateAll", func(r *Resources) { r.Scope.Key = nil }, "ValidateAll"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Translate(traffic(nil))
			if err != nil {
				t.Fatal(err)
			}
			tc.break_(r)
			err = Validate(r)
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "rollout default/checkout") || !strings.Contains(err.Error(), tc.rule) {
				t.Errorf("Validate = %q, want ErrInvalid naming the rollout and %q", err, tc.rule)
			}
		})
	}
}

// TestValidateEnvoyRejects breaks the scoped sluice-http listener the ways
// Envoy would misroute or reject it.
func TestValidateEnvoyRejects(t *testing.T) {
	cases := []struct {
		name   string
		break_ func(h *hcmv3.HttpConnectionManager)
		rule   string
	}{
		{"routes not over ads", func(h *hcmv3.HttpConnectionManager) {
			h.GetScopedRoutes().RdsConfigSource = &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_PathConfigSource{PathConfigSource: &corev3.PathConfigSource{Path: "/etc/routes.yaml"}}}
		}, "ADS"},
		{"scope key from another header", func(h *hcmv3.HttpConnectionManager) {
			h.GetScopedRoutes().ScopeKeyBuilder.Fragments[0].GetHeaderValueExtractor().Name = "x-host"
		}, ":authority"},
		{"no scope key", func(h *hcmv3.HttpConnectionManager) { h.GetScopedRoutes().ScopeKeyBuilder = nil }, "ValidateAll"},
		{"router not last", func(h *hcmv3.HttpConnectionManager) { h.HttpFilters = append(h.HttpFilters, h.HttpFilters[0]) }, "router filter"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := EnvoyListener(10000, EnvoyRoutesScoped)
			f := l.FilterChains[0].Filters[0]
			h := &hcmv3.HttpConnectionManager{}
			if err := f.GetTypedConfig().UnmarshalTo(h); err != nil {
				t.Fatal(err)
			}
			tc.break_(h)
			f.ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(h)}
			err := ValidateEnvoy(l, nil)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.rule) {
				t.Errorf("ValidateEnvoy = %v, want ErrInvalid with %q", err, tc.rule)
			}
		})
	}
}

// TestValidateSkipsOnlyWhatWasPublished: a step's SetTraffic runs
// ValidateAll only on the resources whose bytes changed since they were
// published, and checks the listener's HttpConnectionManager only when the
// listener or its route's name changed; what changed is still checked, so
// a broken resource is rejected whether it is the one that changed or one
// that did not before.
func TestValidateSkipsOnlyWhatWasPublished(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetTraffic(traffic(nil)); err != nil {
		t.Fatal(err)
	}
	type step struct {
		r               *Resources
		published       []proto.Message
		listenerChecked bool
	}
	next := func(mod func(*Resources)) step {
		r, err := Translate(traffic(func(tr *api.Traffic) { tr.Weights = api.CanaryWeights(50) }))
		if err != nil {
			t.Fatal(err)
		}
		if mod != nil {
			mod(r)
		}
		owned, err := encodeOwned(r, s.env.layout)
		if err != nil {
			t.Fatal(err)
		}
		published, checked := s.snap.Load().published(checkout, r, owned)
		return step{r, published, checked}
	}

	st := next(nil)
	var names []string
	for _, m := range st.published {
		names = append(names, fmt.Sprintf("%T", m))
	}
	slices.Sort(names)
	// Two clusters and their endpoints, the listener and the scope: all
	// but the route, whose weights moved.
	want := []string{"*clusterv3.Cluster", "*clusterv3.Cluster", "*endpointv3.ClusterLoadAssignment", "*endpointv3.ClusterLoadAssignment",
		"*listenerv3.Listener", "*routev3.ScopedRouteConfiguration"}
	if !slices.Equal(names, want) || !st.listenerChecked {
		t.Fatalf("unchanged since published: %v, listener checked %v; want %v, true", names, st.listenerChecked, want)
	}
	if err := validateChanged(st.r, st.published, st.listenerChecked); err != nil {
		t.Fatal(err)
	}
	hcmOf := func(r *Resources) *hcmv3.HttpConnectionManager {
		h := &hcmv3.HttpConnectionManager{}
		if err := r.Listener.GetApiListener().GetApiListener().UnmarshalTo(h); err != nil {
			t.Fatal(err)
		}
		return h
	}
	for name, broken := range map[string]struct {
		mod  func(*Resources)
		rule string
	}{
		"the route, which changed": {func(r *Resources) { r.Route.VirtualHosts[0].Domains = nil }, "ValidateAll"},
		"a cluster, which had not": {func(r *Resources) { r.Clusters[0].Name = "" }, "ValidateAll"},
		"a cluster's discovery type, which had not": {func(r *Resources) {
			r.Clusters[1].ClusterDiscoveryType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC}
		}, "want EDS"},
		"the listener's HttpConnectionManager": {func(r *Resources) {
			h := hcmOf(r)
			h.StatPrefix = ""
			r.Listener.ApiListener.ApiListener = mustAny(h)
		}, "ValidateAll"},
		"the route's name, the listener unchanged": {func(r *Resources) { r.Route.Name = "other.internal" }, "route_config_name"},
	} {
		st := next(broken.mod)
		if err := validateChanged(st.r, st.published, st.listenerChecked); err == nil || !strings.Contains(err.Error(), broken.rule) {
			t.Errorf("%s broken: validateChanged = %v, want an error of %s", name, err, broken.rule)
		}
	}
}
