package api

import (
	"strings"
	"testing"
)

const blueGreenKube = `apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: bg
  namespace: shop
  annotations:
    sluice.io/traffic-routing: |
%s
spec:
  replicas: 3
  selector: {matchLabels: {app: bg}}
  template:
    metadata: {labels: {app: bg}}
    spec:
      containers: [{name: app, image: "shop/bg:2"}]
  strategy:
    blueGreen:
      activeService: bg
      previewService: bg-preview
      scaleDownDelayRevisionLimit: 0
`

func blueGreenWithRouting(routing string) string {
	var b strings.Builder
	for _, l := range strings.Split(routing, "\n") {
		b.WriteString("      " + l + "\n")
	}
	return strings.Replace(blueGreenKube, "%s\n", b.String(), 1)
}

// TestBlueGreenKubernetes: in Kubernetes mode a blue-green rollout gets
// its Services as the service router's and, from the annotation, a Gateway
// API route whose stable and canary Services are activeService and
// previewService; scaleDownDelayRevisionLimit 0 keeps no old version.
func TestBlueGreenKubernetes(t *testing.T) {
	set := loadKube(t, blueGreenWithRouting("plugins:\n  argoproj-labs/gatewayAPI:\n    grpcRoute: bg-route"))
	if set.Diagnostics.HasErrors() {
		t.Fatalf("errors:\n%s", diagnosticText(set.Diagnostics.Errors()))
	}
	r := set.Rollouts[0]
	if !r.IsBlueGreen() || r.Routing == nil {
		t.Fatalf("strategy %q, routing %+v", r.Strategy, r.Routing)
	}
	rt := r.Routing
	if rt.ActiveService != "bg" || rt.PreviewService != "bg-preview" || rt.StableService != "bg" || rt.CanaryService != "bg-preview" {
		t.Errorf("services: %+v", rt)
	}
	if rt.GatewayAPI == nil || len(rt.GatewayAPI.GRPCRoutes) != 1 || rt.GatewayAPI.GRPCRoutes[0].Name != "bg-route" || rt.GatewayAPI.Namespace != "shop" {
		t.Errorf("gateway API routing: %+v", rt.GatewayAPI)
	}
	if r.Workload.ScaleDownDelay != 0 || r.Workload.StableService != "" || r.Workload.CanaryService != "" {
		t.Errorf("workload: delay %v, pinned services %q/%q; want 0 and none (the service router switches them)", r.Workload.ScaleDownDelay, r.Workload.StableService, r.Workload.CanaryService)
	}
	var phases []string
	for _, s := range r.Steps {
		phases = append(phases, s.Phase)
	}
	if got := strings.Join(phases, ","); got != "preview,switch" {
		t.Errorf("phases %s; want preview,switch (automatic promotion, no analysis)", got)
	}
}

// TestBlueGreenRoutingErrors: what the routing annotation may not hold is
// an error naming the annotation's field and line.
func TestBlueGreenRoutingErrors(t *testing.T) {
	for name, tc := range map[string]struct{ routing, want string }{
		"xds inside":    {"plugins:\n  sluice.io/xds: {host: a.b}", "r.yaml:7: metadata.annotations[sluice.io/traffic-routing].plugins[sluice.io/xds]: a blue-green rollout's xDS hosts go in the sluice.io/xds annotation"},
		"nginx":         {"nginx: {stableIngress: x}", "metadata.annotations[sluice.io/traffic-routing]: a blue-green rollout switches through plugins[argoproj-labs/gatewayAPI] or istio only"},
		"unknown field": {"plugin: {}", `metadata.annotations[sluice.io/traffic-routing]: cannot read the annotation as a trafficRouting block`},
		"no route":      {"plugins:\n  argoproj-labs/gatewayAPI: {}", "metadata.annotations[sluice.io/traffic-routing].plugins[argoproj-labs/gatewayAPI]: required: at least one of httpRoute"},
	} {
		t.Run(name, func(t *testing.T) {
			errs := loadKube(t, blueGreenWithRouting(tc.routing)).Diagnostics.Errors()
			if len(errs) != 1 || !strings.Contains(errs[0].String(), tc.want) {
				t.Errorf("want one error containing %q, got:\n%s", tc.want, diagnosticText(errs))
			}
		})
	}
}

// TestBlueGreenHostConflicts: a blue-green rollout's preview host is a
// host like any other: naming another rollout's host is a conflict at the
// annotation.
func TestBlueGreenHostConflicts(t *testing.T) {
	set := Load([]Source{{Name: "a.yaml", Data: []byte(`apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: bg
  annotations:
    sluice.io/xds: |
      host: bg.shop
      previewHost: web.shop
      endpoints: {"shop/bg:1": ["10.0.0.1:80"]}
spec:
  template: {spec: {containers: [{name: app, image: "shop/bg:1"}]}}
  strategy: {blueGreen: {activeService: bg}}
---
apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata: {name: web}
spec:
  template: {spec: {containers: [{name: app, image: "shop/web:1"}]}}
  strategy:
    canary:
      trafficRouting:
        plugins:
          sluice.io/xds: {host: web.shop, endpoints: {"shop/web:1": ["10.0.0.2:80"]}}
`)}})
	if len(set.HostConflicts) != 1 || set.HostConflicts[0].Host != "web.shop" {
		t.Fatalf("conflicts %+v; want web.shop claimed twice", set.HostConflicts)
	}
	fields := map[string]bool{}
	for _, d := range set.HostDiagnostics() {
		fields[d.Field] = true
	}
	if !fields["metadata.annotations[sluice.io/xds].previewHost"] || !fields[HostField] {
		t.Errorf("diagnostic fields %v; want the preview host's and the canary's host field", fields)
	}
}
