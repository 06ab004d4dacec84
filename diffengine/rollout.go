package diffengine

import (
	"reflect"
	"strings"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/sluice-dev/sluice/api"
)

// Path prefixes that decide the class of a change.
var (
	metadataPrefix  = fieldPath{{name: "metadata"}}.String()
	endpointsPrefix = fieldPath{{name: "spec"}, {name: "strategy"}, {name: "canary"},
		{name: "trafficRouting"}, {name: "plugins"}, {name: api.XDSPluginName}, {name: "endpoints"}}.String()
	stepsPath = fieldPath{{name: "spec"}, {name: "strategy"}, {name: "canary"}, {name: "steps"}}
)

// DiffRollouts compares two versions of one rollout. old nil means the
// rollout is new (Added), new nil that it is gone (Removed). live is the
// rollout's live position, used by the risk rules that depend on it (see
// risk.go); the zero Live means no canary in flight.
//
// DiffRollouts cannot see analysis templates, so it never reports a
// loosened failureLimit; DiffSets does.
func DiffRollouts(old, new *api.Rollout, live Live) Change {
	switch {
	case old == nil && new == nil:
		return Change{Class: Unchanged}
	case old == nil:
		return Change{Rollout: new.Key, Class: Added, New: new}
	case new == nil:
		return Change{Rollout: old.Key, Class: Removed, Old: old}
	}
	c := Change{Rollout: new.Key, Old: old, New: new}
	if live.InFlight {
		c.ResumeStep = live.StepIndex
	}
	ta, tb := rolloutTrees(old, new)
	diffTree(nil, ta, tb, &c.Changes)
	c.Class = classify(old, new, c.Changes)
	if c.Class == NewVersion {
		c.ResumeStep = 0
	}
	if reflect.DeepEqual(old.Spec.Strategy, new.Spec.Strategy) {
		// Same steps, analysis and host: no risk rule can fire, and the
		// rollout continues where it is.
		return c
	}
	in := riskInput{old: old, new: new, live: live, class: c.Class, resume: c.ResumeStep}
	if !reflect.DeepEqual(canarySteps(old), canarySteps(new)) {
		// The steps differ, so both trees hold them in full.
		in.stepsChanged = true
		in.oldSteps, in.newSteps = steps(ta), steps(tb)
		if live.InFlight {
			c.ResumeStep = align(in.oldSteps, in.newSteps).landing(live.StepIndex)
			in.resume = c.ResumeStep
		}
	}
	c.Reasons = rolloutRisks(in)
	c.Risky = len(c.Reasons) > 0
	if c.Class == NewVersion {
		c.ResumeStep = 0 // a new version starts its canary from the first step
	}
	return c
}

func canarySteps(r *api.Rollout) []v1alpha1.CanaryStep {
	if r.Spec.Strategy.Canary == nil {
		return nil
	}
	return r.Spec.Strategy.Canary.Steps
}

// steps returns the canonical step list of a rollout tree.
func steps(t map[string]any) []any {
	return list(child(t, "spec", "strategy", "canary"), "steps")
}

// classify picks the strongest class the changes imply.
func classify(old, new *api.Rollout, changes []FieldChange) Class {
	if old.Version != new.Version {
		return NewVersion
	}
	class := Unchanged
	for _, fc := range changes {
		switch {
		case hasPathPrefix(fc.Path, metadataPrefix):
			if class == Unchanged {
				class = Cosmetic
			}
		case hasPathPrefix(fc.Path, endpointsPrefix):
			if class == Unchanged || class == Cosmetic {
				class = EndpointsOnly
			}
		default:
			return StrategyEdit
		}
	}
	return class
}

// hasPathPrefix reports whether path is prefix or below it.
func hasPathPrefix(path, prefix string) bool {
	if !strings.HasPrefix(path, prefix) {
		return false
	}
	rest := path[len(prefix):]
	return rest == "" || rest[0] == '.' || rest[0] == '['
}
