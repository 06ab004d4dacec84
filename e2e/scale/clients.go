package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/xds"

	"github.com/sluice-dev/sluice/gateway/probe"
)

// grpcClients are real proxyless gRPC clients, one ClientConn per host,
// all built from one xDS resolver builder (one bootstrap, one node id).
// Each ClientConn's resolver is watched: every state it hands to its
// channel (new routes, clusters or endpoints) is timestamped, which is when
// that client has applied a new configuration.
type grpcClients struct {
	conns map[string]*grpc.ClientConn

	mu      sync.Mutex
	updates map[string][]time.Time // host → resolver updates, in order
	changed chan struct{}          // closed and replaced on every update
}

func dialClients(xdsAddr string, hosts []string) (*grpcClients, error) {
	inner, err := xds.NewXDSResolverWithConfigForTesting(probe.Bootstrap(xdsAddr, "scale-grpc"))
	if err != nil {
		return nil, fmt.Errorf("xds resolver: %w", err)
	}
	c := &grpcClients{conns: map[string]*grpc.ClientConn{}, updates: map[string][]time.Time{}, changed: make(chan struct{})}
	rb := watchedBuilder{Builder: inner, seen: c.seen}
	for _, h := range hosts {
		cc, err := grpc.NewClient("xds:///"+h, grpc.WithResolvers(rb), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			c.close()
			return nil, fmt.Errorf("dial xds:///%s: %w", h, err)
		}
		cc.Connect() // resolve now, not on the first call
		c.conns[h] = cc
	}
	return c, nil
}

func (c *grpcClients) seen(host string, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.updates[host] = append(c.updates[host], at)
	close(c.changed)
	c.changed = make(chan struct{})
}

// waitResolved waits until every client's resolver has produced a state.
func (c *grpcClients) waitResolved(ctx context.Context) error {
	for {
		c.mu.Lock()
		n, ch := len(c.updates), c.changed
		c.mu.Unlock()
		if n == len(c.conns) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d gRPC clients resolved: %w", n, len(c.conns), ctx.Err())
		case <-ch:
		}
	}
}

// lastUpdateBy is the host's last resolver update in (after, by], or false.
func (c *grpcClients) lastUpdateBy(host string, after, by time.Time) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var last time.Time
	for _, t := range c.updates[host] {
		if t.After(after) && !t.After(by) {
			last = t
		}
	}
	return last, !last.IsZero()
}

// answers calls host until version answers or ctx ends, and says whether
// it did: the client routes real calls by the routes it was given.
func (c *grpcClients) answers(ctx context.Context, host, version string) bool {
	cc := c.conns[host]
	for ctx.Err() == nil {
		call, cancel := context.WithTimeout(ctx, 5*time.Second)
		got, err := probe.Call(call, cc)
		cancel()
		if err == nil && got == version {
			return true
		}
	}
	return false
}

func (c *grpcClients) close() {
	for _, cc := range c.conns {
		cc.Close()
	}
}

// watchedBuilder wraps the xDS resolver builder to see each state its
// resolvers publish.
type watchedBuilder struct {
	resolver.Builder
	seen func(host string, at time.Time)
}

func (b watchedBuilder) Build(t resolver.Target, cc resolver.ClientConn, o resolver.BuildOptions) (resolver.Resolver, error) {
	return b.Builder.Build(t, &watchedConn{ClientConn: cc, host: t.Endpoint(), seen: b.seen}, o)
}

type watchedConn struct {
	resolver.ClientConn
	host string
	seen func(host string, at time.Time)
}

func (w *watchedConn) UpdateState(s resolver.State) error {
	w.seen(w.host, time.Now())
	return w.ClientConn.UpdateState(s)
}
