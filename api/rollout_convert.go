package api

import (
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
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
func convertRollout(rd *rolloutDoc) (*Rollout, *checker) {
	ro := rd.obj
	c := &checker{doc: rd.doc, key: Key{Namespace: ro.Namespace, Name: ro.Name}}
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
		c.errorf("metadata.name", "required")
	}
	if ro.Spec.Replicas != nil {
		r.Replicas = *ro.Spec.Replicas
	}
	r.Version = c.version(ro)
	canary := c.strategy(ro)
	if canary == nil {
		return r, c
	}
	c.trafficRouting(r, canary.TrafficRouting)
	for i := range canary.Steps {
		if s, ok := c.step(indexPath(stepsPath, i), &canary.Steps[i]); ok {
			c.checkManaged(r, indexPath(stepsPath, i), s)
			r.Steps = append(r.Steps, s)
			c.stepPaths = append(c.stepPaths, indexPath(stepsPath, i))
		}
	}
	if canary.Analysis != nil {
		r.Background = &BackgroundAnalysis{
			Analysis:     c.analysis(canaryPath+".analysis", &canary.Analysis.RolloutAnalysis),
			StartingStep: derefInt32(canary.Analysis.StartingStep),
		}
		if r.Background.StartingStep < 0 || int(r.Background.StartingStep) > len(canary.Steps) {
			c.errorf(canaryPath+".analysis.startingStep", "must be between 0 and %d (the number of steps), got %d", len(canary.Steps), r.Background.StartingStep)
		}
	}
	return r, c
}

// version is the rollout's version: the first container's image, or the
// workloadRef it points at.
func (c *checker) version(ro *v1alpha1.Rollout) string {
	if ref := ro.Spec.WorkloadRef; ref != nil {
		if ref.Kind == "" || ref.Name == "" {
			c.errorf("spec.workloadRef", "kind and name are required")
		}
		return "workloadRef:" + ref.Kind + "/" + ref.Name
	}
	containers := ro.Spec.Template.Spec.Containers
	if len(containers) == 0 {
		c.errorf("spec.template.spec.containers", "at least one container is required: the first container's image is the rollout's version")
		return ""
	}
	if containers[0].Image == "" {
		c.errorf("spec.template.spec.containers[0].image", "required: the first container's image is the rollout's version")
	}
	return containers[0].Image
}

func (c *checker) strategy(ro *v1alpha1.Rollout) *v1alpha1.CanaryStrategy {
	st := ro.Spec.Strategy
	if st.BlueGreen != nil {
		c.errorf("spec.strategy.blueGreen", "blue-green strategy is not supported: sluice runs canary rollouts only (use spec.strategy.canary)")
		return nil
	}
	if st.Canary == nil {
		c.errorf("spec.strategy", "a canary strategy is required (spec.strategy.canary)")
		return nil
	}
	return st.Canary
}

var stepKinds = "setWeight, pause, analysis, setHeaderRoute, setMirrorRoute, setCanaryScale"

// step checks and converts one canary step.
func (c *checker) step(path string, s *v1alpha1.CanaryStep) (Step, bool) {
	if s.Experiment != nil {
		c.errorf(path+".experiment", "experiment steps are not supported by sluice")
		return Step{}, false
	}
	if s.Plugin != nil {
		c.errorf(path+".plugin", "step plugins are not supported by sluice")
		return Step{}, false
	}
	var set []string
	for name, present := range map[string]bool{
		"setWeight": s.SetWeight != nil, "pause": s.Pause != nil, "analysis": s.Analysis != nil,
		"setHeaderRoute": s.SetHeaderRoute != nil, "setMirrorRoute": s.SetMirrorRoute != nil, "setCanaryScale": s.SetCanaryScale != nil,
	} {
		if present {
			set = append(set, name)
		}
	}
	switch len(set) {
	case 0:
		if unknown := c.doc.walk.unknown[path]; len(unknown) > 0 {
			c.errorf(path, "unknown step type %q: use one of %s", unknown[0], stepKinds)
		} else {
			c.errorf(path, "empty step: use one of %s", stepKinds)
		}
		return Step{}, false
	case 1:
	default:
		sort.Strings(set)
		c.errorf(path, "a step must have exactly one type, got %s", strings.Join(set, " and "))
		return Step{}, false
	}
	switch {
	case s.SetWeight != nil:
		w := *s.SetWeight
		if w < 0 || w > 100 {
			c.errorf(path+".setWeight", "must be between 0 and 100, got %d", w)
		}
		return Step{Kind: StepSetWeight, Weight: w}, true
	case s.Pause != nil:
		d, err := parsePauseDuration(s.Pause.Duration)
		if err != nil {
			c.errorf(path+".pause.duration", "%v", err)
		}
		return Step{Kind: StepPause, Pause: &Pause{Duration: d}}, true
	case s.Analysis != nil:
		a := c.analysis(path+".analysis", s.Analysis)
		return Step{Kind: StepAnalysis, Analysis: &a}, true
	case s.SetHeaderRoute != nil:
		return Step{Kind: StepSetHeaderRoute, HeaderRoute: c.headerRoute(path+".setHeaderRoute", s.SetHeaderRoute)}, true
	case s.SetMirrorRoute != nil:
		return Step{Kind: StepSetMirrorRoute, MirrorRoute: c.mirrorRoute(path+".setMirrorRoute", s.SetMirrorRoute)}, true
	default:
		return Step{Kind: StepSetCanaryScale, CanaryScale: c.canaryScale(path+".setCanaryScale", s.SetCanaryScale)}, true
	}
}

func (c *checker) analysis(path string, a *v1alpha1.RolloutAnalysis) Analysis {
	out := Analysis{}
	if len(a.Templates) == 0 {
		c.errorf(path+".templates", "at least one template is required")
	}
	for i, t := range a.Templates {
		if t.TemplateName == "" {
			c.errorf(indexPath(path+".templates", i)+".templateName", "required")
		}
		out.Templates = append(out.Templates, TemplateRef{Name: t.TemplateName, ClusterScope: t.ClusterScope != nil && *t.ClusterScope})
	}
	for i, arg := range a.Args {
		p := indexPath(path+".args", i)
		if arg.Name == "" {
			c.errorf(p+".name", "required")
		}
		out.Args = append(out.Args, Arg{Name: arg.Name, Value: arg.Value, ValueFrom: describeValueFrom(arg.ValueFrom)})
	}
	for _, d := range a.DryRun {
		out.DryRun = append(out.DryRun, d.MetricName)
	}
	for _, m := range a.MeasurementRetention {
		if out.MeasurementRetention == nil {
			out.MeasurementRetention = map[string]int{}
		}
		out.MeasurementRetention[m.MetricName] = int(m.Limit)
	}
	return out
}

func describeValueFrom(v *v1alpha1.ArgumentValueFrom) string {
	switch {
	case v == nil:
		return ""
	case v.PodTemplateHashValue != nil:
		return "podTemplateHashValue:" + string(*v.PodTemplateHashValue)
	case v.FieldRef != nil:
		return "fieldRef:" + v.FieldRef.FieldPath
	}
	return ""
}

var cookieName = regexp.MustCompile(`^[!#$%&'*+\-.^_` + "`" + `|~0-9A-Za-z]+$`)

func (c *checker) headerRoute(path string, h *v1alpha1.SetHeaderRoute) *HeaderRoute {
	if h.Name == "" {
		c.errorf(path+".name", "required: the route's name, also listed in trafficRouting.managedRoutes")
	}
	out := &HeaderRoute{Name: h.Name}
	for i, m := range h.Match {
		p := indexPath(path+".match", i)
		if m.HeaderName == "" {
			c.errorf(p+".headerName", "required")
		}
		if m.HeaderValue == nil {
			c.errorf(p+".headerValue", "required: one of exact, prefix or regex")
			continue
		}
		sm := c.stringMatch(p+".headerValue", m.HeaderValue)
		hm := HeaderMatch{HeaderName: m.HeaderName, HeaderValue: sm}
		if hm.IsCookie() && sm.Exact != "" {
			name, _, ok := strings.Cut(sm.Exact, "=")
			if !ok || !cookieName.MatchString(name) {
				c.errorf(p+".headerValue.exact", "a cookie match must be name=value with a valid cookie name, got %q", sm.Exact)
			}
		}
		out.Match = append(out.Match, hm)
	}
	return out
}

// stringMatch checks that exactly one of exact, prefix, regex is set and
// that a regex is valid RE2 (Go's regexp is RE2, as Envoy and gRPC use).
func (c *checker) stringMatch(path string, m *v1alpha1.StringMatch) StringMatch {
	n := 0
	for _, v := range []string{m.Exact, m.Prefix, m.Regex} {
		if v != "" {
			n++
		}
	}
	if n != 1 {
		c.errorf(path, "exactly one of exact, prefix or regex is required, got %d", n)
	}
	if m.Regex != "" {
		if _, err := regexp.Compile(m.Regex); err != nil {
			c.errorf(path+".regex", "not a valid RE2 regular expression: %v", err)
		}
	}
	return StringMatch{Exact: m.Exact, Prefix: m.Prefix, Regex: m.Regex}
}

func (c *checker) mirrorRoute(path string, m *v1alpha1.SetMirrorRoute) *MirrorRoute {
	if m.Name == "" {
		c.errorf(path+".name", "required: the route's name, also listed in trafficRouting.managedRoutes")
	}
	out := &MirrorRoute{Name: m.Name, Percentage: 100}
	if m.Percentage != nil {
		out.Percentage = *m.Percentage
		if out.Percentage < 0 || out.Percentage > 100 {
			c.errorf(path+".percentage", "must be between 0 and 100, got %d", out.Percentage)
		}
	}
	for i, rm := range m.Match {
		p := indexPath(path+".match", i)
		var r RouteMatch
		if rm.Method == nil && rm.Path == nil && len(rm.Headers) == 0 {
			c.errorf(p, "a match needs at least one of method, path or headers")
		}
		if rm.Method != nil {
			sm := c.stringMatch(p+".method", rm.Method)
			r.Method = &sm
		}
		if rm.Path != nil {
			sm := c.stringMatch(p+".path", rm.Path)
			r.Path = &sm
		}
		for name, hv := range rm.Headers {
			if r.Headers == nil {
				r.Headers = map[string]StringMatch{}
			}
			r.Headers[name] = c.stringMatch(childPath(p+".headers", name), &hv)
		}
		out.Match = append(out.Match, r)
	}
	return out
}

func (c *checker) canaryScale(path string, s *v1alpha1.SetCanaryScale) *CanaryScale {
	n := 0
	if s.Weight != nil {
		n++
		if *s.Weight < 0 || *s.Weight > 100 {
			c.errorf(path+".weight", "must be between 0 and 100, got %d", *s.Weight)
		}
	}
	if s.Replicas != nil {
		n++
		if *s.Replicas < 0 {
			c.errorf(path+".replicas", "must not be negative, got %d", *s.Replicas)
		}
	}
	if s.MatchTrafficWeight {
		n++
	}
	if n != 1 {
		c.errorf(path, "exactly one of weight, replicas or matchTrafficWeight is required")
	}
	return &CanaryScale{Weight: s.Weight, Replicas: s.Replicas, MatchTrafficWeight: s.MatchTrafficWeight}
}

// checkManaged checks that a header or mirror route a step sets is listed
// in trafficRouting.managedRoutes, as Argo Rollouts requires.
func (c *checker) checkManaged(r *Rollout, path string, s Step) {
	var name, field string
	switch {
	case s.HeaderRoute != nil:
		name, field = s.HeaderRoute.Name, "setHeaderRoute"
	case s.MirrorRoute != nil:
		name, field = s.MirrorRoute.Name, "setMirrorRoute"
	default:
		return
	}
	if name != "" && !slices.Contains(r.ManagedRoutes, name) {
		c.errorf(path+"."+field+".name", "route %q is not listed in %s.managedRoutes", name, routingPath)
	}
}

func derefInt32(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}
