package api

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// gatewayAPIPath and istioPath are the field paths of the routers'
// blocks: in the canary's trafficRouting, or in a blue-green rollout's
// sluice.io/traffic-routing annotation (c.routingBase).
func (c *checker) gatewayAPIPath() string {
	return c.routingPath() + ".plugins[" + GatewayAPIPluginName + "]"
}

func (c *checker) istioPath() string { return c.routingPath() + ".istio" }

// routingPath is where the rollout's trafficRouting block is.
func (c *checker) routingPath() string {
	if c.routingBase != "" {
		return c.routingBase
	}
	return routingPath
}

// gatewayAPIConfigDoc is the Argo Rollouts Gateway API plugin's
// configuration (rollouts-plugin-trafficrouter-gatewayapi, GatewayAPITrafficRouting):
// a single route or a list of each kind. TCP routes, the configMap of
// managed header routes and the plugin's other fields are not read.
type gatewayAPIConfigDoc struct {
	HTTPRoute  string            `json:"httpRoute"`
	HTTPRoutes []gatewayRouteDoc `json:"httpRoutes"`
	GRPCRoute  string            `json:"grpcRoute"`
	GRPCRoutes []gatewayRouteDoc `json:"grpcRoutes"`
	TCPRoute   string            `json:"tcpRoute"`
	TCPRoutes  []gatewayRouteDoc `json:"tcpRoutes"`
	Namespace  string            `json:"namespace"`
	ConfigMap  string            `json:"configMap"`
}

type gatewayRouteDoc struct {
	Name            string `json:"name"`
	UseHeaderRoutes bool   `json:"useHeaderRoutes"`
}

// clusterRouting reads the routers the cluster runs (Gateway API routes,
// Istio virtual services) into r.Routing. Only Kubernetes mode drives
// them; standalone mode warns that they need --kubernetes.
func (c *checker) clusterRouting(r *Rollout, canary *v1alpha1.CanaryStrategy) {
	tr := canary.TrafficRouting
	raw, hasGateway := tr.Plugins[GatewayAPIPluginName]
	if !hasGateway && tr.Istio == nil {
		return
	}
	if c.mode != ModeKubernetes {
		if hasGateway {
			c.warnf(c.gatewayAPIPath(), "the Gateway API router needs --kubernetes: sluice ignores it in standalone mode")
		}
		if tr.Istio != nil {
			c.warnf(c.istioPath(), "the Istio router needs --kubernetes: sluice ignores it in standalone mode")
		}
		return
	}
	cr := &ClusterRouting{StableService: canary.StableService, CanaryService: canary.CanaryService}
	if hasGateway {
		cr.GatewayAPI = c.gatewayAPI(raw, r.Key.Namespace)
	}
	if tr.Istio != nil {
		cr.Istio = c.istio(tr.Istio, r.Key.Namespace)
	}
	r.Routing = cr
}

// gatewayAPI reads the plugin block strictly: a misspelt field would
// otherwise leave a route silently unmanaged.
func (c *checker) gatewayAPI(raw json.RawMessage, namespace string) *GatewayAPIRouting {
	var doc gatewayAPIConfigDoc
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		c.errorf(c.gatewayAPIPath(), "cannot read plugin config: %v", err)
		return nil
	}
	g := &GatewayAPIRouting{Namespace: doc.Namespace}
	if g.Namespace == "" {
		g.Namespace = namespace
	} else if errs := validation.IsDNS1123Label(g.Namespace); len(errs) > 0 {
		c.errorf(c.gatewayAPIPath()+".namespace", "%q is not a valid namespace: %s", g.Namespace, strings.Join(errs, "; "))
	}
	g.HTTPRoutes = c.gatewayRoutes(c.gatewayAPIPath()+".httpRoute", doc.HTTPRoute, c.gatewayAPIPath()+".httpRoutes", doc.HTTPRoutes)
	g.GRPCRoutes = c.gatewayRoutes(c.gatewayAPIPath()+".grpcRoute", doc.GRPCRoute, c.gatewayAPIPath()+".grpcRoutes", doc.GRPCRoutes)
	if doc.TCPRoute != "" || len(doc.TCPRoutes) > 0 {
		c.warnf(c.gatewayAPIPath()+".tcpRoutes", "TCPRoute is not implemented by sluice and is ignored")
	}
	if doc.ConfigMap != "" {
		c.warnf(c.gatewayAPIPath()+".configMap", "ignored: sluice keeps its managed rules in the route itself (rules named sluice-...)")
	}
	if len(g.HTTPRoutes) == 0 && len(g.GRPCRoutes) == 0 {
		c.errorf(c.gatewayAPIPath(), "required: at least one of httpRoute, httpRoutes, grpcRoute or grpcRoutes")
	}
	return g
}

// gatewayRoutes merges the single-route field (which the Argo plugin
// reads as a route with header routes on) with the list.
func (c *checker) gatewayRoutes(singlePath, single, listPath string, list []gatewayRouteDoc) []GatewayRouteRef {
	var out []GatewayRouteRef
	if single != "" {
		c.routeObjectName(singlePath, single)
		out = append(out, GatewayRouteRef{Name: single, UseHeaderRoutes: true})
	}
	seen := map[string]bool{single: single != ""}
	for i, d := range list {
		p := indexPath(listPath, i) + ".name"
		switch {
		case d.Name == "":
			c.errorf(p, "required")
			continue
		case seen[d.Name]:
			c.errorf(p, "route %q is listed twice", d.Name)
			continue
		}
		seen[d.Name] = true
		c.routeObjectName(p, d.Name)
		out = append(out, GatewayRouteRef(d))
	}
	return out
}

func (c *checker) routeObjectName(path, name string) {
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		c.errorf(path, "%q is not a valid object name: %s", name, strings.Join(errs, "; "))
	}
}

// istio reads trafficRouting.istio. A name may be written name.namespace,
// as Argo Rollouts allows; the rollout's namespace is the default.
func (c *checker) istio(in *v1alpha1.IstioTrafficRouting, namespace string) *IstioRouting {
	out := &IstioRouting{}
	vss := in.VirtualServices
	if in.VirtualService != nil {
		vss = append([]v1alpha1.IstioVirtualService{*in.VirtualService}, vss...)
		if len(in.VirtualServices) > 0 {
			c.errorf(c.istioPath(), "set virtualService or virtualServices, not both (Argo Rollouts rule)")
		}
	}
	for i, vs := range vss {
		p := indexPath(c.istioPath()+".virtualServices", i)
		if in.VirtualService != nil && i == 0 {
			p = c.istioPath() + ".virtualService"
		}
		if vs.Name == "" {
			c.errorf(p+".name", "required")
			continue
		}
		name, ns := splitNameNamespace(vs.Name, namespace)
		c.routeObjectName(p+".name", name)
		out.VirtualServices = append(out.VirtualServices, IstioVirtualService{Name: name, Namespace: ns, Routes: vs.Routes})
	}
	if len(out.VirtualServices) == 0 {
		c.errorf(c.istioPath(), "required: virtualService or virtualServices")
	}
	if dr := in.DestinationRule; dr != nil {
		p := c.istioPath() + ".destinationRule"
		for _, f := range []struct{ field, v string }{{"name", dr.Name}, {"canarySubsetName", dr.CanarySubsetName}, {"stableSubsetName", dr.StableSubsetName}} {
			if f.v == "" {
				c.errorf(p+"."+f.field, "required")
			}
		}
		if dr.CanarySubsetName != "" && dr.CanarySubsetName == dr.StableSubsetName {
			c.errorf(p+".canarySubsetName", "must differ from stableSubsetName, both are %q", dr.CanarySubsetName)
		}
		name, ns := splitNameNamespace(dr.Name, namespace)
		out.DestinationRule = &IstioDestinationRule{Name: name, Namespace: ns, CanarySubsetName: dr.CanarySubsetName, StableSubsetName: dr.StableSubsetName}
	}
	return out
}

// splitNameNamespace reads Argo's "name.namespace" form (istio's
// GetVirtualServiceNamespaceName): the first dot separates them.
func splitNameNamespace(s, defaultNamespace string) (name, namespace string) {
	if n, ns, ok := strings.Cut(s, "."); ok {
		return n, ns
	}
	return s, defaultNamespace
}
