// Package subscriber is a raw ADS client that subscribes the way Envoy or a
// proxyless gRPC client does: it follows every reference it is sent
// (listener → route configuration, or route scopes → route configurations;
// routes → clusters for gRPC, which names its clusters; cluster →
// endpoints), ACKs every response and counts the bytes it received
// (proto.Size of each response). Benchmarks and tests use it to measure
// what a change costs each subscriber and to check what it was sent; it
// routes no traffic.
package subscriber

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// Options says how a Subscriber subscribes.
type Options struct {
	// Node is the node id sent on the stream.
	Node string
	// Delta uses incremental xDS; otherwise state of the world.
	Delta bool
	// Envoy subscribes like Envoy with an ADS bootstrap: every listener
	// and cluster by wildcard, then what the listeners with filter chains
	// reference (Envoy skips api_listeners). Otherwise it subscribes like
	// a gRPC client dialing xds:///Host.
	Envoy bool
	// Host is the one host a gRPC-shaped subscriber dials.
	Host string
}

// Response is one response as the subscriber saw it.
type Response struct {
	TypeURL string
	Names   []string // resources in it, sorted
	Removed []string // removed_resources (delta), sorted
}

func (r Response) String() string {
	return fmt.Sprintf("%s %v removed %v", r.TypeURL[len(resourcev3.APITypePrefix):], r.Names, r.Removed)
}

// Subscriber is one ADS stream and what it was sent. Its methods are safe
// to call from any goroutine while the stream runs.
type Subscriber struct {
	opts Options

	mu       sync.Mutex
	bytes    int64
	perType  map[string]int64
	names    map[string]map[string]bool // subscribed names per type URL (nil map: wildcard)
	have     map[string]map[string]*anypb.Any
	answered map[string]bool // type URLs that got at least one response
	log      []Response
	err      error

	sotwNonce   map[string]string
	sotwVersion map[string]string
}

// streamIO sends a request (an ACK of nonce, or a subscription of new
// names) and receives a response, hiding the xDS variant.
type streamIO struct {
	send func(typ, nonce string, newNames []string) error
	recv func() (proto.Message, string, string, []*anypb.Any, []string, error)
}

// Start opens the subscriber's stream on conn and serves it until ctx
// ends or the stream fails (see Complete).
func Start(ctx context.Context, conn grpc.ClientConnInterface, opts Options) (*Subscriber, error) {
	s := &Subscriber{opts: opts,
		names: map[string]map[string]bool{}, perType: map[string]int64{}, have: map[string]map[string]*anypb.Any{},
		answered: map[string]bool{}, sotwNonce: map[string]string{}, sotwVersion: map[string]string{}}
	client := discoveryv3.NewAggregatedDiscoveryServiceClient(conn)
	var io streamIO
	if opts.Delta {
		st, err := client.DeltaAggregatedResources(ctx)
		if err != nil {
			return nil, fmt.Errorf("open delta stream: %w", err)
		}
		io = s.deltaIO(st)
	} else {
		st, err := client.StreamAggregatedResources(ctx)
		if err != nil {
			return nil, fmt.Errorf("open stream: %w", err)
		}
		io = s.sotwIO(st)
	}
	first := []string{resourcev3.ClusterType, resourcev3.ListenerType}
	var firstNames []string
	s.names[resourcev3.ListenerType] = nil // wildcard
	s.names[resourcev3.ClusterType] = nil
	if !opts.Envoy {
		first, firstNames = []string{resourcev3.ListenerType}, []string{opts.Host}
		s.names = map[string]map[string]bool{resourcev3.ListenerType: {opts.Host: true}}
	}
	out := newOutbox(io.send)
	for _, typ := range first {
		out.send(typ, "", firstNames)
	}
	go func() {
		if err := out.run(ctx); err != nil {
			s.fail(fmt.Errorf("send: %w", err))
		}
	}()
	go func() {
		for {
			resp, typ, nonce, res, removed, err := io.recv()
			if err == nil {
				err = s.handle(resp, typ, nonce, res, removed, out.send)
			}
			if err != nil {
				s.fail(err)
				return
			}
		}
	}()
	return s, nil
}

func (s *Subscriber) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
}

// handle records one response, subscribes to what it references, and ACKs
// it (in state of the world the ACK carries the type's subscription).
func (s *Subscriber) handle(resp proto.Message, typ, nonce string, res []*anypb.Any, removed []string, send func(string, string, []string)) error {
	s.mu.Lock()
	size := int64(proto.Size(resp))
	s.bytes += size
	s.perType[typ] += size
	s.answered[typ] = true
	if s.have[typ] == nil || (!s.opts.Delta && typ != resourcev3.RouteType && typ != resourcev3.EndpointType) {
		// State of the world: a listener, cluster or scope response is the
		// whole set of its type; route and endpoint responses may be a part.
		s.have[typ] = map[string]*anypb.Any{}
	}
	for _, n := range removed {
		delete(s.have[typ], n)
	}
	got := Response{TypeURL: typ, Removed: slices.Sorted(slices.Values(removed))}
	refs := map[string][]string{}
	for _, a := range res {
		name, r, err := references(a, s.opts.Envoy)
		if err != nil {
			s.mu.Unlock()
			return fmt.Errorf("%s: %w", s.opts.Node, err)
		}
		got.Names = append(got.Names, name)
		s.have[typ][name] = a
		for t, ns := range r {
			refs[t] = append(refs[t], ns...)
		}
	}
	slices.Sort(got.Names)
	s.log = append(s.log, got)
	grow := s.subscribeLocked(refs)
	s.mu.Unlock()
	send(typ, nonce, nil) // the ACK
	for _, t := range []string{resourcev3.ListenerType, resourcev3.ScopedRouteType, resourcev3.RouteType, resourcev3.ClusterType, resourcev3.EndpointType} {
		if ns, ok := grow[t]; ok {
			send(t, "", ns)
		}
	}
	return nil
}

// subscribeLocked adds the referenced names to the subscription and
// returns the new ones per type. Route scopes are taken by wildcard, as
// Envoy does. Callers hold s.mu.
func (s *Subscriber) subscribeLocked(refs map[string][]string) map[string][]string {
	grow := map[string][]string{}
	for t, ns := range refs {
		cur, subscribed := s.names[t]
		switch {
		case !subscribed && t == resourcev3.ScopedRouteType:
			s.names[t] = nil
			grow[t] = []string{}
			continue
		case subscribed && cur == nil:
			continue // wildcard already
		case cur == nil:
			cur = map[string]bool{}
			s.names[t] = cur
		}
		for _, n := range ns {
			if !cur[n] {
				cur[n] = true
				grow[t] = append(grow[t], n)
			}
		}
	}
	return grow
}

// deltaIO speaks incremental xDS: a subscription sends only new names, an
// ACK only the nonce.
func (s *Subscriber) deltaIO(st grpc.BidiStreamingClient[discoveryv3.DeltaDiscoveryRequest, discoveryv3.DeltaDiscoveryResponse]) streamIO {
	node := &corev3.Node{Id: s.opts.Node}
	return streamIO{
		send: func(typ, nonce string, names []string) error {
			return st.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: typ, ResponseNonce: nonce, ResourceNamesSubscribe: names, Node: node})
		},
		recv: func() (proto.Message, string, string, []*anypb.Any, []string, error) {
			r, err := st.Recv()
			if err != nil {
				return nil, "", "", nil, nil, err
			}
			var res []*anypb.Any
			for _, x := range r.GetResources() {
				res = append(res, x.GetResource())
			}
			return r, r.GetTypeUrl(), r.GetNonce(), res, r.GetRemovedResources(), nil
		},
	}
}

// sotwIO speaks state of the world: every request carries the type's whole
// subscription and the last nonce and version of that type.
func (s *Subscriber) sotwIO(st grpc.BidiStreamingClient[discoveryv3.DiscoveryRequest, discoveryv3.DiscoveryResponse]) streamIO {
	node := &corev3.Node{Id: s.opts.Node}
	return streamIO{
		send: func(typ, _ string, _ []string) error {
			s.mu.Lock()
			names := slices.Sorted(maps.Keys(s.names[typ]))
			req := &discoveryv3.DiscoveryRequest{TypeUrl: typ, ResourceNames: names, VersionInfo: s.sotwVersion[typ], ResponseNonce: s.sotwNonce[typ], Node: node}
			s.mu.Unlock()
			return st.Send(req)
		},
		recv: func() (proto.Message, string, string, []*anypb.Any, []string, error) {
			r, err := st.Recv()
			if err != nil {
				return nil, "", "", nil, nil, err
			}
			s.mu.Lock()
			s.sotwNonce[r.GetTypeUrl()], s.sotwVersion[r.GetTypeUrl()] = r.GetNonce(), r.GetVersionInfo()
			s.mu.Unlock()
			return r, r.GetTypeUrl(), r.GetNonce(), r.GetResources(), nil, nil
		},
	}
}

// Complete reports whether every type subscribed to was answered and every
// name subscribed to was received; it returns the stream's error, if any.
func (s *Subscriber) Complete() (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return false, s.err
	}
	for t, ns := range s.names {
		if !s.answered[t] {
			return false, nil
		}
		for n := range ns {
			if s.have[t][n] == nil {
				return false, nil
			}
		}
	}
	return true, nil
}

// Received is the total of proto.Size over every response so far.
func (s *Subscriber) Received() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

// ReceivedByType is Received per type URL.
func (s *Subscriber) ReceivedByType() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.perType)
}

// Resource returns the last received resource of a type by name, or nil.
func (s *Subscriber) Resource(typ, name string) *anypb.Any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.have[typ][name]
}

// Names lists the names of a type the subscriber holds, sorted.
func (s *Subscriber) Names(typ string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.have[typ]))
}

// Responses is how many responses the subscriber got so far: a mark for
// Since.
func (s *Subscriber) Responses() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.log)
}

// Since returns the responses after mark.
func (s *Subscriber) Since(mark int) []Response {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log[mark:])
}
