package api

import (
	"time"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	sigsyaml "sigs.k8s.io/yaml"
)

// A blue-green rollout (spec.strategy.blueGreen) runs on the same state
// machine as a canary: blueGreenSteps compiles Argo's fields into a step
// program whose transitions the machine already has, and each step's
// Phase says which part of blue-green it is. The new version is the
// canary side, the version that has the traffic the stable side:
//
//	preview               setCanaryScale to previewReplicaCount (or all)
//	prePromotionAnalysis  an analysis step, against the preview
//	promotion             a pause: indefinite (autoPromotionEnabled: false)
//	                      or autoPromotionSeconds
//	switch                setWeight 100 with the full replicas: the
//	                      machine waits for every new pod to be Ready
//	                      before the one traffic change, then for its ACK
//	postPromotionAnalysis an analysis step, with the traffic on the new
//	                      version and the old one still running
//
// The step program ends in the promotion of the new version; the old one
// keeps its pods for scaleDownDelaySeconds. A failure at any step aborts:
// the traffic goes back to the old version (it still runs, as the stable
// side) and the new one is scaled down after abortScaleDownDelaySeconds.
// Keeping the old version as "stable" until the post-promotion analysis
// passed is what makes the switch back one ordinary abort.

// Phases of a blue-green step program (Step.Phase).
const (
	PhasePreview               = "preview"
	PhasePrePromotionAnalysis  = "prePromotionAnalysis"
	PhasePromotion             = "promotion"
	PhaseSwitch                = "switch"
	PhasePostPromotionAnalysis = "postPromotionAnalysis"
)

// XDSAnnotation holds a blue-green rollout's sluice.io/xds configuration
// (host, previewHost, endpoints, ...): Argo's blueGreen strategy has no
// trafficRouting to put it in.
const XDSAnnotation = "sluice.io/xds"

// RoutingAnnotation holds a blue-green rollout's cluster routers: an Argo
// trafficRouting block (YAML) with plugins["argoproj-labs/gatewayAPI"]
// and/or istio, whose stable and canary Services are activeService and
// previewService. The switch is then a weight flip on the managed route.
const RoutingAnnotation = "sluice.io/traffic-routing"

const (
	blueGreenPath         = "spec.strategy.blueGreen"
	xdsAnnotationPath     = "metadata.annotations[" + XDSAnnotation + "]"
	routingAnnotationPath = "metadata.annotations[" + RoutingAnnotation + "]"
)

// blueGreen converts a blue-green rollout: its step program, its workload
// (Kubernetes mode), its Services and its xDS hosts.
func (c *checker) blueGreen(r *Rollout, ro *v1alpha1.Rollout) {
	bg := ro.Spec.Strategy.BlueGreen
	r.Strategy = StrategyBlueGreen
	c.blueGreenRules(ro, bg)
	if c.mode == ModeKubernetes {
		// The fields blue-green shares with a canary, read with Argo's
		// defaults; the Services are the service router's, not pinned by
		// role (see ClusterRouting.ActiveService).
		r.Workload = c.workload(ro, &v1alpha1.CanaryStrategy{
			ScaleDownDelaySeconds:      bg.ScaleDownDelaySeconds,
			AbortScaleDownDelaySeconds: bg.AbortScaleDownDelaySeconds,
		})
		if bg.ScaleDownDelayRevisionLimit != nil && *bg.ScaleDownDelayRevisionLimit == 0 {
			// Argo: a limit of 0 keeps no old ReplicaSet running.
			r.Workload.ScaleDownDelay = 0
		}
		c.blueGreenRouting(r, ro, bg)
	} else if _, ok := ro.Annotations[RoutingAnnotation]; ok {
		c.warnf(routingAnnotationPath, "the cluster routers need --kubernetes: sluice ignores them in standalone mode")
	}
	r.XDS = c.blueGreenXDS(ro, r.Version)
	r.Steps = c.blueGreenSteps(r, bg)
}

// blueGreenRules are Argo's validation of blueGreen (v1.10.1
// ValidateRolloutStrategyBlueGreen) and what sluice needs besides.
func (c *checker) blueGreenRules(ro *v1alpha1.Rollout, bg *v1alpha1.BlueGreenStrategy) {
	if bg.ActiveService == "" && c.mode == ModeKubernetes {
		c.errorf(blueGreenPath+".activeService", "required in Kubernetes mode: the Service whose selector sluice switches to the new version")
	}
	if bg.ActiveService != "" && bg.ActiveService == bg.PreviewService {
		c.errorf(blueGreenPath+".previewService", "must differ from activeService %q", bg.ActiveService)
	}
	limit := derefOr(ro.Spec.RevisionHistoryLimit, DefaultRevisionHistoryLimit)
	if l := bg.ScaleDownDelayRevisionLimit; l != nil && *l > limit {
		c.errorf(blueGreenPath+".scaleDownDelayRevisionLimit", "must not exceed revisionHistoryLimit (%d), got %d", limit, *l)
	}
	c.nonNegative(blueGreenPath+".scaleDownDelaySeconds", bg.ScaleDownDelaySeconds)
	c.nonNegative(blueGreenPath+".abortScaleDownDelaySeconds", bg.AbortScaleDownDelaySeconds)
	if bg.AutoPromotionSeconds < 0 {
		c.errorf(blueGreenPath+".autoPromotionSeconds", "must not be negative, got %d", bg.AutoPromotionSeconds)
	}
	if bg.AutoPromotionEnabled != nil && !*bg.AutoPromotionEnabled && bg.AutoPromotionSeconds > 0 {
		c.warnf(blueGreenPath+".autoPromotionSeconds", "ignored: autoPromotionEnabled is false, so the rollout waits for `sluice promote` (as Argo does)")
	}
	if n := bg.PreviewReplicaCount; n != nil && (*n < 1 || ro.Spec.Replicas != nil && *n > *ro.Spec.Replicas) {
		c.errorf(blueGreenPath+".previewReplicaCount", "must be between 1 and spec.replicas, got %d", *n)
	}
	c.antiAffinity(blueGreenPath, bg.AntiAffinity)
	for _, ignored := range []struct {
		field string
		set   bool
	}{
		{"maxUnavailable", bg.MaxUnavailable != nil}, {"previewMetadata", bg.PreviewMetadata != nil}, {"activeMetadata", bg.ActiveMetadata != nil},
	} {
		if ignored.set {
			c.warnf(blueGreenPath+"."+ignored.field, "not implemented by sluice and ignored")
		}
	}
}

// blueGreenSteps is the rollout's step program (see the top of the file).
func (c *checker) blueGreenSteps(r *Rollout, bg *v1alpha1.BlueGreenStrategy) []Step {
	preview := r.Replicas
	if bg.PreviewReplicaCount != nil {
		preview = *bg.PreviewReplicaCount
	}
	full := r.Replicas
	steps := []Step{{Kind: StepSetCanaryScale, CanaryScale: &CanaryScale{Replicas: &preview}, Phase: PhasePreview}}
	c.stepPaths = append(c.stepPaths, blueGreenPath+".previewReplicaCount")
	if a := bg.PrePromotionAnalysis; a != nil {
		c.blueGreenAnalysis(&steps, a, PhasePrePromotionAnalysis, blueGreenPath+".prePromotionAnalysis")
	}
	switch {
	case bg.AutoPromotionEnabled != nil && !*bg.AutoPromotionEnabled:
		steps = append(steps, Step{Kind: StepPause, Pause: &Pause{}, Phase: PhasePromotion})
		c.stepPaths = append(c.stepPaths, blueGreenPath+".autoPromotionEnabled")
	case bg.AutoPromotionSeconds > 0:
		steps = append(steps, Step{Kind: StepPause, Pause: &Pause{Duration: time.Duration(bg.AutoPromotionSeconds) * time.Second}, Phase: PhasePromotion})
		c.stepPaths = append(c.stepPaths, blueGreenPath+".autoPromotionSeconds")
	}
	steps = append(steps, Step{Kind: StepSetWeight, Weight: 100, CanaryScale: &CanaryScale{Replicas: &full}, Phase: PhaseSwitch})
	c.stepPaths = append(c.stepPaths, blueGreenPath+".activeService")
	if a := bg.PostPromotionAnalysis; a != nil {
		c.blueGreenAnalysis(&steps, a, PhasePostPromotionAnalysis, blueGreenPath+".postPromotionAnalysis")
	}
	return steps
}

// blueGreenAnalysis appends an analysis step read from path, recording
// path as the step's field path and as its analysis's (analysisPaths), for
// the template checks.
func (c *checker) blueGreenAnalysis(steps *[]Step, a *v1alpha1.RolloutAnalysis, phase, path string) {
	an := c.analysis(path, a)
	*steps = append(*steps, Step{Kind: StepAnalysis, Analysis: &an, Phase: phase})
	if c.analysisPaths == nil {
		c.analysisPaths = map[int]string{}
	}
	c.analysisPaths[len(*steps)-1] = path
	c.stepPaths = append(c.stepPaths, path)
}

// blueGreenXDS reads the sluice.io/xds annotation: a YAML block with the
// fields of the canary plugin block and previewHost.
func (c *checker) blueGreenXDS(ro *v1alpha1.Rollout, version string) *XDSConfig {
	raw, ok := ro.Annotations[XDSAnnotation]
	if !ok {
		if c.mode == ModeStandalone {
			c.warnf("metadata.annotations", "no %s annotation: sluice tracks this blue-green rollout but cannot shift its traffic", XDSAnnotation)
		}
		return nil
	}
	var doc xdsConfigDoc
	if err := sigsyaml.UnmarshalStrict([]byte(raw), &doc); err != nil {
		c.errorf(xdsAnnotationPath, "cannot read the annotation as the %s block (host, previewHost, endpoints, ...): %v", XDSPluginName, err)
		return nil
	}
	cfg := c.xdsConfig(xdsAnnotationPath, doc, version)
	if doc.PreviewHost != "" {
		if doc.PreviewHost == doc.Host {
			c.errorf(xdsAnnotationPath+".previewHost", "must differ from host %q", doc.Host)
		}
		checkHostName(c, xdsAnnotationPath+".previewHost", doc.PreviewHost)
		cfg.PreviewHost = doc.PreviewHost
	}
	return cfg
}

// blueGreenRouting reads the Services and, from the sluice.io/traffic-routing
// annotation, the cluster routers (Kubernetes mode).
func (c *checker) blueGreenRouting(r *Rollout, ro *v1alpha1.Rollout, bg *v1alpha1.BlueGreenStrategy) {
	services := func(cr *ClusterRouting) *ClusterRouting {
		cr.ActiveService, cr.PreviewService = bg.ActiveService, bg.PreviewService
		return cr
	}
	raw, ok := ro.Annotations[RoutingAnnotation]
	if !ok {
		r.Routing = services(&ClusterRouting{})
		return
	}
	var tr v1alpha1.RolloutTrafficRouting
	if err := sigsyaml.UnmarshalStrict([]byte(raw), &tr); err != nil {
		c.errorf(routingAnnotationPath, "cannot read the annotation as a trafficRouting block (plugins[%s], istio): %v", GatewayAPIPluginName, err)
		return
	}
	c.routingBase = routingAnnotationPath
	for name := range tr.Plugins {
		if name == XDSPluginName {
			c.errorf(routingAnnotationPath+".plugins["+name+"]", "a blue-green rollout's xDS hosts go in the %s annotation", XDSAnnotation)
		} else if name != GatewayAPIPluginName {
			c.errorf(routingAnnotationPath+".plugins["+name+"]", "a blue-green rollout switches through plugins[%s] or istio only", GatewayAPIPluginName)
		}
	}
	if tr.Nginx != nil || tr.ALB != nil || tr.SMI != nil || tr.Ambassador != nil || tr.AppMesh != nil || tr.Traefik != nil || tr.Apisix != nil || len(tr.ManagedRoutes) > 0 {
		c.errorf(routingAnnotationPath, "a blue-green rollout switches through plugins[%s] or istio only (no other router, no managedRoutes)", GatewayAPIPluginName)
	}
	if bg.PreviewService == "" {
		c.errorf(blueGreenPath+".previewService", "required with %s: the routes send the new version's traffic to it", RoutingAnnotation)
	}
	c.clusterRouting(r, &v1alpha1.CanaryStrategy{TrafficRouting: &tr, StableService: bg.ActiveService, CanaryService: bg.PreviewService})
	if r.Routing == nil {
		r.Routing = &ClusterRouting{}
	}
	r.Routing = services(r.Routing)
}
