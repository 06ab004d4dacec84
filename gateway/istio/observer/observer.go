// Package observer watches what istiod sends a proxyless gRPC client, so
// that the Istio router can tell when a weight it wrote has reached the
// mesh. It is a small ADS client of its own (one Node per sluice, node
// metadata GENERATOR=grpc, the way Istio's agent bootstraps a proxyless
// client): it subscribes to the listeners of the hosts it is asked to watch
// (LDS by host name, which istiod answers with one listener per port),
// follows each listener's HttpConnectionManager to its route configuration
// (RDS, or the route configuration inline), and ACKs every response so that
// istiod keeps pushing. It routes no traffic; Routes returns the routes it
// holds for a host.
package observer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"
)

// Options configures an Observer.
type Options struct {
	// Addr is istiod's plaintext xDS address, host:port (istiod serves it
	// on 15010; e.g. istiod.istio-system.svc:15010). Required.
	Addr string
	// Namespace is the namespace the observer's node claims to run in
	// (default "istio-system", Istio's root namespace, whose Sidecar, if
	// any, applies mesh-wide). It decides which VirtualServices are
	// exported to it.
	Namespace string
	// Name is the node's name, unique per sluice (default sluice-<random>).
	Name string
	// ClusterID is the Kubernetes cluster istiod knows the node's
	// cluster by (default "Kubernetes", istiod's own default).
	ClusterID string
	// Logger gets a line per stream failure (default: discard).
	Logger *slog.Logger
	// Retry is the first pause before reconnecting after the stream ends
	// (default 1s); it doubles, up to 30s, while istiod sends nothing.
	Retry time.Duration
}

// Observer is one ADS stream to istiod and the routes it received. Its
// methods are safe to call from any goroutine.
type Observer struct {
	opts Options
	node *corev3.Node

	mu        sync.Mutex
	hosts     map[string]bool                        // hosts watched (LDS names)
	listeners map[string]listenerRoutes              // by listener name
	routes    map[string]*routev3.RouteConfiguration // by RDS name
	changed   chan struct{}                          // closed and replaced on every change
	wake      chan struct{}                          // Watch added a host
}

// listenerRoutes is what one listener routes with: an RDS name, or its
// route configuration inline.
type listenerRoutes struct {
	host   string
	rds    string
	inline *routev3.RouteConfiguration
}

// New returns an Observer; Run connects it.
func New(opts Options) (*Observer, error) {
	if opts.Addr == "" {
		return nil, errors.New("istio observer: no istiod xDS address")
	}
	if opts.Namespace == "" {
		opts.Namespace = "istio-system"
	}
	if opts.Name == "" {
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		opts.Name = "sluice-" + hex.EncodeToString(b)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ClusterID == "" {
		opts.ClusterID = "Kubernetes"
	}
	if opts.Retry <= 0 {
		opts.Retry = time.Second
	}
	// Istio takes a sidecar's identity from its node id
	// (type~ip~name.namespace~domain) and picks the proxyless generator
	// from the GENERATOR metadata: without it the node gets no routes.
	meta, err := structpb.NewStruct(map[string]any{
		"GENERATOR":  "grpc",
		"NAMESPACE":  opts.Namespace,
		"CLUSTER_ID": opts.ClusterID,
	})
	if err != nil {
		return nil, err
	}
	node := &corev3.Node{
		Id:       fmt.Sprintf("sidecar~127.0.0.1~%s.%s~%s.svc.cluster.local", opts.Name, opts.Namespace, opts.Namespace),
		Metadata: meta,
	}
	return &Observer{opts: opts, node: node, hosts: map[string]bool{}, listeners: map[string]listenerRoutes{},
		routes: map[string]*routev3.RouteConfiguration{}, changed: make(chan struct{}), wake: make(chan struct{}, 1)}, nil
}

// NodeID is the node id the observer sends istiod.
func (o *Observer) NodeID() string { return o.node.GetId() }

// Watch adds hosts (fully qualified service names, e.g.
// web.default.svc.cluster.local) to the listeners the observer subscribes
// to. Hosts already watched are ignored.
func (o *Observer) Watch(hosts ...string) {
	o.mu.Lock()
	added := false
	for _, h := range hosts {
		if !o.hosts[h] {
			o.hosts[h], added = true, true
		}
	}
	o.mu.Unlock()
	if added {
		select {
		case o.wake <- struct{}{}:
		default:
		}
	}
}

// Routes returns every route istiod sent for host, over all its ports'
// route configurations (nil before the first arrives). The routes are
// istiod's own messages: read them, do not change them.
func (o *Observer) Routes(host string) []*routev3.Route {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []*routev3.Route
	for _, name := range slices.Sorted(maps.Keys(o.listeners)) {
		l := o.listeners[name]
		if l.host != host {
			continue
		}
		rc := l.inline
		if rc == nil {
			rc = o.routes[l.rds]
		}
		for _, vh := range rc.GetVirtualHosts() {
			out = append(out, vh.GetRoutes()...)
		}
	}
	return out
}

// Changed returns a channel closed at the next change of what the
// observer holds.
func (o *Observer) Changed() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.changed
}

func (o *Observer) notifyLocked() {
	close(o.changed)
	o.changed = make(chan struct{})
}

// Run keeps a stream to istiod until ctx ends, reconnecting after
// o.opts.Retry when it fails. What a failed stream delivered is
// forgotten: nothing is taken as applied unless the current stream says
// so.
func (o *Observer) Run(ctx context.Context) error {
	conn, err := grpc.NewClient(o.opts.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("istio observer: %w", err)
	}
	defer conn.Close()
	client := discoveryv3.NewAggregatedDiscoveryServiceClient(conn)
	pause := o.opts.Retry
	for {
		received, err := o.stream(ctx, client)
		o.reset()
		if ctx.Err() != nil {
			return nil
		}
		if received {
			pause = o.opts.Retry
		}
		o.opts.Logger.Warn("istio observer: stream to istiod ended; reconnecting", "addr", o.opts.Addr, "in", pause, "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(pause):
		}
		pause = min(2*pause, 30*time.Second)
	}
}

func (o *Observer) reset() {
	o.mu.Lock()
	defer o.mu.Unlock()
	clear(o.listeners)
	clear(o.routes)
	o.notifyLocked()
}

// subscription is one type's state on a stream: the names asked for and
// the last version and nonce, which every request sends back (an ACK).
type subscription struct {
	names          []string
	version, nonce string
	sent           bool
}

// stream runs one ADS stream: the receive loop hands responses over, and
// this goroutine alone sends (a gRPC stream takes one sender at a time).
// received: istiod sent at least one response.
func (o *Observer) stream(ctx context.Context, client discoveryv3.AggregatedDiscoveryServiceClient) (received bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := client.StreamAggregatedResources(ctx)
	if err != nil {
		return false, err
	}
	responses := make(chan *discoveryv3.DiscoveryResponse)
	recvErr := make(chan error, 1)
	go func() {
		for {
			resp, err := st.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case responses <- resp:
			case <-ctx.Done():
				return
			}
		}
	}()
	subs := map[string]*subscription{resourcev3.ListenerType: {}, resourcev3.RouteType: {}}
	first := true
	send := func(typ string, errDetail error) error {
		s := subs[typ]
		req := &discoveryv3.DiscoveryRequest{TypeUrl: typ, ResourceNames: s.names, VersionInfo: s.version, ResponseNonce: s.nonce}
		if errDetail != nil {
			req.ErrorDetail = &status.Status{Code: int32(codes.InvalidArgument), Message: errDetail.Error()}
		}
		if first {
			req.Node, first = o.node, false
		}
		s.sent = true
		return st.Send(req)
	}
	// resubscribe sends a type's request when the names it needs changed.
	resubscribe := func(typ string, names []string) error {
		s := subs[typ]
		if s.sent && slices.Equal(s.names, names) {
			return nil
		}
		if len(names) == 0 && !s.sent {
			return nil // an empty request would be a wildcard: every listener in the mesh
		}
		s.names = names
		return send(typ, nil)
	}
	for {
		if err := resubscribe(resourcev3.ListenerType, o.watchedHosts()); err != nil {
			return received, err
		}
		if err := resubscribe(resourcev3.RouteType, o.rdsNames()); err != nil {
			return received, err
		}
		select {
		case <-ctx.Done():
			return received, ctx.Err()
		case err := <-recvErr:
			return received, err
		case <-o.wake:
		case resp := <-responses:
			received = true
			s, ok := subs[resp.GetTypeUrl()]
			if !ok {
				continue // a type not asked for
			}
			err := o.take(resp)
			if err == nil {
				s.version = resp.GetVersionInfo()
			} else {
				o.opts.Logger.Warn("istio observer: NACK", "type", resp.GetTypeUrl(), "err", err)
			}
			s.nonce = resp.GetNonce()
			if err := send(resp.GetTypeUrl(), err); err != nil {
				return received, err
			}
		}
	}
}

func (o *Observer) watchedHosts() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Sorted(maps.Keys(o.hosts))
}

// rdsNames are the route configurations the listeners held name.
func (o *Observer) rdsNames() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	set := map[string]bool{}
	for _, l := range o.listeners {
		if l.rds != "" {
			set[l.rds] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// take stores one response's resources. A listener response is the whole
// set (state of the world: listeners left out are gone); a route
// configuration response replaces only the configurations it holds.
func (o *Observer) take(resp *discoveryv3.DiscoveryResponse) error {
	switch resp.GetTypeUrl() {
	case resourcev3.ListenerType:
		ls := map[string]listenerRoutes{}
		for _, a := range resp.GetResources() {
			l := &listenerv3.Listener{}
			if err := a.UnmarshalTo(l); err != nil {
				return fmt.Errorf("listener: %w", err)
			}
			lr, err := routesOf(l)
			if err != nil {
				return err
			}
			ls[l.GetName()] = lr
		}
		o.mu.Lock()
		o.listeners = ls
		o.notifyLocked()
		o.mu.Unlock()
	case resourcev3.RouteType:
		rcs := map[string]*routev3.RouteConfiguration{}
		for _, a := range resp.GetResources() {
			rc := &routev3.RouteConfiguration{}
			if err := a.UnmarshalTo(rc); err != nil {
				return fmt.Errorf("route configuration: %w", err)
			}
			rcs[rc.GetName()] = rc
		}
		o.mu.Lock()
		maps.Copy(o.routes, rcs)
		o.notifyLocked()
		o.mu.Unlock()
	}
	return nil
}

// routesOf reads a proxyless client's listener: an api_listener holding an
// HttpConnectionManager, named host:port.
func routesOf(l *listenerv3.Listener) (listenerRoutes, error) {
	host, _, err := net.SplitHostPort(l.GetName())
	if err != nil {
		host = l.GetName()
	}
	api := l.GetApiListener().GetApiListener()
	if api == nil {
		return listenerRoutes{host: host}, nil // not a client-side listener: nothing to route
	}
	hcm := &hcmv3.HttpConnectionManager{}
	if err := api.UnmarshalTo(hcm); err != nil {
		return listenerRoutes{}, fmt.Errorf("listener %s: %w", l.GetName(), err)
	}
	return listenerRoutes{host: host, rds: hcm.GetRds().GetRouteConfigName(), inline: hcm.GetRouteConfig()}, nil
}
