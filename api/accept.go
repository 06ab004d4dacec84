package api

import (
	"slices"
)

// indexTemplates converts the templates, rejects duplicates, and adds the
// valid ones to set. It returns the keys of templates that were named but
// invalid, so rollouts referencing them get a precise error.
func indexTemplates(set *Set, docs []*templateDoc, mode Mode) map[templateID]bool {
	first := map[templateID]*AnalysisTemplate{}
	invalid := map[templateID]bool{}
	for _, td := range docs {
		t, c := convertTemplate(td, mode)
		id := templateID{t.Key, t.ClusterScoped}
		if prev, dup := first[id]; dup && t.Name != "" {
			c.errorf("metadata.name", "duplicate %s %s (first defined at %s:%d)", td.doc.kind, displayKey(t.Key, t.ClusterScoped), prev.File, prev.Line)
		} else if t.Name != "" {
			first[id] = t
		}
		set.Diagnostics = append(set.Diagnostics, c.diags...)
		if c.diags.HasErrors() {
			if first[id] == t {
				invalid[id] = true
			}
			continue
		}
		set.Templates = append(set.Templates, t)
	}
	return invalid
}

type templateID struct {
	Key
	cluster bool
}

func displayKey(k Key, cluster bool) string {
	if cluster {
		return k.Name
	}
	return k.String()
}

// acceptRollouts converts the rollouts and runs the checks that need the
// whole set: duplicate names, analysis template references and hosts
// claimed twice.
func acceptRollouts(set *Set, docs []*rolloutDoc, invalidTemplates map[templateID]bool, mode Mode) {
	first := map[Key]*Rollout{}
	var acceptedDocs []*document
	for _, rd := range docs {
		r, c := convertRollout(rd, mode)
		if prev, dup := first[r.Key]; dup && r.Name != "" {
			c.errorf("metadata.name", "duplicate rollout %s (first defined at %s:%d)", r.Key, prev.File, prev.Line)
		} else if r.Name != "" {
			first[r.Key] = r
		}
		c.templateRefs(set, r, invalidTemplates)
		set.Diagnostics = append(set.Diagnostics, c.diags...)
		switch {
		case !c.diags.HasErrors():
			set.Rollouts = append(set.Rollouts, r)
			acceptedDocs = append(acceptedDocs, rd.doc)
		case r.Name != "" && first[r.Key] == r:
			set.Rejected = append(set.Rejected, Rejected{Key: r.Key, File: r.File, Diagnostics: c.diags.Errors()})
		}
	}
	set.HostConflicts = hostConflicts(acceptedDocs, set.Rollouts)
}

// templateRefs checks that every analysis the rollout runs names templates
// that exist, and that their required arguments are given.
func (c *checker) templateRefs(set *Set, r *Rollout, invalid map[templateID]bool) {
	if r.Background != nil {
		c.analysisRefs(set, r, canaryPath+".analysis", &r.Background.Analysis, invalid)
	}
	for i, s := range r.Steps {
		if s.Analysis != nil {
			path, ok := c.analysisPaths[i]
			if !ok {
				path = c.stepPaths[i] + ".analysis"
			}
			c.analysisRefs(set, r, path, s.Analysis, invalid)
		}
		if s.Experiment != nil {
			c.experimentRefs(set, r, c.stepPaths[i]+".experiment", s.Experiment, invalid)
		}
	}
}

func (c *checker) analysisRefs(set *Set, r *Rollout, path string, a *Analysis, invalid map[templateID]bool) {
	for i, ref := range a.Templates {
		t := c.templateRef(set, r, indexPath(path+".templates", i)+".templateName", ref, invalid)
		if t == nil {
			continue
		}
		if r.Workload != nil && usesJudge(t) {
			r.Workload.Baseline = true
		}
		c.templateArgs(indexPath(path+".templates", i)+".templateName", path+".args", t, a.Args)
	}
}

// experimentRefs checks the templates of an experiment's analyses. A
// judge metric there starts no baseline: the experiment's own templates
// are what its analyses compare.
func (c *checker) experimentRefs(set *Set, r *Rollout, path string, e *Experiment, invalid map[templateID]bool) {
	for i, a := range e.Analyses {
		p := indexPath(path+".analyses", i)
		for _, ref := range a.Analysis.Templates {
			if t := c.templateRef(set, r, p+".templateName", ref, invalid); t != nil {
				c.templateArgs(p+".templateName", p+".args", t, a.Analysis.Args)
			}
		}
	}
}

// templateRef finds the template ref names, or reports at path why not.
func (c *checker) templateRef(set *Set, r *Rollout, path string, ref TemplateRef, invalid map[templateID]bool) *AnalysisTemplate {
	t := set.Template(r.Namespace, ref)
	if t != nil {
		return t
	}
	kind := KindAnalysisTemplate
	if ref.ClusterScope {
		kind = KindClusterAnalysisTemplate
	}
	id := templateID{Key{r.Namespace, ref.Name}, ref.ClusterScope}
	if ref.ClusterScope {
		id.Namespace = ""
	}
	if invalid[id] {
		c.errorf(path, "%s %q is invalid (see its errors)", kind, ref.Name)
	} else if ref.Name != "" {
		c.errorf(path, "%s %q not found in the loaded files", kind, ref.Name)
	}
	return nil
}

// templateArgs checks that every argument t requires is given in args.
func (c *checker) templateArgs(path, argsPath string, t *AnalysisTemplate, args []Arg) {
	for _, arg := range t.Args {
		if arg.Value != nil || arg.FromSecret || slices.Contains(BuiltinArgs, arg.Name) || hasArg(args, arg.Name) {
			continue
		}
		c.errorf(path, "template %q needs argument %q: give it in %s", t.Name, arg.Name, argsPath)
	}
}

func hasArg(args []Arg, name string) bool {
	return slices.ContainsFunc(args, func(a Arg) bool { return a.Name == name })
}

// usesJudge reports whether t has a sluice.io/judge metric: a rollout
// that runs it gets a baseline in Kubernetes mode.
func usesJudge(t *AnalysisTemplate) bool {
	return slices.ContainsFunc(t.Metrics, func(m Metric) bool { return m.Provider.Judge != nil })
}
