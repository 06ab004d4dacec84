package api

import (
	"encoding/json"
	"net"
	"strconv"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// xdsConfigDoc is the sluice.io/xds plugin block as written in YAML.
type xdsConfigDoc struct {
	Host            string              `json:"host"`
	Endpoints       map[string][]string `json:"endpoints"`
	SessionAffinity *struct {
		CookieName string `json:"cookieName"`
		MaxAge     int64  `json:"maxAge"`
		// PinStable is read raw so that a non-boolean is a field error
		// with its line, not a failure of the whole plugin block.
		PinStable json.RawMessage `json:"pinStable"`
	} `json:"sessionAffinity"`
	MaxUnapprovedWeightJump *int32 `json:"maxUnapprovedWeightJump"`
	// PreviewHost is for blue-green rollouts only (see bluegreen.go).
	PreviewHost string `json:"previewHost"`
}

// trafficRouting reads managedRoutes, the sluice.io/xds plugin and (in
// Kubernetes mode) the cluster routers, and warns about routers sluice
// does not drive.
func (c *checker) trafficRouting(r *Rollout, canary *v1alpha1.CanaryStrategy) {
	tr := canary.TrafficRouting
	if tr == nil {
		c.warnf(canaryPath, "no trafficRouting: sluice tracks this rollout but cannot shift its traffic (add trafficRouting.plugins[%s])", XDSPluginName)
		return
	}
	for i, m := range tr.ManagedRoutes {
		if m.Name == "" {
			c.errorf(indexPath(routingPath+".managedRoutes", i)+".name", "required")
		}
		r.ManagedRoutes = append(r.ManagedRoutes, m.Name)
	}
	for _, ignored := range []struct {
		name string
		set  bool
	}{
		{"nginx", tr.Nginx != nil}, {"alb", tr.ALB != nil}, {"smi", tr.SMI != nil},
		{"ambassador", tr.Ambassador != nil}, {"appMesh", tr.AppMesh != nil}, {"traefik", tr.Traefik != nil}, {"apisix", tr.Apisix != nil},
	} {
		if ignored.set {
			c.warnf(routingPath+"."+ignored.name, "%s traffic routing is not implemented by sluice and is ignored; sluice routes through trafficRouting.plugins[%s]", ignored.name, XDSPluginName)
		}
	}
	for name := range tr.Plugins {
		if name != XDSPluginName && name != GatewayAPIPluginName {
			c.warnf(routingPath+".plugins["+name+"]", "traffic router plugin %q is not implemented by sluice and is ignored", name)
		}
	}
	c.clusterRouting(r, canary)
	raw, ok := tr.Plugins[XDSPluginName]
	if !ok && r.Routing != nil {
		return
	}
	if !ok {
		c.warnf(routingPath, "no plugins[%s]: sluice tracks this rollout but cannot shift its traffic", XDSPluginName)
		return
	}
	var doc xdsConfigDoc
	if err := json.Unmarshal(raw, &doc); err != nil {
		c.errorf(xdsPath, "cannot read plugin config: %v", err)
		return
	}
	if doc.PreviewHost != "" {
		c.errorf(xdsPath+".previewHost", "only for blue-green rollouts (spec.strategy.blueGreen): a canary's one host carries both versions by weight")
	}
	r.XDS = c.xdsConfig(xdsPath, doc, r.Version)
}

// xdsConfig checks and converts a sluice.io/xds block found at path.
func (c *checker) xdsConfig(path string, doc xdsConfigDoc, version string) *XDSConfig {
	cfg := &XDSConfig{Host: doc.Host, Endpoints: doc.Endpoints}
	if doc.Host == "" {
		c.errorf(path+".host", "required: the virtual host and gRPC target (xds:///<host>)")
	} else {
		checkHostName(c, path+".host", doc.Host)
	}
	if c.mode == ModeKubernetes {
		if len(doc.Endpoints) > 0 {
			c.errorf(path+".endpoints", "not allowed in Kubernetes mode: each version's endpoints come from the cluster (its Ready pods, or the EndpointSlices of canaryService/stableService)")
		}
		return c.xdsOptions(path, cfg, doc)
	}
	for v, addrs := range doc.Endpoints {
		p := childPath(path+".endpoints", v)
		if len(addrs) == 0 {
			c.errorf(p, "at least one address is required")
		}
		for i, a := range addrs {
			if err := checkAddress(a); err != "" {
				c.errorf(indexPath(p, i), "%q is not a host:port address: %s", a, err)
			}
		}
	}
	if version != "" {
		if _, ok := doc.Endpoints[version]; !ok {
			c.errorf(path+".endpoints", "no endpoints for the current version %q", version)
		}
	}
	return c.xdsOptions(path, cfg, doc)
}

// xdsOptions checks and converts the plugin fields both modes share.
func (c *checker) xdsOptions(path string, cfg *XDSConfig, doc xdsConfigDoc) *XDSConfig {
	if sa := doc.SessionAffinity; sa != nil {
		p := path + ".sessionAffinity"
		if !cookieName.MatchString(sa.CookieName) {
			c.errorf(p+".cookieName", "required: a valid cookie name, got %q", sa.CookieName)
		}
		if sa.MaxAge < 0 {
			c.errorf(p+".maxAge", "must not be negative, got %d", sa.MaxAge)
		}
		cfg.SessionAffinity = &SessionAffinity{CookieName: sa.CookieName, MaxAge: sa.MaxAge}
		if len(sa.PinStable) > 0 {
			if err := json.Unmarshal(sa.PinStable, &cfg.SessionAffinity.PinStable); err != nil {
				c.errorf(p+".pinStable", "must be true or false, got %s", sa.PinStable)
			}
		}
	}
	if j := doc.MaxUnapprovedWeightJump; j != nil {
		if *j < 1 || *j > 100 {
			c.errorf(path+".maxUnapprovedWeightJump", "must be between 1 and 100, got %d", *j)
		}
		cfg.MaxUnapprovedWeightJump = *j
	}
	return cfg
}

// checkHostName reports a host that is not a DNS name.
func checkHostName(c *checker, path, host string) {
	if errs := validation.IsDNS1123Subdomain(host); len(errs) > 0 {
		c.errorf(path, "%q is not a valid DNS name (lowercase letters, digits, '-' and '.', starting and ending with a letter or digit)", host)
	}
}

// checkAddress returns why a is not a usable host:port, or "".
func checkAddress(a string) string {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return err.Error()
	}
	if host == "" {
		return "missing host"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "port must be between 1 and 65535"
	}
	return ""
}
