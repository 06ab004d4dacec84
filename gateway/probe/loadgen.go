package probe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/xds"
)

// Class is a tagged share of the load: Share of all requests carry
// Metadata (header name, value pairs), e.g. {"x-canary", "always"} or
// {"cookie", "beta=on"}.
type Class struct {
	Name     string
	Share    float64
	Metadata []string
}

// LoadOptions configures a LoadGen.
type LoadOptions struct {
	// XDSServer is the host:port of the xDS server the clients bootstrap
	// from. Required.
	XDSServer string
	// ChannelCreds is the bootstrap's channel_creds entry for XDSServer,
	// as JSON (default {"type":"insecure"}); e.g. TLSChannelCreds for
	// mutual TLS.
	ChannelCreds string
	// Host is the virtual host; clients dial xds:///Host. Required.
	Host string
	// Clients is the number of independent gRPC xDS clients (default 4).
	Clients int
	// Rate is the total requests per second over all clients (default 200).
	Rate float64
	// Classes are tagged shares; their shares add up to at most 1 and the
	// rest of the requests is DefaultClass.
	Classes []Class
	// Window is the span Observe reports on (default 5s).
	Window time.Duration
	// Timeout bounds one call, including the wait for a route (default 5s).
	Timeout time.Duration
	// MaxInFlight bounds concurrent calls; a due call beyond it is counted
	// as missed instead of queued, so a stuck backend cannot pile up
	// goroutines (default 512).
	MaxInFlight int
	// NodePrefix names the clients' xDS nodes "<prefix>-<i>" (default "probe").
	NodePrefix string
	// ReconnectBackoff, when set, is the clients' first backoff after a
	// failed connection to a backend (gRPC's default is 1 s, growing to
	// 120 s). A measurement of when clients switch versions can set it
	// short, so that a backend dialed a moment before it listened costs
	// that much instead of a second.
	ReconnectBackoff time.Duration
	// OnCall, when set, is called once for every finished call (calls cut
	// short by the end of Run are not observations and are left out), on
	// the call's goroutine: it must be safe for concurrent use. Observe
	// sees a sliding window; OnCall lets a caller keep every call.
	OnCall func(Answer)
	Logger *slog.Logger
}

// Answer is one finished call as the load generator saw it.
type Answer struct {
	Class string
	// Version is the version that answered; "" when no backend named
	// itself (no route, no endpoint, deadline).
	Version string
	Err     error // nil when the call succeeded
	Started time.Time
	Ended   time.Time
}

// LoadGen sends a steady request rate through real gRPC xDS clients and
// observes which version answers.
//
// Lifecycle: NewLoadGen, then Run once (it blocks until its context ends).
// Observe, FirstSeen and WaitFirst may be called at any time.
type LoadGen struct {
	opts LoadOptions
	log  *slog.Logger

	counts *window[obsKey]
	sent   atomic.Int64
	missed atomic.Int64

	mu      sync.Mutex
	first   map[string]time.Time
	firstCh chan struct{} // closed and replaced when first gains a version
}

// NewLoadGen validates opts. No connection is made before Run.
func NewLoadGen(opts LoadOptions) (*LoadGen, error) {
	if opts.XDSServer == "" {
		return nil, errors.New("xds server address is empty")
	}
	if opts.Host == "" {
		return nil, errors.New("host is empty")
	}
	if opts.Clients <= 0 {
		opts.Clients = 4
	}
	if opts.Rate <= 0 {
		opts.Rate = 200
	}
	if opts.Window <= 0 {
		opts.Window = 5 * time.Second
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = 512
	}
	if opts.NodePrefix == "" {
		opts.NodePrefix = "probe"
	}
	if opts.ChannelCreds == "" {
		opts.ChannelCreds = insecureCreds
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	total := 0.0
	for _, c := range opts.Classes {
		if c.Name == "" || c.Name == DefaultClass {
			return nil, fmt.Errorf("class name %q is reserved", c.Name)
		}
		if c.Share < 0 || math.IsNaN(c.Share) || len(c.Metadata)%2 != 0 {
			return nil, fmt.Errorf("class %s: share must be >= 0 and metadata name/value pairs", c.Name)
		}
		total += c.Share
	}
	if total > 1+1e-9 {
		return nil, fmt.Errorf("class shares add up to %v, more than 1", total)
	}
	return &LoadGen{
		opts:    opts,
		log:     opts.Logger,
		counts:  newWindow[obsKey](opts.Window),
		first:   map[string]time.Time{},
		firstCh: make(chan struct{}),
	}, nil
}

// insecureCreds are plaintext channel credentials to the xDS server.
const insecureCreds = `{"type": "insecure"}`

// BootstrapIn is the gRPC xDS bootstrap JSON of one client node that
// says it runs in cluster (its locality's sub_zone, which picks the
// cluster's routes of a rollout across clusters) of region, in plaintext
// to the xDS server.
func BootstrapIn(xdsServer, node, region, cluster string) []byte {
	return fmt.Appendf(nil, `{
  "xds_servers": [{"server_uri": %q, "channel_creds": [%s], "server_features": ["xds_v3"]}],
  "node": {"id": %q, "locality": {"region": %q, "zone": "probe", "sub_zone": %q}}
}`, xdsServer, insecureCreds, node, region, cluster)
}

// Bootstrap is the gRPC xDS bootstrap JSON of one client node, in
// plaintext to the xDS server.
func Bootstrap(xdsServer, node string) []byte {
	return BootstrapWithCreds(xdsServer, node, insecureCreds)
}

// BootstrapWithCreds is the gRPC xDS bootstrap JSON of one client node
// reaching the xDS server with the given channel_creds entry (JSON).
func BootstrapWithCreds(xdsServer, node, creds string) []byte {
	return fmt.Appendf(nil, `{
  "xds_servers": [{"server_uri": %q, "channel_creds": [%s], "server_features": ["xds_v3"]}],
  "node": {"id": %q, "locality": {"zone": "probe"}}
}`, xdsServer, creds, node)
}

// TLSChannelCreds is the channel_creds entry of gRPC's "tls" credentials
// (gRFC A65): the CA that the xDS server's certificate chains to and, for
// mutual TLS, the client's certificate and key ("" to leave them out).
func TLSChannelCreds(caFile, certFile, keyFile string) string {
	if certFile == "" {
		return fmt.Sprintf(`{"type": "tls", "config": {"ca_certificate_file": %q}}`, caFile)
	}
	return fmt.Sprintf(`{"type": "tls", "config": {"ca_certificate_file": %q, "certificate_file": %q, "private_key_file": %q}}`,
		caFile, certFile, keyFile)
}

// dial opens one client with its own xDS resolver and xDS client, so each
// is a separate xDS node as separate processes would be.
func (l *LoadGen) dial(i int) (*grpc.ClientConn, error) {
	node := fmt.Sprintf("%s-%d", l.opts.NodePrefix, i)
	rb, err := xds.NewXDSResolverWithConfigForTesting(BootstrapWithCreds(l.opts.XDSServer, node, l.opts.ChannelCreds))
	if err != nil {
		return nil, fmt.Errorf("xds resolver for %s: %w", node, err)
	}
	opts := []grpc.DialOption{grpc.WithResolvers(rb), grpc.WithTransportCredentials(insecure.NewCredentials())}
	if d := l.opts.ReconnectBackoff; d > 0 {
		bo := backoff.DefaultConfig
		bo.BaseDelay = d
		opts = append(opts, grpc.WithConnectParams(grpc.ConnectParams{Backoff: bo, MinConnectTimeout: 20 * time.Second}))
	}
	cc, err := grpc.NewClient("xds:///"+l.opts.Host, opts...)
	if err != nil {
		return nil, fmt.Errorf("dial xds:///%s as %s: %w", l.opts.Host, node, err)
	}
	return cc, nil
}

// Run dials the clients and sends load until ctx ends, then waits for the
// calls in flight and closes the clients.
func (l *LoadGen) Run(ctx context.Context) error {
	conns := make([]*grpc.ClientConn, 0, l.opts.Clients)
	defer func() {
		for _, cc := range conns {
			cc.Close()
		}
	}()
	for i := range l.opts.Clients {
		cc, err := l.dial(i)
		if err != nil {
			return err
		}
		conns = append(conns, cc)
		cc.Connect() // start xDS resolution now, not on the first call
	}
	l.log.Info("load generator running", "host", l.opts.Host, "clients", len(conns), "rate", l.opts.Rate)

	var wg sync.WaitGroup
	defer wg.Wait()
	sem := make(chan struct{}, l.opts.MaxInFlight)
	acc := make([]float64, len(l.opts.Classes)) // Bresenham-style spreading; see pick
	start := time.Now()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var n int64
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-tick.C:
			due := int64(now.Sub(start).Seconds() * l.opts.Rate)
			for ; n < due; n++ {
				cls := l.pick(acc)
				select {
				case sem <- struct{}{}:
				default:
					l.missed.Add(1)
					continue
				}
				l.sent.Add(1)
				wg.Add(1)
				go func(cc *grpc.ClientConn) {
					defer func() { <-sem; wg.Done() }()
					l.call(ctx, cc, cls)
				}(conns[n%int64(len(conns))])
			}
		}
	}
}

// pick chooses the class of the next request so that each class gets its
// share evenly spread over time rather than in random clumps.
func (l *LoadGen) pick(acc []float64) *Class {
	best := -1
	for i, c := range l.opts.Classes {
		acc[i] += c.Share
		if acc[i] >= 1-1e-9 && (best < 0 || acc[i] > acc[best]) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	acc[best]--
	return &l.opts.Classes[best]
}

func (l *LoadGen) call(ctx context.Context, cc *grpc.ClientConn, cls *Class) {
	ctx, cancel := context.WithTimeout(ctx, l.opts.Timeout)
	defer cancel()
	name, md := DefaultClass, []string(nil)
	if cls != nil {
		name, md = cls.Name, cls.Metadata
	}
	started := time.Now()
	version, err := Call(ctx, cc, md...)
	if err != nil && ctx.Err() != nil && errors.Is(context.Cause(ctx), context.Canceled) {
		return // shutting down: not an observation
	}
	now := time.Now()
	l.counts.addStarted(started, now, obsKey{class: name, version: version, ok: err == nil})
	if version != "" {
		l.seen(version, now)
	}
	if l.opts.OnCall != nil {
		l.opts.OnCall(Answer{Class: name, Version: version, Err: err, Started: started, Ended: now})
	}
}

func (l *LoadGen) seen(version string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.first[version]; ok {
		return
	}
	l.first[version] = at
	close(l.firstCh)
	l.firstCh = make(chan struct{})
}

// Observe returns the answers of the last window, by class and version.
func (l *LoadGen) Observe() Observation {
	now := time.Now()
	return Observation{
		At:     now,
		Window: l.opts.Window,
		Rate:   l.opts.Rate,
		Sent:   l.sent.Load(),
		Missed: l.missed.Load(),
		Class:  splitsOf(l.counts.sum(now)),
	}
}

// ResetWindow forgets the window's counts (not FirstSeen), so the next
// Observe shows only calls started after it: a call in flight across a
// change was routed before it and says nothing about the new routes.
func (l *LoadGen) ResetWindow() { l.counts.reset(time.Now()) }

// FirstSeen reports when version first answered a call.
func (l *LoadGen) FirstSeen(version string) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.first[version]
	return t, ok
}

// WaitFirst blocks until version has answered a call, or ctx ends.
func (l *LoadGen) WaitFirst(ctx context.Context, version string) (time.Time, error) {
	for {
		l.mu.Lock()
		t, ok := l.first[version]
		ch := l.firstCh
		l.mu.Unlock()
		if ok {
			return t, nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("wait for first answer from %s: %w", version, ctx.Err())
		case <-ch:
		}
	}
}
