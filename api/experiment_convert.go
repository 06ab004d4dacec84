package api

import (
	"reflect"
	"strings"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// experiment checks and converts an experiment step. Argo's validation
// checks only a template's weight (it needs trafficRouting with a router
// that splits to experiments); the rest Argo's experiment controller finds
// when it runs the step and fails the experiment (an empty or repeated
// template name, a selector of everything, an unknown specRef), which
// sluice reports at load time as something it cannot run.
func (c *checker) experiment(path string, e *v1alpha1.RolloutExperimentStep, tr *v1alpha1.RolloutTrafficRouting) *Experiment {
	out := &Experiment{}
	if e.Duration != "" {
		d, err := e.Duration.Duration()
		switch {
		case err != nil:
			c.cannotRunf(path+".duration", "not a duration (e.g. 30s, 5m, 1h): %v", err)
		case d <= 0:
			c.cannotRunf(path+".duration", "must be positive, got %q (leave it out to run until the required analyses complete)", string(e.Duration))
		}
		out.Duration = d
	}
	names := map[string]bool{}
	for i, t := range e.Templates {
		p := indexPath(path+".templates", i)
		c.experimentTemplateName(p+".name", t.Name, names)
		out.Templates = append(out.Templates, c.experimentTemplate(p, &t, tr))
	}
	analyses := map[string]bool{}
	for i, a := range e.Analyses {
		p := indexPath(path+".analyses", i)
		switch {
		case a.Name == "":
			c.cannotRunf(p+".name", "required: it names the analysis among the experiment's")
		case analyses[a.Name]:
			c.cannotRunf(p+".name", "analysis %q is listed twice", a.Name)
		}
		analyses[a.Name] = true
		if a.TemplateName == "" {
			c.cannotRunf(p+".templateName", "required: the name of the template to run")
		}
		an := Analysis{Templates: []TemplateRef{{Name: a.TemplateName, ClusterScope: a.IsClusterScope()}}}
		for j, arg := range a.Args {
			if arg.Name == "" {
				c.warnf(indexPath(p+".args", j)+".name", "an argument with no name fills no template argument (ignored)")
			}
			c.experimentArgTags(indexPath(p+".args", j)+".value", arg.Value, names)
			an.Args = append(an.Args, Arg{Name: arg.Name, Value: arg.Value, ValueFrom: describeValueFrom(arg.ValueFrom)})
		}
		for _, d := range e.DryRun {
			an.DryRun = append(an.DryRun, d.MetricName)
		}
		out.Analyses = append(out.Analyses, ExperimentAnalysis{Name: a.Name, Analysis: an, RequiredForCompletion: a.RequiredForCompletion})
	}
	for _, d := range e.DryRun {
		out.DryRun = append(out.DryRun, d.MetricName)
	}
	if e.Duration == "" && !out.Required() {
		c.warnf(path, "no duration and no analysis requiredForCompletion: the experiment runs until promoted (as in Argo Rollouts, where it runs until terminated)")
	}
	if len(e.AnalysisRunMetadata.Labels)+len(e.AnalysisRunMetadata.Annotations) > 0 {
		c.warnf(path+".analysisRunMetadata", "ignored: sluice keeps analysis runs in its own state, not as AnalysisRun objects")
	}
	if e.ScaleDownDelaySeconds != nil {
		c.warnf(path+".scaleDownDelaySeconds", "ignored: the experiment's pods get no traffic, so sluice removes its ReplicaSets as soon as the step ends")
	}
	return out
}

// experimentArgTags checks the {{...}} tags of an analysis argument:
// Argo resolves them when the analysis starts and fails it on one it
// cannot; sluice resolves the templates' podTemplateHash and
// replicaset.name, not Argo's experiment.availableAt and
// experiment.finishedAt (times, which the state machine does not read).
func (c *checker) experimentArgTags(path, value string, templates map[string]bool) {
	for _, m := range experimentTag.FindAllStringSubmatch(value, -1) {
		t := experimentTemplateTag.FindStringSubmatch(m[1])
		switch {
		case t != nil && templates[t[1]]:
		case t != nil:
			c.cannotRunf(path, "%s names template %q, which the experiment does not have", m[0], t[1])
		default:
			c.cannotRunf(path, "sluice resolves only {{templates.<name>.podTemplateHash}} and {{templates.<name>.replicaset.name}} in an experiment's arguments, got %s", m[0])
		}
	}
}

// experimentTemplateName checks a template name: it names the ReplicaSet
// and labels the pods (ExperimentLabel), so it must be a DNS-1123 label.
func (c *checker) experimentTemplateName(path, name string, seen map[string]bool) {
	switch {
	case name == "":
		c.cannotRunf(path, "required: it names the experiment's ReplicaSet")
	case seen[name]:
		c.cannotRunf(path, "template %q is listed twice", name)
	default:
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			c.cannotRunf(path, "%q is not a DNS-1123 label (it names the experiment's ReplicaSet and labels its pods): %s", name, strings.Join(errs, "; "))
		}
	}
	seen[name] = true
}

func (c *checker) experimentTemplate(path string, t *v1alpha1.RolloutExperimentTemplate, tr *v1alpha1.RolloutTrafficRouting) ExperimentTemplate {
	out := ExperimentTemplate{
		Name:        t.Name,
		SpecRef:     SpecRef(t.SpecRef),
		Replicas:    derefOr(t.Replicas, 1),
		Labels:      t.Metadata.Labels,
		Annotations: t.Metadata.Annotations,
		Selector:    t.Selector,
		Weight:      t.Weight,
	}
	if out.SpecRef != SpecRefStable && out.SpecRef != SpecRefCanary {
		c.cannotRunf(path+".specRef", "must be stable or canary, got %q", t.SpecRef)
	}
	if out.Replicas < 0 {
		c.cannotRunf(path+".replicas", "must not be negative, got %d", out.Replicas)
	}
	c.replicasAtMost(path+".replicas", t.Replicas)
	if t.Selector != nil && reflect.DeepEqual(*t.Selector, metav1.LabelSelector{}) {
		c.cannotRunf(path+".selector", "an empty selector selects every pod of the namespace (Argo's experiment fails on it too)")
	}
	if t.Weight != nil {
		c.experimentWeight(path+".weight", *t.Weight, tr)
	}
	if t.Service != nil {
		c.warnf(path+".service", "sluice creates no Service for an experiment template: select its pods by their rollouts-pod-template-hash or %s label", ExperimentLabel)
	}
	return out
}

// experimentWeight applies Argo's rule for a template's weight (it needs
// trafficRouting with SMI, ALB, Istio or a plugin) and warns that sluice
// does not route it.
func (c *checker) experimentWeight(path string, w int32, tr *v1alpha1.RolloutTrafficRouting) {
	switch {
	case tr == nil:
		c.errorf(path, "an experiment template's weight needs trafficRouting (Argo Rollouts rule)")
	case tr.ALB == nil && tr.SMI == nil && tr.Istio == nil && len(tr.Plugins) == 0:
		c.errorf(path, "an experiment template's weight needs trafficRouting with SMI, ALB, Istio or a plugin (Argo Rollouts rule)")
	default:
		c.warnf(path, "weight %d is not routed: sluice's routers send no traffic to experiment pods yet (they run, and their analyses measure them, without traffic from the rollout's host)", w)
	}
}
