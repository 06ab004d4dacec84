package analysis

import (
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/sluice-dev/sluice/api"
)

// Class is a judge's classification of one metric, as in Kayenta.
type Class string

// Classes.
const (
	ClassPass   Class = "Pass"
	ClassHigh   Class = "High"
	ClassLow    Class = "Low"
	ClassNoData Class = "NoData"
	// ClassOpen is a sequential verdict not reached yet: keep measuring.
	// Still open when the window ends, it is Inconclusive, never Pass.
	ClassOpen Class = "Open"
)

// Score thresholds of a judged run (Kayenta's defaults).
const (
	ScorePass     = 95.0
	ScoreMarginal = 75.0
)

// Judgement is the judge's verdict on one metric.
type Judgement struct {
	Class          Class
	Test           MannWhitney
	CanaryMedian   float64
	BaselineMedian float64
	// Allowed is the margin the interval must clear: tolerance × |shift|.
	Allowed float64
	// Lower and Upper bound the shift at Confidence, by inverting the
	// test (ShiftInterval): they agree with the decision even on tied,
	// discrete samples, where Test's Hodges–Lehmann bounds do not.
	Lower, Upper       float64
	CanaryN, BaselineN int
	Confidence         float64
	MinSamples         int
	Direction          api.Direction
	// Unit is appended to values in explanations ("s", "%"); may be empty.
	Unit string
}

// Score is the metric's contribution: 100 for Pass, 0 otherwise.
func (j Judgement) Score() float64 {
	if j.Class == ClassPass {
		return 100
	}
	return 0
}

// String is a one-line explanation for status and alerts.
func (j Judgement) String() string {
	if j.Class == ClassNoData {
		return fmt.Sprintf("not enough data: canary %d, baseline %d samples (minSamples %d)", j.CanaryN, j.BaselineN, j.MinSamples)
	}
	v := func(f float64) string { return withUnit(short(f), j.Unit) }
	return fmt.Sprintf("%s: canary median %s vs baseline %s, shift %s, %g%% interval [%s, %s], allowed ±%s, p=%.3g: %s",
		j.Class, v(j.CanaryMedian), v(j.BaselineMedian), v(j.Test.Shift),
		j.Confidence*100, v(j.Lower), v(j.Upper), v(j.Allowed), j.Test.P, verdictWord(j.Class))
}

func withUnit(s, unit string) string {
	if unit == "" {
		return s
	}
	return s + " " + unit
}

// verdictWord is how an explanation ends.
func verdictWord(c Class) string {
	switch c {
	case ClassPass:
		return "passed"
	case ClassHigh, ClassLow:
		return "failed"
	case ClassOpen:
		return "undecided so far"
	}
	return "inconclusive"
}

// short prints 4 significant digits: enough to read a verdict.
func short(f float64) string { return strconv.FormatFloat(f, 'g', 4, 64) }

// JudgeConfig fills the judge defaults (Kayenta's confidence 0.98 and
// tolerance 0.25, 20 samples; direction increase, as the api loader) into c.
func JudgeConfig(c api.JudgeProvider) api.JudgeProvider {
	if c.Confidence <= 0 || c.Confidence >= 1 {
		c.Confidence = api.DefaultJudgeConfidence
	}
	if c.Tolerance <= 0 {
		c.Tolerance = api.DefaultJudgeTolerance
	}
	if c.MinSamples <= 0 {
		c.MinSamples = api.DefaultJudgeMinSamples
	}
	if c.Lookback <= 0 {
		c.Lookback = api.DefaultJudgeLookback
	}
	if c.Step <= 0 {
		c.Step = api.DefaultJudgeStep
	}
	if c.Direction == "" {
		c.Direction = api.DirectionIncrease
	}
	return c
}

// Judge classifies canary samples against baseline samples with the
// Mann-Whitney test: a metric is High (Low) when the test is significant
// and the interval of the shift lies above (below) the band
// ±tolerance·|Hodges–Lehmann shift|, as in Kayenta. Unlike Kayenta, the
// interval is the test inverted (ShiftInterval), not the Hodges–Lehmann
// order statistics: on tied samples (an error ratio that is 0 in most
// steps) those sit on the tied differences and include 0 while the
// test's p-value is 1e-5, which passed clear regressions. Only the
// direction the config calls bad can fail. Fewer than minSamples on
// either side is NoData: never a pass. NaN samples (no traffic in that
// step) are dropped.
func Judge(canary, baseline []float64, c api.JudgeProvider) Judgement {
	c = JudgeConfig(c)
	canary, baseline = finite(canary), finite(baseline)
	j := Judgement{
		CanaryN: len(canary), BaselineN: len(baseline),
		Confidence: c.Confidence, MinSamples: c.MinSamples, Direction: c.Direction, Unit: c.Unit,
	}
	if len(canary) < c.MinSamples || len(baseline) < c.MinSamples {
		j.Class = ClassNoData
		return j
	}
	j.CanaryMedian, j.BaselineMedian = median(canary), median(baseline)
	j.Test = MannWhitneyU(canary, baseline, c.Confidence)
	j.Allowed = c.Tolerance * math.Abs(j.Test.Shift)
	j.Lower, j.Upper = ShiftInterval(canary, baseline, c.Confidence)
	significant := j.Test.P < 1-c.Confidence
	j.Class = ClassPass
	switch {
	case significant && j.Lower > j.Allowed && c.Direction != api.DirectionDecrease:
		j.Class = ClassHigh
	case significant && j.Upper < -j.Allowed && c.Direction != api.DirectionIncrease:
		j.Class = ClassLow
	}
	return j
}

// MetricScore is one judged metric's part in a run score.
type MetricScore struct {
	Class    Class
	Critical bool
}

// RunScore scores a run as Kayenta does with equal weights: the share of
// judged metrics that pass, times 100; a critical metric that fails makes
// it 0. NoData counts as not passing.
func RunScore(ms []MetricScore) float64 {
	if len(ms) == 0 {
		return 0
	}
	pass := 0
	for _, m := range ms {
		if m.Class == ClassPass {
			pass++
		} else if m.Critical {
			return 0
		}
	}
	return 100 * float64(pass) / float64(len(ms))
}

// ScorePhase maps a score to a verdict: pass >= 95, marginal >= 75
// (Inconclusive: a person decides), else Failed.
func ScorePhase(score float64) Phase {
	switch {
	case score >= ScorePass:
		return PhaseSuccessful
	case score >= ScoreMarginal:
		return PhaseInconclusive
	}
	return PhaseFailed
}

// judgeScore is the run score over the judge metrics that have measured,
// for RunStatus; nil when the run has none.
func judgeScore(metrics []Metric, status []MetricStatus) *float64 {
	var ms []MetricScore
	for i, m := range metrics {
		if m.Provider.Judge == nil || m.DryRun || len(status[i].Measurements) == 0 {
			continue
		}
		last := status[i].Measurements[len(status[i].Measurements)-1]
		c := ClassPass
		if last.Value != "100" {
			c = ClassHigh // any non-pass outcome, for scoring
		}
		ms = append(ms, MetricScore{Class: c, Critical: m.critical})
	}
	if len(ms) == 0 {
		return nil
	}
	s := RunScore(ms)
	return &s
}

func finite(v []float64) []float64 {
	out := make([]float64, 0, len(v))
	for _, f := range v {
		if !math.IsNaN(f) && !math.IsInf(f, 0) {
			out = append(out, f)
		}
	}
	return out
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
