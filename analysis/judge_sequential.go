package analysis

import (
	"math"

	"github.com/sluice-dev/sluice/api"
)

// CountStep is one step's counts: events (errors) and totals (requests)
// of canary and baseline.
type CountStep struct {
	CanaryEvents, CanaryTotal     float64
	BaselineEvents, BaselineTotal float64
}

// Mixture prior of the sequential test: log rate ratios on a grid up to
// ln 16 away from the null boundary, weighted by a half-normal of scale
// 1 (effects of 1.5× to 4× carry most weight). A discrete mixture of
// likelihood ratios is itself a valid test martingale, so the grid is
// not an approximation of the guarantee, only of the prior.
const (
	mixtureGrid  = 32
	mixtureSpan  = 2.772588722239781 // ln 16
	mixtureScale = 1.0
)

// mixture is a mixture sequential probability ratio test (mSPRT) of the
// rate ratio R against the one-sided null boundary r0, alternatives on
// the side given by up. Given a step's total events, the canary's events
// are Binomial with p = R·n1/(R·n1 + n2) under the Poisson model; the
// likelihood ratio of any alternative R against r0 is, under every null
// R' on the far side of r0, a nonnegative supermartingale (its expected
// factor per step is at most 1), so by Ville's inequality the mixture
// crosses 1/α with probability at most α however often it is looked at
// (Lindon et al., "Rapid Regression Detection in Software Deployments
// through Sequential Testing", 2022, use the same construction).
type mixture struct {
	r0      float64
	ratios  []float64
	logW    []float64 // log prior weights
	logLike []float64 // log likelihood ratio of each ratio against r0
}

func newMixture(r0 float64, up bool) *mixture {
	m := &mixture{r0: r0, logLike: make([]float64, mixtureGrid)}
	weights := make([]float64, mixtureGrid)
	var total float64
	for k := range mixtureGrid {
		u := mixtureSpan * float64(k+1) / mixtureGrid
		weights[k] = math.Exp(-u * u / (2 * mixtureScale * mixtureScale))
		total += weights[k]
		if !up {
			u = -u
		}
		m.ratios = append(m.ratios, r0*math.Exp(u))
	}
	for _, w := range weights {
		m.logW = append(m.logW, math.Log(w/total))
	}
	return m
}

// add folds one step in; steps where a side has no traffic carry no
// information about the ratio.
func (m *mixture) add(s CountStep) {
	if s.CanaryTotal <= 0 || s.BaselineTotal <= 0 {
		return
	}
	c, b := math.Round(math.Max(s.CanaryEvents, 0)), math.Round(math.Max(s.BaselineEvents, 0))
	if c+b == 0 {
		return
	}
	p0 := canaryShare(m.r0, s.CanaryTotal, s.BaselineTotal)
	for k, r := range m.ratios {
		p := canaryShare(r, s.CanaryTotal, s.BaselineTotal)
		m.logLike[k] += c*math.Log(p/p0) + b*math.Log((1-p)/(1-p0))
	}
}

// canaryShare is the probability that an event is the canary's when the
// rate ratio is r.
func canaryShare(r, n1, n2 float64) float64 { return r * n1 / (r*n1 + n2) }

// evidence is the mixture likelihood ratio.
func (m *mixture) evidence() float64 {
	hi := math.Inf(-1)
	for k := range m.logLike {
		hi = math.Max(hi, m.logW[k]+m.logLike[k])
	}
	var sum float64
	for k := range m.logLike {
		sum += math.Exp(m.logW[k] + m.logLike[k] - hi)
	}
	return math.Exp(hi) * sum
}

// JudgeCountsSequential judges counts step by step and stops at the first
// step where the evidence suffices either way. The interval in the
// verdict is the fixed-horizon one over the counts so far, for reading;
// the decision rests on the mixture tests:
//   - High: a mixture test of "the canary's rate is no higher" (R ≤ 1)
//     crosses 2/(1-confidence), and the ratio so far exceeds 1+tolerance;
//   - Pass: a mixture test of "the canary is worse than allowed"
//     (R ≥ 1+tolerance) crosses the same threshold.
//
// Low and its Pass mirror these for direction decrease; either needs
// both Pass tests. Each test errs with probability at most
// (1-confidence)/2 however many steps are looked at. Undecided after all
// steps is Open: the caller makes it Inconclusive when the window is
// over (paused, never passed). stepsTotal is the window's length in
// steps, for the explanation.
func JudgeCountsSequential(steps []CountStep, stepsTotal int, c api.JudgeProvider) CountJudgement {
	c = JudgeConfig(c)
	allowed := 1 + c.Tolerance
	threshold := 2 / (1 - c.Confidence)
	up, down := c.Direction != api.DirectionDecrease, c.Direction != api.DirectionIncrease
	worse, notWorse := newMixture(1, true), newMixture(allowed, false)
	better, notBetter := newMixture(1, false), newMixture(1/allowed, true)
	var sum CountStep
	j := CountJudgement{Class: ClassOpen, StepsTotal: stepsTotal, Threshold: threshold}
	for i, s := range steps {
		sum = CountStep{sum.CanaryEvents + s.CanaryEvents, sum.CanaryTotal + s.CanaryTotal, sum.BaselineEvents + s.BaselineEvents, sum.BaselineTotal + s.BaselineTotal}
		for _, m := range []*mixture{worse, notWorse, better, notBetter} {
			m.add(s)
		}
		j = JudgeCounts(sum.CanaryEvents, sum.CanaryTotal, sum.BaselineEvents, sum.BaselineTotal, c)
		j.Sequential, j.Steps, j.StepsTotal, j.Threshold = true, i+1, stepsTotal, threshold
		ratio := j.Test.Ratio
		passUp, passDown := !up || notWorse.evidence() >= threshold, !down || notBetter.evidence() >= threshold
		switch {
		case up && worse.evidence() >= threshold && ratio > allowed:
			j.Class, j.Evidence = ClassHigh, worse.evidence()
		case down && better.evidence() >= threshold && ratio < 1/allowed:
			j.Class, j.Evidence = ClassLow, better.evidence()
		case passUp && passDown:
			j.Class, j.Evidence = ClassPass, math.Min(orInf(up, notWorse), orInf(down, notBetter))
		default:
			j.Class, j.Evidence = ClassOpen, worse.evidence()
			if !up {
				j.Evidence = better.evidence()
			}
			continue
		}
		return j
	}
	return j
}

// orInf is m's evidence when the side is judged, +Inf otherwise.
func orInf(judged bool, m *mixture) float64 {
	if !judged {
		return math.Inf(1)
	}
	return m.evidence()
}
