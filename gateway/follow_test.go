package gateway

import (
	"context"
	"fmt"
	stdmaps "maps"
	"slices"
	"sync"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// follower is a raw ADS client that subscribes the way Envoy or a
// proxyless gRPC client does and follows every reference it is sent:
// listener → route configuration (RDS) or route scopes (SRDS) → route
// configuration; routes → clusters (gRPC only: Envoy takes clusters by
// wildcard); cluster → endpoints. It ACKs every response and counts the
// bytes it received (proto.Size of each response), which is what a
// subscriber pays for a change.
type follower struct {
	name  string
	delta bool
	envoy bool   // wildcard listeners and clusters; else gRPC-shaped
	host  string // the one host a gRPC-shaped follower dials

	mu       sync.Mutex
	bytes    int64
	perType  map[string]int64           // bytes per type URL
	names    map[string]map[string]bool // subscribed names per type URL (nil map: wildcard)
	have     map[string]map[string]*anypb.Any
	answered map[string]bool // type URLs that got at least one response
	removed  map[string][]string
	log      []received // every response, in order
	err      error

	sotwNonce   map[string]string
	sotwVersion map[string]string
}

// followedTypes are the type URLs a follower can subscribe to.
var followedTypes = []string{resourcev3.ListenerType, resourcev3.ScopedRouteType, resourcev3.RouteType, resourcev3.ClusterType, resourcev3.EndpointType}

// startFollower opens the follower's stream and serves it until ctx ends.
func startFollower(ctx context.Context, t testing.TB, addr, name string, delta, envoy bool, host string) *follower {
	t.Helper()
	f := &follower{name: name, delta: delta, envoy: envoy, host: host,
		names: map[string]map[string]bool{}, perType: map[string]int64{}, have: map[string]map[string]*anypb.Any{}, answered: map[string]bool{},
		removed: map[string][]string{}, sotwNonce: map[string]string{}, sotwVersion: map[string]string{}}
	client := adsClient(t, addr)
	var send func(typ string, nonce string, newNames []string) error
	var recv func() (proto.Message, string, string, []*anypb.Any, []string, error)
	if delta {
		s, err := client.DeltaAggregatedResources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		send, recv = f.deltaIO(s)
	} else {
		s, err := client.StreamAggregatedResources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		send, recv = f.sotwIO(s)
	}
	f.mu.Lock()
	var first []string
	if envoy {
		f.names[resourcev3.ListenerType] = nil // wildcard
		f.names[resourcev3.ClusterType] = nil
		first = []string{resourcev3.ClusterType, resourcev3.ListenerType}
	} else {
		f.names[resourcev3.ListenerType] = map[string]bool{host: true}
		first = []string{resourcev3.ListenerType}
	}
	f.mu.Unlock()
	for _, typ := range first {
		var n []string
		if !envoy {
			n = []string{host}
		}
		if err := send(typ, "", n); err != nil {
			t.Fatal(err)
		}
	}
	go func() {
		for {
			resp, typ, nonce, res, removed, err := recv()
			if err != nil {
				f.fail(err)
				return
			}
			if err := f.handle(resp, typ, nonce, res, removed, send); err != nil {
				f.fail(err)
				return
			}
		}
	}()
	return f
}

func (f *follower) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = err
	}
}

// handle records one response, subscribes to what it references, and ACKs
// it (in state of the world the ACK carries the type's subscription).
func (f *follower) handle(resp proto.Message, typ, nonce string, res []*anypb.Any, removed []string, send func(string, string, []string) error) error {
	f.mu.Lock()
	f.bytes += int64(proto.Size(resp))
	f.perType[typ] += int64(proto.Size(resp))
	f.answered[typ] = true
	if f.have[typ] == nil || (!f.delta && typ != resourcev3.RouteType && typ != resourcev3.EndpointType) {
		// State of the world: a listener, cluster or scope response is the
		// whole set of its type.
		f.have[typ] = map[string]*anypb.Any{}
	}
	for _, n := range removed {
		delete(f.have[typ], n)
	}
	f.removed[typ] = append(f.removed[typ], removed...)
	got := received{typ: typ, removed: slices.Sorted(slices.Values(removed))}
	refs := map[string][]string{}
	for _, a := range res {
		name, r, err := references(a, f.envoy)
		if err != nil {
			f.mu.Unlock()
			return fmt.Errorf("%s: %w", f.name, err)
		}
		got.names = append(got.names, name)
		f.have[typ][name] = a
		for t, ns := range r {
			refs[t] = append(refs[t], ns...)
		}
	}
	slices.Sort(got.names)
	f.log = append(f.log, got)
	// New names to subscribe to, per type.
	grow := map[string][]string{}
	for t, ns := range refs {
		if _, ok := f.names[t]; !ok && t == resourcev3.ScopedRouteType {
			f.names[t] = nil // scopes are taken by wildcard, as Envoy does
			grow[t] = []string{}
			continue
		}
		if f.names[t] == nil && hasKey(f.names, t) {
			continue // wildcard already
		}
		if f.names[t] == nil {
			f.names[t] = map[string]bool{}
		}
		for _, n := range ns {
			if !f.names[t][n] {
				f.names[t][n] = true
				grow[t] = append(grow[t], n)
			}
		}
	}
	f.mu.Unlock()
	if err := send(typ, nonce, nil); err != nil { // the ACK
		return err
	}
	for _, t := range followedTypes {
		if ns, ok := grow[t]; ok && t != typ {
			if err := send(t, "", ns); err != nil {
				return err
			}
		}
	}
	return nil
}

func hasKey[K comparable, V any](m map[K]V, k K) bool { _, ok := m[k]; return ok }

// references decodes one resource and returns its name and the resources
// it makes a client ask for next, by type URL.
func references(a *anypb.Any, envoy bool) (string, map[string][]string, error) {
	m, err := a.UnmarshalNew()
	if err != nil {
		return "", nil, err
	}
	refs := map[string][]string{}
	switch r := m.(type) {
	case *listenerv3.Listener:
		// Envoy does not take an api_listener over LDS (it logs and skips
		// it); gRPC uses nothing but the api_listener.
		var hcms []*anypb.Any
		if !envoy {
			hcms = append(hcms, r.GetApiListener().GetApiListener())
		}
		for _, fc := range r.GetFilterChains() {
			for _, fl := range fc.GetFilters() {
				hcms = append(hcms, fl.GetTypedConfig())
			}
		}
		for _, h := range hcms {
			if h == nil {
				continue
			}
			hcm := &hcmv3.HttpConnectionManager{}
			if err := h.UnmarshalTo(hcm); err != nil {
				return "", nil, err
			}
			if n := hcm.GetRds().GetRouteConfigName(); n != "" {
				refs[resourcev3.RouteType] = append(refs[resourcev3.RouteType], n)
			}
			if hcm.GetScopedRoutes().GetScopedRds() != nil {
				refs[resourcev3.ScopedRouteType] = []string{}
			}
		}
		return r.GetName(), refs, nil
	case *routev3.ScopedRouteConfiguration:
		refs[resourcev3.RouteType] = []string{r.GetRouteConfigurationName()}
		return r.GetName(), refs, nil
	case *routev3.RouteConfiguration:
		if !envoy {
			for _, vh := range r.GetVirtualHosts() {
				for _, rt := range vh.GetRoutes() {
					if c := rt.GetRoute().GetCluster(); c != "" {
						refs[resourcev3.ClusterType] = append(refs[resourcev3.ClusterType], c)
					}
					for _, wc := range rt.GetRoute().GetWeightedClusters().GetClusters() {
						refs[resourcev3.ClusterType] = append(refs[resourcev3.ClusterType], wc.GetName())
					}
				}
			}
		}
		return r.GetName(), refs, nil
	case *clusterv3.Cluster:
		refs[resourcev3.EndpointType] = []string{r.GetName()}
		return r.GetName(), refs, nil
	case *endpointv3.ClusterLoadAssignment:
		return r.GetClusterName(), refs, nil
	}
	return "", nil, fmt.Errorf("unexpected resource %s", a.GetTypeUrl())
}

// deltaIO speaks incremental xDS: subscribe sends only new names, an ACK
// only the nonce.
func (f *follower) deltaIO(s grpc.BidiStreamingClient[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse]) (
	func(string, string, []string) error, func() (proto.Message, string, string, []*anypb.Any, []string, error)) {
	var sendMu sync.Mutex
	send := func(typ, nonce string, names []string) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return s.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: typ, ResponseNonce: nonce, ResourceNamesSubscribe: names, Node: nodeProto(f.name)})
	}
	recv := func() (proto.Message, string, string, []*anypb.Any, []string, error) {
		r, err := s.Recv()
		if err != nil {
			return nil, "", "", nil, nil, err
		}
		var res []*anypb.Any
		for _, x := range r.GetResources() {
			res = append(res, x.GetResource())
		}
		return r, r.GetTypeUrl(), r.GetNonce(), res, r.GetRemovedResources(), nil
	}
	return send, recv
}

// sotwIO speaks state of the world: every request carries the type's whole
// subscription and the last nonce of that type.
func (f *follower) sotwIO(s grpc.BidiStreamingClient[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse]) (
	func(string, string, []string) error, func() (proto.Message, string, string, []*anypb.Any, []string, error)) {
	send := func(typ, _ string, _ []string) error {
		f.mu.Lock()
		names := slices.Sorted(stdmaps.Keys(f.names[typ]))
		req := &discoveryv3.DiscoveryRequest{TypeUrl: typ, ResourceNames: names, VersionInfo: f.sotwVersion[typ], ResponseNonce: f.sotwNonce[typ], Node: nodeProto(f.name)}
		f.mu.Unlock()
		return s.Send(req)
	}
	recv := func() (proto.Message, string, string, []*anypb.Any, []string, error) {
		r, err := s.Recv()
		if err != nil {
			return nil, "", "", nil, nil, err
		}
		f.mu.Lock()
		f.sotwNonce[r.GetTypeUrl()], f.sotwVersion[r.GetTypeUrl()] = r.GetNonce(), r.GetVersionInfo()
		f.mu.Unlock()
		return r, r.GetTypeUrl(), r.GetNonce(), r.GetResources(), nil, nil
	}
	return send, recv
}

// complete reports whether every type subscribed to was answered and every
// name subscribed to was received; it returns the stream's error, if any.
func (f *follower) complete() (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return false, f.err
	}
	for t, ns := range f.names {
		if !f.answered[t] {
			return false, nil
		}
		for n := range ns {
			if f.have[t][n] == nil {
				return false, nil
			}
		}
	}
	return true, nil
}

// received is the total of proto.Size over every response so far.
func (f *follower) received() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bytes
}

// resource returns the last received resource of a type by name.
func (f *follower) resource(typ, name string) *anypb.Any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.have[typ][name]
}

// haveNames lists the names of a type the follower holds.
func (f *follower) haveNames(typ string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(stdmaps.Keys(f.have[typ]))
}

// receivedByType is the bytes received per type URL so far.
func (f *follower) receivedByType() map[string]int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return stdmaps.Clone(f.perType)
}

// received is one response as a follower saw it.
type received struct {
	typ     string
	names   []string // resources in it, sorted
	removed []string // removed_resources (delta), sorted
}

func (r received) String() string {
	return fmt.Sprintf("%s %v removed %v", r.typ[len(resourcev3.APITypePrefix):], r.names, r.removed)
}

// responses returns how many responses the follower got so far, to mark
// a point in its log.
func (f *follower) responses() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.log)
}

// since returns the responses after mark.
func (f *follower) since(mark int) []received {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.log[mark:])
}
