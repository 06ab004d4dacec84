package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/gateway"
	"github.com/sluice-dev/sluice/gateway/gatewayapi"
	"github.com/sluice-dev/sluice/gateway/istio"
	"github.com/sluice-dev/sluice/gateway/kubeservice"
)

// The cluster routers of multi-cluster rollouts: every cluster has its own
// set (clusterRouters), built on its own clients, because the HTTPRoute or
// VirtualService a Rollout names is the user's object in each cluster it
// runs in. partRouter sends a part's traffic ("ns/web@eu-2") to the router
// of its cluster under the rollout's own key ("ns/web"), as
// clusterWorkloads does for its workload actions: the objects and the
// names sluice derives from the key (Istio's ledger entry and sticky
// routes) are then those of a single-cluster rollout.

// clusterRouters are one cluster's routers, in the order a write goes
// through them: the Services first (a blue-green route's weight flip must
// find the active Service on the version it sends the traffic to; on an
// abort, back on the old one before the route leaves the preview
// Service), then the routes.
type clusterRouters struct {
	services *kubeservice.Router
	gateway  *gatewayapi.Router
	mesh     *istio.Router
}

// newClusterRouters builds the routers of the cluster cfg reaches.
// istiodXDS is that cluster's istiod ("" when Verify relies on istiod's
// status only).
func newClusterRouters(cfg *rest.Config, client kubernetes.Interface, istiodXDS string, log *slog.Logger) (*clusterRouters, error) {
	gw, err := gwclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("gateway api client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	c := &clusterRouters{services: kubeservice.New(client, log)}
	if c.gateway, err = gatewayapi.New(gatewayapi.Options{Client: gw, Events: client, Logger: log}); err != nil {
		return nil, err
	}
	// The router logs each drift and records a SluiceReapplied Event on
	// the object, as the Gateway API router does.
	if c.mesh, err = istio.New(istio.RouterOptions{Client: dyn, Events: client, Logger: log, IstiodXDS: istiodXDS}); err != nil {
		return nil, err
	}
	return c, nil
}

// run re-applies, in every router, routes someone else changed until ctx
// ends.
func (c *clusterRouters) run(ctx context.Context) error {
	mesh := make(chan error, 1)
	go func() { mesh <- c.mesh.Run(ctx) }()
	return errors.Join(c.gateway.Run(ctx), <-mesh)
}

// partRouters are the routers routedTraffic drives, each a partRouter
// over every cluster's router of that kind.
func (k *kubeParts) partRouters() []gateway.ClusterRouter {
	var out []gateway.ClusterRouter
	for i, r := range k.routers.list() {
		out = append(out, partRouter{k: k, name: r.Name(), pick: func(c *clusterRouters) gateway.ClusterRouter { return c.list()[i] }})
	}
	return out
}

// partRouter is one kind of router across the clusters: a rollout's own
// key goes to the home cluster's, a part's to its cluster's, under the
// rollout's own key; no other cluster is touched. A part of a cluster not
// connected yet (sluice just started) is written once it connects
// (awaitedRoutes): its Verify waits for that write.
type partRouter struct {
	k    *kubeParts
	name string
	pick func(*clusterRouters) gateway.ClusterRouter
}

var _ gateway.ClusterRouter = partRouter{}

// target is the key's own key and the remote cluster it runs in (nil for
// the home cluster's).
func (p partRouter) target(key api.Key) (*remoteCluster, api.Key, error) {
	cluster := key.Cluster()
	if cluster == "" {
		return nil, key, nil
	}
	if cluster == p.k.homeName {
		return nil, key.Parent(), nil
	}
	r, ok := p.k.remotes[cluster]
	if !ok {
		return nil, key, fmt.Errorf("rollout %s: cluster %q is not one sluice runs rollouts in (--cluster)", key, cluster)
	}
	return r, key.Parent(), nil
}

func (p partRouter) Name() string { return p.name }

// Apply writes t in its cluster, or keeps it for the cluster's connection
// (pendingToken).
func (p partRouter) Apply(ctx context.Context, t api.Traffic) (string, error) {
	rc, own, err := p.target(t.Rollout)
	if err != nil {
		return "", err
	}
	t.Rollout = own
	routers := p.k.routers
	if rc != nil {
		if routers = rc.routes.routersOrHold(t); routers == nil {
			return pendingToken, nil
		}
	}
	return p.pick(routers).Apply(ctx, t)
}

func (p partRouter) Verify(ctx context.Context, key api.Key, token string) (gateway.Verification, error) {
	rc, own, err := p.target(key)
	if err != nil {
		return gateway.Verification{}, err
	}
	if rc == nil {
		return p.pick(p.k.routers).Verify(ctx, own, token)
	}
	if token == pendingToken {
		if token, err = rc.routes.flushed(ctx, p.name, own); err != nil {
			return gateway.Verification{}, fmt.Errorf("rollout %s: written once cluster %s connected: %w", key, rc.name, err)
		}
	}
	routers := rc.routes.connected()
	if routers == nil {
		return gateway.Verification{}, fmt.Errorf("rollout %s: %s", key, rc.notConnected())
	}
	return p.pick(routers).Verify(ctx, own, token)
}

func (p partRouter) Release(ctx context.Context, key api.Key, cr *api.ClusterRouting) error {
	rc, own, err := p.target(key)
	if err != nil {
		return err
	}
	routers := p.k.routers
	if rc != nil {
		if routers = rc.routes.connected(); routers == nil {
			return fmt.Errorf("rollout %s: %s", key, rc.notConnected())
		}
	}
	return p.pick(routers).Release(ctx, own, cr)
}

// pendingToken is Apply's token for traffic kept until its cluster
// connects.
const pendingToken = "pending: cluster not connected"

// awaitedRoutes are a remote cluster's routers once it is connected, and
// until then the latest traffic of each of its parts. The runner pushes
// the traffic of every part it restores as soon as it starts, before the
// other clusters are connected: failing those writes would hold the
// parts on a NACK nothing retries, so they are written, and verified, at
// the connection instead.
type awaitedRoutes struct {
	mu      sync.Mutex
	routers *clusterRouters
	ready   chan struct{} // closed once routers is set
	pending map[api.Key]api.Traffic
	// written is each held write's result at the connection, by router
	// and rollout, for Verify.
	written map[string]map[api.Key]heldWrite
}

type heldWrite struct {
	token string
	err   error
}

func (a *awaitedRoutes) init() {
	if a.ready == nil {
		a.ready = make(chan struct{})
		a.pending = map[api.Key]api.Traffic{}
		a.written = map[string]map[api.Key]heldWrite{}
	}
}

// routersOrHold returns the routers, or nil after keeping t for the
// connection.
func (a *awaitedRoutes) routersOrHold(t api.Traffic) *clusterRouters {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.init()
	if a.routers == nil {
		a.pending[t.Rollout] = t
	}
	return a.routers
}

func (a *awaitedRoutes) connected() *clusterRouters {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.routers
}

// connect writes the traffic held for the cluster with its routers, then
// lets every later write through. It holds the lock while it writes, so
// that no newer write of a part can be overtaken by its held one.
func (a *awaitedRoutes) connect(c *clusterRouters, timeout time.Duration, log *slog.Logger) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.init()
	if a.routers != nil {
		return // connected once already
	}
	for key, t := range a.pending {
		for _, r := range c.list() {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			tok, err := r.Apply(ctx, t)
			cancel()
			if err != nil {
				log.Warn("write routes held until the cluster connected", "rollout", key.String(), "router", r.Name(), "err", err)
			}
			if a.written[r.Name()] == nil {
				a.written[r.Name()] = map[api.Key]heldWrite{}
			}
			a.written[r.Name()][key] = heldWrite{token: tok, err: err}
		}
	}
	a.pending = nil
	a.routers = c
	close(a.ready)
}

// flushed waits for the connection and returns the token of the held
// write of key by router.
func (a *awaitedRoutes) flushed(ctx context.Context, router string, key api.Key) (string, error) {
	a.mu.Lock()
	a.init()
	ready := a.ready
	a.mu.Unlock()
	select {
	case <-ctx.Done():
		return "", ctx.Err()
	case <-ready:
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	w := a.written[router][key]
	return w.token, w.err
}

// list is the cluster's routers in the order a write goes through them.
func (c *clusterRouters) list() []gateway.ClusterRouter {
	return []gateway.ClusterRouter{c.services, c.gateway, c.mesh}
}

// startRouters builds the remote cluster's routers, writes the traffic
// held for it and runs their drift checks until ctx ends. Istio weights
// there are verified by istiod's status only: the --istio-xds observer is
// the home cluster's istiod.
func (r *remoteCluster) startRouters(ctx context.Context, client kubernetes.Interface, applyTimeout time.Duration, log *slog.Logger) error {
	c, err := newClusterRouters(r.config, client, "", log)
	if err != nil {
		return err
	}
	r.routes.connect(c, applyTimeout, log)
	go func() {
		if err := c.run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			log.Error("cluster routers stopped", "err", err)
		}
	}()
	return nil
}
