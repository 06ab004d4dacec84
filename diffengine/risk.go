package diffengine

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/sluice-dev/sluice/api"
)

// The risk rules. A risky change waits in phase Paused for `sluice
// approve` while a canary is in flight. Each rule adds one reason:
//
//  1. Weight jump (in flight, not a new version): the next weight the
//     rollout would reach from its live position (the first setWeight at or
//     after Change.ResumeStep, or 100 at promotion when none is left) is
//     more than maxUnapprovedWeightJump points above the live weight, and
//     higher than the old strategy's next weight from the same position,
//     so the edit itself made the jump. The threshold is the smaller of the
//     old and new rollouts' MaxUnapprovedWeightJump(), so an edit cannot
//     raise its own limit.
//  2. Analysis step removed before it ran: an analysis step (counted by its
//     template names) that was still ahead in the old steps (from
//     Live.StepIndex, the step being executed included; from the first step
//     when no canary is in flight or the version changed) is missing from
//     the steps still ahead in the new ones.
//  3. All analysis removed: the old rollout had analysis steps or background
//     analysis and the new one has neither.
//  4. Host changed: the sluice.io/xds host differs.
//  5. failureLimit loosened (DiffSets only, it needs the templates): a
//     metric of a template the new rollout references allows more failures
//     than before (a higher limit, or -1, which disables the limit).

type riskInput struct {
	old, new *api.Rollout
	live     Live
	class    Class
	// stepsChanged says whether the steps differ; only then are oldSteps
	// and newSteps set.
	stepsChanged       bool
	oldSteps, newSteps []any
	resume             int
}

func rolloutRisks(in riskInput) []string {
	var reasons []string
	if in.stepsChanged {
		if r := weightJump(in); r != "" {
			reasons = append(reasons, r)
		}
		reasons = append(reasons, removedAnalysisSteps(in)...)
	}
	if hasAnalysis(in.old) && !hasAnalysis(in.new) {
		reasons = append(reasons, "all analysis removed")
	}
	if oh, nh := host(in.old), host(in.new); oh != nh {
		reasons = append(reasons, fmt.Sprintf("host changed from %q to %q", oh, nh))
	}
	return reasons
}

func weightJump(in riskInput) string {
	if !in.live.InFlight || in.class == NewVersion {
		return ""
	}
	limit := min(in.old.MaxUnapprovedWeightJump(), in.new.MaxUnapprovedWeightJump())
	oldNext, _ := nextWeight(in.oldSteps, in.live.StepIndex)
	newNext, at := nextWeight(in.newSteps, in.resume)
	jump := newNext - in.live.CanaryWeight
	if jump <= limit || newNext <= oldNext {
		return ""
	}
	where := "at promotion"
	if at >= 0 {
		where = "at " + stepsPath.index(at).String()
	}
	return fmt.Sprintf("canary weight would jump from %d%% to %d%% %s (+%d points, more than %d without approval)",
		in.live.CanaryWeight, newNext, where, jump, limit)
}

// nextWeight is the first setWeight at or after from, with its index, or
// 100 and -1 when the rollout would promote.
func nextWeight(steps []any, from int) (int32, int) {
	for k := max(from, 0); k < len(steps); k++ {
		if w, ok := asMap(steps[k])[string(api.StepSetWeight)].(float64); ok {
			return int32(w), k
		}
	}
	return 100, -1
}

func removedAnalysisSteps(in riskInput) []string {
	fromOld, fromNew := 0, 0
	if in.live.InFlight && in.class != NewVersion {
		fromOld, fromNew = in.live.StepIndex, in.resume
	}
	ahead := func(steps []any, from int) map[string]int {
		n := map[string]int{}
		for k := max(from, 0); k < len(steps); k++ {
			if sig, ok := analysisSignature(steps[k]); ok {
				n[sig]++
			}
		}
		return n
	}
	before, after := ahead(in.oldSteps, fromOld), ahead(in.newSteps, fromNew)
	var out []string
	for _, sig := range slices.Sorted(maps.Keys(before)) {
		if after[sig] < before[sig] {
			out = append(out, fmt.Sprintf("analysis step %s removed before it ran", sig))
		}
	}
	return out
}

// analysisSignature names an analysis step by its sorted template names.
func analysisSignature(step any) (string, bool) {
	a, ok := asMap(step)[string(api.StepAnalysis)].(map[string]any)
	if !ok {
		return "", false
	}
	var names []string
	for _, t := range list(a, "templates") {
		if n, ok := asMap(t)["templateName"].(string); ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return strings.Join(names, "+"), true
}

func hasAnalysis(r *api.Rollout) bool {
	if r.Background != nil && len(r.Background.Templates) > 0 {
		return true
	}
	for _, s := range r.Steps {
		if s.Kind == api.StepAnalysis {
			return true
		}
	}
	return false
}

func host(r *api.Rollout) string {
	if r.XDS == nil {
		return ""
	}
	return r.XDS.Host
}
