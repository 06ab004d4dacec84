package analysis

import (
	"fmt"
	"math"
	"strconv"

	"github.com/sluice-dev/sluice/api"
)

// CountJudgement is the judge's verdict on a count metric: events (errors)
// out of a total (requests), canary against baseline, judged on the ratio
// of the two rates with CompareRates.
type CountJudgement struct {
	Class Class
	// Test is over the counts the verdict was reached on: the whole
	// window, or in sequential mode the steps up to the verdict.
	Test RateRatio
	// Allowed is the ratio that still passes: 1 + tolerance.
	Allowed    float64
	Confidence float64
	Direction  api.Direction
	Unit       string // what the events are, e.g. "errors"
	// Sequential verdicts only: how many steps the verdict took, and the
	// mixture likelihood ratio against the threshold 2/(1-confidence).
	Sequential        bool
	Steps, StepsTotal int
	Evidence          float64
	Threshold         float64
}

// Score is the metric's contribution: 100 for Pass, 0 otherwise.
func (j CountJudgement) Score() float64 {
	if j.Class == ClassPass {
		return 100
	}
	return 0
}

// String explains the verdict in the metric's own units, e.g. "canary
// 3.2 % errors (48 of 1,500) vs baseline 1 % (15 of 1,500): 3.2× worse,
// 98 % interval [1.6×, 7×], allowed 1.25×, failed".
func (j CountJudgement) String() string {
	t := j.Test
	if t.CanaryTotal <= 0 || t.BaselineTotal <= 0 {
		return fmt.Sprintf("no traffic: canary %s, baseline %s requests", thousands(t.CanaryTotal), thousands(t.BaselineTotal))
	}
	s := fmt.Sprintf("canary %s %s (%s of %s) vs baseline %s (%s of %s): %s, %g %% interval [%s, %s], allowed %s",
		percent(t.CanaryEvents, t.CanaryTotal), j.Unit, thousands(t.CanaryEvents), thousands(t.CanaryTotal),
		percent(t.BaselineEvents, t.BaselineTotal), thousands(t.BaselineEvents), thousands(t.BaselineTotal),
		j.ratioWords(), j.Confidence*100, times(t.Lower), times(t.Upper), j.allowedWords())
	if j.Sequential {
		s += fmt.Sprintf(", sequential: evidence %s vs %s after %d of %d steps", short(j.Evidence), short(j.Threshold), j.Steps, j.StepsTotal)
	}
	return s + ", " + verdictWord(j.Class)
}

// ratioWords says how the canary's rate compares: "3.2× worse", "15×
// better" (the factor is always at least 1), or higher/lower when either
// direction is bad.
func (j CountJudgement) ratioWords() string {
	r := j.Test.Ratio
	switch {
	case math.IsNaN(r):
		return "no " + j.Unit + " on either side"
	case r == 1:
		return "same rate"
	}
	factor, higher := r, r > 1
	if !higher {
		factor = 1 / r
	}
	switch {
	case j.Direction == api.DirectionEither && higher:
		return times(factor) + " higher"
	case j.Direction == api.DirectionEither:
		return times(factor) + " lower"
	case higher == (j.Direction != api.DirectionDecrease):
		return times(factor) + " worse"
	}
	return times(factor) + " better"
}

func (j CountJudgement) allowedWords() string {
	switch j.Direction {
	case api.DirectionDecrease:
		return times(1 / j.Allowed)
	case api.DirectionEither:
		return times(1/j.Allowed) + " to " + times(j.Allowed)
	}
	return times(j.Allowed)
}

// JudgeCounts judges a whole window's counts: High when the interval of
// the rate ratio lies above 1 (the canary is worse, p < 1-confidence) and
// the ratio exceeds 1+tolerance (worse by more than allowed); Low
// mirrored for direction decrease. A side without traffic is NoData.
func JudgeCounts(canaryEvents, canaryTotal, baselineEvents, baselineTotal float64, c api.JudgeProvider) CountJudgement {
	c = JudgeConfig(c)
	j := CountJudgement{
		Allowed: 1 + c.Tolerance, Confidence: c.Confidence, Direction: c.Direction, Unit: countUnit(c),
		Test: CompareRates(canaryEvents, canaryTotal, baselineEvents, baselineTotal, c.Confidence),
	}
	j.Class = j.fixedClass()
	return j
}

func (j CountJudgement) fixedClass() Class {
	t := j.Test
	switch {
	case t.CanaryTotal <= 0 || t.BaselineTotal <= 0:
		return ClassNoData
	case j.Direction != api.DirectionDecrease && t.Lower > 1 && t.Ratio > j.Allowed:
		return ClassHigh
	case j.Direction != api.DirectionIncrease && t.Upper < 1 && t.Ratio < 1/j.Allowed:
		return ClassLow
	}
	return ClassPass
}

func countUnit(c api.JudgeProvider) string {
	if c.Unit != "" {
		return c.Unit
	}
	return "errors"
}

// percent prints events/total as a percentage with 2 significant digits.
func percent(events, total float64) string {
	return strconv.FormatFloat(100*events/total, 'g', 2, 64) + " %"
}

// times prints a ratio with 3 significant digits: "3.2×", "1.25×".
func times(r float64) string {
	if math.IsInf(r, 1) {
		return "∞"
	}
	return strconv.FormatFloat(r, 'g', 3, 64) + "×"
}

// thousands prints a count with thousands separators: "1,500".
func thousands(f float64) string {
	s := strconv.FormatFloat(math.Round(f), 'f', 0, 64)
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}
