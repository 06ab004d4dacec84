package gateway

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/sluice-dev/sluice/api"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// ErrInvalid is wrapped by every ValidationError.
var ErrInvalid = errors.New("invalid xds configuration")

// ValidationError says which rollout, resource and rule rejected a
// configuration. Nothing of a configuration that fails is published.
type ValidationError struct {
	Rollout  api.Key
	Resource string // resource name, empty when the input itself was wrong
	Rule     string // e.g. "ValidateAll", "total weight", "RE2", "router last"
	Err      error
}

func (e *ValidationError) Error() string {
	s := "rollout " + e.Rollout.String()
	if e.Resource != "" {
		s += ": " + e.Resource
	}
	return s + ": " + e.Rule + ": " + e.Err.Error()
}

func (e *ValidationError) Unwrap() []error { return []error{ErrInvalid, e.Err} }

// validator is what protoc-gen-validate generates on every Envoy message.
type validator interface{ ValidateAll() error }

// Validate checks one rollout's resources the way Envoy and gRPC will:
// ValidateAll on every message (and on the messages packed inside Any
// fields that matter: the HttpConnectionManager of the api_listener, the
// router filter, the cluster's protocol options), then the rules gRPC
// enforces that the validators miss, then that every reference resolves
// inside the set.
func Validate(r *Resources) error { return validateChanged(r, nil, false) }

// validateChanged is Validate without ValidateAll, and the checks of one
// message alone, on the messages in published (byte for byte ones that
// passed them when they were published) and, with listenerChecked, without
// the check of the listener's HttpConnectionManager (snapshot.published
// says when it passed before).
func validateChanged(r *Resources, published []proto.Message, listenerChecked bool) error {
	fail := func(resource, rule string, err error) error {
		return &ValidationError{Rollout: r.Rollout, Resource: resource, Rule: rule, Err: err}
	}
	msgs := []struct {
		name string
		m    validator
	}{{r.Listener.GetName(), r.Listener}, {r.Route.GetName(), r.Route}, {r.Scope.GetName(), r.Scope}}
	for _, c := range r.Clusters {
		msgs = append(msgs, struct {
			name string
			m    validator
		}{c.GetName(), c})
	}
	for _, e := range r.Endpoints {
		msgs = append(msgs, struct {
			name string
			m    validator
		}{e.GetClusterName(), e})
	}
	known := func(m any) bool {
		return slices.ContainsFunc(published, func(p proto.Message) bool { return any(p) == m })
	}
	for _, m := range msgs {
		if known(m.m) {
			continue
		}
		if err := m.m.ValidateAll(); err != nil {
			return fail(m.name, "ValidateAll", err)
		}
	}
	if !listenerChecked {
		hcm, err := unpackHCM(r.Listener.GetApiListener().GetApiListener())
		if err != nil {
			return fail(r.Listener.GetName(), "api_listener", err)
		}
		if err := checkHCM(hcm, r.Route.GetName()); err != nil {
			return fail(r.Listener.GetName(), "http connection manager", err)
		}
	}
	if err := checkScope(r.Scope, r.Host, r.Route.GetName()); err != nil {
		return fail(r.Scope.GetName(), "route scope", err)
	}
	clusters := map[string]bool{}
	for _, c := range r.Clusters {
		if !known(c) {
			if err := checkCluster(c); err != nil {
				return fail(c.GetName(), "cluster", err)
			}
		}
		clusters[c.GetName()] = true
	}
	for _, e := range r.Endpoints {
		if !clusters[e.GetClusterName()] {
			return fail(e.GetClusterName(), "references", fmt.Errorf("endpoints for unknown cluster"))
		}
		if err := checkPriorities(e); err != nil {
			return fail(e.GetClusterName(), "priorities", err)
		}
		for _, l := range e.GetEndpoints() {
			if l.GetLocality() == nil {
				return fail(e.GetClusterName(), "locality", fmt.Errorf("locality without ID is rejected by gRPC"))
			}
			if l.GetLoadBalancingWeight().GetValue() == 0 {
				return fail(e.GetClusterName(), "locality weight", fmt.Errorf("locality without load_balancing_weight is ignored by gRPC"))
			}
		}
	}
	if err := checkRoutes(r.Route, clusters); err != nil {
		return fail(r.Route.GetName(), "routes", err)
	}
	return nil
}

// ValidateEnvoy checks the sluice-http Listener (ValidateAll, and the
// HttpConnectionManager inside each filter: RDS sluice-http in the
// combined layout, scoped routes over ADS in the scoped one) and that no
// domain appears in two of the virtual hosts of the combined route
// configuration (vhosts is empty for the scoped layout, where hosts are
// unique scope keys). The virtual hosts and scopes themselves are checked
// per rollout by Validate.
func ValidateEnvoy(l *listenerv3.Listener, vhosts []*routev3.VirtualHost) error {
	fail := func(resource, rule string, err error) error {
		return &ValidationError{Resource: resource, Rule: rule, Err: err}
	}
	if err := l.ValidateAll(); err != nil {
		return fail(l.GetName(), "ValidateAll", err)
	}
	for _, fc := range l.GetFilterChains() {
		for _, f := range fc.GetFilters() {
			hcm, err := unpackHCM(f.GetTypedConfig())
			if err != nil {
				return fail(l.GetName(), "filter "+f.GetName(), err)
			}
			check := checkHCM
			if hcm.GetScopedRoutes() != nil {
				check = checkScopedHCM
			}
			if err := check(hcm, EnvoyName); err != nil {
				return fail(l.GetName(), "http connection manager", err)
			}
		}
	}
	domains := map[string]string{}
	for _, vh := range vhosts {
		for _, d := range vh.GetDomains() {
			if other, dup := domains[d]; dup {
				return fail(EnvoyName, "domains", fmt.Errorf("domain %q in virtual hosts %s and %s", d, other, vh.GetName()))
			}
			domains[d] = vh.GetName()
		}
	}
	return nil
}

// checkScopedHCM checks the scoped-routes HttpConnectionManager of the
// sluice-http listener: scopes and routes over ADS, the scope key taken
// from the host in :authority, and the filter rules of checkHCM.
func checkScopedHCM(hcm *hcmv3.HttpConnectionManager, name string) error {
	if hcm.GetStatPrefix() == "" {
		return fmt.Errorf("stat_prefix is empty")
	}
	sr := hcm.GetScopedRoutes()
	if sr.GetName() != name {
		return fmt.Errorf("scoped routes name %q, want %q", sr.GetName(), name)
	}
	if sr.GetRdsConfigSource().GetAds() == nil || sr.GetScopedRds().GetScopedRdsConfigSource().GetAds() == nil {
		return fmt.Errorf("scoped routes and their route configurations must come over ADS")
	}
	frags := sr.GetScopeKeyBuilder().GetFragments()
	if len(frags) != 1 || frags[0].GetHeaderValueExtractor().GetName() != authorityHeader {
		return fmt.Errorf("scope key must be the one %s fragment a route scope's key has", authorityHeader)
	}
	return checkFilters(hcm.GetHttpFilters())
}

// checkScope checks that a route scope selects the rollout's own route
// configuration by its host, the key checkScopedHCM's builder extracts.
func checkScope(sc *routev3.ScopedRouteConfiguration, host, route string) error {
	if sc.GetRouteConfigurationName() != route {
		return fmt.Errorf("route_configuration_name %q, want %q", sc.GetRouteConfigurationName(), route)
	}
	if f := sc.GetKey().GetFragments(); len(f) != 1 || f[0].GetStringKey() != host {
		return fmt.Errorf("key must be the one fragment %q", host)
	}
	return nil
}

func unpackHCM(a *anypb.Any) (*hcmv3.HttpConnectionManager, error) {
	if a == nil {
		return nil, fmt.Errorf("no http connection manager")
	}
	hcm := &hcmv3.HttpConnectionManager{}
	if err := a.UnmarshalTo(hcm); err != nil {
		return nil, fmt.Errorf("unpack http connection manager: %w", err)
	}
	if err := hcm.ValidateAll(); err != nil {
		return nil, fmt.Errorf("ValidateAll: %w", err)
	}
	return hcm, nil
}

// checkHCM applies gRPC's listener rules: RDS over ADS for the expected
// route name, stat_prefix set, and a non-empty filter chain that ends with
// the router (the only terminal filter) and has it nowhere else.
func checkHCM(hcm *hcmv3.HttpConnectionManager, routeName string) error {
	if hcm.GetStatPrefix() == "" {
		return fmt.Errorf("stat_prefix is empty")
	}
	rds := hcm.GetRds()
	if rds == nil {
		return fmt.Errorf("route specifier is not RDS")
	}
	if rds.GetConfigSource().GetAds() == nil && rds.GetConfigSource().GetSelf() == nil {
		return fmt.Errorf("RDS config source is not ADS")
	}
	if rds.GetRouteConfigName() != routeName {
		return fmt.Errorf("route_config_name %q, want %q", rds.GetRouteConfigName(), routeName)
	}
	return checkFilters(hcm.GetHttpFilters())
}

// checkFilters applies gRPC's filter rules, which Envoy shares: a
// non-empty chain that ends with the router and has it nowhere else.
func checkFilters(filters []*hcmv3.HttpFilter) error {
	if len(filters) == 0 {
		return fmt.Errorf("http filters list is empty")
	}
	for i, f := range filters {
		isRouter := f.GetTypedConfig().MessageIs((*routerv3.Router)(nil))
		if isRouter != (i == len(filters)-1) {
			return fmt.Errorf("router filter must be last and only last (filter %d %q)", i, f.GetName())
		}
		if isRouter {
			rt := &routerv3.Router{}
			if err := f.GetTypedConfig().UnmarshalTo(rt); err != nil {
				return fmt.Errorf("unpack router: %w", err)
			}
			if err := rt.ValidateAll(); err != nil {
				return fmt.Errorf("router: %w", err)
			}
		}
	}
	return nil
}

// checkCluster applies gRPC's cluster rules: type EDS, endpoints over ADS,
// service_name empty or the cluster's own name.
func checkCluster(c *clusterv3.Cluster) error {
	if c.GetType() != clusterv3.Cluster_EDS {
		return fmt.Errorf("type %v, want EDS", c.GetType())
	}
	eds := c.GetEdsClusterConfig()
	if eds.GetEdsConfig().GetAds() == nil && eds.GetEdsConfig().GetSelf() == nil {
		return fmt.Errorf("EDS config source is not ADS")
	}
	if n := eds.GetServiceName(); n != "" && n != c.GetName() {
		return fmt.Errorf("eds service_name %q differs from the cluster name", n)
	}
	for k, a := range c.GetTypedExtensionProtocolOptions() {
		if k != httpOptionsKey {
			continue
		}
		o := &httpv3.HttpProtocolOptions{}
		if err := a.UnmarshalTo(o); err != nil {
			return fmt.Errorf("unpack %s: %w", k, err)
		}
		if err := o.ValidateAll(); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	return nil
}

// checkRoutes applies gRPC's route rules: every route has a path specifier,
// weighted clusters total more than 0 and at most MaxUint32, every regex
// compiles as RE2, header matchers use the forms every gRPC client knows
// (no string_match), and every referenced cluster exists.
func checkRoutes(rc *routev3.RouteConfiguration, clusters map[string]bool) error {
	for _, vh := range rc.GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			if err := checkRoute(r, clusters); err != nil {
				return fmt.Errorf("virtual host %s route %q: %w", vh.GetName(), r.GetName(), err)
			}
		}
	}
	return nil
}

func checkRoute(r *routev3.Route, clusters map[string]bool) error {
	m := r.GetMatch()
	if m.GetPathSpecifier() == nil {
		return fmt.Errorf("no path specifier")
	}
	if err := checkRE2(m.GetSafeRegex()); err != nil {
		return err
	}
	for _, h := range m.GetHeaders() {
		if err := checkRE2(h.GetSafeRegexMatch()); err != nil {
			return err
		}
		if h.GetStringMatch() != nil {
			// See valueHeaderMatcher: gRPC clients older than gRFC A63
			// (C-core < 1.56, e.g. Debian 12's python3-grpcio 1.51) NACK
			// the whole route table over one string_match.
			return fmt.Errorf("header %s: string_match is unknown to older gRPC clients (gRFC A63); use exact_match, prefix_match or safe_regex_match", h.GetName())
		}
	}
	a := r.GetRoute()
	if a == nil {
		return fmt.Errorf("not a route action")
	}
	var refs []string
	switch {
	case a.GetCluster() != "":
		refs = append(refs, a.GetCluster())
	case a.GetWeightedClusters() != nil:
		var total uint64
		for _, c := range a.GetWeightedClusters().GetClusters() {
			total += uint64(c.GetWeight().GetValue())
			refs = append(refs, c.GetName())
		}
		if total == 0 || total > math.MaxUint32 {
			return fmt.Errorf("total weight %d is not in 1..%d", total, uint64(math.MaxUint32))
		}
	default:
		return fmt.Errorf("route action has no cluster")
	}
	for _, p := range a.GetRequestMirrorPolicies() {
		refs = append(refs, p.GetCluster())
		if err := checkFraction(p.GetRuntimeFraction()); err != nil {
			return err
		}
	}
	for _, c := range refs {
		if !clusters[c] {
			return fmt.Errorf("references unknown cluster %q", c)
		}
	}
	return nil
}

func checkFraction(f *corev3.RuntimeFractionalPercent) error {
	if f != nil && f.GetDefaultValue().GetNumerator() > 100 && f.GetDefaultValue().GetDenominator() == 0 {
		return fmt.Errorf("mirror fraction %d%% is over 100", f.GetDefaultValue().GetNumerator())
	}
	return nil
}

// checkRE2 compiles a regex the way gRPC does (Go's regexp is RE2).
func checkRE2(re *matcherv3.RegexMatcher) error {
	if re == nil {
		return nil
	}
	if _, err := regexp.Compile("^(?:" + re.GetRegex() + ")$"); err != nil {
		return fmt.Errorf("regex %q is not RE2: %w", re.GetRegex(), err)
	}
	return nil
}

// checkPriorities: the localities' priorities run from 0 without a gap,
// or gRPC rejects the assignment.
func checkPriorities(e *endpointv3.ClusterLoadAssignment) error {
	seen := map[uint32]bool{}
	top := uint32(0)
	for _, l := range e.GetEndpoints() {
		seen[l.GetPriority()] = true
		top = max(top, l.GetPriority())
	}
	for p := range top {
		if !seen[p] {
			return fmt.Errorf("priority %d has no locality but %d has: gRPC rejects a gap", p, top)
		}
	}
	return nil
}
