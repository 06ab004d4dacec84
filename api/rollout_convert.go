package api

import (
	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/argoproj/argo-rollouts/utils/weightutil"
)

// rolloutDoc is a decoded Rollout document waiting for set-wide checks.
type rolloutDoc struct {
	doc *document
	obj *v1alpha1.Rollout
}

// checker collects the diagnostics of one object.
type checker struct {
	doc   *document
	key   Key
	diags Diagnostics
	// stepPaths[i] is the field path of the rollout's Steps[i]: invalid
	// steps are left out of Steps, so indexes can differ from the file's.
	stepPaths []string
	// analysisPaths[i], when set, is the field path of Steps[i]'s
	// analysis (a blue-green program's; a canary step's is
	// stepPaths[i]+".analysis").
	analysisPaths map[int]string
	// routingBase, when set, is the field path of the trafficRouting
	// block (a blue-green rollout's annotation); routingPath otherwise.
	routingBase string
	// mode is where the rollout runs: it decides where endpoints come from.
	mode Mode
}

func (c *checker) errorf(path, format string, args ...any) {
	c.diags = append(c.diags, c.doc.diag(SeverityError, path, format, args...))
}

func (c *checker) warnf(path, format string, args ...any) {
	c.diags = append(c.diags, c.doc.diag(SeverityWarning, path, format, args...))
}

const (
	canaryPath  = "spec.strategy.canary"
	stepsPath   = canaryPath + ".steps"
	routingPath = canaryPath + ".trafficRouting"
	xdsPath     = routingPath + ".plugins[" + XDSPluginName + "]"
)

// convertRollout checks one Rollout on its own and converts it. The
// set-wide checks (duplicates, template references) come after.
func convertRollout(rd *rolloutDoc, mode Mode) (*Rollout, *checker) {
	ro := rd.obj
	c := &checker{doc: rd.doc, key: Key{Namespace: ro.Namespace, Name: ro.Name}, mode: mode}
	if c.key.Namespace == "" {
		c.key.Namespace = DefaultNamespace
	}
	r := &Rollout{
		Key:      c.key,
		File:     rd.doc.file,
		Line:     rd.doc.walk.line("metadata.name"),
		Labels:   ro.Labels,
		Replicas: 1,
		Spec:     ro.Spec,
	}
	if ro.Name == "" {
		c.cannotRunf("metadata.name", "required: sluice identifies a rollout by namespace/name")
	}
	c.objectNames(ro.Name, ro.Namespace)
	c.replicasAtMost("spec.replicas", ro.Spec.Replicas)
	if ro.Spec.Replicas != nil {
		r.Replicas = *ro.Spec.Replicas
	}
	r.Version = c.version(ro)
	r.Placement = c.placement(ro)
	if ro.Spec.Strategy.BlueGreen != nil && ro.Spec.Strategy.Canary == nil {
		c.argoSpecRules(ro)
		c.blueGreen(r, ro)
		return r, c
	}
	canary := c.strategy(ro)
	if canary == nil {
		return r, c
	}
	c.argoSpecRules(ro)
	if c.mode == ModeKubernetes {
		r.Workload = c.workload(ro, canary)
	}
	c.trafficRouting(r, canary)
	ctx := stepContext{routing: canary.TrafficRouting, maxWeight: weightutil.MaxTrafficWeight(ro)}
	for i := range canary.Steps {
		if s, ok := c.step(indexPath(stepsPath, i), &canary.Steps[i], ctx); ok {
			r.Steps = append(r.Steps, s)
			c.stepPaths = append(c.stepPaths, indexPath(stepsPath, i))
		}
	}
	if canary.Analysis != nil {
		r.Background = &BackgroundAnalysis{
			Analysis:     c.analysis(canaryPath+".analysis", &canary.Analysis.RolloutAnalysis),
			StartingStep: derefInt32(canary.Analysis.StartingStep),
		}
		c.startingStep(r.Background.StartingStep, len(canary.Steps))
	}
	return r, c
}

// version is the rollout's version: the first container's image, or the
// workloadRef it points at (in Kubernetes mode only until it is resolved).
func (c *checker) version(ro *v1alpha1.Rollout) string {
	if ref := ro.Spec.WorkloadRef; ref != nil {
		// In Kubernetes mode workloadRef checks its fields itself, and the
		// resolved Deployment's template gives the version (workloadref.go).
		if c.mode == ModeStandalone && (ref.Kind == "" || ref.Name == "") {
			c.cannotRunf("spec.workloadRef", "kind and name are required: they are the rollout's version")
		}
		return "workloadRef:" + ref.Kind + "/" + ref.Name
	}
	containers := ro.Spec.Template.Spec.Containers
	if len(containers) == 0 {
		c.errorf("spec.template.spec.containers", "at least one container is required (the first container's image is the rollout's version)")
		return ""
	}
	if containers[0].Image == "" {
		c.cannotRunf("spec.template.spec.containers[0].image", "required: the first container's image is the rollout's version")
	}
	return containers[0].Image
}

func (c *checker) strategy(ro *v1alpha1.Rollout) *v1alpha1.CanaryStrategy {
	st := ro.Spec.Strategy
	if st.BlueGreen != nil {
		c.errorf("spec.strategy", "only one of canary and blueGreen may be set")
		return nil
	}
	if st.Canary == nil {
		c.errorf("spec.strategy", "a strategy is required (spec.strategy.canary or spec.strategy.blueGreen)")
		return nil
	}
	return st.Canary
}

// startingStep warns about a background analysis that Argo accepts but
// that starts at once (negative) or never (past the last step).
func (c *checker) startingStep(start int32, steps int) {
	switch {
	case start < 0:
		c.warnf(canaryPath+".analysis.startingStep", "negative (%d): the background analysis starts with the first step", start)
	case int(start) > steps:
		c.warnf(canaryPath+".analysis.startingStep", "%d is past the last step (%d steps): the background analysis never starts", start, steps)
	}
}

func derefInt32(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}
