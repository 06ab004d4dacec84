package main

import (
	"time"

	"github.com/sluice-dev/sluice/analysis"
)

// Methods are the ways of judging a canary the benchmark compares.
var Methods = []Method{
	{Name: "threshold: canary rate ≤ 2× typical", Judge: threshold},
	{Name: "Mann-Whitney, Kayenta's interval (before #15)", Judge: mannWhitneyKayenta},
	{Name: "Mann-Whitney, test-inverted interval", Judge: mannWhitney},
	{Name: "counts, fixed horizon", Judge: countsFixed},
	{Name: "counts, sequential", Judge: countsSequential},
}

// window is when a fixed-horizon method decides: after all steps.
func window(d Data, c Config) time.Duration { return time.Duration(len(d.Steps)) * c.Step }

// threshold is a static condition of the kind written in an Argo
// template, set from the service's typical rate and evaluated once over
// the whole window (its most favourable setting).
func threshold(d Data, c Config) Verdict {
	var events, total float64
	for _, s := range d.Steps {
		events += s.CanaryEvents
		total += s.CanaryTotal
	}
	if total == 0 {
		return Verdict{Undecided: true, At: window(d, c)}
	}
	return Verdict{Abort: events/total > 2*d.Scenario.Rate, At: window(d, c)}
}

// mannWhitneyKayenta is the judge as it was: Kayenta's rule, High when
// significant and the Hodges–Lehmann interval clears the band.
func mannWhitneyKayenta(d Data, c Config) Verdict {
	cfg := judgeConfig(d)
	j := analysis.Judge(d.Canary, d.Baseline, cfg)
	if j.Class == analysis.ClassNoData {
		return Verdict{Undecided: true, At: window(d, c)}
	}
	high := j.Test.P < 1-cfg.Confidence && j.Test.Lower > j.Allowed
	return Verdict{Abort: high, At: window(d, c)}
}

func mannWhitney(d Data, c Config) Verdict {
	j := analysis.Judge(d.Canary, d.Baseline, judgeConfig(d))
	return Verdict{Abort: j.Class == analysis.ClassHigh, Undecided: j.Class == analysis.ClassNoData, At: window(d, c)}
}

func countsFixed(d Data, c Config) Verdict {
	var s analysis.CountStep
	for _, st := range d.Steps {
		s.CanaryEvents += st.CanaryEvents
		s.CanaryTotal += st.CanaryTotal
		s.BaselineEvents += st.BaselineEvents
		s.BaselineTotal += st.BaselineTotal
	}
	j := analysis.JudgeCounts(s.CanaryEvents, s.CanaryTotal, s.BaselineEvents, s.BaselineTotal, judgeConfig(d))
	return Verdict{Abort: j.Class == analysis.ClassHigh, Undecided: j.Class == analysis.ClassNoData, At: window(d, c)}
}

func countsSequential(d Data, c Config) Verdict {
	j := analysis.JudgeCountsSequential(d.Steps, len(d.Steps), judgeConfig(d))
	return Verdict{Abort: j.Class == analysis.ClassHigh, Undecided: j.Class == analysis.ClassOpen, At: time.Duration(j.Steps) * c.Step}
}
