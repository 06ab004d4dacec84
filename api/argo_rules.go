package api

import (
	"strconv"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/argoproj/argo-rollouts/utils/defaults"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
)

// argoSpecRules applies the checks of Argo Rollouts' validation package
// (v1.10.1: ValidateRolloutSpec and ValidateRolloutStrategyCanary) that
// concern the Kubernetes side of a rollout: selector, pod counts,
// services, anti-affinity. sluice does not need these fields to run a
// canary through its own gateway, so a breach is a warning that says Argo
// would reject the file, not an error. The step and traffic routing rules
// are errors and live with the steps (step_convert.go). Argo's full pod
// template validation is not repeated: it needs Kubernetes' internal
// packages; only the selector checks are.
func (c *checker) argoSpecRules(ro *v1alpha1.Rollout) {
	spec := &ro.Spec
	c.nonNegative("spec.replicas", spec.Replicas)
	c.selector(spec)
	if spec.WorkloadRef != nil && !spec.EmptyTemplate() {
		c.argoRejectsf("spec.template", "must be empty for a workloadRef rollout")
	}
	if spec.MinReadySeconds < 0 {
		c.argoRejectsf("spec.minReadySeconds", "must not be negative, got %d", spec.MinReadySeconds)
	}
	c.nonNegative("spec.revisionHistoryLimit", spec.RevisionHistoryLimit)
	c.nonNegative("spec.progressDeadlineSeconds", spec.ProgressDeadlineSeconds)
	if d := defaults.GetProgressDeadlineSecondsOrDefault(ro); d <= spec.MinReadySeconds {
		c.argoRejectsf("spec.progressDeadlineSeconds", "must be greater than minReadySeconds (%d), got %d", spec.MinReadySeconds, d)
	}
	c.canaryRules(ro)
}

// argoRejectsf warns about a field Argo Rollouts' validation rejects but
// sluice does not use; every such warning starts with the same words.
func (c *checker) argoRejectsf(path, format string, args ...any) {
	c.warnf(path, "Argo Rollouts rejects this: "+format, args...)
}

func (c *checker) nonNegative(path string, v *int32) {
	if v != nil && *v < 0 {
		c.argoRejectsf(path, "must not be negative, got %d", *v)
	}
}

// selector: a rollout without workloadRef needs a valid, non-empty
// selector that matches its pod template's labels.
func (c *checker) selector(spec *v1alpha1.RolloutSpec) {
	if spec.WorkloadRef != nil {
		return
	}
	if spec.Selector == nil {
		c.argoRejectsf("spec.selector", "required (Argo Rollouts and Kubernetes need it to find the pods)")
		return
	}
	if len(spec.Selector.MatchLabels)+len(spec.Selector.MatchExpressions) == 0 {
		c.argoRejectsf("spec.selector", "must not be empty")
		return
	}
	sel, err := metav1.LabelSelectorAsSelector(spec.Selector)
	if err != nil {
		c.argoRejectsf("spec.selector", "invalid label selector: %v", err)
		return
	}
	if !sel.Matches(labels.Set(spec.Template.Labels)) {
		c.argoRejectsf("spec.template.metadata.labels", "do not match spec.selector")
	}
}

// canaryRules are ValidateRolloutStrategyCanary's checks outside the steps.
func (c *checker) canaryRules(ro *v1alpha1.Rollout) {
	canary := ro.Spec.Strategy.Canary
	if canary == nil {
		return
	}
	surge, unavailable := defaults.GetMaxSurgeOrDefault(ro), defaults.GetMaxUnavailableOrDefault(ro)
	if intOrPercent(*surge) == 0 && intOrPercent(*unavailable) == 0 {
		c.argoRejectsf(canaryPath+".maxSurge", "maxSurge and maxUnavailable must not both be zero")
	}
	if canary.CanaryService != "" && canary.CanaryService == canary.StableService {
		c.argoRejectsf(canaryPath+".stableService", "stableService and canaryService must be two different services")
	}
	c.pingPong(canary)
	if needsServices(canary.TrafficRouting, canary.PingPong != nil) {
		if canary.StableService == "" {
			c.argoRejectsf(canaryPath+".stableService", "required by the configured traffic router (Argo Rollouts rule)")
		}
		if canary.CanaryService == "" {
			c.argoRejectsf(canaryPath+".canaryService", "required by the configured traffic router (Argo Rollouts rule)")
		}
	}
	tr := canary.TrafficRouting
	switch {
	case tr == nil && canary.ScaleDownDelaySeconds != nil:
		c.argoRejectsf(canaryPath+".scaleDownDelaySeconds", "can only be used with trafficRouting")
	case tr == nil && canary.DynamicStableScale:
		c.argoRejectsf(canaryPath+".dynamicStableScale", "can only be used with trafficRouting")
	case tr != nil && canary.ScaleDownDelaySeconds != nil && canary.DynamicStableScale:
		c.argoRejectsf(canaryPath+".dynamicStableScale", "cannot be used with scaleDownDelaySeconds")
	}
	if tr != nil && tr.MaxTrafficWeight != nil && tr.Nginx == nil && len(tr.Plugins) == 0 {
		c.argoRejectsf(routingPath+".maxTrafficWeight", "only nginx and plugin traffic routers take maxTrafficWeight")
	}
	c.antiAffinity(canaryPath, canary.AntiAffinity)
}

func (c *checker) pingPong(canary *v1alpha1.CanaryStrategy) {
	pp, tr := canary.PingPong, canary.TrafficRouting
	if pp == nil {
		return
	}
	if tr != nil && tr.ALB == nil && tr.Istio == nil && len(tr.Plugins) == 0 {
		c.argoRejectsf(canaryPath+".pingPong", "ping-pong works with the alb, istio and plugin traffic routers only")
	}
	if pp.PingService == "" {
		c.argoRejectsf(canaryPath+".pingPong.pingService", "required")
	}
	if pp.PongService == "" {
		c.argoRejectsf(canaryPath+".pingPong.pongService", "required")
	}
	if pp.PingService == pp.PongService {
		c.argoRejectsf(canaryPath+".pingPong.pingService", "pingService and pongService must be two different services")
	}
	if tr != nil && tr.ALB != nil && tr.ALB.RootService == "" {
		c.argoRejectsf(routingPath+".alb.rootService", "required with alb and ping-pong")
	}
}

// needsServices mirrors Argo's requireCanaryStableServices: the routers
// that address the canary and stable through two Services.
func needsServices(tr *v1alpha1.RolloutTrafficRouting, pingPong bool) bool {
	if tr == nil {
		return false
	}
	return (tr.ALB != nil && !pingPong) ||
		(tr.Istio != nil && tr.Istio.DestinationRule == nil && !pingPong) ||
		tr.SMI != nil || tr.Apisix != nil || tr.Ambassador != nil || tr.Nginx != nil || tr.AppMesh != nil || tr.Traefik != nil
}

func (c *checker) antiAffinity(strategyPath string, a *v1alpha1.AntiAffinity) {
	if a == nil {
		return
	}
	preferred, required := a.PreferredDuringSchedulingIgnoredDuringExecution, a.RequiredDuringSchedulingIgnoredDuringExecution
	if (preferred == nil) == (required == nil) {
		c.argoRejectsf(strategyPath+".antiAffinity", "exactly one of preferredDuringSchedulingIgnoredDuringExecution and requiredDuringSchedulingIgnoredDuringExecution is required")
	}
	if preferred != nil && (preferred.Weight < 1 || preferred.Weight > 100) {
		c.argoRejectsf(strategyPath+".antiAffinity.weight", "must be between 1 and 100, got %d", preferred.Weight)
	}
}

// intOrPercent reads "25%" as 25 and anything else as IntValue does, as
// Argo's getIntOrPercentValue.
func intOrPercent(v intstr.IntOrString) int {
	if v.Type == intstr.String && len(validation.IsValidPercent(v.StrVal)) == 0 {
		n, _ := strconv.Atoi(v.StrVal[:len(v.StrVal)-1])
		return n
	}
	return v.IntValue()
}
