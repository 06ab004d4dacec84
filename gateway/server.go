package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluice-dev/sluice/api"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/encoding"
	protoenc "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/protobuf/proto"
)

// Options configures a Server. The zero value of every field is usable.
type Options struct {
	Logger *slog.Logger
	// Registry receives sluice_xds_clients, sluice_xds_push_seconds and
	// sluice_xds_nacks_total; nil registers nothing.
	Registry *prometheus.Registry
	// EnvoyPort is the port of the sluice-http listener (default 10000).
	EnvoyPort uint32
	// EnvoyRoutes is how the sluice-http listener finds a host's routes
	// (default EnvoyRoutesScoped: one route scope per host, so a change
	// to one rollout sends Envoy one small RouteConfiguration).
	EnvoyRoutes EnvoyRouteLayout
	// TLS secures the xDS listener; empty means plaintext.
	TLS TLSOptions
	// OnNack is called for every NACK, synchronously on the goroutine of
	// the stream that received it (no lock held): keep it short (queue,
	// don't block), or that client's stream stalls.
	OnNack func(Nack)
	// Limits bound what peers can make the server hold; zero fields take
	// DefaultLimits.
	Limits Limits
	// AllowedNodes, when not empty, are node-id patterns (path.Match
	// syntax); a stream whose node id matches none is refused with
	// PermissionDenied. Without mutual TLS node ids are claims; with it a
	// node id must match the client certificate's identity (identity.go),
	// so the patterns then authorize identities.
	AllowedNodes []string
}

// Nack is one rejected response.
type Nack struct {
	Node      string    // node id the client sent on its stream
	Identity  string    // with mutual TLS, its certificate's identity (Node matches it); else ""
	Stream    uint64    // server-side stream id
	TypeURL   string    // resource type rejected
	Version   string    // version_info (or delta nonce) rejected
	Resources []string  // resource names in the rejected response
	Rollouts  []api.Key // rollouts owning those resources
	Detail    string    // the client's error_detail message, capped at 1 KiB
	Time      time.Time
}

// ErrNack is wrapped by WaitForAck when a client rejected the version.
var ErrNack = errors.New("xds nack")

// Server serves every rollout's traffic over ADS (state of the world and
// delta) and tracks what each client ACKed.
//
// Lifecycle: New, then Serve (once; it blocks until its context ends), with
// SetTraffic, Remove and WaitForAck callable at any time from any goroutine,
// before or during Serve.
type Server struct {
	log   *slog.Logger
	opts  Options
	m     *metrics
	creds credentials.TransportCredentials

	writeMu   sync.Mutex // one publisher at a time
	snap      atomic.Pointer[snapshot]
	published atomic.Pointer[chan struct{}] // closed and replaced on publish

	limits Limits
	env    envoyConfig

	mu      sync.RWMutex
	streams map[*stream]struct{}
	nextID  atomic.Uint64
	nonce   atomic.Uint64

	// subscribedBytes counts the bytes of the names all streams subscribe
	// to, against Limits.SubscribedBytes.
	subscribedBytes atomic.Int64
	// keyMu guards keyRefs: how many streams hold each subscription key,
	// so a cached response dies with the last stream that uses it.
	keyMu   sync.Mutex
	keyRefs [numTypes]map[string]int

	// subscriptions counts subscription changes of all streams, so a
	// WaitForAck can tell that no stream may have become interested in its
	// host since it last looked at every stream.
	subscriptions atomic.Uint64
	// waiters are the WaitForAck calls in progress, indexed by the
	// resources they wait on.
	waiters waiterIndex

	done     chan struct{}
	doneOnce sync.Once

	// sentHook, when set (tests), runs after each state-of-the-world
	// response is sent: it widens the window in which the client's reply
	// is read before sotwSend goes on (TestSotwReplyReadBeforeSendReturns).
	sentHook atomic.Pointer[func()]

	discoveryv3.UnimplementedAggregatedDiscoveryServiceServer
}

var _ discoveryv3.AggregatedDiscoveryServiceServer = (*Server)(nil)

// New validates opts and returns a Server with no rollouts.
func New(opts Options) (*Server, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.EnvoyPort == 0 {
		opts.EnvoyPort = 10000
	}
	if opts.EnvoyRoutes == "" {
		opts.EnvoyRoutes = EnvoyRoutesScoped
	}
	env, err := newEnvoyConfig(opts.EnvoyPort, opts.EnvoyRoutes)
	if err != nil {
		return nil, err
	}
	if err := checkPatterns(opts.AllowedNodes); err != nil {
		return nil, err
	}
	m, err := newMetrics(opts.Registry)
	if err != nil {
		return nil, err
	}
	s := &Server{
		log:     opts.Logger,
		opts:    opts,
		m:       m,
		limits:  opts.Limits.withDefaults(),
		env:     env,
		streams: map[*stream]struct{}{},
		done:    make(chan struct{}),
	}
	for t := range s.keyRefs {
		s.keyRefs[t] = map[string]int{}
	}
	if opts.TLS.enabled() {
		if s.creds, err = opts.TLS.credentials(); err != nil {
			return nil, err
		}
	}
	s.snap.Store(emptySnapshot())
	pub := make(chan struct{})
	s.published.Store(&pub)
	return s, nil
}

// grpcServerOptions are the options Serve uses: transport credentials,
// the per-connection stream limit, lenient keepalive, static flow-control windows (no BDP pings from the
// server on every stream), and a write buffer released between writes (an
// idle xDS stream then holds no 32 KiB buffer), and the request and node
// size limits.
func (s *Server) grpcServerOptions() []grpc.ServerOption {
	opts := []grpc.ServerOption{
		grpc.MaxConcurrentStreams(s.limits.StreamsPerConnection),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.StaticStreamWindowSize(1 << 20),
		grpc.StaticConnWindowSize(1 << 20),
		grpc.SharedWriteBuffer(true),
		grpc.MaxRecvMsgSize(s.limits.RequestBytes),
		grpc.ForceServerCodecV2(nodeBoundCodec{
			CodecV2: encoding.GetCodecV2(protoenc.Name),
			limit:   s.limits.NodeBytes,
			refused: func() { s.m.refused.WithLabelValues(refusedNodeBytes).Inc() },
		}),
	}
	if s.creds != nil {
		opts = append(opts, grpc.Creds(s.creds))
	}
	return opts
}

// Serve answers ADS on lis until ctx ends, then closes every stream and
// stops. It returns nil after a stop caused by ctx.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	gs := grpc.NewServer(s.grpcServerOptions()...)
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(gs, s)
	errc := make(chan error, 1)
	go func() { errc <- gs.Serve(lis) }()
	s.log.Info("xds serving", "addr", lis.Addr().String(), "tls", s.creds != nil)
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	s.doneOnce.Do(func() { close(s.done) }) // ends every stream handler
	stopped := make(chan struct{})
	go func() { gs.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		gs.Stop()
		<-stopped
	}
	if err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("serve xds: %w", err)
	}
	return nil
}

// SetTraffic validates one rollout's traffic and publishes it. It returns
// the version WaitForAck takes ("<generation>-<hash>"); an unchanged spec
// returns the current version and pushes nothing. On error nothing is
// published. It never waits for clients: streams are woken and send on
// their own goroutines, and a slow stream only ever gets the newest state.
func (s *Server) SetTraffic(t api.Traffic) (string, error) {
	return s.setTraffic(t, true)
}

// setTraffic publishes t; tests turn validation off to make a real client
// NACK.
func (s *Server) setTraffic(t api.Traffic, validate bool) (string, error) {
	res, err := Translate(t)
	if err != nil {
		return "", err
	}
	owned, err := encodeOwned(res, s.env.layout)
	if err != nil {
		return "", err
	}
	if validate {
		// Most of a step's resources are the ones published at the step
		// before (only the route's weights move): the checks of one
		// resource alone run only on those that changed, the checks
		// across them (references, names) on all.
		published, listenerChecked := s.snap.Load().published(t.Rollout, res, owned)
		if err := validateChanged(res, published, listenerChecked); err != nil {
			return "", err
		}
	}
	var vhost []byte
	if s.env.layout == EnvoyRoutesCombined {
		if vhost, err = (proto.MarshalOptions{Deterministic: true}).Marshal(res.VirtualHost); err != nil {
			return "", fmt.Errorf("marshal virtual host of %s: %w", t.Rollout, err)
		}
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	cur := s.snap.Load()
	h := trafficHash(t)
	old := cur.rollout(t.Rollout)
	if old != nil && old.hash == h {
		return old.version, nil
	}
	ro := &rolloutState{traffic: t, hash: h, stamp: &stamp{gen: cur.gen + 1, published: time.Now()}, vhost: vhost}
	if t.Rollout.Cluster() != "" {
		ro.res = res // a part: published again when its host's routes move (views.go)
	}
	next, changed, err := cur.publish([]rolloutChange{{t.Rollout, ro, res, owned}}, s.env)
	if err != nil {
		return "", err
	}
	if !changed && old != nil {
		// Same resources (only labels such as versions differ): the
		// clients already have it.
		next.setGen(cur.gen)
		ro.gen = old.gen
		ro.pushObserved.Store(true) // nothing was pushed
	}
	ro.version = fmt.Sprintf("%d-%s", ro.gen, h)
	s.snap.Store(next)
	if changed {
		s.notify()
	}
	s.log.Debug("traffic published", "rollout", t.Rollout.String(), "version", ro.version, "changed", changed,
		"stable", t.Weights.Stable, "canary", t.Weights.Canary, "baseline", t.Weights.Baseline)
	return ro.version, nil
}

// Remove stops serving a rollout; its clusters, routes and listener are
// withdrawn from every client. Removing an unknown rollout is a no-op.
func (s *Server) Remove(key api.Key) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	cur := s.snap.Load()
	if cur.rollout(key) == nil {
		return nil
	}
	next, _, err := cur.publish([]rolloutChange{{key: key}}, s.env)
	if err != nil {
		return fmt.Errorf("remove %s: %w", key, err)
	}
	s.snap.Store(next)
	s.notify()
	return nil
}

// Version returns the current version of a rollout's traffic, if served.
func (s *Server) Version(key api.Key) (string, bool) {
	ro := s.snap.Load().rollout(key)
	if ro == nil {
		return "", false
	}
	return ro.version, true
}

// Clients is the number of connected xDS streams.
func (s *Server) Clients() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.streams)
}

// notify wakes every stream without blocking: a stream that is still busy
// already has a wake-up pending and will read the newest snapshot.
//
// Closing one channel readies every waiting stream goroutine in a single
// pass of the runtime, instead of one channel send per stream.
func (s *Server) notify() {
	next := make(chan struct{})
	old := s.published.Swap(&next)
	close(*old)
}

// publishedChan is closed at the next publish. A stream takes it before
// reading the snapshot, so a publish in between is never missed.
func (s *Server) publishedChan() <-chan struct{} { return *s.published.Load() }
