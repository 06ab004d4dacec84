package diffengine

import (
	"fmt"
	"reflect"

	"github.com/sluice-dev/sluice/api"
)

// DiffTemplates compares two versions of an analysis template. Paths start
// at spec (spec.metrics[error-rate].failureLimit). A nil old or new gives a
// single added or removed change of the whole spec.
func DiffTemplates(old, new *api.AnalysisTemplate) []FieldChange {
	switch {
	case old == nil && new == nil:
		return nil
	case old == nil:
		return []FieldChange{{Path: "spec", Kind: KindAdded, New: templateTree(new)["spec"]}}
	case new == nil:
		return []FieldChange{{Path: "spec", Kind: KindRemoved, Old: templateTree(old)["spec"]}}
	}
	if reflect.DeepEqual(old.Spec, new.Spec) {
		return nil
	}
	var out []FieldChange
	diffTree(nil, templateTree(old), templateTree(new), &out)
	return out
}

// loosenedFailureLimits lists the metrics of a template whose failureLimit
// now allows more failures. A limit that becomes an argument placeholder
// cannot be judged here and counts as loosened.
func loosenedFailureLimits(old, new *api.AnalysisTemplate) []string {
	before := make(map[string]api.IntOrArg, len(old.Metrics))
	for _, m := range old.Metrics {
		before[m.Name] = m.FailureLimit
	}
	var out []string
	for _, m := range new.Metrics {
		o, ok := before[m.Name]
		if !ok || o == m.FailureLimit {
			continue
		}
		n := m.FailureLimit
		switch {
		case n.Arg != "":
			out = append(out, fmt.Sprintf("failureLimit of metric %s in template %s changed from %s to %s, which may allow more failures",
				m.Name, templateName(new), limitText(o), limitText(n)))
		case o.Arg != "":
			// From a placeholder to a number: nothing to compare against.
		case (n.Value < 0 && o.Value >= 0) || (o.Value >= 0 && n.Value > o.Value):
			out = append(out, fmt.Sprintf("failureLimit of metric %s in template %s loosened from %s to %s",
				m.Name, templateName(new), limitText(o), limitText(n)))
		}
	}
	return out
}

func limitText(l api.IntOrArg) string {
	if l.Arg != "" {
		return l.Arg
	}
	if l.Value < 0 {
		return fmt.Sprintf("%d (disabled)", l.Value)
	}
	return fmt.Sprint(l.Value)
}

func templateName(t *api.AnalysisTemplate) string {
	if t.ClusterScoped {
		return "cluster/" + t.Name
	}
	return t.Key.String()
}

// TemplateChange is the diff of one analysis template between two sets.
type TemplateChange struct {
	Template      api.Key
	ClusterScoped bool
	// Class is Added, Removed, StrategyEdit (the spec changed) or Unchanged.
	Class   Class
	Changes []FieldChange
}

// MarshalJSON writes {kind, template, class, changes}.
func (c TemplateChange) MarshalJSON() ([]byte, error) {
	kind, name := "AnalysisTemplate", c.Template.String()
	if c.ClusterScoped {
		kind, name = "ClusterAnalysisTemplate", c.Template.Name
	}
	changes := c.Changes
	if changes == nil {
		changes = []FieldChange{}
	}
	return marshalPlain(struct {
		Kind     string        `json:"kind"`
		Template string        `json:"template"`
		Class    Class         `json:"class"`
		Changes  []FieldChange `json:"changes"`
	}{kind, name, c.Class, changes})
}
