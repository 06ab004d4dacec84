package api

import (
	"regexp"
	"slices"
	"strings"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
)

// stepKinds lists the step types sluice runs, for error messages.
const stepKinds = "setWeight, pause, analysis, experiment, setHeaderRoute, setMirrorRoute, setCanaryScale"

// cannotRunf reports an error for a file that Argo Rollouts accepts but
// sluice cannot run; every such message starts with the same words, so a
// reader (and the Argo oracle test) can tell them from Argo's own rules.
func (c *checker) cannotRunf(path, format string, args ...any) {
	c.errorf(path, "sluice cannot run this: "+format, args...)
}

// experimentNeedsKubernetes is the error for an experiment step in
// standalone mode, where sluice runs no pods.
const experimentNeedsKubernetes = "experiment steps start ReplicaSets, and standalone sluice runs no pods: run sluice with --kubernetes (or use an analysis step)"

// stepContext is what the step checks need from the rest of the rollout.
type stepContext struct {
	routing   *v1alpha1.RolloutTrafficRouting
	maxWeight int32
}

// step checks and converts one canary step. Argo Rollouts allows at most
// one of setWeight, pause, experiment and analysis in a step and any of
// the other types beside it (validation.hasMultipleStepsType); so does
// sluice. See Step for the order in which a step's parts take effect.
func (c *checker) step(path string, s *v1alpha1.CanaryStep, ctx stepContext) (Step, bool) {
	if s.Experiment != nil && c.mode != ModeKubernetes {
		c.cannotRunf(path+".experiment", "%s", experimentNeedsKubernetes)
	}
	if s.Plugin != nil {
		c.cannotRunf(path+".plugin", "step plugins are not supported: they are Argo Rollouts controller binaries, which sluice cannot load")
	}
	if main := mainStepTypes(s); len(main) > 1 {
		c.errorf(path, "a step may have only one of setWeight, pause, experiment and analysis, got %s", strings.Join(main, " and "))
		return Step{}, false
	}
	if s.Experiment != nil && c.mode != ModeKubernetes || s.Plugin != nil {
		return Step{}, false
	}
	out := Step{Kind: stepKind(s)}
	if out.Kind == "" {
		if unknown := c.doc.walk.unknown[path]; len(unknown) > 0 {
			c.errorf(path, "unknown step type %q: use one of %s", unknown[0], stepKinds)
		} else {
			c.errorf(path, "empty step: use one of %s", stepKinds)
		}
		return Step{}, false
	}
	if s.SetWeight != nil {
		out.Weight = c.setWeight(path+".setWeight", *s.SetWeight, ctx.maxWeight)
	}
	if s.Pause != nil {
		out.Pause = c.pause(path+".pause", s.Pause)
	}
	if s.Analysis != nil {
		a := c.analysis(path+".analysis", s.Analysis)
		out.Analysis = &a
	}
	if s.Experiment != nil {
		out.Experiment = c.experiment(path+".experiment", s.Experiment, ctx.routing)
	}
	if s.SetHeaderRoute != nil {
		out.HeaderRoute = c.headerRoute(path+".setHeaderRoute", s.SetHeaderRoute, ctx.routing)
	}
	if s.SetMirrorRoute != nil {
		out.MirrorRoute = c.mirrorRoute(path+".setMirrorRoute", s.SetMirrorRoute, ctx.routing)
	}
	if s.SetCanaryScale != nil {
		out.CanaryScale = c.canaryScale(path+".setCanaryScale", s.SetCanaryScale, ctx.routing)
	}
	return out, true
}

// mainStepTypes lists the types Argo allows only one of per step, sorted.
func mainStepTypes(s *v1alpha1.CanaryStep) []string {
	var set []string
	for _, t := range []struct {
		name    string
		present bool
	}{
		{"analysis", s.Analysis != nil}, {"experiment", s.Experiment != nil},
		{"pause", s.Pause != nil}, {"setWeight", s.SetWeight != nil},
	} {
		if t.present {
			set = append(set, t.name)
		}
	}
	return set
}

// stepKind is the step's main type (see Step), or "" for an empty step.
func stepKind(s *v1alpha1.CanaryStep) StepKind {
	switch {
	case s.SetWeight != nil:
		return StepSetWeight
	case s.Pause != nil:
		return StepPause
	case s.Analysis != nil:
		return StepAnalysis
	case s.Experiment != nil:
		return StepExperiment
	case s.SetHeaderRoute != nil:
		return StepSetHeaderRoute
	case s.SetMirrorRoute != nil:
		return StepSetMirrorRoute
	case s.SetCanaryScale != nil:
		return StepSetCanaryScale
	}
	return ""
}

// setWeight checks a weight against Argo's bound, 0 to maxTrafficWeight,
// and returns it in percent, which is what sluice's routes carry.
func (c *checker) setWeight(path string, w, maxWeight int32) int32 {
	if w < 0 || w > maxWeight {
		c.errorf(path, "must be between 0 and %d, got %d", maxWeight, w)
		return w
	}
	if maxWeight == 100 || maxWeight <= 0 {
		return w
	}
	percent := int32(int64(w) * 100 / int64(maxWeight))
	if int64(percent)*int64(maxWeight) != int64(w)*100 {
		c.warnf(path, "%d of maxTrafficWeight %d is not a whole percent: sluice routes %d %%", w, maxWeight, percent)
	}
	return percent
}

// pause reads a pause duration. Argo rejects what its DurationSeconds
// cannot read (it returns -1); sluice's parser reads the same inputs.
func (c *checker) pause(path string, p *v1alpha1.RolloutPause) *Pause {
	d, err := parsePauseDuration(p.Duration)
	switch {
	case err != nil:
		c.errorf(path+".duration", "%v", err)
	case p.DurationSeconds() < 0:
		c.errorf(path+".duration", "must be a duration of at most %d seconds, got %q", int32(1<<31-1), p.Duration.String())
	case p.Duration != nil && d == 0:
		c.warnf(path+".duration", "a zero pause waits until promoted in sluice, as pause: {} does; Argo Rollouts goes on at once (remove the step to go on)")
	}
	return &Pause{Duration: d}
}

func (c *checker) analysis(path string, a *v1alpha1.RolloutAnalysis) Analysis {
	out := Analysis{}
	if len(a.Templates) == 0 {
		c.cannotRunf(path+".templates", "an analysis with no templates has nothing to measure; name at least one template")
	}
	for i, t := range a.Templates {
		if t.TemplateName == "" {
			c.cannotRunf(indexPath(path+".templates", i)+".templateName", "required: the name of the template to run")
		}
		out.Templates = append(out.Templates, TemplateRef{Name: t.TemplateName, ClusterScope: t.ClusterScope != nil && *t.ClusterScope})
	}
	for i, arg := range a.Args {
		p := indexPath(path+".args", i)
		if arg.Name == "" {
			c.warnf(p+".name", "an argument with no name fills no template argument (ignored)")
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

// headerRoute checks setHeaderRoute. Argo needs a router that implements
// it (istio, alb, apisix or a plugin) and, for alb, exact matches only.
func (c *checker) headerRoute(path string, h *v1alpha1.SetHeaderRoute, tr *v1alpha1.RolloutTrafficRouting) *HeaderRoute {
	if tr == nil || (tr.Istio == nil && tr.ALB == nil && tr.Apisix == nil && len(tr.Plugins) == 0) {
		c.errorf(path, "setHeaderRoute needs trafficRouting with a router that implements it: plugins[%s] (Argo Rollouts also takes istio, alb or apisix)", XDSPluginName)
	}
	c.routeName(path, h.Name, tr)
	out := &HeaderRoute{Name: h.Name}
	for i, m := range h.Match {
		p := indexPath(path+".match", i)
		if m.HeaderName == "" {
			c.cannotRunf(p+".headerName", "required: Envoy and gRPC cannot match a header without a name")
		}
		if m.HeaderValue == nil {
			c.errorf(p+".headerValue", "required: one of exact, prefix or regex")
			continue
		}
		if tr != nil && tr.ALB != nil && (m.HeaderValue.Exact == "" || m.HeaderValue.Prefix != "" || m.HeaderValue.Regex != "") {
			c.errorf(p+".headerValue", "with alb traffic routing a header match must be exact only (Argo Rollouts rule)")
		}
		sm := c.stringMatch(p+".headerValue", m.HeaderValue)
		hm := HeaderMatch{HeaderName: m.HeaderName, HeaderValue: sm}
		if hm.IsCookie() && sm.Exact != "" {
			name, _, ok := strings.Cut(sm.Exact, "=")
			if !ok || !cookieName.MatchString(name) {
				c.cannotRunf(p+".headerValue.exact", "sluice matches the cookie header by one name=value pair with a valid cookie name, got %q", sm.Exact)
			}
		}
		out.Match = append(out.Match, hm)
	}
	return out
}

// stringMatch checks that exactly one of exact, prefix, regex is set (as
// Argo does) and that a regex is valid RE2, which Envoy and gRPC need.
func (c *checker) stringMatch(path string, m *v1alpha1.StringMatch) StringMatch {
	if n := matcherCount(m); n != 1 {
		c.errorf(path, "exactly one of exact, prefix or regex is required, got %d", n)
	}
	return c.regexMatch(path, m)
}

// mirrorHeaderMatch is stringMatch for a mirror route's header, which
// Argo does not check: a header matcher Envoy and gRPC can build needs
// exactly one of exact, prefix or regex all the same.
func (c *checker) mirrorHeaderMatch(path string, m *v1alpha1.StringMatch) StringMatch {
	if n := matcherCount(m); n != 1 {
		c.cannotRunf(path, "a header match needs exactly one of exact, prefix or regex, got %d", n)
	}
	return c.regexMatch(path, m)
}

func matcherCount(m *v1alpha1.StringMatch) int {
	n := 0
	for _, v := range []string{m.Exact, m.Prefix, m.Regex} {
		if v != "" {
			n++
		}
	}
	return n
}

// regexMatch checks that a regex is valid RE2 within Envoy's program size
// limit, and converts m.
func (c *checker) regexMatch(path string, m *v1alpha1.StringMatch) StringMatch {
	if m.Regex != "" {
		if _, err := regexp.Compile(m.Regex); err != nil {
			c.cannotRunf(path+".regex", "not a valid RE2 regular expression, which Envoy and gRPC need: %v", err)
		} else if size, err := re2ProgramSize(m.Regex); err == nil && size > MaxRE2ProgramSize {
			c.cannotRunf(path+".regex", "RE2 program size about %d is over Envoy's default limit of %d (re2.max_program_size.error_level): "+
				"Envoy would NACK the route and hold the canary; simplify the regex (fewer .*, no large {n,m}) or match with exact or prefix", size, MaxRE2ProgramSize)
		}
	}
	return StringMatch{Exact: m.Exact, Prefix: m.Prefix, Regex: m.Regex}
}

// mirrorRoute checks setMirrorRoute. Argo needs istio or a plugin router,
// and checks the method and path matches; sluice also checks the header
// matches, which Envoy and gRPC need as much.
func (c *checker) mirrorRoute(path string, m *v1alpha1.SetMirrorRoute, tr *v1alpha1.RolloutTrafficRouting) *MirrorRoute {
	if tr == nil || (tr.Istio == nil && len(tr.Plugins) == 0) {
		c.errorf(path, "setMirrorRoute needs trafficRouting with a router that implements it: plugins[%s] (Argo Rollouts also takes istio)", XDSPluginName)
	}
	c.routeName(path, m.Name, tr)
	out := &MirrorRoute{Name: m.Name, Percentage: 100}
	if m.Percentage != nil {
		out.Percentage = *m.Percentage
		if out.Percentage < 0 || out.Percentage > 100 {
			c.cannotRunf(path+".percentage", "a mirror percentage must be between 0 and 100, got %d", out.Percentage)
		}
	}
	for i, rm := range m.Match {
		p := indexPath(path+".match", i)
		var r RouteMatch
		if rm.Method == nil && rm.Path == nil && len(rm.Headers) == 0 {
			c.warnf(p, "a match with none of method, path or headers matches every request")
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
			r.Headers[name] = c.mirrorHeaderMatch(childPath(p+".headers", name), &hv)
		}
		out.Match = append(out.Match, r)
	}
	return out
}

// routeName checks that a header or mirror route is named and listed in
// trafficRouting.managedRoutes, as Argo Rollouts requires.
func (c *checker) routeName(path, name string, tr *v1alpha1.RolloutTrafficRouting) {
	switch {
	case name == "":
		c.cannotRunf(path+".name", "required: sluice names the route after it, and it must be listed in %s.managedRoutes", routingPath)
	case tr == nil:
	case tr.ManagedRoutes == nil:
		c.errorf(routingPath+".managedRoutes", "required: list the routes that steps set (route %q)", name)
	case !slices.ContainsFunc(tr.ManagedRoutes, func(m v1alpha1.MangedRoutes) bool { return m.Name == name }):
		c.errorf(path+".name", "route %q is not listed in %s.managedRoutes", name, routingPath)
	}
}

// canaryScale reads setCanaryScale, which only Kubernetes mode uses.
// Argo needs trafficRouting for it; when several of its fields are set,
// Argo takes replicas, then weight, then matchTrafficWeight.
func (c *checker) canaryScale(path string, s *v1alpha1.SetCanaryScale, tr *v1alpha1.RolloutTrafficRouting) *CanaryScale {
	if tr == nil {
		c.errorf(path, "setCanaryScale needs trafficRouting (Argo Rollouts rule)")
	}
	n := 0
	if s.Weight != nil {
		n++
		if *s.Weight < 0 || *s.Weight > 100 {
			c.warnf(path+".weight", "should be between 0 and 100, got %d", *s.Weight)
		}
	}
	if s.Replicas != nil {
		n++
		if *s.Replicas < 0 {
			c.warnf(path+".replicas", "should not be negative, got %d", *s.Replicas)
		}
		c.replicasAtMost(path+".replicas", s.Replicas)
	}
	if s.MatchTrafficWeight {
		n++
	}
	if n != 1 {
		c.warnf(path, "set exactly one of weight, replicas or matchTrafficWeight (Argo takes replicas, then weight, then matchTrafficWeight)")
	}
	return &CanaryScale{Weight: s.Weight, Replicas: s.Replicas, MatchTrafficWeight: s.MatchTrafficWeight}
}
