package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

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
// through them: the Services first (a blue-green flip must find the
// active Service on the version it sends traffic to), then the routes.
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
	return []gateway.ClusterRouter{
		partRouter{k: k, name: k.routers.services.Name(), pick: func(c *clusterRouters) gateway.ClusterRouter { return c.services }},
		partRouter{k: k, name: k.routers.gateway.Name(), pick: func(c *clusterRouters) gateway.ClusterRouter { return c.gateway }},
		partRouter{k: k, name: k.routers.mesh.Name(), pick: func(c *clusterRouters) gateway.ClusterRouter { return c.mesh }},
	}
}

// partRouter is one kind of router across the clusters: a rollout's own
// key goes to the home cluster's, a part's to its cluster's, under the
// rollout's own key. A cluster not connected yet fails the write (its
// part holds and the runner retries); no other cluster is touched.
type partRouter struct {
	k    *kubeParts
	name string
	pick func(*clusterRouters) gateway.ClusterRouter
}

var _ gateway.ClusterRouter = partRouter{}

// route is the router and key for key's cluster.
func (p partRouter) route(key api.Key) (gateway.ClusterRouter, api.Key, error) {
	cluster := key.Cluster()
	if cluster == "" {
		return p.pick(p.k.routers), key, nil
	}
	if cluster == p.k.homeName {
		return p.pick(p.k.routers), key.Parent(), nil
	}
	r, ok := p.k.remotes[cluster]
	if !ok {
		return nil, key, fmt.Errorf("rollout %s: cluster %q is not one sluice runs rollouts in (--cluster)", key, cluster)
	}
	c := r.routers.Load()
	if c == nil {
		return nil, key, fmt.Errorf("rollout %s: %s", key, r.notConnected())
	}
	return p.pick(c), key.Parent(), nil
}

func (p partRouter) Name() string { return p.name }

func (p partRouter) Apply(ctx context.Context, t api.Traffic) (string, error) {
	r, key, err := p.route(t.Rollout)
	if err != nil {
		return "", err
	}
	t.Rollout = key
	return r.Apply(ctx, t)
}

func (p partRouter) Verify(ctx context.Context, key api.Key, token string) (gateway.Verification, error) {
	r, own, err := p.route(key)
	if err != nil {
		return gateway.Verification{}, err
	}
	return r.Verify(ctx, own, token)
}

func (p partRouter) Release(ctx context.Context, key api.Key, cr *api.ClusterRouting) error {
	r, own, err := p.route(key)
	if err != nil {
		return err
	}
	return r.Release(ctx, own, cr)
}

// startRouters builds the remote cluster's routers and runs their drift
// checks until ctx ends. Istio weights there are verified by istiod's
// status only: the --istio-xds observer is the home cluster's istiod.
func (r *remoteCluster) startRouters(ctx context.Context, client kubernetes.Interface, log *slog.Logger) error {
	c, err := newClusterRouters(r.config, client, "", log)
	if err != nil {
		return err
	}
	go func() {
		if err := c.run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			log.Error("cluster routers stopped", "err", err)
		}
	}()
	r.routers.Store(c)
	return nil
}
